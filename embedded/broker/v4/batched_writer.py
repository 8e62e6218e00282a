"""PIP-160's TxnLogBufferedWriter: many log records in one managed-ledger entry.

Theory of operation. `BatchBuffer` is the decision logic without I/O: records are
added with their size and the time they arrived, and it answers which batches must be
written now:

* by records: the batch holds `max_records` records;
* by size: the batch holds `max_size` bytes or more;
* by delay: its oldest record has waited `max_delay_ms` (`due()`, asked by a timer);
* a record of `max_size` bytes or more is written alone, unbatched; whatever waited
  before it is flushed first so the log keeps the call order (Pulsar counts that
  flush as "force", `triggering_count_by_force`).

`TxnLogBufferedWriter` drives it on asyncio: `append(record)` returns a future of the
record's `LogPosition`, the entry's position plus the record's batch index and the
batch size, resolved (strictly in call order, as the managed ledger confirms entries
in order) once the entry holding it is durable. With batching off every record is its
own entry (batch index -1). Each batch is one managed-ledger append of
`[magic][version][records]` (`records.encode_batch`), and every flush updates
Pulsar's batched-log metrics: records per entry, entry size, the oldest record's
delay, and the counter of what triggered it.

Simplifications (embedded/broker/v4/README.md): the delay timer starts with the first
record of each batch (the PIP's description) where Pulsar's writer ticks at a fixed
period; and, as Pulsar's metrics do, the "seconds" delay histogram is fed milliseconds.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from embedded import tracing
from embedded.broker.managed_ledger.api import ManagedLedgerApi, ManagedLedgerError
from embedded.broker.metrics import BatchedLogMetrics
from embedded.broker.position import Position
from embedded.broker.v4.records import encode_batch
from embedded.broker.v4.settings import BatchedWriteConfig

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, order=True)
class LogPosition:
    """Where a record is: its entry, and (batched) its index in the entry and the entry's record count."""

    position: Position
    batch_index: int = -1
    batch_size: int = 0

    @property
    def batched(self) -> bool:
        return self.batch_index >= 0

    def __str__(self) -> str:
        return f"{self.position}" if not self.batched else f"{self.position}[{self.batch_index}/{self.batch_size}]"


class FlushTrigger(enum.Enum):
    RECORDS = "records"
    SIZE = "size"
    DELAY = "delay"
    FORCE = "force"


@dataclass(frozen=True)
class Flush(Generic[T]):
    """One entry to write: its items in order, whether it is a batch, and why it is written now."""

    items: tuple[T, ...]
    batched: bool
    trigger: FlushTrigger | None      # None for an oversized record written alone
    size: int                         # bytes of the records (Pulsar's bytesSize, without the prefix)
    oldest_ms: float                  # arrival time of the oldest record


@dataclass
class _Pending(Generic[T]):
    items: list[T] = field(default_factory=list)
    size: int = 0
    first_ms: float = 0.0


class BatchBuffer(Generic[T]):
    """The batching decisions of TxnLogBufferedWriter, without I/O or clocks."""

    def __init__(self, config: BatchedWriteConfig) -> None:
        self.config = config
        self._pending: _Pending[T] = _Pending()

    @property
    def pending_count(self) -> int:
        return len(self._pending.items)

    def deadline_ms(self) -> float | None:
        """When the oldest waiting record must be written (None when nothing waits)."""
        if not self._pending.items:
            return None
        return self._pending.first_ms + self.config.max_delay_ms

    def add(self, item: T, size: int, now_ms: float) -> list[Flush[T]]:
        """Add one record; returns the entries to write now, in order."""
        if not self.config.enabled:
            return [Flush((item,), False, None, size, now_ms)]
        out: list[Flush[T]] = []
        if size >= self.config.max_size:
            if self._pending.items:
                out.append(self._take(FlushTrigger.FORCE))
            out.append(Flush((item,), False, None, size, now_ms))
            return out
        pending = self._pending
        if not pending.items:
            pending.first_ms = now_ms
        pending.items.append(item)
        pending.size += size
        if len(pending.items) >= self.config.max_records:
            out.append(self._take(FlushTrigger.RECORDS))
        elif pending.size >= self.config.max_size:
            out.append(self._take(FlushTrigger.SIZE))
        return out

    def due(self, now_ms: float) -> Flush[T] | None:
        """The waiting batch if its oldest record has waited long enough."""
        deadline = self.deadline_ms()
        if deadline is None or now_ms < deadline:
            return None
        return self._take(FlushTrigger.DELAY)

    def drain(self) -> list[T]:
        """Everything still waiting (closing: the writer fails them)."""
        items = self._pending.items
        self._pending = _Pending()
        return items

    def _take(self, trigger: FlushTrigger) -> Flush[T]:
        pending = self._pending
        self._pending = _Pending()
        return Flush(tuple(pending.items), True, trigger, pending.size, pending.first_ms)


