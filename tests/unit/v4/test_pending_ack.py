"""Pending acks: conflict rules (individual, batch index, cumulative), commit, abort, recovery, batched log."""

from __future__ import annotations

import asyncio

import pytest

from embedded import planted_bugs
from embedded.broker.entry import EntryInfo
from embedded.broker.managed_ledger.api import ManagedLedgerConfig
from embedded.broker.managed_ledger.cursor_state import CursorState
from embedded.broker.position import Position
from embedded.broker.txn_api import TxnAck, TxnError
from embedded.broker.v4.pending_ack import PendingAckHandleImpl, pending_ack_log_name
from embedded.broker.v4.pending_ack_state import AckState, HeldAck, PendingAckState, acked_bits
from embedded.broker.v4.records import split_entry
from harness.wire import ServerError, TxnAction, TxnId, commands
from tests.unit.v4.fakes import (
    FakeBroker,
    FakeCursor,
    FakeSubscription,
    FakeTopic,
    acks,
    v4_metrics,
    v4_settings,
)

T1, T2 = TxnId(0, 1), TxnId(0, 2)
P = [Position(3, i) for i in range(10)]


def cursor_at(mark_delete: Position) -> FakeCursor:
    return FakeCursor(None, "c", CursorState(mark_delete, lambda p: Position(p.ledger_id, p.entry_id + 1)))  # type: ignore[arg-type]


