"""`txnbench shrink`, reading side: what a failing run did (its faults, pinned to what they hit, and
when its first unexpected anomaly happened), the runs it refuses, and the scenario a candidate
becomes, round-tripped through the scenario loader `txnbench run` uses. No processes: the run
folders are written here as a run writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faults.schedule import plan_timeline
from harness.config import TriggerOn, parse_scenario
from harness.errors import ConfigError
from orchestrator import scenario as scenario_module
from orchestrator.shrink.pin import pin_target, topic_index
from orchestrator.shrink.record import read_failing_run, run_topics
from orchestrator.shrink.schedule import (
    faults_phase_s,
    scenario_data,
    scenario_text,
    schedule_entries,
    shrink_faults,
)

RUN_ID = "20261129-101010-shrinkme-v4"
SCENARIO = """
name: shrinkme
seed: 42
path: v4
phases: {warmup_s: 1, steady_s: 1, faults_s: 60, recovery_s: 2}
cluster: {brokers: 2, settings: {metadataStoreUrl: txnbench}}
workload: {kind: atomic-produce, topics: 4}
faults:
  quiet_s: 2
  schedule:
    - {kind: restart, target: "broker:random", at_s: 2, for_s: 0}
    - {kind: kill, target: coordinator, at_s: 10, for_s: 4, trigger: {op: txn-commit, within_s: 7}}
  random: {kinds: [latency, partition], every_s: 20, for_s: 3}
checks:
  expected:
    - {paths: [v4], anomalies: [stalled-commit], reason: "the test expects it"}
"""
PHASE_START_NS = 10_000_000_000   # the faults phase begins 10 s into the run


def _op(writer: str, index: int, t_s: float, f: str, type_: str, **fields: Any) -> dict[str, Any]:
    """A history line as a writer records it; times in seconds into the faults phase."""
    return {"schema": 1, "run": RUN_ID, "writer": writer, "process": fields.pop("process", writer), "index": index,
            "time_ns": PHASE_START_NS + int(t_s * 1e9), "wall_ms": 0.0, "type": type_, "f": f, "path": "v4",
            "txn": None, **fields}


def _fault(index: int, fault_id: str, t_s: float, end_s: float | None, *, kind: str, selector: str,
           targets: list[str], for_s: float = 0.0, outcome: str = "ok", trigger: dict[str, Any] | None = None,
           source: str = "faults.schedule[0]", effect: dict[str, Any] | None = None,
           healable: bool = True) -> list[dict[str, Any]]:
    extra = {"kind": kind, "targets": targets, "params": {}, "selector": selector, "fault_id": fault_id,
             "for_s": for_s, "healable": healable, "source": source, **({"trigger": trigger} if trigger else {})}
    process = f"nemesis/{fault_id}"
    lines = [_op("nemesis", index, t_s, "fault", "invoke", process=process, extra=extra),
             _op("nemesis", index + 1, t_s + 0.05, "fault", outcome, process=process,
                 extra={**extra, **({"effect": effect} if effect else {})})]
    if end_s is not None:
        lines.append(_op("nemesis", index + 2, end_s, "heal", "ok", process=process, extra=extra))
    return lines


def _topic(index: int) -> str:
    return f"persistent://public/txnbench/{RUN_ID}-ap-{index}"


COMMIT_TRIGGER = {"op": "txn-commit", "type": "invoke", "fired": True, "waited_s": 1.5,
                  "seen": {"writer": "w0", "txn": "1:2"}}


def nemesis_lines() -> list[dict[str, Any]]:
    """Six faults as a run records them, one of them failed and one the supervisor's."""
    lines: list[dict[str, Any]] = []
    lines += _fault(0, "f1", 2.1, 6.0, kind="restart", selector="broker:random", targets=["broker-1"])
    lines += _fault(3, "f2", 11.5, 16.0, kind="kill", selector="coordinator", targets=["broker-0"], for_s=4.0,
                    trigger=COMMIT_TRIGGER, source="faults.schedule[1]")
    # stacked in f2's window: the same trigger reading
    lines += _fault(6, "f3", 12.0, 14.0, kind="unload", selector="topic:trigger", targets=[_topic(2)],
                    trigger=COMMIT_TRIGGER, source="faults.schedule[1].overlap[0]", healable=False)
    lines += _fault(9, "f4", 20.0, 23.2, kind="latency", selector="link:random", targets=["client-broker-1"],
                    for_s=3.0, source="faults.random")
    lines += _fault(12, "f5", 21.0, None, kind="partition", selector="link:random", targets=["broker-0-ledger"],
                    for_s=3.0, source="faults.random", outcome="fail")
    lines += _fault(15, "f6", 30.0, 33.0, kind="exit", selector="broker-1", targets=["broker-1"], source="supervisor")
    lines += _fault(18, "f7", 40.0, 45.1, kind="partition", selector="link:random",
                    targets=["broker-0-broker-1"], for_s=5.0, source="faults.random")
    return lines


