"""The pulsar target's coverage report, without processes: JaCoCo's XML read into per-class and
per-method figures, the recovery list judged against it (reached, first reached, the faults
active then), the dumps' losses, and a matrix's figure across paths."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator import pulsar_coverage as pc
from targets.pulsar.recovery_methods import RecoveryMethod

XML = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<!DOCTYPE report PUBLIC "-//JACOCO//DTD Report 1.1//EN" "report.dtd">
<report name="t">
  <sessioninfo id="vm-1" start="1" dump="2"/>
  <package name="org/apache/pulsar/transaction/coordinator/impl">
    <class name="org/apache/pulsar/transaction/coordinator/impl/MLTransactionLogImpl" sourcefilename="X.java">
      <method name="replayAsync" desc="(LX;)V" line="120">
        <counter type="INSTRUCTION" missed="10" covered="5"/>
        <counter type="BRANCH" missed="1" covered="1"/>
        <counter type="LINE" missed="2" covered="3"/>
        <counter type="METHOD" missed="0" covered="1"/>
      </method>
      <method name="lambda$replayAsync$0" desc="()V" line="125">
        <counter type="INSTRUCTION" missed="4" covered="0"/>
        <counter type="LINE" missed="1" covered="0"/>
        <counter type="METHOD" missed="1" covered="0"/>
      </method>
      <method name="initialize" desc="()V" line="80">
        <counter type="INSTRUCTION" missed="3" covered="0"/>
        <counter type="LINE" missed="2" covered="0"/>
        <counter type="METHOD" missed="1" covered="0"/>
      </method>
      <method name="lambda$initialize$1" desc="()V" line="90">
        <counter type="INSTRUCTION" missed="0" covered="2"/>
        <counter type="LINE" missed="0" covered="1"/>
        <counter type="METHOD" missed="0" covered="1"/>
      </method>
      <counter type="INSTRUCTION" missed="17" covered="7"/>
      <counter type="BRANCH" missed="1" covered="1"/>
      <counter type="LINE" missed="5" covered="4"/>
    </class>
  </package>
  <counter type="LINE" missed="5" covered="4"/>
</report>
"""

CLS = "org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl"
REPLAY = RecoveryMethod("coordinator log replay", CLS, "replayAsync", ("v4", "v4-batched"), "replay")
INIT = RecoveryMethod("coordinator log replay", CLS, "initialize", ("v4", "v4-batched"), "open")
CLOSE = RecoveryMethod("fencing and takeover", CLS, "closeAsync", ("v4", "v4-batched"), "close")
V5 = RecoveryMethod("timeout", "org.apache.pulsar.X", "sweepTimeouts", ("v5",), "sweep")
NEVER = RecoveryMethod("timeout", "org.apache.pulsar.Y", "neverCalled", ("v4", "v4-batched"), "x",
                       unreachable="no client does it")
INTERNAL = CLS.replace(".", "/")


def parsed(tmp_path: Path) -> dict[str, pc.ClassCoverage]:
    path = tmp_path / "jacoco.xml"
    path.write_text(XML)
    return pc.parse_jacoco_xml(path)


def test_the_xml_gives_classes_and_methods_with_their_counters(tmp_path: Path) -> None:
    classes = parsed(tmp_path)
    cls = classes[INTERNAL]
    assert (cls.lines.covered, cls.lines.total, cls.branches.covered) == (4, 9, 1)
    replay = next(m for m in cls.methods if m.name == "replayAsync")
    assert replay.entered and replay.line == 120 and replay.branches.total == 2
    assert not next(m for m in cls.methods if m.name == "initialize").entered


def test_a_listed_method_counts_its_lambdas() -> None:
    assert pc.belongs("lambda$recover$3", "recover")
    assert pc.belongs("recover", "recover")
    assert not pc.belongs("lambda$recoverFromSnapshot$0", "recover")
    assert not pc.belongs("recoverFromSnapshot", "recover")


