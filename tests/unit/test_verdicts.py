from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.verdicts import expectations_of, judge, judge_run
from harness.anomalies import AnomalyClass
from harness.config import ChecksConfig, ExpectationScope, ExpectedAnomalies, parse_scenario
from harness.errors import ConfigError
from harness.txn_paths import TxnPath

REASON = "PIP-31 markers cannot be written to a terminated topic"
SCENARIO = f"""
checks:
  expected:
    - paths: [v4, v4-batched]
      anomalies: [partial-txn, stalled-commit]
      scope: terminated-topics
      reason: {REASON}
"""
TERMINATED = "persistent://public/t/ap-2"
CAUSED = ("caused by a terminate (a transaction that sent to the terminated topic and was open when it was "
          "terminated, or a value behind one)")


def test_expected_anomalies_are_per_path() -> None:
    config = parse_scenario(SCENARIO)
    on_v4 = config.checks.expected_on(TxnPath.V4)
    assert set(on_v4) == {"partial-txn", "stalled-commit"}
    assert on_v4[AnomalyClass.PARTIAL_TXN].scope is ExpectationScope.TERMINATED_TOPICS
    assert config.checks.expected_on(TxnPath.V5) == {}
    from_manifest = expectations_of({"path": "v4-batched", "config": config.to_dict()}, "manifest.json")
    assert {a: (e.reason, e.scope) for a, e in from_manifest.items()} == {
        "partial-txn": (REASON, "terminated-topics"),
        "stalled-commit": (REASON, "terminated-topics")}
    assert from_manifest == config.checks.expected_on(TxnPath.V4_BATCHED)     # the manifest round trip


def test_a_manifest_without_a_path_or_checks_expects_nothing() -> None:
    assert expectations_of({}, "manifest.json") == {}
    assert expectations_of({"path": "v4", "config": {}}, "manifest.json") == {}
    assert expectations_of({"path": "v4", "config": {"checks": {"stall_after_s": 10.0}}}, "manifest.json") == {}


def test_a_damaged_manifest_is_a_config_error_naming_it() -> None:
    checks = {"expected": [{"paths": ["v4"], "anomalies": ["partial-tx"], "reason": "r"}]}
    with pytest.raises(ConfigError) as info:
        expectations_of({"path": "v4", "config": {"checks": checks}}, "run/manifest.json")
    assert str(info.value).startswith("run/manifest.json: config.checks.expected[0].anomalies:")


def test_unscoped_expectations_cover_every_instance() -> None:
    why = ExpectedAnomalies((TxnPath.V4,), ("partial-txn", "lost-write"), "why")
    expected = ChecksConfig(expected=(why,)).expected_on(TxnPath.V4)
    only = judge(False, {"partial-txn": {"count": 1}}, expected)
    assert only.only_expected and only.expected == {"partial-txn": "why"} and only.not_seen == ("lost-write",)
    mixed = judge(False, {"partial-txn": {}, "lost-ack": {}}, expected)
    assert not mixed.only_expected and mixed.unexpected == ("lost-ack",)
    clean = judge(True, {}, expected)
    assert not clean.only_expected and clean.not_seen == ("partial-txn", "lost-write")
    assert not judge("unknown", {}, expected).only_expected


