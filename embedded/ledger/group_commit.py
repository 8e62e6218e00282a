"""Group commit: records that arrive together share one journal write and one fsync.

Theory of operation. `submit()` runs on the event loop: it queues the encoded record
and returns a future. One flusher task drains the queue: it takes everything queued
(up to `max_batch_bytes`, at least one record), hands it to the sink's
`write_batch` on the writer thread (write + fsync off the event loop), and meanwhile
new records queue up for the next batch. The longer an fsync takes, the more records
the next one carries, which is BookKeeper's adaptive group commit without a timer.
When a batch is durable, `on_durable` sees its records in journal order (so the
state machine confirms them in order) and only then are their futures resolved, so
nothing is answered before its fsync.

If a write or fsync fails, what reached the disk is unknown: the committer fails
every queued record with `JournalFailed`, refuses new ones and calls `on_fatal`; the
service then exits (fail-stop, as a bookie does on journal errors) and recovery
sorts out the disk on restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Protocol

from embedded.ledger.journal import BatchWritten
from embedded.ledger.model import LedgerKind
from embedded.ledger.records import RECORD_HEADER_SIZE, Record, encode_record

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024


class JournalFailed(Exception):
    """The journal could not write or fsync; the store stops (outcome of queued records unknown)."""


class BatchSink(Protocol):
    """Where batches go: `Journal` in production, a fake in tests."""

    def write_batch(self, records: Sequence[bytes], next_ledger_id: int) -> BatchWritten: ...


@dataclass(frozen=True)
class DurableRecord:
    """A record that is on disk now, with where its payload is and what the store needs."""

    record: Record
    segment: int
    payload_offset: int
    accepted_at: float
    kind: LedgerKind | None


@dataclass
class _Queued:
    record: Record
    encoded: bytes
    future: asyncio.Future[None]
    accepted_at: float
    kind: LedgerKind | None


class GroupCommitter:
    def __init__(self, sink: BatchSink, executor: Executor, *,
                 next_ledger_id: Callable[[], int],
                 on_durable: Callable[[list[DurableRecord], BatchWritten], None],
                 on_fatal: Callable[[BaseException], None],
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> None:
        self._sink = sink
        self._executor = executor
        self._next_ledger_id = next_ledger_id
        self._on_durable = on_durable
        self._on_fatal = on_fatal
        self.max_batch_bytes = max_batch_bytes
        self._queue: deque[_Queued] = deque()
        self._flusher: asyncio.Task[None] | None = None
        self.failed: BaseException | None = None

    def submit(self, record: Record, kind: LedgerKind | None = None) -> asyncio.Future[None]:
        """Queue `record`; the future resolves once it is durable (in submission order)."""
        if self.failed is not None:
            raise JournalFailed(f"the journal failed earlier: {self.failed!r}")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.append(_Queued(record, encode_record(record), future, time.perf_counter(), kind))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        return future

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def drain(self) -> None:
        """Wait until everything submitted so far is durable (or failed)."""
        for _ in range(1_000_000):  # each round waits for one flusher run to finish
            flusher = self._flusher
            if flusher is None or flusher.done():
                return
            await asyncio.shield(flusher)

    def _take_batch(self) -> list[_Queued]:
        batch = [self._queue.popleft()]
        size = len(batch[0].encoded)
        while self._queue and size + len(self._queue[0].encoded) <= self.max_batch_bytes:
            item = self._queue.popleft()
            batch.append(item)
            size += len(item.encoded)
        return batch

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            batch = self._take_batch()
            try:
                written = await loop.run_in_executor(
                    self._executor, self._sink.write_batch, [q.encoded for q in batch], self._next_ledger_id())
                durable = []
                position = written.body_offset
                for q in batch:
                    durable.append(DurableRecord(q.record, written.segment, position + RECORD_HEADER_SIZE,
                                                 q.accepted_at, q.kind))
                    position += len(q.encoded)
                self._on_durable(durable, written)
            except asyncio.CancelledError:
                self._fail(batch, JournalFailed("the store shut down before this record was durable"),
                           fatal=False)
                raise
            except Exception as err:
                self._fail(batch, err)
                return
            for q in batch:
                if not q.future.done():
                    q.future.set_result(None)

    def _fail(self, batch: list[_Queued], err: BaseException, fatal: bool = True) -> None:
        self.failed = err
        if fatal:
            log.critical("journal write failed; failing %d queued records: %r", len(batch) + len(self._queue), err)
        failure = JournalFailed(f"journal write failed: {err!r}")
        for q in [*batch, *self._queue]:
            if not q.future.done():
                q.future.set_exception(failure)
        self._queue.clear()
        if fatal:
            self._on_fatal(err)
