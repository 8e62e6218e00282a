"""Generated fault schedules: a seeded, Jepsen-style composition of every fault kind.

Theory of operation. A hand-written schedule tests what its author thought of; a
generated one draws, from the run's seed, a sequence of *windows* until the faults
phase ends: a random gap (`gap_min_s`..`gap_max_s`), then one to `together` faults of
distinct kinds injected together, each with a random target from its kind's pool
(its `Draw`, faults/kinds/: fixed, random and coordinator brokers, stores, every link kind,
topics and segments), random parameters and its own random duration
(`for_min_s`..`for_max_s`, 0 for the instant kinds), so the faults of a window overlap
and are healed one by one. A share (`triggered`) of the windows wait for the load: the
next commit or transactional send, and their topic, segment and coordinator faults then
aim at what that transaction touched (`topic:trigger`, `segment:trigger`,
`coordinator:trigger`, faults/triggers.py). A kind may cap its count (`Draw.cap`: `terminates`,
`isolations`) and draw its own duration (`Draw.duration`: an isolation outlasts the transaction timeout).

The draw is a pure function of the seed (`random.Random(f"{seed}/generated")`) and the
bounds; the same windows are drawn for every path and the kinds that do not apply to a
path (split and merge on v4) are then left out, so one seed means one schedule. A failing
seed reproduces with `txnbench run SCENARIO --path P --seed S` (printed in the chaos
report). The windows become ordinary timeline candidates (faults/schedule.py places them).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faults.kinds import KINDS
from faults.kinds.base import Kind
from harness.config import GeneratedFaults, TriggerOn, TriggerSpec, TriggerType

#: Drawn when a scenario names no kinds (`Draw.by_default`), in the registry's order.
DEFAULT_KINDS = tuple(k for k in KINDS if k.draw.by_default)
DEFAULT_TXN_TIMEOUT_S = 30.0
"""The transaction timeout an isolation outlasts when the caller does not say (the workload's default)."""
TRIGGERS = (TriggerSpec(TriggerOn.TXN_COMMIT, TriggerType.INVOKE, 5.0),
            TriggerSpec(TriggerOn.TXN_COMMIT, TriggerType.OK, 5.0),
            TriggerSpec(TriggerOn.SEND, TriggerType.OK, 5.0))


@dataclass(frozen=True)
class GeneratedFault:
    kind: Kind
    target: str
    for_s: float
    params: Mapping[str, Any]


@dataclass(frozen=True)
class GeneratedWindow:
    at_s: float
    faults: tuple[GeneratedFault, ...]
    trigger: TriggerSpec | None

    @property
    def for_s(self) -> float:
        return max(f.for_s for f in self.faults)


def draw(spec: GeneratedFaults, kinds: tuple[Kind, ...], *, seed: int, duration_s: float,
         txn_timeout_s: float | None = None) -> list[GeneratedWindow]:
    """The windows of a generated schedule (every path's; faults/schedule.py filters by path).

    `txn_timeout_s` is the workload's transaction timeout, which a client-isolate outlasts."""
    rng = random.Random(f"{seed}/generated")
    pool = list(kinds or DEFAULT_KINDS)
    timeout = txn_timeout_s if txn_timeout_s is not None else DEFAULT_TXN_TIMEOUT_S
    windows: list[GeneratedWindow] = []
    drawn: dict[Kind, int] = {}      # against each kind's cap
    t = spec.from_s
    end_s = duration_s if spec.until_s is None else min(duration_s, spec.until_s)
    for _ in range(10_000):          # bounded: a window is at least a few milliseconds of the phase
        t += rng.uniform(spec.gap_min_s, spec.gap_max_s)
        if t >= end_s:
            break
        trigger = rng.choice(TRIGGERS) if rng.random() < spec.triggered else None
        choices = [k for k in pool if k.draw.cap is None or drawn.get(k, 0) < k.draw.cap(spec)]
        count = min(rng.randint(1, spec.together), len(choices))
        chosen = rng.sample(choices, count)
        faults = []
        for kind in chosen:
            targets = kind.draw.targets + (kind.draw.aimed if trigger is not None else ())
            for_s = round(rng.uniform(spec.for_min_s, spec.for_max_s), 2) if kind.healable else 0.0
            if kind.draw.duration is not None:
                for_s = kind.draw.duration(for_s, rng, timeout)
            faults.append(GeneratedFault(kind, rng.choice(targets), for_s, kind.draw.params(rng)))
            drawn[kind] = drawn.get(kind, 0) + 1
        window = GeneratedWindow(round(t, 3), tuple(faults), trigger)
        windows.append(window)
        t += window.for_s
    return windows
