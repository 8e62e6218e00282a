"""A candidate schedule: the faults the run injected, pinned to what they hit, as a scenario file.

Theory of operation. `shrink_faults` turns the run's recorded faults into `ShrinkFault`s, the unit
the search drops and shortens: each keeps its kind, pinned target (orchestrator.shrink.pin), params,
the moment the run injected it (seconds into the faults phase) and how long it was held. Faults the
run injected together (one window of the timeline: the same trigger, or overlapping in time) share
a `window`; `scenario_data` writes each window of a candidate as one schedule entry at its time
(`at_s`), its first fault the entry's and the others stacked in it (`overlap`, each `after_s` into
it with its own `for_s`), because the planner never overlaps two entries' windows and the faults a
run had in effect together must stay together. A window keeps its trigger (op, type, `within_s`),
so a fault timed to a commit is timed to one again. `faults.quiet_s` is 0: the recorded times
already hold the quiet periods. The rest of the scenario is the run's own config (seed, workload,
load, cluster settings, target, release, checks), on its one path, with the faults phase cut to
`margin_s` past the last kept fault's heal.

Why the recorded times and not the planned ones: the nemesis's timeline slips behind its plan
(heals and triggers take time), and the faults that mattered met the load where the run had them.
A re-run's timeline slips too; the margin keeps its last fault inside the phase.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from faults import kinds
from faults.generate import TRIGGERS
from harness.config import RunConfig, TriggerOn, TriggerSpec, TriggerType
from orchestrator.shrink.pin import pin_target
from orchestrator.shrink.record import FailingRun, RecordedFault

#: The shortest window the search tries when it halves one (seconds).
MIN_FOR_S = 0.5


@dataclass(frozen=True)
class ShrinkFault:
    """One fault of a candidate schedule, named by the run's fault id (f7) across candidates."""

    fault_id: str
    kind: str
    target: str                         # pinned selector (what the run hit, where it can be named)
    params: Mapping[str, Any]
    start_s: float                      # when the run injected it, seconds into the faults phase
    for_s: float                        # how long it is held (0: instant, or a restart at once)
    healable: bool
    window: int                         # the run's window it was injected in
    due_s: float                        # when that window was due (before its trigger's wait)
    trigger: TriggerSpec | None         # the window's trigger, kept
    selector: str = ""                  # as the run planned it
    pinned: bool = True                 # the target names exactly what the run hit
    note: str = ""

    def describe(self) -> str:
        held = f" for {self.for_s:g}s" if self.healable else ""
        return f"{self.fault_id} {self.kind} {self.target} at {self.start_s:g}s{held}"

    def to_json(self) -> dict[str, Any]:
        return {"fault": self.fault_id, "kind": self.kind, "target": self.target, "selector": self.selector,
                "pinned": self.pinned, "note": self.note, "params": dict(self.params), "start_s": self.start_s,
                "for_s": self.for_s, "window": self.window,
                "trigger": None if self.trigger is None else _trigger_data(self.trigger)}


def shrink_faults(run: FailingRun, topics: Sequence[str]) -> tuple[ShrinkFault, ...]:
    """The run's faults as the search's units: grouped into the windows they were injected in,
    each target pinned (`topics`: the run's topics in topology order)."""
    out: list[ShrinkFault] = []
    for number, members in enumerate(_windows(run.faults)):
        first = members[0]
        trigger = _trigger_spec(first, run.config)
        waited = float((first.trigger or {}).get("waited_s") or 0.0) if trigger is not None else 0.0
        due = max(0.0, round(first.start_s - waited, 3))
        for fault in members:
            network = _is_network(fault.kind)
            pinned = pin_target(fault.selector, fault.targets, network=network, keeps_trigger=trigger is not None,
                                topics=topics, effect=fault.effect)
            out.append(ShrinkFault(fault.fault_id, fault.kind, pinned.target, dict(fault.params), fault.start_s,
                                   fault.for_s if fault.healable else 0.0, fault.healable, number, due, trigger,
                                   fault.selector, pinned.pinned, pinned.note))
    return tuple(out)


def _windows(faults: Sequence[RecordedFault]) -> list[list[RecordedFault]]:
    """Faults injected together: one window's (the same trigger reading), or overlapping in time."""
    windows: list[list[RecordedFault]] = []
    end = -math.inf
    for fault in sorted(faults, key=lambda f: f.start_s):
        current = windows[-1] if windows else None
        same_trigger = current is not None and fault.trigger is not None and fault.trigger == current[0].trigger
        if current is not None and (same_trigger or fault.start_s < end):
            current.append(fault)
            end = max(end, fault.end_s)
        else:
            windows.append([fault])
            end = fault.end_s
    return windows


