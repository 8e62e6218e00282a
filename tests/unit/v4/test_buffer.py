"""The transaction buffer: read horizon, markers, aborts, snapshots, recovery, low watermarks, sealed topics."""

from __future__ import annotations

import asyncio
import json

import pytest

from embedded.broker.entry import EntryInfo
from embedded.broker.managed_ledger.api import ManagedLedgerConfig
from embedded.broker.position import Position
from embedded.broker.txn_api import TxnError
from embedded.broker.v4.buffer import TopicTransactionBuffer, snapshot_log_name
from embedded.broker.v4.buffer_state import BufferState, TbState
from harness.wire import MarkerType, Payload, ServerError, TxnAction, TxnId, commands
from tests.unit.v4.fakes import FakeBroker, FakeTopic, v4_settings

TOPIC = "persistent://public/default/orders"
A, B, C = TxnId(0, 1), TxnId(0, 2), TxnId(1, 1)


def data(value: str, txn: TxnId | None = None) -> bytes:
    meta = commands.message_metadata("p", 0, 0, txn=txn)
    return bytes(Payload.build(meta, value.encode()).entry)


async def loaded(broker: FakeBroker, **settings: object) -> tuple[TopicTransactionBuffer, FakeTopic, list[int]]:
    ml = await broker.managed_ledgers.open("public/default/persistent/orders", ManagedLedgerConfig())
    topic = FakeTopic(TOPIC, ml, broker)
    tb = TopicTransactionBuffer(topic, v4_settings(**settings))   # type: ignore[arg-type]
    await tb.recover()
    ml.add_listener(tb.on_entry_added)
    fired: list[int] = []
    tb.add_listener(lambda: fired.append(1))
    return tb, topic, fired


async def plain(topic: FakeTopic, value: str) -> Position:
    return await topic.ledger.append(data(value))


async def txn_send(tb: TopicTransactionBuffer, txn: TxnId, value: str) -> Position:
    return await tb.append(txn, data(value, txn), EntryInfo(1, txn, False))


def test_horizon_stops_before_the_oldest_open_transaction_and_moves_on_its_end() -> None:
    async def run() -> None:
        tb, topic, fired = await loaded(FakeBroker())
        assert tb.status is TbState.NO_SNAPSHOT
        first = await plain(topic, "a")
        assert tb.max_read_position() == first and fired
        a1 = await txn_send(tb, A, "a1")
        assert tb.status is TbState.READY   # the first transaction took a snapshot first
        b1 = await txn_send(tb, B, "b1")
        after = await plain(topic, "z")
        assert tb.max_read_position() == Position(a1.ledger_id, a1.entry_id - 1)
        await tb.end_txn(B, TxnAction.ABORT, 0)
        assert tb.is_aborted(B, b1) and not tb.is_aborted(A, a1)
        assert tb.max_read_position() == Position(a1.ledger_id, a1.entry_id - 1)   # A still holds it
        count = len(fired)
        await tb.end_txn(A, TxnAction.COMMIT, 0)
        assert tb.max_read_position() == topic.ledger.last_confirmed > after
        assert len(fired) > count
        markers = [Payload.parse(d, verify=False).metadata for d in topic.ledger.all_data()[-2:]]
        assert [(m.marker_type, m.txnid_least_bits, m.producer_name) for m in markers] == [
            (MarkerType.TXN_ABORT, 2, "pulsar.marker"), (MarkerType.TXN_COMMIT, 1, "pulsar.marker")]
        await tb.close()

    asyncio.run(run())


def test_a_terminated_topic_refuses_the_marker_so_the_end_fails_with_persistence_error() -> None:
    async def run() -> None:
        tb, topic, _ = await loaded(FakeBroker())
        await txn_send(tb, A, "a1")
        await topic.ledger.terminate()
        with pytest.raises(TxnError) as err:
            await tb.end_txn(A, TxnAction.COMMIT, 0)
        assert err.value.error is ServerError.PersistenceError and "terminated" in err.value.message
        assert A in tb.state.ongoing   # the transaction stays open here, and holds the horizon
        await tb.close()

    asyncio.run(run())


