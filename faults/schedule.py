"""Fault schedules: a pure function from (faults config, seed, duration, path) to a timeline.

Theory of operation. Every schedule entry and the `random` section produce
*candidates*: a nominal start (seconds from the start of the faults phase) and the
faults to inject together then. `at_s: T` gives one candidate at T; `every_s: E`
gives candidates at 0, E, 2E, ... before the end of the phase (or before its `until_s`:
the timeline's end can then hold faults whose damage no later move or restart repairs); `random` gives one
candidate every `random.every_s` (from 0), each a random non-empty subset of
`random.kinds` (seeded per occurrence, so dropping one does not change the others).

Candidates are placed in nominal order (ties: declaration order, `random` last)
into *windows* that never overlap: a window starts at its nominal time or, when a
fault is still in effect or the quiet period (`faults.quiet_s`) after the last
heal is running, when that quiet period ends. A repeating candidate that would be
postponed past its own next occurrence is skipped instead of piling up. A window
lasts its `for_s` (healable faults are healed at its end; split, merge and
terminate are instant and not healed), is cut short at the end of the phase, and
nothing starts at or after the end of the phase. Kinds that do not apply to the
run's path (split and merge on v4) are left out. Every such decision is kept in
`Timeline.notes`, so a user can see why a fault did not run when planned.

An entry may set its own `quiet_s` (the quiet period after each of its windows,
instead of `faults.quiet_s`), so dense schedules (a kill every few seconds) and
spaced ones live in one scenario. `flap: {count, off_s}` turns each occurrence into
a burst of `count` windows, `for_s` on and `off_s` off (flapping: many short
partitions); a burst is placed whole (nothing else starts inside it, and when its
first window is postponed the whole burst moves with it), and a burst postponed
past the series' next burst is skipped instead of piling up. A `trigger` is carried on the window: the
nemesis then injects at the load's next matching operation (faults.triggers).
An entry's `overlap` stacks more faults inside its window, each injected `after_s` into it
and healed after its own `for_s` (a store down while a coordinator moves: failures that
reach the recovery paths only together); the window lasts until the last heal.
A `generated` section (faults.generate) adds windows drawn from the seed; their faults
carry their own durations (`PlannedFault.for_s`), so the faults of one window overlap and
are healed one by one, the window lasting as long as the longest.

The nemesis runs the timeline against the clock; the real start of a window may
be later than planned (injections and restarts take time), never earlier, and
the quiet period is counted from the real end of the last heal.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from faults.environment import TARGET_LACKS, Capability
from faults.generate import draw
from faults.kinds import kind_of
from faults.kinds.base import Kind, ParamError
from faults.selectors import Selector, SelectorError, check_against_cluster, uses_trigger
from harness.config import FaultsConfig, FaultSpec, RunConfig, TriggerSpec
from harness.errors import ConfigError
from harness.txn_paths import TxnPath

RANDOM_SOURCE = "faults.random"
GENERATED_SOURCE = "faults.generated"


@dataclass(frozen=True)
class PlannedFault:
    """One fault as the scenario declared it, validated; its targets are resolved at injection."""

    fault_id: str                   # f1, f2, ... in timeline order; also the history process suffix
    kind: Kind
    target: str                     # the selector as written (after `random` -> the kind's default)
    selector: Selector
    params: Mapping[str, Any]
    source: str                     # the scenario key it came from, e.g. faults.schedule[2]
    for_s: float | None = None      # its own duration within its window (generated, overlap); None: the window's
    after_s: float = 0.0            # injected this long after the window's start (overlap)

    @property
    def healable(self) -> bool:
        return self.kind.healable


@dataclass(frozen=True)
class Window:
    start_s: float
    heal_s: float                   # when the healable faults are healed (start_s + for_s, cut at the end)
    faults: tuple[PlannedFault, ...]
    nominal_s: float                # when the scenario asked for it
    quiet_s: float = 0.0            # fault-free seconds after its heal (the entry's, or faults.quiet_s)
    trigger: TriggerSpec | None = None   # inject only at the load's next matching operation

    @property
    def for_s(self) -> float:
        return self.heal_s - self.start_s


@dataclass(frozen=True)
class Timeline:
    windows: tuple[Window, ...]
    duration_s: float
    quiet_s: float
    notes: tuple[str, ...] = ()

    @property
    def faults(self) -> tuple[PlannedFault, ...]:
        return tuple(f for w in self.windows for f in w.faults)

    def kinds(self) -> set[str]:
        return {f.kind.name for f in self.faults}


@dataclass(frozen=True)
class _Draft:
    kind: Kind
    target: str
    selector: Selector
    params: Mapping[str, Any]
    source: str
    for_s: float | None = None
    after_s: float = 0.0


@dataclass(frozen=True)
class _Candidate:
    nominal_s: float
    order: int
    series: str
    repeating: bool
    for_s: float
    drafts: tuple[_Draft, ...]
    quiet_s: float | None = None
    trigger: TriggerSpec | None = None
    burst_s: float | None = None    # a flap window: where its burst starts (a burst is placed whole)


def _draft(kind: Kind, target: str, params: Mapping[str, Any], txn_path: TxnPath,
           source: str, key: str, brokers: int | None, topics: int | None) -> _Draft:
    try:
        selector = kind.selector(target, txn_path)
    except SelectorError as err:
        raise ConfigError(source, f"{key}.target", str(err), "see faults/README.md, 'Targets'") from None
    if not kind.accepts_selector(selector):
        raise ConfigError(source, f"{key}.target", f"{kind.name} cannot act on {target!r}",
                          f"give one of: {kind.describe_accepts()}")
    if brokers is not None:
        try:
            check_against_cluster(selector, brokers, topics)
        except SelectorError as err:
            raise ConfigError(source, f"{key}.target", str(err), "pick one that exists") from None
    try:
        checked = kind.validate_params(params)
    except ParamError as err:
        raise ConfigError(source, f"{key}.params.{err.key}", err.problem, err.fix) from None
    return _Draft(kind, selector_text(selector, target), selector, MappingProxyType(checked), key)


def selector_text(selector: Selector, written: str) -> str:
    return getattr(selector, "text", written)


def _occurrences(every_s: float, duration_s: float) -> list[float]:
    count = int(duration_s // every_s) + 1
    return [round(i * every_s, 9) for i in range(count) if i * every_s < duration_s]


def plan_run(config: RunConfig, txn_path: TxnPath | None = None) -> Timeline:
    """A run's timeline on `txn_path` (default: the run's), checked against the scenario's broker count.
    Planned once, before a cluster exists (orchestrator.scenario), and handed to the nemesis, which
    checks it against the running cluster (its brokers, the run's topics) without planning it again."""
    timeline = plan_timeline(config.faults, seed=config.seed, duration_s=config.phases.faults_s,
                             txn_path=txn_path or config.path, source=f"scenario {config.name}",
                             brokers=config.cluster.brokers, load_workers=config.load.workers,
                             txn_timeout_s=config.workload.txn_timeout_s)
    return without_lacking(timeline, TARGET_LACKS.get(config.target, {}))


def without_lacking(timeline: Timeline, lacks: Mapping[Capability, str]) -> Timeline:
    """`timeline` without the faults that need what the target lacks (`lacks`: capability -> why), with a
    note per scenario entry. The faults kept keep their times and ids, so a scenario's faults line up
    across targets (a crash window on the embedded target is a gap on the pulsar target, not a shift)."""
    left_out: dict[tuple[str, str], int] = {}
    windows = []
    for window in timeline.windows:
        kept = []
        for fault in window.faults:
            missing = sorted(fault.kind.needs & lacks.keys(), key=str)
            if missing:
                key = (fault.source, f"{fault.kind.name} {lacks[missing[0]]}")
                left_out[key] = left_out.get(key, 0) + 1
            else:
                kept.append(fault)
        if kept:
            windows.append(dataclasses.replace(window, faults=tuple(kept)))
    if not left_out:
        return timeline
    notes = [f"{source}: {count} {why}; left out" for (source, why), count in left_out.items()]
    return dataclasses.replace(timeline, windows=tuple(windows), notes=(*timeline.notes, *notes))


def plan_timeline(faults: FaultsConfig, *, seed: int, duration_s: float, txn_path: TxnPath,
                  source: str = "scenario", brokers: int | None = None,
                  topics: int | None = None, load_workers: int | None = None,
                  txn_timeout_s: float | None = None) -> Timeline:
    """The faults a run injects and when. Raises ConfigError for a bad target or parameter.

    Args:
        faults: the scenario's `faults` section.
        seed: the run's seed; the same seed gives the same timeline.
        duration_s: the faults phase's length (`phases.faults_s`).
        txn_path: the run's transaction path (kinds that do not apply to it are left out).
        source: names the scenario in error messages.
        brokers, topics: when given, fixed broker and topic numbers are checked against them.
        load_workers: the load's Locust workers (`load.workers`); 0 leaves a generated schedule's
            client kills out (nothing to kill). None: not known, kept.
        txn_timeout_s: the workload's transaction timeout, which a generated client-isolate outlasts.
    """
    notes: list[str] = []
    candidates: list[_Candidate] = []
    order = 0
    for i, entry in enumerate(faults.schedule):
        key = f"faults.schedule[{i}]"
        draft = _entry_draft(entry.kind, entry.target, entry.params, entry.trigger is not None, key,
                             txn_path, source, notes, brokers, topics)
        if draft is None:
            continue
        drafts: tuple[_Draft, ...] = (draft,)
        length = entry.for_s
        stacked = _overlap_drafts(entry, key, txn_path, source, notes, brokers, topics)
        if stacked:   # each fault keeps its own duration; the window lasts until the last heal
            drafts = (dataclasses.replace(draft, for_s=entry.for_s), *stacked)
            length = max(d.after_s + (d.for_s or 0.0) for d in drafts)
        if entry.at_s is not None:
            times, repeating = [entry.at_s], False
        else:
            assert entry.every_s is not None  # FaultSpec.check: exactly one of at_s, every_s
            last_s = duration_s if entry.until_s is None else min(duration_s, entry.until_s)
            times, repeating = _occurrences(entry.every_s, last_s), True
        for t in times:
            if entry.flap is None:
                candidates.append(_Candidate(t, order, key, repeating, length, drafts, entry.quiet_s,
                                             entry.trigger))
                order += 1
                continue
            # A burst: `count` windows back to back, `off_s` apart (their quiet period), the
            # entry's own quiet period (or the section's) after the last one.
            period = entry.for_s + entry.flap.off_s
            for k in range(entry.flap.count):
                last = k == entry.flap.count - 1
                candidates.append(_Candidate(round(t + k * period, 9), order, key, True, entry.for_s, (draft,),
                                             entry.quiet_s if last else entry.flap.off_s, entry.trigger, t))
                order += 1
    if faults.random is not None:
        candidates.extend(_random_candidates(faults, seed, duration_s, txn_path, source, order, notes,
                                             brokers, topics))
        order += len(candidates)
    if faults.generated is not None:
        candidates.extend(_generated_candidates(faults, seed, duration_s, txn_path, source, order, notes,
                                                brokers, topics, load_workers, txn_timeout_s))
    return _place(candidates, duration_s, faults.quiet_s, notes)


def _entry_draft(kind_text: str, target: str, params: Mapping[str, Any], has_trigger: bool, key: str,
                 txn_path: TxnPath, source: str, notes: list[str], brokers: int | None,
                 topics: int | None) -> _Draft | None:
    """A schedule entry's (or a fault stacked in it) draft, checked (a `...:trigger` target needs
    the entry's trigger); None, with a note, when its kind does not apply to `txn_path`."""
    kind = kind_of(kind_text, source, f"{key}.kind")
    draft = _draft(kind, target, params, txn_path, source, key, brokers, topics)
    if not has_trigger and uses_trigger(draft.selector):
        raise ConfigError(source, f"{key}.target", f"{target!r} aims at what a trigger saw, and the entry "
                          "has no trigger", "add e.g. `trigger: {op: txn-commit}` to the entry, or name the "
                          "target another way (topic:random, coordinator)")
    if txn_path not in kind.paths:
        notes.append(f"{key}: {kind.name} does not apply to {txn_path.value}; left out")
        return None
    return draft


def _overlap_drafts(entry: FaultSpec, key: str, txn_path: TxnPath, source: str, notes: list[str],
                    brokers: int | None, topics: int | None) -> tuple[_Draft, ...]:
    """The faults stacked inside `entry`'s window (`overlap`), without those `txn_path` lacks."""
    out = []
    for j, extra in enumerate(entry.overlap):
        sub = f"{key}.overlap[{j}]"
        draft = _entry_draft(extra.kind, extra.target, extra.params, entry.trigger is not None, sub,
                             txn_path, source, notes, brokers, topics)
        if draft is None:
            continue
        for_s = extra.for_s if draft.kind.healable else 0.0
        out.append(dataclasses.replace(draft, for_s=for_s, after_s=extra.after_s))
    return tuple(out)


def _generated_candidates(faults: FaultsConfig, seed: int, duration_s: float, txn_path: TxnPath, source: str,
                          order: int, notes: list[str], brokers: int | None,
                          topics: int | None, load_workers: int | None = None,
                          txn_timeout_s: float | None = None) -> list[_Candidate]:
    """The seed's generated windows (faults.generate) as candidates, without the kinds `txn_path` lacks
    (and without the kinds that act through the load when it has no worker)."""
    spec = faults.generated
    assert spec is not None
    named = tuple(dict.fromkeys(kind_of(text, source, f"{GENERATED_SOURCE}.kinds[{i}]")
                                for i, text in enumerate(spec.kinds)))
    out = []
    dropped: dict[str, int] = {}
    no_workers: dict[str, int] = {}
    for n, window in enumerate(draw(spec, named, seed=seed, duration_s=duration_s, txn_timeout_s=txn_timeout_s)):
        drafts = []
        for fault in window.faults:
            if txn_path not in fault.kind.paths:
                dropped[fault.kind.name] = dropped.get(fault.kind.name, 0) + 1
                continue
            if Capability.LOAD in fault.kind.needs and load_workers == 0:
                no_workers[fault.kind.name] = no_workers.get(fault.kind.name, 0) + 1
                continue
            draft = _draft(fault.kind, fault.target, fault.params, txn_path, source, f"{GENERATED_SOURCE}[{n}]",
                           brokers, topics)
            drafts.append(dataclasses.replace(draft, for_s=fault.for_s))
        if drafts:
            longest = max(d.for_s or 0.0 for d in drafts)
            out.append(_Candidate(window.at_s, order + n, GENERATED_SOURCE, False, longest, tuple(drafts), 0.0,
                                  window.trigger))
    for kind, count in sorted(dropped.items()):
        notes.append(f"{GENERATED_SOURCE}: {count} {kind} fault(s) do not apply to {txn_path.value}; left out")
    for kind, count in sorted(no_workers.items()):
        notes.append(f"{GENERATED_SOURCE}: {count} {kind} fault(s) need Locust workers (load.workers 0); left out")
    return out


def _random_candidates(faults: FaultsConfig, seed: int, duration_s: float, txn_path: TxnPath, source: str,
                       order: int, notes: list[str], brokers: int | None,
                       topics: int | None) -> list[_Candidate]:
    spec = faults.random
    assert spec is not None
    named = [kind_of(text, source, f"{RANDOM_SOURCE}.kinds[{i}]") for i, text in enumerate(spec.kinds)]
    drafts: list[_Draft] = []
    for i, kind in enumerate(dict.fromkeys(named)):
        draft = _draft(kind, spec.target, {}, txn_path, source, RANDOM_SOURCE, brokers, topics)
        if uses_trigger(draft.selector):
            raise ConfigError(source, f"{RANDOM_SOURCE}.target", f"{spec.target!r} aims at what a trigger "
                              "saw, and random faults have no trigger", "use random, or a schedule entry "
                              "with a trigger")
        if txn_path not in kind.paths:
            notes.append(f"{RANDOM_SOURCE}.kinds[{i}]: {kind.name} does not apply to {txn_path.value}; left out")
            continue
        drafts.append(draft)
    if not drafts:
        notes.append(f"{RANDOM_SOURCE}: none of its kinds applies to {txn_path.value}; no random faults")
        return []
    out = []
    for n, t in enumerate(_occurrences(spec.every_s, duration_s)):
        rng = random.Random(f"{seed}/random/{n}")
        size = rng.randint(1, len(drafts))
        chosen = sorted(rng.sample(range(len(drafts)), size))
        out.append(_Candidate(t, order + n, RANDOM_SOURCE, True, spec.for_s,
                              tuple(drafts[c] for c in chosen)))
    return out


def _place(candidates: list[_Candidate], duration_s: float, quiet_s: float, notes: list[str]) -> Timeline:
    ordered = sorted(candidates, key=lambda c: (c.nominal_s if c.burst_s is None else c.burst_s, c.order))
    windows: list[Window] = []
    free_at = 0.0
    next_id = 1
    shifts: dict[tuple[str, float], float | None] = {}   # a burst's delay; None: the burst was skipped
    for i, cand in enumerate(ordered):
        burst = (cand.series, cand.burst_s) if cand.burst_s is not None else None
        later_in_burst = burst is not None and burst in shifts
        if burst is not None and later_in_burst:
            shift = shifts[burst]
            if shift is None:
                continue
            nominal = cand.nominal_s + shift     # a burst moves whole: its rhythm is its point
        else:
            nominal = cand.nominal_s
        start = max(nominal, free_at)
        label = f"{cand.series} at {cand.nominal_s:g}s"
        if start >= duration_s:
            notes.append(f"{label}: would start at {start:g}s, not before the end of the faults phase "
                         f"({duration_s:g}s); left out")
            continue
        if not later_in_burst and cand.repeating and start > nominal and any(
                later.series == cand.series and later.nominal_s <= start
                and (burst is None or later.burst_s != cand.burst_s) for later in ordered[i + 1:]):
            notes.append(f"{label}: still busy until {start:g}s, past its next occurrence; skipped")
            if burst is not None:
                shifts[burst] = None
            continue
        if burst is not None and not later_in_burst:
            shifts[burst] = start - cand.nominal_s
        if start > nominal and not later_in_burst:
            notes.append(f"{label}: postponed to {start:g}s (a fault or the quiet period before it)")
        heal = start + cand.for_s
        if heal > duration_s:
            notes.append(f"{label}: cut to {duration_s - start:g}s so it is healed when the faults phase ends")
            heal = duration_s
        planned = []
        for draft in cand.drafts:
            planned.append(PlannedFault(f"f{next_id}", draft.kind, draft.target, draft.selector,
                                        draft.params, draft.source, draft.for_s, draft.after_s))
            next_id += 1
        quiet = quiet_s if cand.quiet_s is None else cand.quiet_s
        windows.append(Window(round(start, 9), round(heal, 9), tuple(planned), cand.nominal_s, quiet,
                              cand.trigger))
        free_at = heal + quiet
    return Timeline(tuple(windows), duration_s, quiet_s, tuple(notes))


def describe(timeline: Timeline) -> list[str]:
    """One line per window, for logs and `--dry-run`-style output."""
    lines = []
    for w in timeline.windows:
        what = ", ".join(f"{f.fault_id} {f.kind.name} {f.target}" + (f" (+{f.after_s:g}s)" if f.after_s else "")
                         + (f" ({f.for_s:g}s)" if f.for_s is not None else "") for f in w.faults)
        when = f"  (at the next {w.trigger.op.value} {w.trigger.type.value})" if w.trigger is not None else ""
        lines.append(f"{w.start_s:7.1f}s - {w.heal_s:7.1f}s  {what}{when}")
    return lines