def _is_network(kind: str) -> bool:
    return kind in kinds.BY_NAME and kinds.BY_NAME[kind].network


def _trigger_spec(fault: RecordedFault, config: RunConfig) -> TriggerSpec | None:
    """The window's trigger as the scenario had it: op and type from the history, `within_s` from the
    schedule entry it came from (a generated window's from faults.generate), else the default."""
    seen = fault.trigger
    if not seen:
        return None
    try:
        op, type_ = TriggerOn(str(seen.get("op"))), TriggerType(str(seen.get("type") or "invoke"))
    except ValueError:
        return None
    within = TriggerSpec(op, type_).within_s
    entry = re.match(r"faults\.schedule\[(\d+)\]", fault.source)
    if entry and int(entry.group(1)) < len(config.faults.schedule):
        spec = config.faults.schedule[int(entry.group(1))].trigger
        within = spec.within_s if spec is not None else within
    elif fault.source.startswith("faults.generated"):
        within = next((t.within_s for t in TRIGGERS if (t.op, t.type) == (op, type_)), within)
    return TriggerSpec(op, type_, within)


def _trigger_data(trigger: TriggerSpec) -> dict[str, Any]:
    return {"op": trigger.op.value, "type": trigger.type.value, "within_s": trigger.within_s}


def _window_entries(faults: Iterable[ShrinkFault]) -> list[list[ShrinkFault]]:
    by_window: dict[int, list[ShrinkFault]] = {}
    for fault in faults:
        by_window.setdefault(fault.window, []).append(fault)
    return [sorted(members, key=lambda f: (f.start_s, f.fault_id)) for _, members in sorted(by_window.items())]


def schedule_entries(faults: Iterable[ShrinkFault]) -> list[dict[str, Any]]:
    """A candidate's `faults.schedule`: one entry per window, its other faults stacked in it.

    A triggered window is due when the run's was (the trigger then waits for the load); an untimed
    one starts when its first kept fault was injected. The stacked faults keep their distance to
    that first one."""
    entries = []
    for members in _window_entries(faults):
        main = members[0]
        entry: dict[str, Any] = {"kind": main.kind, "target": main.target,
                                 "at_s": _round(main.due_s if main.trigger is not None else main.start_s),
                                 "for_s": _round(main.for_s)}
        if main.params:
            entry["params"] = dict(main.params)
        if main.trigger is not None:
            entry["trigger"] = _trigger_data(main.trigger)
        stacked = []
        for fault in members[1:]:
            extra: dict[str, Any] = {"kind": fault.kind, "target": fault.target,
                                     "after_s": _round(max(0.0, fault.start_s - main.start_s)),
                                     "for_s": _round(fault.for_s)}
            if fault.params:
                extra["params"] = dict(fault.params)
            stacked.append(extra)
        if stacked:
            entry["overlap"] = stacked
        entries.append(entry)
    return entries


def faults_phase_s(faults: Iterable[ShrinkFault], margin_s: float) -> float:
    """The faults phase a candidate needs: `margin_s` past the end of its last window."""
    end = 0.0
    for entry in schedule_entries(faults):
        length = max([entry["for_s"], *(o["after_s"] + o["for_s"] for o in entry.get("overlap", []))])
        end = max(end, entry["at_s"] + length)
    return _round(math.ceil((end + margin_s) * 10) / 10)


def scenario_data(run: FailingRun, faults: Sequence[ShrinkFault], margin_s: float) -> dict[str, Any]:
    """The scenario of one candidate: the run's own config on its path, these faults, a cut faults phase."""
    config = dataclasses.replace(run.config, paths=(run.config.path,))
    data = config.to_dict()
    data["name"] = shrunk_name(run.config.name)
    data["description"] = (f"{len(faults)} fault(s) of run {run.run_id}, shrunk by txnbench shrink to still "
                           f"show {', '.join(run.classes)}")
    data["phases"]["faults_s"] = faults_phase_s(faults, margin_s)
    data["faults"] = {"quiet_s": 0.0, "schedule": schedule_entries(faults)}
    return data


def shrunk_name(name: str) -> str:
    """`<scenario>-shrunk`, within a scenario name's 64 characters."""
    return f"{name[:57]}-shrunk"


def scenario_text(data: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """The scenario as YAML, after `# ` comment lines (`header`)."""
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header)
    return comments + yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=None, width=110)


def total_for_s(faults: Iterable[ShrinkFault]) -> float:
    return round(sum(f.for_s for f in faults), 3)


def _round(value: float) -> float:
    return round(float(value), 1)
