"""Generated fault schedules: a seeded, Jepsen-style composition of every fault kind.

Theory of operation. A hand-written schedule tests what its author thought of; a
generated one draws, from the run's seed, a sequence of *windows* until the faults
phase ends: a random gap (`gap_min_s`..`gap_max_s`), then one to `together` faults of
distinct kinds injected together, each with a random target from its kind's pool
(`TARGETS`: fixed, random and coordinator brokers, stores, every link kind, topics and
segments), random parameters (`_params`) and its own random duration
(`for_min_s`..`for_max_s`, 0 for the instant kinds), so the faults of a window overlap
and are healed one by one. A share (`triggered`) of the windows wait for the load: the
next commit or transactional send, and their topic, segment and coordinator faults then
aim at what that transaction touched (`topic:trigger`, `segment:trigger`,
`coordinator:trigger`, faults/triggers.py). Terminates are capped (`terminates`): a
terminated v4 topic refuses every later send, so more would leave nothing to test. Clients
are faults too: a Locust worker killed (client-kill) and every client cut off from every
broker (client-isolate) for longer than the transaction timeout, capped (`isolations`), so
the coordinators' timeout path and the release of what abandoned transactions held run.

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

from faults.kinds import FaultKind
from harness.config import GeneratedFaults, TriggerOn, TriggerSpec, TriggerType

_LINKS = ("client-broker:random", "client-broker:coordinator", "broker-metadata:random", "broker-ledger:random",
          "broker-broker:random", "broker-metadata:coordinator", "link:random")
_ISOLATED = ("broker:random", "broker:coordinator", "metadata", "ledger")
_PROCESSES = ("broker:random", "broker:0", "coordinator", "metadata", "ledger", "process:random")

#: each kind's target pool; the aimed ones are drawn only in a triggered window
TARGETS: Mapping[FaultKind, tuple[str, ...]] = {
    FaultKind.PARTITION: _LINKS + _ISOLATED,
    FaultKind.LATENCY: _LINKS + _ISOLATED,
    FaultKind.BANDWIDTH: _LINKS,
    FaultKind.KILL: _PROCESSES,
    FaultKind.PAUSE: _PROCESSES,
    FaultKind.RESTART: _PROCESSES,
    # v4: a whole topic (a terminated partition alone is not named by the sends that fail on it,
    # so its expected anomalies could not be attributed); v5: one of its segments, sealed
    FaultKind.TERMINATE: ("topic:random",),
    FaultKind.UNLOAD: ("topic:random", "segment:random"),
    FaultKind.SPLIT: ("segment:random",),
    FaultKind.MERGE: ("topic:random",),
    FaultKind.SLOW_PARTICIPANT: ("broker:random",),
    FaultKind.CLIENT_KILL: ("load:random",),
    FaultKind.CLIENT_ISOLATE: ("clients",),
    # a power loss matters where a process keeps a log: the two stores (a broker loses nothing)
    FaultKind.CRASH: ("ledger", "metadata"),
    FaultKind.CORRUPT: ("ledger", "metadata"),
}
AIMED: Mapping[FaultKind, tuple[str, ...]] = {
    FaultKind.KILL: ("coordinator:trigger", "broker:trigger"),
    FaultKind.RESTART: ("coordinator:trigger", "broker:trigger"),
    FaultKind.PAUSE: ("broker:trigger",),
    FaultKind.TERMINATE: ("topic:trigger",),
    FaultKind.UNLOAD: ("topic:trigger", "segment:trigger"),
    FaultKind.SPLIT: ("segment:trigger",),
    FaultKind.MERGE: ("topic:trigger",),
}
INSTANT = frozenset({FaultKind.TERMINATE, FaultKind.UNLOAD, FaultKind.SPLIT, FaultKind.MERGE})
#: Not drawn unless a scenario names it: the slow participant needs the GC window's timing, and
#: disk corruption came after seeds were drawn for the shipped scenarios (in the pool it would
#: change every seed's draw, and what their self-test figures measured).
#: The client faults are drawn: an isolation is held longer than the transaction timeout
#: (`ISOLATE_OVER_S` past it), at most `isolations` times; a client kill needs Locust workers,
#: and a run without them leaves the drawn kills out (faults/schedule.py), as a path leaves
#: out what it lacks, so one seed still means one draw.
DEFAULT_KINDS = tuple(k for k in FaultKind if k not in (FaultKind.SLOW_PARTICIPANT, FaultKind.CORRUPT))
ISOLATE_OVER_S = (2.0, 6.0)
"""How much longer than the transaction timeout a drawn client-isolate is held (uniform)."""
DEFAULT_TXN_TIMEOUT_S = 30.0
"""The transaction timeout an isolation outlasts when the caller does not say (the workload's default)."""
TRIGGERS = (TriggerSpec(TriggerOn.TXN_COMMIT, TriggerType.INVOKE, 5.0),
            TriggerSpec(TriggerOn.TXN_COMMIT, TriggerType.OK, 5.0),
            TriggerSpec(TriggerOn.SEND, TriggerType.OK, 5.0))


@dataclass(frozen=True)
class GeneratedFault:
    kind: FaultKind
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


def _params(kind: FaultKind, rng: random.Random) -> dict[str, Any]:
    if kind is FaultKind.PARTITION:
        return {"direction": rng.choice(("both", "both", "inbound", "outbound"))}
    if kind is FaultKind.LATENCY:
        return {"latency_ms": rng.choice((20, 50, 100, 200, 500, 1000)), "jitter_ms": rng.choice((0, 0, 20)),
                "direction": rng.choice(("both", "inbound", "outbound"))}
    if kind is FaultKind.BANDWIDTH:
        return {"rate_kbps": rng.choice((8, 32, 128, 512))}
    return {}


def draw(spec: GeneratedFaults, kinds: tuple[FaultKind, ...], *, seed: int, duration_s: float,
         txn_timeout_s: float | None = None) -> list[GeneratedWindow]:
    """The windows of a generated schedule (every path's; faults/schedule.py filters by path).

    `txn_timeout_s` is the workload's transaction timeout, which a client-isolate outlasts."""
    rng = random.Random(f"{seed}/generated")
    pool = list(kinds or DEFAULT_KINDS)
    timeout = txn_timeout_s if txn_timeout_s is not None else DEFAULT_TXN_TIMEOUT_S
    windows: list[GeneratedWindow] = []
    terminates = 0
    isolations = 0
    t = spec.from_s
    end_s = duration_s if spec.until_s is None else min(duration_s, spec.until_s)
    for _ in range(10_000):          # bounded: a window is at least a few milliseconds of the phase
        t += rng.uniform(spec.gap_min_s, spec.gap_max_s)
        if t >= end_s:
            break
        trigger = rng.choice(TRIGGERS) if rng.random() < spec.triggered else None
        choices = [k for k in pool if (k is not FaultKind.TERMINATE or terminates < spec.terminates)
                   and (k is not FaultKind.CLIENT_ISOLATE or isolations < spec.isolations)]
        count = min(rng.randint(1, spec.together), len(choices))
        chosen = rng.sample(choices, count)
        faults = []
        for kind in chosen:
            targets = TARGETS[kind] + (AIMED.get(kind, ()) if trigger is not None else ())
            for_s = 0.0 if kind in INSTANT else round(rng.uniform(spec.for_min_s, spec.for_max_s), 2)
            if kind is FaultKind.RESTART and rng.random() < 0.5:
                for_s = 0.0         # a restart at once: only the graceful hand-over
            if kind is FaultKind.CLIENT_ISOLATE:   # abandoned: the coordinators must time them out
                for_s = round(timeout + rng.uniform(*ISOLATE_OVER_S), 2)
            faults.append(GeneratedFault(kind, rng.choice(targets), for_s, _params(kind, rng)))
            terminates += kind is FaultKind.TERMINATE
            isolations += kind is FaultKind.CLIENT_ISOLATE
        window = GeneratedWindow(round(t, 3), tuple(faults), trigger)
        windows.append(window)
        t += window.for_s
    return windows