def write_run(folder: Path, *, anomalies: dict[str, Any] | None = None, valid: Any = False, status: str = "complete",
              nemesis: list[dict[str, Any]] | None = None) -> Path:
    """A run folder as `txnbench run` leaves it (manifest, history, analysis/results.json)."""
    config = parse_scenario(SCENARIO)
    (folder / "history").mkdir(parents=True)
    (folder / "analysis" / "instances").mkdir(parents=True)
    manifest = {"schema": 1, "run_id": RUN_ID, "scenario": "shrinkme", "path": "v4", "target": "embedded",
                "seed": 42, "status": status, "config": config.to_dict(), "planted_bugs": []}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    phases = [_op("run", i, t, "phase", "ok", extra={"name": name})
              for i, (t, name) in enumerate([(-10, "setup"), (-2, "warmup"), (-1, "steady"), (0, "faults"),
                                             (61.5, "recovery"), (64, "drain")])]
    (folder / "history" / "run.jsonl").write_text("".join(json.dumps(o) + "\n" for o in phases))
    if nemesis is None:
        nemesis = nemesis_lines()
    if nemesis:
        (folder / "history" / "nemesis.jsonl").write_text("".join(json.dumps(o) + "\n" for o in nemesis))
    if anomalies is None:
        lost = [{"txn": "0:9", "send": {"writer": "w0", "f": "send", "type": "ok", "time_ns": PHASE_START_NS + 13_000_000_000},
                 "read": {"writer": "drain", "f": "read", "time_ns": PHASE_START_NS + 80_000_000_000}},
                {"txn": "0:3", "send": {"writer": "w0", "f": "send", "type": "ok", "time_ns": PHASE_START_NS + 9_000_000_000},
                 "commit": {"writer": "w0", "f": "txn-commit", "type": "ok", "time_ns": PHASE_START_NS + 12_500_000_000}}]
        (folder / "analysis" / "instances" / "lost-write.jsonl").write_text("".join(json.dumps(i) + "\n" for i in lost))
        anomalies = {"lost-write": {"count": 2, "examples": lost[:1], "instances": "analysis/instances/lost-write.jsonl"},
                     "stalled-commit": {"count": 1, "examples": [{"txn": "0:1", "op": {"writer": "w0", "time_ns": 1}}]},
                     "partial-txn": {"count": 1, "examples": [{"txn": "0:4", "ops": [
                         {"writer": "w1", "time_ns": PHASE_START_NS + 30_000_000_000}]}]}}
    (folder / "analysis" / "results.json").write_text(json.dumps({"valid": valid, "anomalies": anomalies}))
    return folder


# ---- what the run did -------------------------------------------------------------------------------


def test_the_run_is_read_back_from_its_history(tmp_path: Path) -> None:
    run = read_failing_run(write_run(tmp_path / "run"))
    assert run.run_id == RUN_ID and run.config.seed == 42 and run.config.path.value == "v4"
    # stalled-commit is expected by the scenario: only the unexpected classes are kept
    assert run.classes == ("lost-write", "partial-txn") == run.unexpected
    # the first unexpected instance: its latest load operation (never the drain's read), 12.5 s in
    assert run.first_anomaly_s == 12.5
    assert run.faults_phase_s == 61.5
    assert [f.fault_id for f in run.faults] == ["f1", "f2", "f3", "f4", "f7"]
    f2 = run.faults[1]
    assert (f2.kind, f2.selector, f2.targets, f2.start_s, f2.end_s, f2.for_s) == \
        ("kill", "coordinator", ("broker-0",), 11.5, 16.0, 4.0)
    assert not run.faults[2].healable and run.faults[2].for_s == 0.0
    assert any("f5" in n and "injection failed" in n for n in run.notes)
    assert any("f6" in n and "supervisor" in n for n in run.notes)


