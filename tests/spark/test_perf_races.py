"""perf.json `races` (issue #43): the racing decisions a history shows, counted from its lines."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from analysis.perf import compute_perf
from harness.history.schema import OpF
from tests.spark.dsl import History


def _commit(h: History, process: str, txn: str, type_: str, **extra: object) -> None:
    h.operation("w0", process, OpF.TXN_COMMIT, {"txn": txn, "extra": extra or None}, type_)


def _foreign_abort(h: History, txn: str, owner: str, type_: str) -> None:
    h.operation("w0", "w0/foreign", OpF.TXN_ABORT, {"txn": txn, "extra": {"foreign": {"owner": owner}}}, type_)


def test_races_count_double_acks_timeout_commits_and_second_clients_aborts(spark: SparkSession,
                                                                           tmp_path: Path) -> None:
    h = History()
    h.process("w0/p").open().sends("m1", "m2", "m3").commit()
    c1, c2 = h.process("w0/c1"), h.process("w0/c2")
    c1.open().ack("m1").abort()                    # m1: acked in an aborted transaction ...
    c2.open().ack("m1").commit()                   # ... and again, ok, in another: a double ack attempted
    c1.open().ack("m2").commit()
    c2.open().ack("m2", type="fail").abort()       # refused (a conflict): not acked ok twice
    c1.open().ack("m3").ack("m3").commit()         # one transaction acking twice: one transaction
    c2.ack("m3", cumulative=True)                  # a plain ack: none
    # commits at the transaction timeout, as the load marks them
    u = h.process("w0/u3")
    late = u.open()
    _commit(h, "w0/u3", late.id, "ok", timeout_offset_s=0.4)
    early = u.open()
    _commit(h, "w0/u3", early.id, "fail", timeout_offset_s=-0.5)
    gone = u.open()
    _commit(h, "w0/u3", gone.id, "info", timeout_offset_s=0.9)
    # a second client's aborts beside commits: lost, won, and both answered ok (a false answer)
    for commit_type, abort_type in (("ok", "fail"), ("fail", "ok"), ("ok", "ok")):
        txn = u.open()
        _foreign_abort(h, txn.id, "w0/u3", abort_type)
        _commit(h, "w0/u3", txn.id, commit_type)
    perf = compute_perf(h.write(tmp_path / "run"), spark=spark)
    races = perf["races"]
    assert races["acked_in_two_txns"] == 1
    assert races["timeout_commits"] == {"count": 3, "ok": 1, "fail": 1, "info": 1, "after": 2, "after_ok": 1}
    assert races["foreign_aborts"] == {"count": 3, "ok": 2, "fail": 1, "info": 0, "both_ok": 1}
    # no status file: what only the load knows is absent, not zero
    assert races["ack_conflicts"] is None and races["end_txn_resends"] is None and races["ack_races"] is None
    # the second client's aborts are decisions on the same transactions: counted once, by their owner
    assert perf["transactions"]["aborted"] == 2      # c1's and c2's own aborts, not the foreign ok ones
    assert perf["operations"]["txn-abort"] == {"ok": 2, "fail": 0, "info": 0}
    assert perf["latency_ms"]["txn-abort"]["count"] == 2