def ack_set(size: int, acked: list[int]) -> tuple[int, ...]:
    words = [0] * ((size + 63) // 64)
    for i in range(size):
        if i not in acked:
            words[i // 64] |= 1 << (i % 64)
    return tuple(words)


def conflict(call: object) -> None:
    with pytest.raises(TxnError) as err:
        call()  # type: ignore[operator]
    assert err.value.error is ServerError.TransactionConflict


def test_individual_conflicts_as_pulsar_checks_them() -> None:
    state, cursor = PendingAckState(), cursor_at(Position(3, 0))
    conflict(lambda: state.check_individual(T1, [HeldAck(P[0])], cursor))     # already acked on the cursor
    state.check_individual(T1, [HeldAck(P[1])], cursor)
    state.hold_individual(T1, [HeldAck(P[1])])
    conflict(lambda: state.check_individual(T2, [HeldAck(P[1])], cursor))     # held by another transaction
    conflict(lambda: state.check_individual(T1, [HeldAck(P[1])], cursor))     # or by the same one
    conflict(lambda: state.check_individual(T2, [HeldAck(P[1], ack_set(4, [0]), 4)], cursor))
    assert state.is_pending(P[1]) and state.state_of(P[1], cursor) is AckState.PENDING_ACK
    assert state.state_of(P[2], cursor) is AckState.NONE and state.state_of(P[0], cursor) is AckState.ACKED
    released = state.release(T1)
    assert released is not None and list(released.individual) == [P[1]] and not state.is_pending(P[1])
    state.check_individual(T2, [HeldAck(P[1])], cursor)


def test_batch_index_acks_conflict_only_on_overlapping_indexes() -> None:
    state, cursor = PendingAckState(), cursor_at(Position(3, 0))
    state.hold_individual(T1, [HeldAck(P[2], ack_set(5, [0, 1]), 5)])
    assert state.held_bits(P[2]) == [0b00011] and not state.is_pending(P[2])
    state.check_individual(T2, [HeldAck(P[2], ack_set(5, [2, 3]), 5)], cursor)      # other indexes: fine
    conflict(lambda: state.check_individual(T2, [HeldAck(P[2], ack_set(5, [1, 4]), 5)], cursor))
    conflict(lambda: state.check_individual(T2, [HeldAck(P[2])], cursor))            # whole entry vs partly held
    cursor.acknowledge([(P[3], list(ack_set(5, [4])))])                                           # index 4 acked without txn
    conflict(lambda: state.check_individual(T2, [HeldAck(P[3], ack_set(5, [4]), 5)], cursor))
    state.check_individual(T2, [HeldAck(P[3], ack_set(5, [3]), 5)], cursor)
    conflict(lambda: state.check_individual(T2, [HeldAck(P[4], ack_set(5, [0]), 5),
                                                 HeldAck(P[4], ack_set(5, [0]), 5)], cursor))   # twice in one ack
    assert acked_bits(ack_set(70, [0, 69]), 70) == [1, 1 << 5]


def test_cumulative_conflicts() -> None:
    state, cursor = PendingAckState(), cursor_at(Position(3, 3))
    conflict(lambda: state.check_cumulative(T1, P[3], cursor))          # at or before mark-delete
    state.check_cumulative(T1, P[5], cursor)
    state.hold_cumulative(T1, HeldAck(P[5]))
    assert state.covered_by_cumulative(P[4]) and state.covered_by_cumulative(P[5]) and not state.covered_by_cumulative(P[6])
    assert not state.is_pending(P[4])   # the dispatcher sends it again on a rewind (Pulsar filters individual acks only)
    conflict(lambda: state.check_cumulative(T2, P[7], cursor))          # another transaction holds one
    conflict(lambda: state.check_cumulative(T1, P[5], cursor))          # not beyond its own
    state.check_cumulative(T1, P[7], cursor)
    state.release(T1)
    state.check_cumulative(T2, P[7], cursor)


async def subscription(broker: FakeBroker, **settings: object) -> tuple[PendingAckHandleImpl, FakeSubscription]:
    data = await broker.managed_ledgers.open("public/default/persistent/in", ManagedLedgerConfig())
    for i in range(6):   # entries 0..5; entry 5 is a batch of 3
        meta = commands.message_metadata("p", i, 0, num_messages_in_batch=3 if i == 5 else None)
        entry = bytes(commands.send(1, i, meta, b"x").payload.entry)   # type: ignore[union-attr]
        await data.append(entry, EntryInfo.parse(entry))
    topic = FakeTopic("persistent://public/default/in", data, broker)
    cursor = await data.open_cursor("sub", initial_position=Position.EARLIEST)
    sub = FakeSubscription(topic, "sub", cursor)
    handle = PendingAckHandleImpl(sub, v4_settings(**settings), v4_metrics(broker))   # type: ignore[arg-type]
    await handle.recover()
    return handle, sub


def positions(sub: FakeSubscription) -> list[Position]:
    ledger = sub.topic.ledger.stored.ledgers[0][0]
    return [Position(ledger, i) for i in range(6)]


def test_commit_applies_to_the_cursor_abort_redelivers_and_records_are_deleted() -> None:
    async def run() -> None:
        broker = FakeBroker()
        handle, sub = await subscription(broker)
        p = positions(sub)
        await handle.individual_ack(T1, acks(p[0], p[1]))
        with pytest.raises(TxnError) as err:
            await handle.individual_ack(T2, acks(p[1]))
        assert err.value.error is ServerError.TransactionConflict
        await handle.individual_ack(T2, [TxnAck(p[5], ack_set(3, [1]))])   # batch size learned from the entry
        assert handle.pending_ack_set(p[5]) == [0b010] and handle.is_pending(p[0])
        assert handle.ack_state(p[0]) is AckState.PENDING_ACK
        await handle.end_txn(T1, TxnAction.COMMIT, 0)
        assert sub.cursor.is_acked(p[0]) and sub.cursor.is_acked(p[1]) and sub.wakes == 1
        await handle.end_txn(T2, TxnAction.ABORT, 0)
        assert sub.redelivered == [p[5]] and handle.pending_ack_set(p[5]) is None
        assert sub.cursor.batch_ack_set(p[5]) is None   # nothing of the batch was acknowledged
        for _ in range(10):
            await asyncio.sleep(0)
        assert handle.log is not None and handle.log.cursor.is_acked(handle.log.ml.last_confirmed)
        await handle.close()

    asyncio.run(run())


def test_recovery_keeps_open_transactions_held_and_reapplies_committed_ones() -> None:
    async def run() -> None:
        broker = FakeBroker()
        handle, sub = await subscription(broker)
        p = positions(sub)
        await handle.individual_ack(T1, acks(p[2]))
        await handle.cumulative_ack(T2, TxnAck(p[1]))
        await handle.end_txn(T2, TxnAction.COMMIT, 0)   # COMMIT logged; the cursor is not flushed by a crash
        broker.managed_ledgers = broker.managed_ledgers.crash()
        handle2, sub2 = await subscription(broker)
        assert handle2.is_pending(p[2]) and T1 in handle2.state.txns
        assert sub2.cursor.is_acked(p[1])   # the committed cumulative ack is applied again
        await handle2.end_txn(T1, TxnAction.COMMIT, 0)
        assert sub2.cursor.is_acked(p[2])
        await handle2.close()

    asyncio.run(run())


def test_a_committed_cumulative_ack_of_a_batch_message_keeps_the_indexes_after_it() -> None:
    """Pulsar keeps a cumulative transactional ack's ack set (an AckSetPosition) and marks the
    batch deleted only up to its index; acking the whole entry on commit loses the rest of the
    batch (the model did, until a Failover consumer's cumulative acks showed ctp-loss)."""
    async def run() -> None:
        broker = FakeBroker()
        handle, sub = await subscription(broker)
        p = positions(sub)
        await handle.cumulative_ack(T1, TxnAck(p[5], ack_set(3, [0])))   # up to index 0 of the batch at p[5]
        assert handle.ack_state(p[4]) is AckState.PENDING_ACK
        assert not handle.is_pending(p[4]) and handle.pending_ack_set(p[5]) is None   # dispatched on a rewind
        await handle.end_txn(T1, TxnAction.COMMIT, 0)
        assert sub.cursor.is_acked(p[4]) and not sub.cursor.is_acked(p[5])
        assert sub.cursor.batch_ack_set(p[5]) == [0b110]                    # indexes 1 and 2 stay
        with pytest.raises(TxnError) as err:                                 # index 0 again: refused
            await handle.cumulative_ack(T2, TxnAck(p[5], ack_set(3, [0])))   # (Pulsar accepts it: a finding)
        assert err.value.error is ServerError.TransactionConflict
        await handle.cumulative_ack(T2, TxnAck(p[5], ack_set(3, [0, 1])))   # a later one, within that entry
        await handle.end_txn(T2, TxnAction.COMMIT, 0)
        assert sub.cursor.batch_ack_set(p[5]) == [0b100]
        broker.managed_ledgers = broker.managed_ledgers.crash()
        handle2, sub2 = await subscription(broker)                           # the record keeps the ack set
        assert not sub2.cursor.is_acked(p[5]) and sub2.cursor.batch_ack_set(p[5]) == [0b100]
        await handle2.close()
        await handle.close()

    asyncio.run(run())


@pytest.mark.parametrize("planted", [False, True])
def test_a_refused_transactions_abort_erases_the_held_cumulative_ack_only_with_the_planted_bug(planted: bool) -> None:
    """Real Pulsar logs the abort of a transaction whose cumulative ack was refused and, replaying
    it after a reload, clears whoever holds the cumulative ack (docs/findings/
    v4-pending-cumulative-ack-erased-by-other-abort.md); the model keeps the holder's ack unless the
    planted bug makes it do what Pulsar does."""
    async def run() -> None:
        broker = FakeBroker()
        handle, sub = await subscription(broker)
        p = positions(sub)
        await handle.cumulative_ack(T1, TxnAck(p[2]))
        with pytest.raises(TxnError):
            await handle.cumulative_ack(T2, TxnAck(p[2]))
        await handle.end_txn(T2, TxnAction.ABORT, 0)
        assert handle.state.cumulative is not None and handle.state.cumulative[0] == T1   # live: still held
        broker.managed_ledgers = broker.managed_ledgers.crash()
        handle2, sub2 = await subscription(broker)
        await handle2.end_txn(T1, TxnAction.COMMIT, 0)
        assert sub2.cursor.is_acked(p[2]) is not planted
        await handle2.close()
        await handle.close()

    planted_bugs.activate([planted_bugs.V4_REPLAYED_ABORT_CLEARS_ANY_CUMULATIVE] if planted else [])
    try:
        asyncio.run(run())
    finally:
        planted_bugs.activate(())


def test_batched_pending_ack_log_groups_acks_of_many_transactions() -> None:
    async def run() -> None:
        broker = FakeBroker()
        handle, sub = await subscription(broker, transactionPendingAckBatchedWriteEnabled=True,
                                         transactionPendingAckBatchedWriteMaxDelayInMillis=5)
        p = positions(sub)
        await asyncio.gather(*(handle.individual_ack(TxnId(0, i + 1), acks(p[i])) for i in range(5)))
        assert handle.log is not None
        ml = broker.managed_ledgers.open_ledgers[pending_ack_log_name(sub.topic.name, "sub")]
        assert len(ml.all_data()) == 1 and len(split_entry(ml.all_data()[0])) == 5
        assert broker.metrics.pending_ack_batched.by_delay.get(broker="broker-0") == 1
        await handle.close()

    asyncio.run(run())


def test_low_watermark_aborts_transactions_whose_end_never_came() -> None:
    async def run() -> None:
        broker = FakeBroker()
        handle, sub = await subscription(broker)
        p = positions(sub)
        await handle.individual_ack(T1, acks(p[0]))
        await handle.individual_ack(TxnId(0, 5), acks(p[1]))
        await handle.end_txn(TxnId(0, 5), TxnAction.COMMIT, 3)   # coordinator 0: everything up to 3 has ended
        for _ in range(20):
            await asyncio.sleep(0)
        assert not handle.state.txns and sub.redelivered == [p[0]] and sub.cursor.is_acked(p[1])
        await handle.close()

    asyncio.run(run())
