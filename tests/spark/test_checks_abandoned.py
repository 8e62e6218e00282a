"""unresolved-txn: transactions their client abandoned, held to the coordinator's timeout."""

from __future__ import annotations

from pyspark.sql import SparkSession

from analysis.checks import AnomalyClass, CheckStatus, prepare, run_one
from analysis.checks.acks import stuck_acks
from analysis.history_io import ops_from_records
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History

TIMEOUT = {"txn_timeout_s": 2.0, "abort_bound_s": 1.0}


def _abandoned(h: History) -> str:
    """w1 opens a transaction, sends, and dies (no commit): its last invoke stays open."""
    t = h.process("w1/u1").open().send("a1")
    h.process("w1/u1").send("a2", type=None)       # the writer was killed during this send
    return t.id


def test_abandoned_transaction_still_open_after_its_timeout_is_unresolved(run_check: RunCheck) -> None:
    h = History()
    txn = _abandoned(h)
    h.process("w0/u1").open().send("b").commit()
    h.sleep(4.0).txn_state(txn, "OPEN")             # asked 4 s later: past 2 s + 1 s
    h.drain(reads={"t1": ["b"]})
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.status is CheckStatus.RAN and result.count == 1
    example = result.examples[0]
    assert example["txn"] == txn and example["status"] == "OPEN" and "still had it OPEN" in example["why"]
    assert example["observed"]["f"] == "txn-state" and example["observed"]["writer"] == "drain"


def test_abandoned_transaction_the_coordinator_aborted_is_clean(run_check: RunCheck) -> None:
    for status in ("ABORTED", "NOT_FOUND"):
        h = History()
        txn = _abandoned(h)
        h.sleep(4.0).txn_state(txn, status)
        h.drain(reads={"t1": []})
        result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
        assert result.count == 0 and result.unjudged == 0, status


def test_a_live_reading_still_unfinished_is_unresolved_though_the_restart_finished_it(run_check: RunCheck) -> None:
    """What the live system shows is judged on its own: a coordinator that stopped finishing a
    transaction (real 5.0.1's stale coordinator after a re-acquired lock, 2026-12-04) is not
    excused because the coordinator a cold restart loaded finished it."""
    h = History()
    txn = _abandoned(h)
    h.sleep(4.0).txn_state(txn, "ABORTING", live=True).txn_state(txn, "ABORTING", live=True)
    h.sleep(1.0).txn_state(txn, "ABORTING").txn_state(txn, "NOT_FOUND")
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.count == 1 and result.unjudged == 0
    example = result.examples[0]
    assert "still had it ABORTING at the live read" in example["why"] and example["status"] == "ABORTING"
    assert example["observed"]["writer"] == "drain-live"


def test_a_drain_is_judged_on_its_latest_reading_of_a_transaction(run_check: RunCheck) -> None:
    """The drain asks an unfinished one again while the coordinator may be finishing it (a
    coordinator just loaded answers before its in-flight abort's last write): the last answer of
    each drain counts, not the first."""
    h = History()
    txn = _abandoned(h)
    h.sleep(4.0).txn_state(txn, "OPEN", live=True).txn_state(txn, "ABORTED", live=True)
    h.sleep(1.0).txn_state(txn, "ABORTING").txn_state(txn, "NOT_FOUND")
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.count == 0 and result.unjudged == 0


def test_an_unanswered_live_reading_leaves_the_final_one_to_judge(run_check: RunCheck) -> None:
    for final, count in (("OPEN", 1), ("UNKNOWN", 0)):
        h = History()
        txn = _abandoned(h)
        h.sleep(4.0).txn_state(txn, "UNKNOWN", error="AdminError: no answer", live=True)
        h.txn_state(txn, final, error="AdminError: no answer" if final == "UNKNOWN" else None)
        h.drain(reads={"t1": []})
        result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
        assert (result.count, result.unjudged) == (count, 1 - count), final


def test_committed_without_a_commit_is_unresolved(run_check: RunCheck) -> None:
    h = History()
    txn = _abandoned(h)
    h.sleep(4.0).txn_state(txn, "COMMITTED")
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.count == 1 and "never asked to commit" in result.examples[0]["why"]


def test_a_reading_before_the_deadline_or_without_answer_is_unjudged(run_check: RunCheck) -> None:
    h = History()
    early = _abandoned(h)
    h.txn_state(early, "OPEN")                      # asked right away: still inside its timeout
    late = h.process("w2/u1").open().send("c").commit(type="info").id
    h.sleep(4.0).txn_state(late, "UNKNOWN", error="AdminError: no answer")
    h.drain(reads={"t1": ["c"]})
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.count == 0 and result.unjudged == 2