def test_recovery_from_the_snapshot_and_the_ledger_after_it() -> None:
    async def run() -> None:
        broker = FakeBroker()
        tb, topic, _ = await loaded(broker)
        await plain(topic, "a")
        await txn_send(tb, C, "c1")                     # snapshot taken before this append
        await tb.end_txn(C, TxnAction.ABORT, 0)
        await tb._snapshot()                           # a later snapshot knows C aborted
        a1 = await txn_send(tb, A, "a1")
        b1 = await txn_send(tb, B, "b1")
        await tb.end_txn(B, TxnAction.ABORT, 0)         # only in the ledger, after the snapshot
        await plain(topic, "z")
        snapshots = broker.managed_ledgers.open_ledgers[snapshot_log_name(topic.name)].all_data()
        assert [len(json.loads(s)["aborts"]) for s in snapshots] == [0, 1]
        broker.managed_ledgers = broker.managed_ledgers.crash()
        tb2, topic2, _ = await loaded(broker)
        assert tb2.status is TbState.READY
        assert set(tb2.state.aborted) == {B, C} and list(tb2.state.ongoing) == [A]
        assert tb2.state.ongoing[A] == a1 and tb2.is_aborted(B, b1)
        assert tb2.max_read_position() == Position(a1.ledger_id, a1.entry_id - 1)
        await tb2.end_txn(A, TxnAction.COMMIT, 0)
        assert tb2.max_read_position() == topic2.ledger.last_confirmed
        await tb2.close()

    asyncio.run(run())


def test_a_topic_without_transactions_recovers_without_snapshot_or_replay() -> None:
    async def run() -> None:
        broker = FakeBroker()
        tb, topic, _ = await loaded(broker)
        await plain(topic, "a")
        await tb.end_txn(A, TxnAction.ABORT, 0)   # an abort where nothing was written: no marker
        assert len(topic.ledger.all_data()) == 1
        assert not await broker.managed_ledgers.exists(snapshot_log_name(topic.name))
        await tb.close()

    asyncio.run(run())


def test_snapshots_are_taken_after_enough_horizon_moves() -> None:
    async def run() -> None:
        broker = FakeBroker()
        tb, topic, _ = await loaded(broker, transactionBufferSnapshotMaxTransactionCount=3)
        for i in range(1, 5):
            txn = TxnId(0, i)
            await txn_send(tb, txn, f"v{i}")
            await tb.end_txn(txn, TxnAction.COMMIT, 0)
        for _ in range(20):
            await asyncio.sleep(0)
        snapshots = broker.managed_ledgers.open_ledgers[snapshot_log_name(topic.name)].all_data()
        assert len(snapshots) >= 2 and json.loads(snapshots[-1])["topicName"] == TOPIC
        await tb.close()

    asyncio.run(run())


def test_low_watermark_refuses_ended_transactions_and_aborts_forgotten_ones() -> None:
    async def run() -> None:
        tb, _, _ = await loaded(FakeBroker())
        await txn_send(tb, A, "a1")                    # txn (0,1): its commit never reached us
        await txn_send(tb, TxnId(0, 5), "x")
        await tb.end_txn(TxnId(0, 5), TxnAction.COMMIT, 3)   # coordinator 0: everything up to 3 has ended
        for _ in range(20):
            await asyncio.sleep(0)
        assert tb.is_aborted(A, Position(0, 0)) and not tb.state.ongoing
        with pytest.raises(TxnError) as err:
            await txn_send(tb, TxnId(0, 2), "late")
        assert err.value.error is ServerError.NotAllowedError
        await txn_send(tb, TxnId(1, 2), "other coordinator")   # low watermarks are per coordinator
        await tb.close()

    asyncio.run(run())


def test_buffer_state_horizon_uses_the_previous_position_across_ledgers() -> None:
    previous = {Position(5, 0): Position(4, 9)}
    state = BufferState(lambda p: previous.get(p, Position(p.ledger_id, p.entry_id - 1)), Position(4, 9))
    assert not state.on_entry(Position(5, 0), A, False)    # horizon was already the previous entry
    assert state.max_read == Position(4, 9)
    state.on_entry(Position(5, 1), None, False)
    assert state.max_read == Position(4, 9)
    assert state.on_end(A, TxnAction.COMMIT, Position(5, 2), Position(5, 2))
    assert state.max_read == Position(5, 2) and state.committed_count == 1

