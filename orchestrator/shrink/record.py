"""What a failing run did, read back from its folder: the faults it injected, when and on what, the
anomaly classes nobody expected, and when the first of them happened.

Why from the history and not from the scenario: a scenario's `random` and `generated` faults, its
random targets and its triggers are decided while the run goes, so only the nemesis's history
(`fault` and `heal` ops, writer `nemesis`) says what was injected where and when, and only the
checker's instances say when the first unexpected anomaly happened. The verdict is judged again
here by the same code as the run's (analysis.verdicts.judge_run), so a run judged by older rules
is shrunk towards what counts as unexpected today.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.verdicts import judge_run
from faults.supervisor import EXIT_KIND
from harness.config import RunConfig
from harness.errors import ConfigError
from harness.history.events import file_events
from harness.history.schema import NOT_THE_LOAD, OpF, OpType
from harness.results import planted_bugs_of


@dataclass(frozen=True)
class RecordedFault:
    """One fault the nemesis put in effect (or may have: an `info` injection), as the history has it."""

    fault_id: str
    kind: str
    selector: str                       # as planned (after `random` became the kind's default)
    targets: tuple[str, ...]            # what it resolved to: services, proxies, topics, segments
    params: Mapping[str, Any]
    for_s: float                        # how long it was held (0: instant or not healable)
    healable: bool
    source: str                         # the scenario key it came from, e.g. faults.generated[3]
    start_s: float                      # its injection began, seconds into the faults phase
    end_s: float                        # its heal completed (instant kinds: its injection did)
    trigger: Mapping[str, Any] | None   # extra.trigger: op, type, fired, waited_s, seen
    effect: Mapping[str, Any]           # the `fault` ok's extra.effect (client-kill: the worker killed)


@dataclass(frozen=True)
class FailingRun:
    """A run folder with anomalies nobody expected, and the faults it ran."""

    path: Path
    run_id: str
    config: RunConfig                   # as the run ran it (its manifest's resolved config)
    classes: tuple[str, ...]            # the unexpected classes a smaller schedule must still show
    unexpected: tuple[str, ...]         # every class the run showed unexpectedly
    faults: tuple[RecordedFault, ...]
    faults_phase_s: float               # how long its faults phase really lasted
    first_anomaly_s: float | None       # the first unexpected instance, seconds into the faults phase
    planted_bugs: tuple[str, ...]
    notes: tuple[str, ...]              # what of the history was left out, and why


def read_failing_run(folder: Path, wanted: Sequence[str] = ()) -> FailingRun:
    """The failing run in `folder` (a single run's folder, or a matrix's `runs/<path>`).

    `wanted`: the unexpected classes to keep (default: every one the run showed). A ConfigError
    when the folder is not a run, the run did not complete or was not checked, its verdict was
    valid, unknown or only expected anomalies, a wanted class was not unexpected in it, or its
    history holds no fault the nemesis injected."""
    folder = Path(folder)
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        runs = sorted(p.name for p in (folder / "runs").glob("*") if (p / "manifest.json").is_file())
        fix = (f"pass one of its runs: {', '.join(str(folder / 'runs' / r) for r in runs)}" if runs
               else "pass a run folder: results/<run_id> or results/<matrix>/runs/<path>")
        raise ConfigError(str(folder), "", "is not a run folder (no manifest.json)", fix)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    source = str(manifest_path)
    if manifest.get("status") != "complete":
        raise ConfigError(source, "status", f"the run is {manifest.get('status')!r}, not complete: it has no "
                          "verdict to shrink towards", "shrink a run that completed")
    judgement = judge_run(folder, manifest=manifest)
    if judgement is None:
        raise ConfigError(str(folder), "analysis/results.json", "the run was never checked",
                          f"run `txnbench check {folder}` first")
    if judgement.valid is True:
        raise ConfigError(str(folder), "", "is not a failing run: its verdict is valid", "shrink a run with anomalies")
    if judgement.valid not in (True, False):
        raise ConfigError(str(folder), "", "its verdict is unknown (the history could not be judged), so there is "
                          "no anomaly to shrink towards", "see its analysis/results.json, unknown_reasons")
    if not judgement.unexpected:
        raise ConfigError(str(folder), "", "its anomalies were all expected by its scenario "
                          f"({', '.join(judgement.expected)}): nothing failed", "shrink a run with unexpected anomalies")
    unknown = [c for c in wanted if c not in judgement.unexpected]
    if unknown:
        raise ConfigError("--anomaly", unknown[0], "was not an unexpected anomaly of this run",
                          f"give some of: {', '.join(judgement.unexpected)}")
    classes = tuple(dict.fromkeys(wanted)) or tuple(judgement.unexpected)
    config = RunConfig.from_plain(manifest.get("config"), source)
    phase_start, phase_end = _faults_phase(folder / "history" / "run.jsonl", source)
    faults, notes = _recorded_faults(folder / "history" / "nemesis.jsonl", phase_start, source)
    results = json.loads((folder / "analysis" / "results.json").read_text(encoding="utf-8"))
    first = _first_instance_ns(folder, results, classes)
    return FailingRun(
        path=folder, run_id=str(manifest.get("run_id") or folder.name), config=config, classes=classes,
        unexpected=tuple(judgement.unexpected), faults=faults,
        faults_phase_s=round((phase_end - phase_start) / 1e9, 3),
        first_anomaly_s=None if first is None else round((first - phase_start) / 1e9, 3),
        planted_bugs=tuple(planted_bugs_of(manifest)), notes=notes)


def run_topics(run: FailingRun) -> tuple[str, ...]:
    """The run's topics in topology order (what `topic:<k>` counts), rebuilt from its config and id."""
    from workloads.topology import plan

    try:
        return tuple(plan(run.config, run.run_id).topics)
    except Exception:   # an older config the planner cannot read: topic targets stay as selected
        return ()