def nemesis(tmp_path: Path) -> Path:
    ops = [
        {"f": "fault", "type": "invoke", "wall_ms": 10_000, "extra": {"fault_id": "f1", "kind": "kill",
                                                                      "targets": ["broker-0"]}},
        {"f": "fault", "type": "ok", "wall_ms": 10_100, "extra": {"fault_id": "f1", "healable": True}},
        {"f": "heal", "type": "ok", "wall_ms": 20_000, "extra": {"fault_id": "f1"}},
        {"f": "fault", "type": "invoke", "wall_ms": 30_000, "extra": {"fault_id": "f2", "kind": "unload",
                                                                      "targets": ["topic-a"]}},
        {"f": "fault", "type": "ok", "wall_ms": 30_500, "extra": {"fault_id": "f2", "healable": False}},
        {"f": "fault", "type": "invoke", "wall_ms": 40_000, "extra": {"fault_id": "f3", "kind": "partition",
                                                                      "targets": ["ledger"]}},
    ]
    path = tmp_path / "nemesis.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in ops) + '{"torn')
    return path


def test_fault_spans_from_injection_to_heal(tmp_path: Path) -> None:
    spans = pc.fault_spans(nemesis(tmp_path), end_ms=99_000)
    assert [(s.fault_id, s.label, s.start_ms, s.end_ms) for s in spans] == [
        ("f1", "kill broker-0", 10_000, 20_000), ("f2", "unload topic-a", 30_000, 30_500),
        ("f3", "partition ledger", 40_000, 99_000)]
    assert [s.fault_id for s in pc.active(spans, 19_000, 31_000)] == ["f1", "f2"]
    assert pc.active(spans, 21_000, 29_000) == []


INDEX = [
    {"event": "start", "service": "broker-0", "life": 1, "wall_ms": 1_000},
    {"event": "dump", "service": "broker-0", "life": 1, "seq": 1, "ok": True, "file": "parts/broker-0-1-0001.exec",
     "from_ms": 1_000, "to_ms": 9_000, "reason": "periodic"},
    {"event": "dump", "service": "broker-0", "life": 1, "seq": 2, "ok": True, "file": "parts/broker-0-1-0002.exec",
     "from_ms": 9_000, "to_ms": 15_000, "reason": "before kill"},
    {"event": "end", "service": "broker-0", "life": 1, "how": "kill", "unrecorded_s": 0.01, "dumped": True},
    {"event": "start", "service": "broker-0", "life": 2, "wall_ms": 16_000},
    {"event": "dump", "service": "broker-0", "life": 2, "ok": False, "error": "OSError: refused"},
    {"event": "end", "service": "broker-0", "life": 2, "how": "exited", "unrecorded_s": 12.5, "dumped": False},
]
PARTS = {"parts/broker-0-1-0001.exec": [f"{INTERNAL}#lambda$initialize$1#()V"],
         "parts/broker-0-1-0002.exec": [f"{INTERNAL}#replayAsync#(LX;)V", f"{INTERNAL}#initialize#()V"]}


def test_the_list_is_judged_with_first_reached_and_the_faults_then(tmp_path: Path) -> None:
    spans = pc.fault_spans(nemesis(tmp_path), end_ms=99_000)
    phases = [(0.0, "setup"), (5_000.0, "faults")]
    rows = pc.evaluate(parsed(tmp_path), [REPLAY, INIT, CLOSE, V5], "v4", PARTS, INDEX, spans, phases,
                       start_ms=0.0, missing=[f"{CLS}.closeAsync"])
    by = {r["method"]: r for r in rows}
    assert by["replayAsync"]["reached"] and by["replayAsync"]["lines"] == {"covered": 3, "total": 6, "percent": 50.0}
    assert by["replayAsync"]["first"]["faults"] == ["kill broker-0"]
    assert by["replayAsync"]["first"]["from_s"] == 9.0 and by["replayAsync"]["first"]["phase"] == "faults"
    # entered through its lambda only, in the first window: before any fault
    assert by["initialize"]["reached"] and by["initialize"]["first"]["faults"] == []
    assert by["initialize"]["first"]["phase"] == "setup"
    assert not by["closeAsync"]["in_release"] and not by["closeAsync"]["reached"]
    assert not by["sweepTimeouts"]["applies"]
    assert pc.figure(rows) == {"entered": 2, "listed": 2, "percent": 100.0}