def test_only_the_asked_classes_are_kept(tmp_path: Path) -> None:
    run = read_failing_run(write_run(tmp_path / "run"), ["partial-txn"])
    assert run.classes == ("partial-txn",) and run.first_anomaly_s == 30.0
    with pytest.raises(ConfigError, match=r"stalled-commit.*was not an unexpected anomaly"):
        read_failing_run(tmp_path / "run", ["stalled-commit"])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"valid": True, "anomalies": {}}, "not a failing run: its verdict is valid"),
    ({"valid": "unknown", "anomalies": {}}, "verdict is unknown"),
    ({"anomalies": {"stalled-commit": {"count": 1, "examples": []}}}, "all expected"),
    ({"status": "interrupted"}, "not complete"),
    ({"nemesis": []}, "no nemesis history"),
    ({"nemesis": _fault(0, "f1", 1.0, 2.0, kind="kill", selector="broker:0", targets=["broker-0"], outcome="fail")},
     "no fault was in effect"),
])
def test_a_run_that_is_not_a_failing_chaos_run_is_refused(tmp_path: Path, kwargs: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_failing_run(write_run(tmp_path / "run", **kwargs))


def test_a_matrix_folder_names_its_runs(tmp_path: Path) -> None:
    write_run(tmp_path / "matrix" / "runs" / "v4")
    with pytest.raises(ConfigError, match=r"pass one of its runs: .*runs/v4"):
        read_failing_run(tmp_path / "matrix")


# ---- pinned targets ---------------------------------------------------------------------------------

TOPICS = [_topic(i) for i in range(4)]


@pytest.mark.parametrize(("selector", "targets", "network", "pinned"), [
    ("broker:random", ["broker-1"], False, "broker:1"),
    ("coordinator", ["broker-0"], False, "broker:0"),
    ("process:random", ["metadata"], False, "metadata"),
    ("coordinator:2", ["broker-1"], False, "coordinator:2"),       # an id is no draw: kept
    ("broker:0", ["broker-0"], False, "broker:0"),
    ("coordinator", ["client-broker-1", "broker-1-metadata", "broker-1-ledger", "broker-1-broker-0",
                     "broker-0-broker-1"], True, "broker:1"),         # isolating the coordinator's broker
    ("process:random", ["broker-0-metadata", "broker-1-metadata"], True, "metadata"),
    ("broker:random", ["broker-1-metadata"], True, "broker:1"),      # slow-participant's one link
    ("link:random", ["client-broker-1"], True, "client-broker:1"),
    ("link:random", ["broker-0-ledger"], True, "broker-ledger:0"),
    ("broker-metadata:random", ["broker-1-metadata"], True, "broker-metadata:1"),
    ("broker-broker:random", ["brokers-broker-0", "brokers-broker-1"], True, "broker-broker:0-1"),  # pulsar
    ("topic:random", [_topic(3)], False, "topic:3"),
    ("segment:random", [_topic(1) + "-partition-0"], False, "segment:1"),
    ("clients", ["client-broker-0", "client-broker-1"], True, "clients"),
])
def test_a_drawn_target_is_pinned_to_what_the_run_hit(selector: str, targets: list[str], network: bool,
                                                      pinned: str) -> None:
    result = pin_target(selector, targets, network=network, keeps_trigger=False, topics=TOPICS)
    assert (result.target, result.pinned) == (pinned, True)


def test_aimed_targets_stay_aimed_with_their_trigger_and_the_rest_says_why_not_pinned() -> None:
    assert pin_target("coordinator:trigger", ["broker-1"], network=False, keeps_trigger=True).target \
        == "coordinator:trigger"
    assert pin_target("coordinator:trigger", ["broker-1"], network=False, keeps_trigger=False).target == "broker:1"
    assert pin_target("load:random", ["load:random"], network=False, keeps_trigger=False,
                      effect={"writer": "w1"}).target == "load:1"
    kept = pin_target("load:random", ["load:random"], network=False, keeps_trigger=False, effect={"writer": "w1-2"})
    assert (kept.target, kept.pinned) == ("load:random", False) and "w1-2" in kept.note
    shared = pin_target("link:random", ["brokers-ledger"], network=True, keeps_trigger=False)
    assert (shared.target, shared.pinned) == ("link:random", False)


def test_a_segment_names_its_topic() -> None:
    topics = ["topic://public/txnbench/r-ap-0", "topic://public/txnbench/r-ap-1"]
    assert topic_index("segment://public/txnbench/r-ap-1/0000-7fff-0", topics) == 1
    assert topic_index("persistent://public/txnbench/other", topics) is None


# ---- the candidate as a scenario --------------------------------------------------------------------


def test_the_runs_faults_become_windows_with_pinned_targets(tmp_path: Path) -> None:
    run = read_failing_run(write_run(tmp_path / "run"))
    assert run_topics(run)[2] == _topic(2)
    faults = shrink_faults(run, run_topics(run))
    by_id = {f.fault_id: f for f in faults}
    assert [f.window for f in faults] == [0, 1, 1, 2, 3]            # f2 and f3 share a trigger reading
    assert by_id["f1"].target == "broker:1" and by_id["f2"].target == "broker:0"
    assert by_id["f3"].target == "topic:trigger"                     # aimed, its trigger kept
    assert by_id["f4"].target == "client-broker:1" and by_id["f7"].target == "broker-broker:0-1"
    trigger = by_id["f2"].trigger
    assert trigger is not None and trigger.op is TriggerOn.TXN_COMMIT
    assert trigger.within_s == 7.0                                   # from the entry the window came from
    assert by_id["f2"].due_s == 10.0                                 # injected 11.5 s after a 1.5 s wait


def test_a_candidate_round_trips_through_the_scenario_loader(tmp_path: Path) -> None:
    run = read_failing_run(write_run(tmp_path / "run"))
    faults = shrink_faults(run, run_topics(run))
    kept = tuple(f for f in faults if f.fault_id in ("f2", "f3", "f7"))
    file = tmp_path / "candidate.yaml"
    file.write_text(scenario_text(scenario_data(run, kept, margin_s=10.0), ["a header"]))
    assert file.read_text().startswith("# a header\n")
    config = scenario_module.load(str(file))                         # what `txnbench run FILE` does
    assert (config.seed, config.path.value, config.paths, config.target.value) == (42, "v4", (config.path,),
                                                                                    "embedded")
    assert config.load == run.config.load and config.workload == run.config.workload
    assert config.cluster == run.config.cluster and config.checks == run.config.checks
    assert config.faults.random is None and config.faults.generated is None and config.faults.quiet_s == 0
    first, second = config.faults.schedule
    assert (first.kind, first.target, first.at_s, first.for_s) == ("kill", "broker:0", 10.0, 4.0)
    assert first.trigger is not None and first.trigger.within_s == 7.0
    assert [(o.kind, o.target, o.after_s, o.for_s) for o in first.overlap] == [("unload", "topic:trigger", 0.5, 0.0)]
    assert (second.kind, second.target, second.at_s, second.for_s) == ("partition", "broker-broker:0-1", 40.0, 5.0)
    # the faults phase ends the margin after the last window (40 + 5 + 10), not where the run's did
    assert config.phases.faults_s == 55.0 == faults_phase_s(kept, 10.0)
    timeline = plan_timeline(config.faults, seed=config.seed, duration_s=config.phases.faults_s,
                             txn_path=config.path, brokers=2, topics=4)
    assert [(w.start_s, [f.kind.name for f in w.faults]) for w in timeline.windows] == \
        [(10.0, ["kill", "unload"]), (40.0, ["partition"])]
    assert not timeline.notes


def test_the_stacked_fault_alone_keeps_the_trigger_time(tmp_path: Path) -> None:
    run = read_failing_run(write_run(tmp_path / "run"))
    only = tuple(f for f in shrink_faults(run, run_topics(run)) if f.fault_id == "f3")
    (entry,) = schedule_entries(only)
    assert (entry["kind"], entry["at_s"], entry["trigger"]["op"]) == ("unload", 10.0, "txn-commit")
    assert "overlap" not in entry
