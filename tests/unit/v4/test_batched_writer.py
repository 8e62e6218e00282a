"""PIP-160's batched writer: thresholds, positions with batch indexes, the entry format, metrics."""

from __future__ import annotations

import asyncio

import pytest

from embedded.broker.managed_ledger.api import ManagedLedgerConfig, ManagedLedgerError
from embedded.broker.metrics import BrokerMetrics
from embedded.broker.position import Position
from embedded.broker.v4.batched_writer import (
    BatchBuffer,
    FlushTrigger,
    LogPosition,
    TxnLogBufferedWriter,
    WriterClosed,
)
from embedded.broker.v4.record_log import RecordLog, is_live, remaining_words
from embedded.broker.v4.records import decode_entry
from embedded.broker.v4.settings import BatchedWriteConfig
from embedded.ledger.model import LedgerKind
from tests.unit.v4.fakes import FakeLedger, FakeStorage

ON = BatchedWriteConfig(enabled=True, max_records=3, max_size=100, max_delay_ms=5)


def test_buffer_flushes_by_records_size_delay_and_force() -> None:
    buffer: BatchBuffer[str] = BatchBuffer(ON)
    assert buffer.add("a", 10, 0.0) == [] and buffer.add("b", 10, 1.0) == []
    (by_records,) = buffer.add("c", 10, 2.0)
    assert by_records.items == ("a", "b", "c") and by_records.trigger is FlushTrigger.RECORDS and by_records.batched
    assert by_records.size == 30 and by_records.oldest_ms == 0.0
    assert buffer.add("d", 60, 3.0) == []
    (by_size,) = buffer.add("e", 50, 4.0)
    assert by_size.items == ("d", "e") and by_size.trigger is FlushTrigger.SIZE
    buffer.add("f", 1, 10.0)
    assert buffer.deadline_ms() == 15.0 and buffer.due(14.9) is None
    by_delay = buffer.due(15.0)
    assert by_delay is not None and by_delay.items == ("f",) and by_delay.trigger is FlushTrigger.DELAY
    buffer.add("g", 1, 20.0)
    forced, alone = buffer.add("big", 100, 21.0)   # >= max size: what waited goes first, then it alone
    assert forced.items == ("g",) and forced.trigger is FlushTrigger.FORCE and forced.batched
    assert alone.items == ("big",) and not alone.batched and alone.trigger is None
    assert buffer.pending_count == 0 and buffer.deadline_ms() is None


def test_disabled_buffer_writes_every_record_alone() -> None:
    buffer: BatchBuffer[str] = BatchBuffer(BatchedWriteConfig(enabled=False))
    (flush,) = buffer.add("a", 10, 0.0)
    assert not flush.batched and flush.items == ("a",)


def _ledger() -> FakeLedger:
    return FakeLedger("pulsar/system/persistent/__transaction_log_0", ManagedLedgerConfig(kind=LedgerKind.TXN_LOG),
                      FakeStorage())


def test_writer_answers_each_record_with_its_batch_index_and_fills_the_metrics() -> None:
    async def run() -> None:
        ml = _ledger()
        metrics = BrokerMetrics()
        writer = TxnLogBufferedWriter(ml, BatchedWriteConfig(True, 4, 1 << 20, 2), metrics=metrics.tc_batched,
                                      metrics_label="broker-0")
        futures = [writer.append(f"r{i}".encode()) for i in range(6)]   # 4 by records, then 2 by delay
        positions = await asyncio.gather(*futures)
        first, second = positions[0].position, positions[4].position
        assert positions[:4] == [LogPosition(first, i, 4) for i in range(4)]
        assert positions[4:] == [LogPosition(second, 0, 2), LogPosition(second, 1, 2)]
        assert ml.appends == 2 and (writer.entries_written, writer.records_written) == (2, 6)
        assert decode_entry(ml.all_data()[0]) == [b"r0", b"r1", b"r2", b"r3"]
        m = metrics.tc_batched
        assert m.by_records.get(broker="broker-0") == 1 and m.by_delay.get(broker="broker-0") == 1
        assert m.records_per_entry.counts[("broker-0",)][-1] == 2     # two entries observed
        assert m.records_per_entry.sums[("broker-0",)] == 6
        text = metrics.registry.render()
        assert "pulsar_txn_tc_batched_log_triggering_count_by_records_total" in text
        assert "pulsar_txn_tc_batched_log_oldest_record_delay_time_seconds_bucket" in text

    asyncio.run(run())


def test_writer_without_batching_writes_plain_records() -> None:
    async def run() -> None:
        ml = _ledger()
        writer = TxnLogBufferedWriter(ml, BatchedWriteConfig(enabled=False))
        positions = await asyncio.gather(*(writer.append(b"x%d" % i) for i in range(3)))
        assert [p.batch_index for p in positions] == [-1, -1, -1]
        assert ml.all_data() == [b"x0", b"x1", b"x2"]

    asyncio.run(run())


def test_writer_fails_records_when_the_append_fails_and_after_close() -> None:
    async def run() -> None:
        ml = _ledger()
        writer = TxnLogBufferedWriter(ml, BatchedWriteConfig(True, 10, 1 << 20, 50))
        ml.fail_appends = ManagedLedgerError("bookies down")
        waiting = writer.append(b"a")
        writer.flush_now()
        with pytest.raises(ManagedLedgerError):
            await waiting
        ml.fail_appends = None
        pending = writer.append(b"b")
        writer.close()
        with pytest.raises(WriterClosed):
            await pending
        with pytest.raises(WriterClosed):
            await writer.append(b"c")

    asyncio.run(run())


def test_record_log_deletes_by_batch_index_and_replays_only_live_records() -> None:
    async def run() -> None:
        ml = _ledger()
        cursor = await ml.open_cursor("c", initial_position=Position.EARLIEST)
        records = RecordLog(ml, cursor, TxnLogBufferedWriter(ml, BatchedWriteConfig(True, 3, 1 << 20, 1)))
        positions = await asyncio.gather(*(records.append(b"r%d" % i) for i in range(6)))
        records.delete([positions[0], positions[2]])              # entry 1 keeps index 1
        records.delete([positions[3], positions[4], positions[5]])   # entry 2 is wholly deleted
        assert cursor.is_acked(positions[3].position) and not cursor.is_acked(positions[0].position)
        seen: list[tuple[LogPosition, bytes]] = []
        assert await records.replay(lambda at, data: seen.append((at, data))) == 1
        assert seen == [(positions[1], b"r1")]
        records.delete([positions[1]])
        assert cursor.mark_delete_position == positions[5].position   # every entry is deleted now

    asyncio.run(run())


def test_ack_set_words_for_batch_indexes() -> None:
    words = remaining_words(70, [0, 65])
    assert not is_live(words, 0) and is_live(words, 1) and not is_live(words, 65) and is_live(words, 69)
    assert not is_live(words, 70)   # past the batch
    assert is_live(None, 5)
