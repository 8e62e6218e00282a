"""A transaction its client left without a known end is decided by its coordinator's record when
the drain read one (COMMITTED or ABORTED), not by what the final reads happen to show."""

from __future__ import annotations

from pyspark.sql import SparkSession

from analysis.checks import AnomalyClass, prepare, run_checks
from analysis.model import COORDINATOR
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History


def _unknown_commit(h: History, *values: str) -> str:
    """A transaction that sent `values` ok and whose commit ended `info` (the client was cut off)."""
    return h.process("w0/u1").open().sends(*values).commit(type="info").id


def test_a_committed_record_with_nothing_visible_is_a_lost_write(run_check: RunCheck) -> None:
    # Visibility alone calls this transaction aborted (nothing of it is visible) and the run valid;
    # the coordinator committed it, so both values are lost.
    h = History()
    txn = _unknown_commit(h, "a1", "a2")
    h.sleep(1.0).txn_state(txn, "COMMITTED")
    h.drain(reads={"t1": []})
    lost = run_check(h, AnomalyClass.LOST_WRITE)
    assert lost.count == 2 and lost.unjudged == 0
    example = lost.examples[0]
    assert example["decided_by"] == COORDINATOR
    assert example["coordinator"]["status"] == "COMMITTED" and example["coordinator"]["f"] == "txn-state"
    assert example["coordinator"]["writer"] == "drain"


def test_an_aborted_record_with_a_value_shown_is_an_aborted_read(run_check: RunCheck) -> None:
    # Visibility alone calls this committed (a reader was shown a1) and a2 lost; the coordinator
    # aborted it, so a1 in the final read is the anomaly and nothing committed is missing.
    h = History()
    txn = _unknown_commit(h, "a1", "a2")
    h.sleep(1.0).txn_state(txn, "ABORTED")
    h.drain(reads={"t1": ["a1"]})
    aborted = run_check(h, AnomalyClass.ABORTED_READ)
    assert aborted.count == 1 and aborted.examples[0]["value"] == "a1"
    assert "coordinator's record" in aborted.examples[0]["why"]
    assert run_check(h, AnomalyClass.LOST_WRITE).count == 0
    assert run_check(h, AnomalyClass.PARTIAL_TXN).count == 1       # any outcome: some but not all shown


def test_the_record_agreeing_with_the_reads_changes_nothing(run_check: RunCheck) -> None:
    h = History()
    committed = _unknown_commit(h, "a1")
    aborted = h.process("w0/u2").open().send("b1").commit(type="info").id
    h.sleep(1.0).txn_state(committed, "COMMITTED").txn_state(aborted, "ABORTED")
    h.drain(reads={"t1": ["a1"]})
    for name in (AnomalyClass.LOST_WRITE, AnomalyClass.ABORTED_READ, AnomalyClass.PARTIAL_TXN):
        result = run_check(h, name)
        assert result.count == 0 and result.unjudged == 0, name


def test_what_is_not_a_final_record_leaves_visibility_to_decide(run_check: RunCheck) -> None:
    # Unfinished, forgotten, unanswered or contradictory readings are no outcome: a1 visible decides
    # committed, and a2 missing is lost as before.
    for statuses in (["COMMITTING"], ["NOT_FOUND"], ["UNKNOWN"], ["ABORTED", "COMMITTED"]):
        h = History()
        txn = _unknown_commit(h, "a1", "a2")
        h.sleep(1.0)
        for status in statuses:
            h.txn_state(txn, status)
        h.drain(reads={"t1": ["a1"]})
        lost = run_check(h, AnomalyClass.LOST_WRITE)
        assert lost.count == 1 and lost.examples[0]["decided_by"] == "visibility", statuses
        assert run_check(h, AnomalyClass.ABORTED_READ).count == 0, statuses


def test_the_client_and_the_never_invoked_commit_are_not_overruled(run_check: RunCheck) -> None:
    h = History()
    known = h.process("w0/u1").open().send("a1").commit().id            # the client saw it commit
    never = h.process("w0/u2").open().send("b1").id                     # commit never invoked
    h.sleep(1.0).txn_state(known, "ABORTED").txn_state(never, "COMMITTED")
    h.drain(reads={"t1": ["a1"]})
    assert run_check(h, AnomalyClass.ABORTED_READ).count == 0           # a1: committed, as its client saw
    assert run_check(h, AnomalyClass.LOST_WRITE).count == 0             # b1: aborted, as no commit was asked
    unresolved = run_check(h, AnomalyClass.UNRESOLVED_TXN, txn_timeout_s=0.1, abort_bound_s=0.1)
    assert unresolved.count == 1 and "never asked to commit" in unresolved.examples[0]["why"]


def test_an_ack_only_transaction_aborted_by_its_coordinator_must_give_its_acks_back(
        run_check: RunCheck) -> None:
    # Without the record it is decided by redelivery (nothing came back: committed, clean). The
    # coordinator aborted it, so the acked message had to come back to the emptied subscription.
    h = History()
    h.process("w0/p").open().send("m").commit()
    c = h.process("w1/c1")
    c.receive("m")
    txn = c.open().ack("m").commit(type="info").id
    h.sleep(1.0).txn_state(txn, "ABORTED")
    h.drain(reads={"t1": ["m"]}, subscriptions=[("t1", "s")])
    stuck = run_check(h, AnomalyClass.STUCK_ACK)
    assert stuck.count == 1


def test_large_histories_decide_the_same(spark: SparkSession) -> None:
    """The persisted (large-input) preparation broadcasts the decisions: the same outcomes."""
    h = History()
    lost = _unknown_commit(h, "a1", "a2")
    shown = h.process("w0/u2").open().sends("b1", "b2").commit(type="info").id
    h.sleep(1.0).txn_state(lost, "COMMITTED").txn_state(shown, "ABORTED")
    h.drain(reads={"t1": ["b1"]})
    ops = h.ops(spark)
    counts = []
    for cut_lineage in (True, False):
        ctx = prepare(ops, persist=True, cut_lineage=cut_lineage)
        try:
            decided = {row["txn"]: (row["outcome"], row["decided_by"]) for row in ctx.txns.collect()}
            assert decided == {lost: ("committed", COORDINATOR), shown: ("aborted", COORDINATOR)}
            counts.append({r.name: r.count for r in run_checks(ctx)})
        finally:
            ctx.unpersist()
    assert counts[0] == counts[1]
    assert counts[0][AnomalyClass.LOST_WRITE] == 2 and counts[0][AnomalyClass.ABORTED_READ] == 1