def _faults_phase(run_history: Path, source: str) -> tuple[int, int]:
    """When the faults phase began and ended (the next phase's start), in the run's nanoseconds."""
    if not run_history.is_file():
        raise ConfigError(source, "history/run.jsonl", "missing: the run's phases are unknown")
    starts = [(op.time_ns, str(op.phase)) for op in file_events(run_history, (OpF.PHASE,))]
    names = [name for _, name in starts]
    if "faults" not in names:
        raise ConfigError(source, "history", "the run had no faults phase (its scenario has no faults)",
                          "shrink a chaos run")
    at = names.index("faults")
    begin = starts[at][0]
    end = next((t for t, name in starts[at + 1:] if name in ("recovery", "drain", "collect")), None)
    return begin, end if end is not None else begin


def _recorded_faults(nemesis: Path, phase_start: int, source: str) -> tuple[tuple[RecordedFault, ...], tuple[str, ...]]:
    """The faults that were in effect (injection ok, or unknown: it may have been), in injection order.

    Left out, with a note: a fault whose injection failed (it never was in effect), and a server's
    exit the supervisor recorded (the system did that, not the schedule)."""
    if not nemesis.is_file():
        raise ConfigError(source, "history/nemesis.jsonl", "missing: the run has no nemesis history",
                          "shrink a chaos run (one whose scenario has faults)")
    invokes: dict[str, tuple[int, Mapping[str, Any]]] = {}
    outcome: dict[str, tuple[str, int, Mapping[str, Any]]] = {}
    healed: dict[str, int] = {}
    for op in file_events(nemesis, (OpF.FAULT, OpF.HEAL)):
        if op.f is OpF.FAULT and op.type is OpType.INVOKE:
            invokes[op.fault_key] = (op.time_ns, op.extra)
        elif op.f is OpF.FAULT:
            outcome[op.fault_key] = (str(op.type), op.time_ns, op.extra)
        elif op.type is OpType.OK:
            healed[op.fault_key] = op.time_ns
    faults: list[RecordedFault] = []
    notes: list[str] = []
    for key, (t, extra) in sorted(invokes.items(), key=lambda item: item[1][0]):
        kind = str(extra.get("kind"))
        if extra.get("source") == "supervisor" or kind == EXIT_KIND:
            notes.append(f"{key}: {kind} of {', '.join(map(str, extra.get('targets') or []))} left out "
                         "(a server exited on its own; the supervisor started it again)")
            continue
        result, done, done_extra = outcome.get(key, ("info", t, {}))
        if result == "fail":
            notes.append(f"{key}: {kind} {extra.get('selector')} left out (its injection failed: never in effect)")
            continue
        trigger = extra.get("trigger")
        faults.append(RecordedFault(
            fault_id=key, kind=kind, selector=str(extra.get("selector") or "random"),
            targets=tuple(str(x) for x in extra.get("targets") or ()), params=dict(extra.get("params") or {}),
            for_s=float(extra.get("for_s") or 0.0) if extra.get("healable", True) else 0.0,
            healable=bool(extra.get("healable", True)), source=str(extra.get("source") or ""),
            start_s=round((t - phase_start) / 1e9, 3),
            end_s=round((healed.get(key, done) - phase_start) / 1e9, 3),
            trigger=dict(trigger) if isinstance(trigger, Mapping) else None,
            effect=dict(done_extra.get("effect") or {})))
    if not faults:
        raise ConfigError(source, "history/nemesis.jsonl", "no fault was in effect in this run: there is no "
                          "schedule to shrink", "shrink a run whose faults were injected")
    return tuple(faults), tuple(notes)


def _first_instance_ns(folder: Path, results: Mapping[str, Any], classes: Iterable[str]) -> int | None:
    """The earliest moment at which an instance of `classes` had all its evidence in the load's
    history (the latest load operation it names); None when no instance names a time."""
    first: int | None = None
    anomalies = results.get("anomalies") or {}
    for name in classes:
        entry = anomalies.get(name) or {}
        for instance in _instances(folder, entry):
            times = list(_load_times(instance))
            if times and (first is None or max(times) < first):
                first = max(times)
    return first


def _instances(folder: Path, entry: Mapping[str, Any]) -> list[Any]:
    """Every instance the checker kept (analysis/instances/<class>.jsonl), else the examples."""
    name = entry.get("instances")
    if isinstance(name, str) and name:
        try:
            text = (folder / name).read_text(encoding="utf-8")
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except (OSError, ValueError):
            pass
    return list(entry.get("examples") or [])


def _load_times(value: Any) -> Iterable[int]:
    """The `time_ns` of every load operation nested in an instance."""
    if isinstance(value, Mapping):
        if isinstance(value.get("time_ns"), int) and str(value.get("writer")) not in NOT_THE_LOAD:
            yield int(value["time_ns"])
        for item in value.values():
            yield from _load_times(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _load_times(item)
