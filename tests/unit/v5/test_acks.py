"""Pending transactional acks: Pulsar's conflict rules, holds, release, masks."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from embedded.broker.position import Position as P
from embedded.broker.txn_api import TxnAck
from embedded.broker.v5.txn.acks import AckConflict, PendingAcks
from harness.wire import TxnId

A, B = TxnId(0, 1), TxnId(0, 2)


@dataclass
class FakeCursor:
    mark_delete_position: P = field(default_factory=lambda: P(1, -1))
    acked: set[P] = field(default_factory=set)
    batches: dict[P, list[int]] = field(default_factory=dict)

    def is_acked(self, position: P) -> bool:
        return position <= self.mark_delete_position or position in self.acked

    def batch_ack_set(self, position: P) -> list[int] | None:
        return self.batches.get(position)


def test_an_entry_held_by_one_transaction_conflicts_for_every_other_ack() -> None:
    acks, cursor = PendingAcks(), FakeCursor()
    acks.check_individual(A, [TxnAck(P(1, 0))], cursor)
    acks.hold_individual(A, [TxnAck(P(1, 0))])
    assert acks.is_pending(P(1, 0), cursor.mark_delete_position)
    with pytest.raises(AckConflict, match="held"):
        acks.check_individual(B, [TxnAck(P(1, 0))], cursor)
    with pytest.raises(AckConflict, match="held"):   # Pulsar refuses the same txn acking it twice too
        acks.check_individual(A, [TxnAck(P(1, 0))], cursor)
    assert acks.release(A) == [P(1, 0)]
    acks.check_individual(B, [TxnAck(P(1, 0))], cursor)


def test_already_acknowledged_entries_conflict() -> None:
    acks, cursor = PendingAcks(), FakeCursor(mark_delete_position=P(1, 3), acked={P(1, 7)})
    for position in (P(1, 2), P(1, 7)):
        with pytest.raises(AckConflict, match="already acknowledged"):
            acks.check_individual(A, [TxnAck(position)], cursor)
    with pytest.raises(AckConflict, match="mark-delete"):
        acks.check_cumulative(A, P(1, 3), cursor)


def test_batch_indexes_conflict_only_when_they_overlap() -> None:
    acks, cursor = PendingAcks(), FakeCursor()
    entry = P(1, 0)
    acks.hold_individual(A, [TxnAck(entry, (0b110,), 3)])               # A acks index 0 of 3
    acks.check_individual(B, [TxnAck(entry, (0b011,), 3)], cursor)       # B acks index 2: fine
    with pytest.raises(AckConflict, match="batch indexes"):
        acks.check_individual(B, [TxnAck(entry, (0b100,), 3)], cursor)   # indexes 0 and 1 overlap
    with pytest.raises(AckConflict, match="part of which"):
        acks.check_individual(B, [TxnAck(entry)], cursor)
    held = acks.pending_ack_set(entry)
    assert held is not None and held[0] & 0b111 == 0b001               # index 0 is masked
    assert not acks.is_pending(entry, cursor.mark_delete_position)     # the rest stays deliverable
    cursor.batches[entry] = [0b101]                                      # index 1 acked by a plain ack
    with pytest.raises(AckConflict, match="already acknowledged"):
        acks.check_individual(B, [TxnAck(entry, (0b101,), 3)], cursor)


def test_a_batch_s_last_message_conflicts_too() -> None:
    """Acking the last index of a batch clears the highest bit of its ack set: a batch size guessed
    from that bit left the index out of every overlap, and two committed transactions acked the same
    message (an embedded chaos run with batched inputs, double-ack 18, ctp-duplicate 19)."""
    acks, cursor = PendingAcks(), FakeCursor()
    entry = P(1, 0)
    last_of_four = (0b0111,)
    acks.check_individual(A, [TxnAck(entry, last_of_four, 4)], cursor)
    acks.hold_individual(A, [TxnAck(entry, last_of_four, 4)])
    with pytest.raises(AckConflict, match="held by the pending ack"):
        acks.check_individual(B, [TxnAck(entry, last_of_four, 4)], cursor)
    acks.check_individual(B, [TxnAck(entry, (0b1011,), 4)], cursor)     # index 2: no overlap
    cursor.batches[entry] = [0b0111]                                     # the last one acked plainly
    acks.release(A)
    with pytest.raises(AckConflict, match="already acknowledged"):
        acks.check_individual(B, [TxnAck(entry, last_of_four, 4)], cursor)


def test_an_ack_of_batch_indexes_needs_its_batch_size() -> None:
    with pytest.raises(ValueError, match="batch size"):
        PendingAcks().check_individual(A, [TxnAck(P(1, 0), (0b0111,))], FakeCursor())


def test_one_cumulative_holder_at_a_time_moving_forward() -> None:
    acks, cursor = PendingAcks(), FakeCursor()
    acks.check_cumulative(A, P(1, 5), cursor)
    acks.hold_cumulative(A, TxnAck(P(1, 5)))
    assert not acks.is_pending(P(1, 3), cursor.mark_delete_position)   # dispatched again on a rewind (Pulsar)
    with pytest.raises(AckConflict, match="holds a cumulative"):
        acks.check_cumulative(B, P(1, 9), cursor)
    with pytest.raises(AckConflict, match="holds a cumulative"):
        acks.check_cumulative(A, P(1, 5), cursor)
    acks.check_cumulative(A, P(1, 8), cursor)
    assert acks.release(A) == [P(1, 5)]


def test_a_cumulative_ack_hides_nothing_from_the_dispatcher() -> None:
    """Pulsar's dispatcher filters entries by individual pending acks only (`getPositionInPendingAck`):
    a Failover consumer whose cursor rewinds (its redelivery, an abort applied later, a failover)
    gets what a pending cumulative ack covers again, in order. Skipping them let a v5 consumer take
    the next entry first and ack it cumulatively over messages it never saw (the model did)."""
    acks, cursor = PendingAcks(), FakeCursor()
    acks.hold_cumulative(A, TxnAck(P(1, 5), (0b1100,), 4))   # up to index 1 of a batch of four
    mark_delete = cursor.mark_delete_position
    assert not acks.is_pending(P(1, 4), mark_delete) and acks.pending_ack_set(P(1, 5)) is None
    with pytest.raises(AckConflict, match="holds a cumulative"):
        acks.check_cumulative(B, P(1, 6), cursor)
    assert acks.release(A) == [P(1, 5)]


def test_a_cumulative_ack_naming_an_acknowledged_batch_index_conflicts() -> None:
    """The cursor keeps indexes 0 and 1 of the batch at 1:5 acknowledged (its mark-delete is 1:4):
    a cumulative ack naming index 1 again, or 0, is refused (Pulsar accepts both, comparing entries
    only: docs/findings/v4-cumulative-ack-of-acked-batch-message.md); naming index 2 is new."""
    acks, cursor = PendingAcks(), FakeCursor(mark_delete_position=P(1, 4), batches={P(1, 5): [0b1100]})
    for named_ack_set in ((0b1100,), (0b1110,)):          # up to index 1, up to index 0
        with pytest.raises(AckConflict, match="already acknowledged"):
            acks.check_cumulative(B, P(1, 5), cursor, named_ack_set)
    acks.check_cumulative(B, P(1, 5), cursor, (0b1000,))   # up to index 2
    acks.check_cumulative(B, P(1, 5), cursor, None)        # the whole entry (its last index)


def test_release_returns_every_position_once() -> None:
    acks = PendingAcks()
    acks.hold_individual(A, [TxnAck(P(1, 1)), TxnAck(P(1, 2), (0b10,))])
    acks.hold_individual(B, [TxnAck(P(1, 2), (0b01,))])
    assert acks.holds(A) and set(acks.transactions()) == {A, B}
    assert acks.release(A) == [P(1, 1), P(1, 2)]
    assert acks.release(A) == []
    assert acks.pending_ack_set(P(1, 2)) is not None   # B still holds index 1