class WriterClosed(ManagedLedgerError):
    """The writer was closed before the record was written (Pulsar: 'Transaction log buffered write has closed')."""


@dataclass
class _Item:
    record: bytes
    future: asyncio.Future[LogPosition]


class TxnLogBufferedWriter:
    """Appends records to one managed ledger, batched per PIP-160 when the config enables it."""

    def __init__(self, ml: ManagedLedgerApi, config: BatchedWriteConfig, *, metrics: BatchedLogMetrics | None = None,
                 metrics_label: str = "", clock_ms: Callable[[], float] | None = None) -> None:
        self.ml = ml
        self.config = config
        self._buffer: BatchBuffer[_Item] = BatchBuffer(config)
        self._metrics = metrics
        self._label = metrics_label
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.entries_written = 0
        self.records_written = 0

    @property
    def batching(self) -> bool:
        return self.config.enabled

    def append(self, record: bytes) -> asyncio.Future[LogPosition]:
        """Write `record`; the future resolves with its position once its entry is durable."""
        future: asyncio.Future[LogPosition] = asyncio.get_running_loop().create_future()
        # the record's wait for its (possibly shared, timer-flushed) entry is the request's durable write
        tracing.track_future(tracing.CallKind.LEDGER_APPEND, future)
        if self._closed:
            future.set_exception(WriterClosed(f"{self.ml.name}: the transaction log writer is closed"))
            return future
        for flush in self._buffer.add(_Item(record, future), len(record), self._clock_ms()):
            self._write(flush)
        self._arm_timer()
        return future

    def flush_now(self) -> None:
        """Write what waits without waiting for a threshold (counted as a delay flush)."""
        flush = self._buffer.due(float("inf"))
        if flush is not None:
            self._write(flush)
        self._arm_timer()

    def _arm_timer(self) -> None:
        deadline = self._buffer.deadline_ms()
        if deadline is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        if self._timer is not None:
            return
        delay_s = max(0.0, (deadline - self._clock_ms()) / 1000.0)
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        flush = self._buffer.due(self._clock_ms())
        if flush is not None:
            self._write(flush)
        self._arm_timer()

    def _write(self, flush: Flush[_Item]) -> None:
        items = flush.items
        if flush.batched:
            data = encode_batch([item.record for item in items])
            self._observe(flush)
        else:
            data = items[0].record
        self.entries_written += 1
        self.records_written += len(items)
        appended = self.ml.append(data)
        appended.add_done_callback(lambda done: self._written(flush, done))

    def _observe(self, flush: Flush[_Item]) -> None:
        metrics = self._metrics
        if metrics is None or flush.trigger is None:
            return
        label = self._label
        metrics.records_per_entry.observe(len(flush.items), broker=label)
        metrics.entry_size_bytes.observe(flush.size, broker=label)
        # Pulsar observes milliseconds into the histogram named "..._seconds" (buckets 1, 5, 10)
        metrics.oldest_record_delay_seconds.observe(max(0.0, self._clock_ms() - flush.oldest_ms), broker=label)
        counter = {FlushTrigger.RECORDS: metrics.by_records, FlushTrigger.SIZE: metrics.by_size,
                   FlushTrigger.DELAY: metrics.by_delay, FlushTrigger.FORCE: metrics.by_force}[flush.trigger]
        counter.inc(broker=label)

    @staticmethod
    def _written(flush: Flush[_Item], done: asyncio.Future[Position]) -> None:
        items = flush.items
        if done.cancelled():
            error: BaseException | None = WriterClosed("the log append was cancelled")
        else:
            error = done.exception()
        if error is not None:
            for item in items:
                if not item.future.done():
                    item.future.set_exception(error)
            return
        position = done.result()
        if not flush.batched:
            if not items[0].future.done():
                items[0].future.set_result(LogPosition(position))
            return
        size = len(items)
        for index, item in enumerate(items):
            if not item.future.done():
                item.future.set_result(LogPosition(position, index, size))

    def close(self) -> None:
        """Fail whatever has not been handed to the managed ledger; later appends fail at once."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for item in self._buffer.drain():
            if not item.future.done():
                item.future.set_exception(WriterClosed(f"{self.ml.name}: the transaction log writer was closed"))


__all__ = ["BatchBuffer", "Flush", "FlushTrigger", "LogPosition", "TxnLogBufferedWriter", "WriterClosed"]