def _run(tmp_path: Path, anomalies: dict) -> Path:
    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    (run / "analysis").mkdir()
    config = parse_scenario(SCENARIO).to_dict()
    (run / "manifest.json").write_text(json.dumps({"path": "v4", "config": config}))
    (run / "analysis" / "results.json").write_text(json.dumps({"valid": False, "anomalies": anomalies}))
    (run / "history" / "nemesis.jsonl").write_text(json.dumps(
        {"f": "fault", "type": "ok", "extra": {"kind": "terminate", "effects": ["stays"], "targets": [TERMINATED], "fault_id": "f1"}}) + "\n")
    sends = [{"f": "send", "type": "invoke", "txn": "1:1", "topic": TERMINATED},
             {"f": "send", "type": "invoke", "txn": "1:1", "topic": "persistent://public/t/ap-3"},
             {"f": "send", "type": "invoke", "txn": "1:2", "topic": "persistent://public/t/ap-3"},
             {"f": "send", "type": "invoke", "txn": "1:3", "topic": TERMINATED},
             {"f": "send", "type": "invoke", "txn": "1:4", "topic": f"{TERMINATED}-partition-1"}]
    (run / "history" / "w0.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sends))
    return run


def test_scoped_expectation_covers_only_instances_on_terminated_topics(tmp_path: Path) -> None:
    on_terminated = {"txn": "1:1", "op": {"f": "txn-commit", "txn": "1:1"}}
    elsewhere = {"txn": "1:2", "op": {"f": "txn-commit", "txn": "1:2"}}
    missing_on_terminated = {"txn": "1:1", "missing": [{"topic": TERMINATED}]}
    judged = judge_run(_run(tmp_path / "a", {
        "stalled-commit": {"count": 1, "examples": [on_terminated]},
        "partial-txn": {"count": 1, "examples": [missing_on_terminated]}}))
    assert judged is not None and judged.only_expected and judged.expected == {
        "stalled-commit": REASON, "partial-txn": REASON}
    judged = judge_run(_run(tmp_path / "b", {
        "stalled-commit": {"count": 2, "examples": [on_terminated, elsewhere]}}))
    assert judged is not None and not judged.only_expected
    assert judged.unexpected == ("stalled-commit",)
    assert judged.notes == {"stalled-commit": f"1 of 2 instance(s) {CAUSED}; not caused by one: 1 (its transaction "
                                              "never sent to a terminated topic)"}


def test_more_instances_than_were_kept_cannot_be_explained(tmp_path: Path) -> None:
    judged = judge_run(_run(tmp_path, {"stalled-commit": {"count": 3, "examples": [{"txn": "1:1"}]}}))
    assert judged is not None and judged.unexpected == ("stalled-commit",)
    assert judged.notes == {"stalled-commit": f"0 of 3 instance(s) {CAUSED}; not caused by one: 3 (not kept by the "
                                              "checker)"}


def _with_instances(run: Path, name: str, instances: list[dict]) -> Path:
    (run / "analysis" / "instances").mkdir()
    (run / "analysis" / "instances" / f"{name}.jsonl").write_text("".join(json.dumps(i) + "\n" for i in instances))
    return run


def test_every_kept_instance_is_attributed_not_only_the_examples(tmp_path: Path) -> None:
    """More instances than examples (a check keeps 50): the verdict reads the file of all of them.
    The make chaos of 2026-11-28 read v4's 62 lost writes, all of the terminate, as unexpected."""
    entry = {"count": 3, "examples": [{"txn": "1:1"}], "instances": "analysis/instances/stalled-commit.jsonl"}
    run = _with_instances(_run(tmp_path / "a", {"stalled-commit": entry}), "stalled-commit",
                          [{"txn": "1:1"}, {"txn": "1:3"}, {"txn": "1:4"}])
    judged = judge_run(run)
    assert judged is not None and judged.only_expected, judged
    assert judged.attribution["stalled-commit"]["by_fault"] == {"f1": {"instances": 3, "transactions": 3}}
    # the same, with one instance beyond the examples on another topic: a finding
    run = _with_instances(_run(tmp_path / "b", {"stalled-commit": entry}), "stalled-commit",
                          [{"txn": "1:1"}, {"txn": "1:3"}, {"txn": "1:2"}])
    judged = judge_run(run)
    assert judged is not None and judged.unexpected == ("stalled-commit",)
    assert judged.notes["stalled-commit"].startswith(f"2 of 3 instance(s) {CAUSED}")


def test_expected_instances_are_bounded_by_the_transactions_the_terminate_touched(tmp_path: Path) -> None:
    """One transaction is one partial-txn, one unresolved-txn, one stalled-commit per end it invoked:
    more instances naming it than it can produce are not the terminate's."""
    entry = {"count": 2, "examples": [{"txn": "1:1"}, {"txn": "1:1", "n": 2}]}
    judged = judge_run(_run(tmp_path, {"partial-txn": entry}))
    assert judged is not None and judged.unexpected == ("partial-txn",)
    assert judged.attribution["partial-txn"] == {
        "instances": 2, "expected": 1, "by_fault": {"f1": {"instances": 1, "transactions": 3}},
        "unexpected": {"more instances than its transaction can account for": 1}}


def test_a_missing_or_short_file_of_instances_explains_nothing(tmp_path: Path) -> None:
    entry = {"count": 3, "examples": [{"txn": "1:1"}], "instances": "analysis/instances/stalled-commit.jsonl"}
    judged = judge_run(_run(tmp_path / "a", {"stalled-commit": entry}))
    assert judged is not None and judged.unexpected == ("stalled-commit",)
    run = _with_instances(_run(tmp_path / "b", {"stalled-commit": entry}), "stalled-commit",
                          [{"txn": "1:1"}, {"txn": "1:1"}])
    judged = judge_run(run)
    assert judged is not None and judged.unexpected == ("stalled-commit",)


def test_partitions_of_a_terminated_topic_count(tmp_path: Path) -> None:
    """A transaction that sent to one partition of the terminated topic (1:4) was touched by it."""
    run = _run(tmp_path, {"partial-txn": {"count": 1, "examples": [
        {"txn": "1:4", "missing": [{"topic": "persistent://public/t/x", "segment": f"{TERMINATED}-partition-1",
                                    "time_ns": 5}]}]}})
    judged = judge_run(run)
    assert judged is not None and judged.only_expected


@pytest.mark.parametrize("entry, key", [
    ("{paths: [v4], anomalies: [partial-tx], reason: r}", "checks.expected[0].anomalies"),
    ("{paths: [v4], anomalies: [partial-txn], reason: ''}", "checks.expected[0].reason"),
    ("{paths: [], anomalies: [partial-txn], reason: r}", "checks.expected[0].paths"),
    ("{paths: [v4], anomalies: [partial-txn], reason: r, scope: terminated}", "checks.expected[0].scope"),
])
def test_bad_expectations_are_config_errors(entry: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_scenario(f"checks:\n  expected:\n    - {entry}\n", source="s.yaml")
    assert str(info.value).startswith(f"s.yaml: {key}:")


OLD_MANIFEST = Path(__file__).parents[1] / "data" / "old-manifests" / "chaos-v4.json"


def test_a_manifest_written_before_the_expectations_merged_is_judged_as_then(tmp_path: Path) -> None:
    run = _run(tmp_path, {
        "partial-txn": {"count": 1, "examples": [{"txn": "1:1", "missing": [{"topic": TERMINATED}]}]},
        "stalled-commit": {"count": 1, "examples": [{"txn": "1:2", "op": {"f": "txn-commit", "txn": "1:2"}}]},
        "lost-ack": {"count": 1, "examples": [{"txn": "1:1"}]}})
    (run / "manifest.json").write_text(OLD_MANIFEST.read_text())
    judged = judge_run(run)
    assert judged is not None and not judged.only_expected
    assert list(judged.expected) == ["partial-txn"]
    assert judged.expected["partial-txn"].startswith("PIP-31 writes commit markers into the topic's data stream")
    assert judged.unexpected == ("stalled-commit", "lost-ack")
    assert judged.notes["stalled-commit"].startswith(f"0 of 1 instance(s) {CAUSED}")
    assert judged.not_seen == ("lost-write",)


def _timed_run(tmp_path: Path, anomalies: dict, lines: list[dict]) -> Path:
    """A run folder whose history has times: the terminate of TERMINATED at 10 s, load lines given."""
    run = _run(tmp_path, anomalies)
    s = 1_000_000_000
    (run / "history" / "nemesis.jsonl").write_text("".join(json.dumps(op) + "\n" for op in [
        {"f": "fault", "type": "invoke", "time_ns": 10 * s, "process": "nemesis/f3",
         "extra": {"kind": "terminate", "effects": ["stays"], "targets": [TERMINATED], "fault_id": "f3"}},
        {"f": "fault", "type": "ok", "time_ns": 10 * s + 5, "process": "nemesis/f3",
         "extra": {"kind": "terminate", "effects": ["stays"], "targets": [TERMINATED], "fault_id": "f3", "healable": False}}]))
    (run / "history" / "w0.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    return run


def _txn(txn: str, topic: str, start_s: float, end_s: float | None,
         end_type: str = "ok") -> list[dict]:
    """A transaction's lines: open, a send to `topic`, a commit invoked at the end (completed `end_type`
    unless None: an `info` commit leaves the transaction open, its outcome unknown)."""
    s = 1_000_000_000
    process = f"w0/{txn}"
    lines = [{"f": "txn-open", "type": "invoke", "process": process, "time_ns": int(start_s * s)},
             {"f": "txn-open", "type": "ok", "process": process, "txn": txn, "time_ns": int(start_s * s) + 1},
             {"f": "send", "type": "invoke", "process": process, "txn": txn, "topic": topic,
              "time_ns": int(start_s * s) + 2},
             {"f": "send", "type": "ok", "process": process, "txn": txn, "topic": topic,
              "time_ns": int(start_s * s) + 3}]
    commit_at = int((end_s if end_s is not None else start_s + 1) * s)
    lines.append({"f": "txn-commit", "type": "invoke", "process": process, "txn": txn, "time_ns": commit_at})
    if end_s is not None:
        lines.append({"f": "txn-commit", "type": end_type, "process": process, "txn": txn, "time_ns": commit_at + 1})
    return lines


def test_an_instance_inside_the_faults_window_on_its_participant_is_expected(tmp_path: Path) -> None:
    in_flight = _txn("1:1", TERMINATED, 9.5, 25.0)      # its commit ran into the terminate at 10 s
    abandoned = _txn("1:2", TERMINATED, 9.8, None)      # its client died mid-commit, after 10 s it is open
    after = _txn("1:3", TERMINATED, 30.0, 40.0)         # started after the terminate: still affected
    run = _timed_run(tmp_path, {"stalled-commit": {"count": 3, "examples": [
        {"txn": "1:1"}, {"txn": "1:2"}, {"txn": "1:3"}]}}, in_flight + abandoned + after)
    judged = judge_run(run)
    assert judged is not None and judged.only_expected, judged


def test_the_same_anomaly_before_the_fault_or_on_another_topic_is_a_finding(tmp_path: Path) -> None:
    before = _txn("1:1", TERMINATED, 2.0, 5.0)                    # ended 5 s before the terminate
    elsewhere = _txn("1:2", "persistent://public/t/ap-3", 9.5, 25.0)   # in the window, other topic
    run = _timed_run(tmp_path / "a", {"stalled-commit": {"count": 1, "examples": [{"txn": "1:1"}]}},
                     before + elsewhere)
    judged = judge_run(run)
    assert judged is not None and judged.unexpected == ("stalled-commit",)
    assert judged.notes == {"stalled-commit": f"0 of 1 instance(s) {CAUSED}; not caused by one: 1 (its transaction "
                                              "was not open when the topic was terminated)"}
    run = _timed_run(tmp_path / "b", {"stalled-commit": {"count": 1, "examples": [{"txn": "1:2"}]}},
                     before + elsewhere)
    judged = judge_run(run)
    assert judged is not None and judged.unexpected == ("stalled-commit",)


def test_an_instance_without_a_transaction_is_not_the_terminates_by_its_topic_and_time(tmp_path: Path) -> None:
    """An instance naming no transaction has a cause only when its values lie behind a stuck entry:
    a read of the terminated topic while it was terminated is a resemblance, not a cause."""
    s = 1_000_000_000
    inside = {"value": "v", "reads": [{"topic": TERMINATED, "time_ns": 12 * s}]}
    judged = judge_run(_timed_run(tmp_path / "a", {"partial-txn": {"count": 1, "examples": [inside]}}, []))
    assert judged is not None and judged.unexpected == ("partial-txn",)
    assert judged.attribution["partial-txn"]["unexpected"] == {"names no transaction": 1}


def test_a_commit_that_had_timed_out_before_the_terminate_is_not_the_terminates(tmp_path: Path) -> None:
    """A transaction that sent to the terminated topic long before, whose commit stalled and timed out
    (`info`) before the terminate came, was stalled before the terminate existed (a planted COMMITTING
    stall, 2:17 in 20261129-031906-selftest-catalogue); its commit still in flight at the terminate
    is the terminate's."""
    timed_out = _txn("1:1", TERMINATED, 2.0, 5.0, end_type="info")      # commit invoked 5 s, info 5 s + 1 ns
    in_flight = _txn("1:2", TERMINATED, 2.0, 9.0, end_type="info")
    in_flight[-1]["time_ns"] = 39 * 1_000_000_000                       # timed out after the terminate at 10 s
    history = timed_out + in_flight
    for n, (txn, expected) in enumerate((("1:1", False), ("1:2", True))):
        run = _timed_run(tmp_path / str(n), {"stalled-commit": {"count": 1, "examples": [{"txn": txn}]}}, history)
        judged = judge_run(run)
        assert judged is not None and judged.only_expected is expected, (txn, judged)


def test_a_terminate_whose_outcome_was_unknown_stays_whatever_heal_was_recorded(tmp_path: Path) -> None:
    """3.2.0, 2026-12-03: the terminate answered HTTP 500 after terminating one partition (`info`),
    the nemesis recorded a heal of it, and a transaction whose send that partition refused right
    after stayed ABORTING (its end stalled): the terminate's, though its window had been closed at that
    heal."""
    s = 1_000_000_000
    stuck = _txn("1:1", TERMINATED, 10.4, 12.0, end_type="info")    # opened after the heal; its end stalls
    run = _timed_run(tmp_path, {"stalled-commit": {"count": 1, "examples": [{"txn": "1:1"}]}}, stuck)
    fault = {"kind": "terminate", "effects": ["stays"], "targets": [TERMINATED], "fault_id": "f3", "healable": False}
    (run / "history" / "nemesis.jsonl").write_text("".join(json.dumps(op) + "\n" for op in [
        {"f": "fault", "type": "invoke", "time_ns": 8 * s, "process": "nemesis/f3", "extra": fault},
        {"f": "fault", "type": "info", "time_ns": 10 * s, "process": "nemesis/f3", "extra": fault,
         "error": "AdminError: HTTP 500: BadVersionException"},
        {"f": "heal", "type": "invoke", "time_ns": 10 * s + 1, "process": "nemesis/f3", "extra": fault},
        {"f": "heal", "type": "ok", "time_ns": 10 * s + 2, "process": "nemesis/f3", "extra": fault}]))
    judged = judge_run(run)
    assert judged is not None and judged.only_expected, judged


def test_a_healed_faults_window_ends_at_its_heal() -> None:
    from analysis.verdicts import FaultWindow

    window = FaultWindow("f1", "terminate", frozenset({TERMINATED}), 10, 20)
    assert window.covers([TERMINATED], 15, 30) and window.covers([f"{TERMINATED}-partition-0"], 5, 10)
    assert not window.covers([TERMINATED], 21, 30) and not window.covers([TERMINATED], 1, 9)
    assert window.covers([TERMINATED], 5, None) and not window.covers(["persistent://public/t/other"], 15, 16)


def test_a_value_behind_a_transaction_the_terminate_left_open_is_expected(tmp_path: Path) -> None:
    """PIP-31's read horizon stops at the first entry of a transaction that is still undecided;
    the terminate keeps it so, and values committed after that entry, before the terminate, stay
    invisible. Only those: a value before the stuck entry, or in another partition, is a finding."""
    s = 1_000_000_000
    p0, p1 = f"{TERMINATED}-partition-0", f"{TERMINATED}-partition-1"

    def send(txn: str, at_s: float, segment: str, msg_id: str) -> dict:
        return {"f": "send", "type": "ok", "process": f"w0/{txn}", "txn": txn, "topic": TERMINATED,
                "segment": segment, "msg_id": msg_id, "time_ns": int(at_s * s)}

    stuck = _txn("1:1", TERMINATED, 9.5, 25.0, "info")    # held open across the terminate at 10 s, never ended
    stuck[3] = send("1:1", 9.5, p0, "5:3:-1")
    earlier = _txn("1:2", TERMINATED, 9.4, 9.45)          # committed before the terminate ...
    earlier[3] = send("1:2", 9.41, p0, "5:2:-1")          # ... and before the stuck entry
    behind = _txn("1:3", TERMINATED, 9.6, 9.7)            # committed before the terminate, behind it
    behind[3] = send("1:3", 9.61, p0, "5:4:-1")
    elsewhere = _txn("1:4", TERMINATED, 9.6, 9.7)         # another partition: nothing stuck there
    elsewhere[3] = send("1:4", 9.61, p1, "6:1:-1")
    history = stuck + earlier + behind + elsewhere
    cases = (("1:3", [behind[3]]), ("1:2", [earlier[3]]), ("1:4", [elsewhere[3]]),
             ("1:3", [behind[3], elsewhere[3]]))       # the last: one of its missing values unexplained
    for n, (txn, missing) in enumerate(cases):
        run = _timed_run(tmp_path / str(n), {"partial-txn": {"count": 1, "examples": [
            {"txn": txn, "outcome": "committed", "decided_by": "client", "visible": ["u"], "missing": missing}]}},
            history)
        judged = judge_run(run)
        assert judged is not None
        assert judged.only_expected == (n == 0), (n, judged)
    # the same stuck entry, but its transaction's commit completed after all: its marker was written
    ended = _txn("1:1", TERMINATED, 9.5, 25.0)
    ended[3] = stuck[3]
    run = _timed_run(tmp_path / "ended", {"partial-txn": {"count": 1, "examples": [
        {"txn": "1:3", "outcome": "committed", "decided_by": "client", "visible": ["u"], "missing": [behind[3]]}]}},
        ended + earlier + behind + elsewhere)
    judged = judge_run(run)
    assert judged is not None and judged.unexpected == ("partial-txn",)


def test_a_servers_own_exit_is_read_as_its_stop(tmp_path: Path) -> None:
    """The supervisor (faults/supervisor.py) records a server that exited on its own as a fault of
    kind `exit` that stops it, every one under process `nemesis/supervisor`: each is a window of a
    stop of that service, told apart by its fault id; the windows of faults that stay do not include it."""
    from analysis.verdicts import fault_windows
    from harness.history.schema import FaultEffect

    history = tmp_path / "history"
    history.mkdir()
    lines = []
    for n, (service, t) in enumerate([("ledger", 10), ("ledger", 30)], start=1):
        extra = {"kind": "exit", "targets": [service], "selector": service, "fault_id": f"exit-{service}-{n}",
                 "source": "supervisor", "effects": ["stops"]}
        lines += [{"f": f, "type": type_, "time_ns": at, "process": "nemesis/supervisor", "extra": extra}
                  for f, type_, at in (("fault", "invoke", t), ("fault", "ok", t), ("heal", "ok", t + 4))]
    (history / "nemesis.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    windows = sorted(fault_windows(history, FaultEffect.STOPS), key=lambda w: w.start_ns)
    assert [(w.fault_id, w.kind, set(w.targets), w.start_ns, w.end_ns) for w in windows] == [
        ("exit-ledger-1", "exit", {"ledger"}, 10, 14), ("exit-ledger-2", "exit", {"ledger"}, 30, 34)]
    assert fault_windows(history) == []


HELD = "persistent://public/t/ap-3-partition-0"


def _held_run(tmp_path: Path) -> Path:
    """5.0.1's v4 at full length (results/20261129-122837-chaos-chaos): a commit answered ok while its
    partition's bundle unloaded left the partition without its marker; the drain found the horizon held
    by it, its coordinator no longer knowing it, and thousands of lost writes behind it."""
    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    (run / "analysis" / "instances").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"path": "v4", "config": {}}))

    def send(value: str, msg_id: str, where: str = HELD) -> dict:
        return {"f": "send", "type": "ok", "txn": "0:9", "value": value, "msg_id": msg_id, "segment": where}

    instances = [{"value": "a", "txn": "0:9", "send": send("a", "7:3:-1")},
                 {"value": "b", "txn": "0:9", "send": send("b", "8:0:-1")},
                 {"value": "c", "txn": "0:8", "send": send("c", "7:1:-1")},                 # before the horizon
                 {"value": "d", "txn": "0:8", "send": send("d", "9:0:-1", "persistent://public/t/ap-1-partition-0")}]
    (run / "analysis" / "instances" / "lost-write.jsonl").write_text("".join(json.dumps(i) + "\n" for i in instances))
    (run / "analysis" / "results.json").write_text(json.dumps({"valid": False, "anomalies": {
        "lost-write": {"count": 4, "examples": instances[:1], "instances": "analysis/instances/lost-write.jsonl"}}}))
    held = {"partition": HELD, "max_read_position": "7:2", "last_confirmed": "8:5", "ongoing": 1,
            "holder": "0:7", "holder_status": "NOT_FOUND", "low_watermarks": {"0": 3}, "stuck_for_good": True}
    ops = [{"f": "txn-commit", "type": "invoke", "txn": "0:7", "time_ns": 173_000_000_000},
           {"f": "txn-commit", "type": "ok", "txn": "0:7", "time_ns": 173_900_000_000},
           {"f": "phase", "type": "ok", "time_ns": 900_000_000_000,
            "extra": {"name": "drain-complete", "held_horizons": [held],
                      "live_held_horizons": [{**held, "max_read_position": "7:0"}]}}]
    (run / "history" / "w0.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    return run


def test_instances_behind_a_held_read_horizon_are_counted_per_holder_and_stay_unexpected(tmp_path: Path) -> None:
    judged = judge_run(_held_run(tmp_path))
    assert judged is not None and judged.unexpected == ("lost-write",) and not judged.expected
    held = judged.held["lost-write"]
    assert (held["instances"], held["behind_held_horizons"]) == (4, 2)     # every instance judged, not the examples
    [(label, count)] = held["by_holder"].items()
    assert count == 2 and label.startswith("ap-3-partition-0 at 7:2 by transaction 0:7")   # the furthest horizon
    assert "its coordinator: NOT_FOUND; the client: commit ok at 173.9 s" in label
    assert judged.to_json()["held"] == judged.held


def test_a_run_whose_drain_found_no_held_horizon_has_no_account(tmp_path: Path) -> None:
    run = _held_run(tmp_path)
    (run / "history" / "w0.jsonl").write_text("")
    judged = judge_run(run)
    assert judged is not None and judged.held == {}


def test_the_reports_verdict_names_the_holders(tmp_path: Path) -> None:
    from analysis.report.run_report import verdict_section

    run = _held_run(tmp_path)
    results = json.loads((run / "analysis" / "results.json").read_text())
    section = verdict_section(results, judgement=judge_run(run))
    [said] = [p for p in section.paragraphs if p.startswith("lost-write: 2 of 4 instance(s) lie behind read horizons")]
    assert "by transaction 0:7 (its coordinator: NOT_FOUND; the client: commit ok at 173.9 s): 2" in said


def test_the_holders_account_quotes_the_brokers_lines_naming_it(tmp_path: Path) -> None:
    """2.10.5's chaos.yaml (results/20261204-224432-chaos-chaos): 98 lost writes behind `1:1356`, whose
    cause was two log lines away: the coordinator's `End transaction fail!` with the participant's error."""
    run = _held_run(tmp_path)
    (run / "logs").mkdir()
    (run / "logs" / "broker-1.log").write_text(
        "2026-12-04T22:57:04,283 ERROR [pulsar-transaction-executor-4-1] o.a.p.b.s.ServerCnx - handleEndTxnOnPartition "
        "fail!, topic persistent://public/t/ap-3-partition-0, txnId: [(0,7)], txnAction: [ABORT] {}\n"
        "org.apache.bookkeeper.mledger.ManagedLedgerException: ManagedLedger public/t/ap-3-partition-0 has already "
        "been closed\n"
        "2026-12-04T22:57:04,290 INFO  [pulsar-io-6-2] o.a.p.b.s.ServerCnx - [(0,7)] an INFO line is not quoted {}\n"
        "2026-12-04T22:57:04,291 ERROR [pulsar-io-6-2] o.a.p.b.s.ServerCnx - txnId: [(0,70)] another transaction {}\n")
    (run / "logs" / "broker-0.log").write_text(
        "2026-12-04T22:57:04,286 ERROR [pulsar-io-6-2] o.a.p.b.TransactionMetadataStoreService - End transaction fail! "
        "TxnId : (0,7), TxnAction : 1 {}\n"
        "org.apache.pulsar.client.api.PulsarClientException: ManagedLedger public/t/ap-3-partition-0 has already been "
        "closed\n"
        "\tat org.apache.pulsar.client.impl.ClientCnx.getPulsarClientException(ClientCnx.java:1167)\n")
    judged = judge_run(run)
    assert judged is not None
    held = judged.held["lost-write"]
    assert held["holder_logs"] == {"0:7": [
        "broker-1 22:57:04,283 ERROR ServerCnx - handleEndTxnOnPartition fail!, topic persistent://public/t/"
        "ap-3-partition-0, txnId: [(0,7)], txnAction: [ABORT] (org.apache.bookkeeper.mledger.ManagedLedgerException: "
        "ManagedLedger public/t/ap-3-partition-0 has already been closed)",
        "broker-0 22:57:04,286 ERROR TransactionMetadataStoreService - End transaction fail! TxnId : (0,7), TxnAction : 1 "
        "(org.apache.pulsar.client.api.PulsarClientException: ManagedLedger public/t/ap-3-partition-0 has already been "
        "closed)"]}
    assert "; the brokers' log lines naming 0:7: broker-1 22:57:04,283" in held["describe"]


def test_a_debug_line_naming_a_holder_is_quoted(tmp_path: Path) -> None:
    """The only trace of 2.10.5 dropping a transaction's timeout is a DEBUG line (conf.DEBUG_LOGGERS)."""
    from analysis.holder_logs import broker_lines_naming

    (tmp_path / "broker-1.log").write_text(
        "2026-12-05T04:34:00,990 DEBUG [pulsar-transaction-timer-40-1] o.a.p.b.TransactionMetadataStoreService - "
        "Transaction have been handle complete, don't need to handle by transaction timeout! TxnId : (1,1317) {}\n"
        "2026-12-05T04:34:00,991 INFO  [t] o.a.p.b.TransactionMetadataStoreService - (1,1317) at INFO {}\n")
    assert broker_lines_naming(tmp_path, ["1:1317"]) == {"1:1317": [
        "broker-1 04:34:00,990 DEBUG TransactionMetadataStoreService - Transaction have been handle complete, "
        "don't need to handle by transaction timeout! TxnId : (1,1317)"]}


def test_the_brokers_write_debug_for_the_coordinators_service_only() -> None:
    from targets.pulsar.conf import DEBUG_LOGGERS, LOG4J2

    assert DEBUG_LOGGERS == ("org.apache.pulsar.broker.TransactionMetadataStoreService",)
    assert '<Logger name="org.apache.pulsar.broker.TransactionMetadataStoreService" level="debug"/>' in LOG4J2
    assert '<Root level="info">' in LOG4J2


def test_only_the_latest_distinct_lines_naming_a_holder_are_quoted(tmp_path: Path) -> None:
    from analysis.holder_logs import PER_HOLDER, broker_lines_naming

    lines = [f"2026-12-05T00:00:{i:02d},000 WARN  [t] o.a.p.b.C{i % 6} - txnId=(2,903) try {i} {{}}\n" for i in range(30)]
    (tmp_path / "broker-0.log").write_text("".join(lines))
    quoted = broker_lines_naming(tmp_path, ["2:903", "no-id"])
    assert list(quoted) == ["2:903"] and len(quoted["2:903"]) == PER_HOLDER
    assert quoted["2:903"][-1] == "broker-0 00:00:29,000 WARN C5 - txnId=(2,903) try 29"     # the latest, last
    assert broker_lines_naming(tmp_path / "absent", ["2:903"]) == {}
