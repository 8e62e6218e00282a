"""Expected anomalies attributed by cause (analysis/verdicts.py), end to end on tiny histories.

A terminate explains a stalled, unresolved commit only in a transaction it touched: one that
sent to the terminated topic and was open when it was terminated. The same stall in a
transaction that never sent there (a coordinator that leaves a commit COMMITTING, the planted
txnbenchBugV4CommitStallsAfterMarkers) is a finding, even though the terminate leaves
transactions in that very state.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from analysis.check import check_run
from analysis.verdicts import judge_run
from harness.config import parse_scenario
from tests.spark.dsl import History, Txn

TERMINATED = "persistent://public/t/ap-2"
OTHER = "persistent://public/t/ap-3"
SCENARIO = """
workload:
  txn_timeout_s: 2
checks:
  stall_after_s: 10
  abort_bound_s: 1
  expected:
    - paths: [v4, v4-batched]
      anomalies: [partial-txn, lost-write, stalled-commit, unresolved-txn, ctp-loss]
      scope: terminated-topics
      reason: PIP-31 writes commit markers into the terminated topic's data stream
"""
STALL_S = 40.0


def _terminate(h: History) -> None:
    extra = {"kind": "terminate", "effects": ["stays"], "targets": [TERMINATED], "fault_id": "f1", "healable": False}
    h.emit("nemesis", "nemesis/f1", "invoke", "fault", extra=extra)
    h.emit("nemesis", "nemesis/f1", "ok", "fault", extra=extra)


def _stalled(h: History, process: str, *topics: str) -> Txn:
    """A transaction that sends to `topics` and invokes its commit, which is not answered (yet)."""
    txn = h.process(process).open()
    for n, topic in enumerate(topics):
        txn.send(f"{process}-{n}", topic=topic)
    return txn.commit(type=None)


def _times_out(h: History, txn: Txn) -> None:
    """The client gives up on the commit: `info`, its outcome unknown."""
    h.emit(txn.p.writer, txn.p.name, "info", "txn-commit", txn=txn.id, error="TimeoutError: no answer")


def _run(h: History, run_dir: Path, stalled: list[Txn]) -> Path:
    """The drain asks the coordinator (still COMMITTING), reads both topics (nothing visible), and
    the run folder gets a v4 manifest with the scenario's expectations."""
    h.sleep(5.0)
    for txn in stalled:
        h.txn_state(txn.id, "COMMITTING")
    h.drain(reads={TERMINATED: [], OTHER: []})
    h.write(run_dir)
    (run_dir / "manifest.json").write_text(json.dumps(
        {"schema": 1, "run_id": run_dir.name, "status": "complete", "path": "v4",
         "config": parse_scenario(SCENARIO).to_dict()}))
    return run_dir


def test_a_stall_in_a_transaction_the_terminate_never_touched_is_a_finding(spark: SparkSession,
                                                                           tmp_path: Path) -> None:
    h = History()
    touched = _stalled(h, "w0/u1", TERMINATED, OTHER)     # its commit in flight when the topic is terminated
    _terminate(h)
    elsewhere = _stalled(h, "w0/u2", OTHER)                # after the terminate, never near the topic
    h.sleep(STALL_S)
    _times_out(h, touched)
    _times_out(h, elsewhere)
    run = _run(h, tmp_path / "both", [touched, elsewhere])
    results = check_run(run)
    assert results["valid"] is False
    assert {k: v["count"] for k, v in results["anomalies"].items()} == {"stalled-commit": 2, "unresolved-txn": 2}
    judged = judge_run(run)
    assert judged is not None and not judged.only_expected
    assert judged.unexpected == ("stalled-commit", "unresolved-txn") and judged.expected == {}
    for name in ("stalled-commit", "unresolved-txn"):
        assert judged.attribution[name] == {
            "instances": 2, "expected": 1, "by_fault": {"f1": {"instances": 1, "transactions": 1}},
            "unexpected": {"its transaction never sent to a terminated topic": 1}}, name


def test_a_stall_in_a_transaction_that_sent_to_the_terminated_topic_while_open_is_expected(
        spark: SparkSession, tmp_path: Path) -> None:
    h = History()
    touched = _stalled(h, "w0/u1", TERMINATED, OTHER)
    _terminate(h)
    h.sleep(STALL_S)
    _times_out(h, touched)
    run = _run(h, tmp_path / "touched", [touched])
    assert check_run(run)["valid"] is False
    judged = judge_run(run)
    assert judged is not None and judged.only_expected, judged
    assert set(judged.expected) == {"stalled-commit", "unresolved-txn"}


def test_a_stall_that_began_long_before_the_terminate_is_not_the_terminates(spark: SparkSession,
                                                                            tmp_path: Path) -> None:
    """It sent to the topic, but its commit had already timed out when the topic was terminated."""
    h = History()
    early = _stalled(h, "w0/u1", TERMINATED, OTHER)
    h.sleep(STALL_S)
    _times_out(h, early)
    _terminate(h)
    run = _run(h, tmp_path / "early", [early])
    assert check_run(run)["valid"] is False
    judged = judge_run(run)
    assert judged is not None and judged.unexpected == ("stalled-commit", "unresolved-txn")
    assert judged.attribution["stalled-commit"]["unexpected"] == {
        "its transaction was not open when the topic was terminated": 1}
