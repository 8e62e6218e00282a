"""The read horizon of a segment and decision application, without I/O."""

from __future__ import annotations

from embedded.broker.position import Position as P
from embedded.broker.v5.txn.records import TxnState
from embedded.broker.v5.txn.visibility import SegmentVisibility, before
from harness.wire import TxnId

A, B, C = TxnId(0, 1), TxnId(1, 1), TxnId(2, 1)


def test_the_first_open_entry_pins_the_horizon() -> None:
    vis = SegmentVisibility(P(5, -1))
    assert vis.entry_added(P(5, 0), None) and vis.horizon == P(5, 0)
    vis.begin(A)
    assert not vis.entry_added(P(5, 1), A) and vis.horizon == P(5, 0)   # pinned before its entry
    assert not vis.entry_added(P(5, 2), None)      # a plain entry after it waits too
    vis.begin(B)
    vis.entry_added(P(5, 3), B)
    assert vis.horizon == P(5, 0)
    effect = vis.decide(A, TxnState.COMMITTED)
    assert effect.applied and effect.horizon_moved and not effect.aborted
    assert vis.horizon == P(5, 2)                 # now B pins
    vis.decide(B, TxnState.COMMITTED)
    assert vis.horizon == P(5, 3) and vis.open_transactions() == []


def test_an_abort_marks_entries_skippable_and_moves_the_horizon() -> None:
    vis = SegmentVisibility(P(2, -1))
    vis.begin(A)
    vis.entry_added(P(2, 0), A)
    vis.entry_added(P(2, 1), A)
    effect = vis.decide(A, TxnState.ABORTED)
    assert effect.aborted and effect.last_position == P(2, 1)
    assert vis.is_aborted(A) and vis.horizon == P(2, 1)
    assert vis.state_of(A) is TxnState.ABORTED
    again = vis.decide(A, TxnState.ABORTED)
    assert not again.applied and not again.horizon_moved
    vis.forget(A)
    assert vis.is_aborted(A)                      # aborts are remembered for readers


def test_an_open_txn_without_entries_pins_nothing_until_it_writes() -> None:
    vis = SegmentVisibility(P(1, 4))
    vis.begin(A)
    assert vis.horizon == P(1, 4)
    vis.entry_added(P(2, 0), A)                   # first entry of a new ledger
    assert vis.horizon == before(P(2, 0)) == P(2, -1)


def test_recovered_open_transactions_pin_the_watermark() -> None:
    vis = SegmentVisibility(P(3, 9), pin=P(3, 4))
    vis.recovered(A, TxnState.OPEN)
    vis.recovered(B, TxnState.COMMITTED)
    vis.recovered(C, TxnState.ABORTED)
    vis.finish_recovery()
    assert vis.horizon == P(3, 4) and vis.watermark() is None
    assert vis.is_aborted(C) and vis.recovered_open_count == 1
    vis.entry_added(P(3, 10), None)
    assert vis.horizon == P(3, 4)
    vis.decide(A, TxnState.COMMITTED)
    assert vis.horizon == P(3, 10) and vis.watermark() == P(3, 10)


def test_without_a_watermark_recovery_pins_before_everything() -> None:
    vis = SegmentVisibility(P(3, 9), pin=P.EARLIEST)
    vis.recovered(A, TxnState.OPEN)
    vis.finish_recovery()
    assert vis.horizon == P.EARLIEST              # Pulsar 5.0 would expose 3:9 here
    vis.decide(A, TxnState.ABORTED)
    assert vis.horizon == P(3, 9)


def test_a_decision_for_an_unknown_transaction() -> None:
    vis = SegmentVisibility(P(1, 1))
    assert not vis.decide(A, TxnState.COMMITTED).applied
    effect = vis.decide(B, TxnState.ABORTED)      # its entries (if any) must stay hidden
    assert effect.applied and effect.aborted and vis.is_aborted(B)


def test_late_entries_of_a_decided_txn_do_not_pin() -> None:
    vis = SegmentVisibility(P(1, -1))
    vis.begin(A)
    vis.decide(A, TxnState.COMMITTED)
    vis.entry_added(P(1, 0), A)                   # its append landed after the decision
    assert vis.horizon == P(1, 0)