def test_losses_name_what_each_life_lost() -> None:
    lost = pc.losses(INDEX)
    assert (lost["lives"], lost["killed"], lost["exited_on_their_own"], lost["dumps_failed"]) == (2, 1, 1, 1)
    assert lost["exited_unrecorded_s"] == 12.5
    sentence = pc.losses_sentence(lost)
    assert "1 exited on its own: 12.5 s" in sentence and "1 killed" in sentence


def run_result(path: str, reached: dict[str, bool]) -> dict[str, object]:
    rows = []
    for m in (REPLAY, INIT, V5, NEVER):
        rows.append({"area": m.area, "class": m.cls, "method": m.method, "name": m.simple, "what": m.what,
                     "paths": list(m.paths), "applies": path in m.paths, "unreachable": m.unreachable,
                     "in_release": True, "reached": reached.get(m.method, False),
                     "lines": {"covered": 1, "total": 2, "percent": 50.0},
                     "branches": {"covered": 0, "total": 0, "percent": None},
                     "first": {"phase": "faults", "faults": ["kill broker-0"], "from_s": 1, "to_s": 2,
                               "service": "broker-0-1"} if reached.get(m.method) else None})
    return {"path": path, "pulsar_release": "5.0.1", "recovery": pc.figure(rows), "recovery_methods": rows,
            "transaction_code": {"lines": {"covered": 1, "total": 2, "percent": 50.0},
                                 "branches": {"covered": 1, "total": 4, "percent": 25.0}},
            "components": {}, "lost": pc.losses(INDEX), "html": "coverage/html/index.html"}


def test_a_matrix_counts_a_method_entered_on_any_path() -> None:
    result = pc.measure_matrix({"v4": run_result("v4", {"replayAsync": True}),
                                "v4-batched": run_result("v4-batched", {"initialize": True}),
                                "v5": run_result("v5", {})})
    # replayAsync (v4), initialize (v4-batched), sweepTimeouts (no): 2 of 3; the unreachable one not counted
    assert result["all"] == {"entered": 2, "listed": 3, "percent": 66.7}
    text = pc.render_matrix(result)
    assert "short of the goal of 80%" in text
    assert "| timeout | `Y.neverCalled` (unreachable) |" in text
    assert "`X.sweepTimeouts` (sweep)" in text.split("## Never reached in any run")[1]


def test_the_run_report_renders(tmp_path: Path) -> None:
    result = run_result("v4", {"replayAsync": True}) | {
        "run_id": "r1", "jacoco": "0.8.14", "faults_progress": {"windows": 3, "started": 2, "unreached": [1],
                                                               "last_late_s": 5},
        "per_class": pc.class_rows(parsed(tmp_path))}
    text = pc.render_run(result)
    assert "1 of 2 listed recovery methods entered (50.0%)" in text
    assert "| `MLTransactionLogImpl` | v4 coordinator and log | 4/9 | 44.4% |" in text
    assert "Fault windows that ran: 2 of 3" in text


def test_a_fault_whose_injection_failed_was_never_active(tmp_path: Path) -> None:
    path = nemesis(tmp_path)
    with path.open("a") as out:
        out.write("\n" + json.dumps({"f": "fault", "type": "invoke", "wall_ms": 50_000,
                                      "extra": {"fault_id": "f4", "kind": "crash", "targets": ["metadata"]}}))
        out.write("\n" + json.dumps({"f": "fault", "type": "fail", "wall_ms": 50_001, "extra": {"fault_id": "f4"}}))
    assert "f4" not in [s.fault_id for s in pc.fault_spans(path, end_ms=99_000)]


def test_fault_labels_are_counted_and_capped() -> None:
    assert pc.fault_labels(["crash ledger"] * 3 + ["kill broker-0"]) == "crash ledger (x3), kill broker-0"
    assert pc.fault_labels([f"f{i}" for i in range(5)], most=2) == "f0, f1, and 3 more"
    assert pc.fault_labels([]) == "none"