def test_a_history_without_readings_has_nothing_to_judge(run_check: RunCheck) -> None:
    h = History()
    _abandoned(h)
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.count == 0 and result.unjudged == 0


def test_a_transaction_its_client_ended_is_not_abandoned(run_check: RunCheck) -> None:
    h = History()
    ended = h.process("w0/u1").open().send("b").abort().id
    h.sleep(4.0).txn_state(ended, "OPEN")            # a coordinator bug, but not this check's
    h.drain(reads={"t1": []})
    assert run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT).count == 0


def test_a_transaction_whose_commit_failed_is_still_the_coordinators_to_end(run_check: RunCheck) -> None:
    """A failed commit ends nothing: real 2.10.5's coordinator, loaded again after its broker died,
    kept such a transaction OPEN a minute past its timeout (docs/findings/historical/
    v4-timeout-lost-after-coordinator-recovery.md), and the check did not look at it."""
    h = History()
    failed = h.process("w0/u1").open().send("b").commit(type="fail").id
    h.sleep(4.0).txn_state(failed, "OPEN")
    h.drain(reads={"t1": []})
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.count == 1 and result.examples[0]["txn"] == failed
    assert "still had it OPEN" in result.examples[0]["why"]


def test_a_failed_commit_then_an_abort_ok_is_ended(run_check: RunCheck) -> None:
    h = History()
    ended = h.process("w0/u1").open().send("b").commit(type="fail").abort().id
    h.sleep(4.0).txn_state(ended, "OPEN")
    h.drain(reads={"t1": []})
    assert run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT).count == 0


def test_acks_an_abandoned_transaction_held_must_come_back(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/p").open().send("m").commit()
    c = h.process("w1/c1")
    c.receive("m", sub="s")
    txn = c.open().ack("m", sub="s").id            # the consumer dies holding the ack
    h.sleep(4.0).txn_state(txn, "NOT_FOUND")
    h.drain(reads={"t1": ["m"]}, subscriptions=[("t1", "s")])     # the drain never gets "m" again
    result = run_check(h, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT)
    assert result.count == 1 and "never released" in result.examples[0]["why"]
    released = History()
    released.process("w0/p").open().send("m").commit()
    c = released.process("w1/c1")
    c.receive("m", sub="s")
    txn = c.open().ack("m", sub="s").id
    released.sleep(4.0).txn_state(txn, "NOT_FOUND")
    released.phase("drain")
    released.drain_receive("m", sub="s")
    released.read("t1", "m").drain_complete(subscriptions=[("t1", "s")])
    assert run_check(released, AnomalyClass.UNRESOLVED_TXN, **TIMEOUT).count == 0


def test_stuck_acks_are_computed_once_per_context_and_released_with_it(spark: SparkSession) -> None:
    """stuck-ack and unresolved-txn read one kept frame of stuck acks: the second does not recompute it."""
    h = History()
    h.process("w0/p").open().send("m").commit()
    c = h.process("w1/c1")
    c.receive("m", sub="s")
    txn = c.open().ack("m", sub="s").id
    h.sleep(4.0).txn_state(txn, "NOT_FOUND")
    h.drain(reads={"t1": ["m"]}, subscriptions=[("t1", "s")])
    ctx = prepare(ops_from_records(spark, h.records()), persist=True,
                  txn_timeout_s=TIMEOUT["txn_timeout_s"], abort_bound_s=TIMEOUT["abort_bound_s"])
    try:
        stuck, _ = stuck_acks(ctx)
        assert stuck.is_cached
        assert run_one(AnomalyClass.STUCK_ACK, ctx).count == 1
        assert run_one(AnomalyClass.UNRESOLVED_TXN, ctx).count == 1
        assert stuck_acks(ctx)[0] is stuck
    finally:
        ctx.unpersist()
    assert not stuck.is_cached


def test_time_every_client_was_cut_off_is_not_a_stall(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit(took_s=20.0)      # invoked just before a 17 s cut
    start = 2_000_000_000
    cut = ((start, start + 17_000_000_000),)
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=15.0).count == 1
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=15.0, commit_blocked_windows=cut).count == 0
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=2.0, commit_blocked_windows=cut).count == 1
    # a store outage inside the cut is not left out twice: 20 s - 17 s is still over 2 s
    both = (*cut, (start + 5_000_000_000, start + 12_000_000_000))
    assert run_check(h, AnomalyClass.STALLED_COMMIT, stall_after_s=2.0, commit_blocked_windows=both).count == 1
