"""The ledger store: the state machine, the journal and the read path, on one event loop.

Theory of operation. Every command runs on the event loop in arrival order: the
pure `LedgerBook` validates it and changes the accepted state at once (an append
gets its entry id, a fence stops later appends), and its record is submitted to the
group committer. The caller's answer waits for that record's fsync. When a batch is
durable, `_on_durable` (still in journal order) confirms its records in the book,
indexes the entries, keeps them in the entry cache and counts the metrics. Reads
see confirmed entries only; they come from the cache or are pread from the journal
on a small reader pool, never on the event loop.

Deleting a ledger drops its index at once; its bytes stay in the journal until
every ledger sharing their segment is deleted too (`reclaim`), then the segment is
unlinked on the writer thread, after any batch in progress.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from embedded import planted_bugs
from embedded.ledger.group_commit import DEFAULT_MAX_BATCH_BYTES, DurableRecord, GroupCommitter
from embedded.ledger.index import EntryCache, EntryLocation
from embedded.ledger.journal import DEFAULT_SEGMENT_BYTES, BatchWritten, DirectoryLock, Journal
from embedded.ledger.model import LedgerInfo, LedgerKind, LedgerMetadata, NoSuchLedger
from embedded.ledger.records import CreateRecord, DeleteRecord, EntryRecord, SealRecord
from embedded.ledger.recovery import Recovered, recover
from embedded.ledger.stats import LedgerStats
from harness.metrics import Registry

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
READ_MAX_BYTES = 16 * 1024 * 1024
"""A read answers at most this many bytes (but always one entry); clients ask again for the rest."""
READ_MAX_ENTRIES = 10_000


def _read_locations(journal: Journal, locations: list[EntryLocation]) -> list[bytes]:
    return [journal.read(loc.segment, loc.offset, loc.size) for loc in locations]


class LedgerStore:
    """Open with `await LedgerStore.open(data_dir)`; every method runs on the event loop."""

    def __init__(self, directory: Path, lock: DirectoryLock, recovered: Recovered, stats: LedgerStats,
                 writer: ThreadPoolExecutor, readers: ThreadPoolExecutor, *, cache_bytes: int,
                 max_batch_bytes: int, on_fatal: Callable[[BaseException], None]) -> None:
        self.directory = directory
        self._lock = lock
        self.journal = recovered.journal
        self.book = recovered.book
        self.index = recovered.index
        self.usage = recovered.usage
        self.recovery = recovered.stats
        self.stats = stats
        self.cache = EntryCache(cache_bytes)
        self._writer = writer
        self._readers = readers
        self._on_fatal = on_fatal
        self._reclaiming: asyncio.Task[None] | None = None
        self.committer = GroupCommitter(self.journal, writer, next_ledger_id=lambda: self.book.next_ledger_id,
                                        on_durable=self._on_durable, on_fatal=self._fatal,
                                        max_batch_bytes=max_batch_bytes)

    @classmethod
    async def open(cls, directory: Path, *, stats: LedgerStats | None = None,
                   segment_bytes: int = DEFAULT_SEGMENT_BYTES, cache_bytes: int = DEFAULT_CACHE_BYTES,
                   max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                   on_fatal: Callable[[BaseException], None] | None = None) -> LedgerStore:
        """Lock `directory`, replay its journal (off the event loop) and open a new segment."""
        directory.mkdir(parents=True, exist_ok=True)
        lock = DirectoryLock(directory)
        lock.acquire()
        loop = asyncio.get_running_loop()
        writer = ThreadPoolExecutor(1, thread_name_prefix="ledger-journal")
        readers = ThreadPoolExecutor(2, thread_name_prefix="ledger-read")
        try:
            recovered = await loop.run_in_executor(writer, recover, directory / "journal", segment_bytes)
            await loop.run_in_executor(writer, recovered.journal.start_segment, recovered.book.next_ledger_id)
        except BaseException:
            writer.shutdown(wait=False)
            readers.shutdown(wait=False)
            lock.release()
            raise
        store = cls(directory, lock, recovered, stats or LedgerStats(Registry()), writer, readers,
                    cache_bytes=cache_bytes, max_batch_bytes=max_batch_bytes,
                    on_fatal=on_fatal or (lambda err: None))
        store.stats.recovery_seconds.set(recovered.stats.seconds)
        store.stats.recovered_entries.set(recovered.stats.entries)
        store.usage.add_segment(store._active_segment())
        store._refresh_gauges()
        store._schedule_reclaim()
        log.info("recovered %d ledgers, %d entries from %d segments (%.1f MB) in %.2fs; %d torn bytes cut; "
                 "next ledger id %d", len(store.book.ledgers), recovered.stats.entries, recovered.stats.segments,
                 recovered.stats.journal_bytes / 1e6, recovered.stats.seconds, recovered.stats.torn_bytes,
                 store.book.next_ledger_id)
        return store

    # ---- commands ------------------------------------------------------------------------------

    async def create(self, metadata: LedgerMetadata) -> int:
        record = self.book.create(metadata)
        await self.committer.submit(record, metadata.kind)
        return record.ledger_id

    async def append(self, ledger_id: int, payload: bytes) -> int:
        record = self.book.append(ledger_id, payload)
        durable = self.committer.submit(record, self.book.kind_of(ledger_id))
        if planted_bugs.on(planted_bugs.LEDGER_ACK_BEFORE_JOURNAL):
            # DELIBERATE FAULT (txnbench self-test): answered once queued, before write and fsync
            durable.add_done_callback(lambda f: f.cancelled() or f.exception())
            return record.entry_id
        await durable
        return record.entry_id

    async def close_ledger(self, ledger_id: int) -> int:
        record = self.book.close(ledger_id)
        await self.committer.submit(record)
        return record.last_entry_id

    async def fence(self, ledger_id: int) -> int:
        record = self.book.fence(ledger_id)
        await self.committer.submit(record)
        return record.last_entry_id

    async def delete(self, ledger_id: int) -> None:
        record = self.book.delete(ledger_id)
        self.index.drop(ledger_id)
        self._refresh_gauges()
        await self.committer.submit(record)

    def info(self, ledger_id: int) -> LedgerInfo:
        return self.book.info(ledger_id)

    def list_ledgers(self, kind: LedgerKind | None = None) -> list[LedgerInfo]:
        return self.book.list_ledgers(kind)

    async def read(self, ledger_id: int, first: int, last: int, max_bytes: int = READ_MAX_BYTES) -> list[bytes]:
        """Entries first..last, or a prefix of them when they exceed `max_bytes` (at least one)."""
        self.book.check_read(ledger_id, first, last)
        entries: list[bytes | None] = []
        missing: list[tuple[int, EntryLocation]] = []
        total = 0
        for entry_id in range(first, min(last, first + READ_MAX_ENTRIES - 1) + 1):
            size = self.index.size(ledger_id, entry_id)
            if entries and total + size > max_bytes:
                break
            payload = self.cache.get(ledger_id, entry_id)
            if payload is None:
                missing.append((len(entries), self.index.get(ledger_id, entry_id)))
            entries.append(payload)
            total += size
        if missing:
            loop = asyncio.get_running_loop()
            try:
                payloads = await loop.run_in_executor(self._readers, _read_locations, self.journal,
                                                      [loc for _, loc in missing])
            except FileNotFoundError:
                raise NoSuchLedger(f"ledger {ledger_id} was deleted while it was being read") from None
            for (position, _), payload in zip(missing, payloads, strict=True):
                entries[position] = payload
        self.stats.cache_hits.inc(len(entries) - len(missing))
        self.stats.cache_misses.inc(len(missing))
        self.stats.read_entry.inc(len(entries))
        self.stats.read_bytes.inc(total)
        return [e for e in entries if e is not None]

    # ---- durability ----------------------------------------------------------------------------

    def _on_durable(self, durable: list[DurableRecord], written: BatchWritten) -> None:
        stats = self.stats
        stats.journal_syncs.inc(written.syncs)
        stats.journal_bytes.inc(written.bytes_written)
        stats.journal_disk_bytes.inc(written.bytes_written)
        stats.batch_records.observe(len(durable))
        now = time.perf_counter()
        segment = written.segment
        usage, book, index, cache = self.usage, self.book, self.index, self.cache
        reclaim = written.new_segment   # an older segment may be garbage now
        states_changed = False
        for item in durable:
            record = item.record
            if isinstance(record, EntryRecord):
                usage.note(segment, record.ledger_id)
                if record.ledger_id in book.ledgers:
                    book.confirm(record)
                    index.add(record.ledger_id, record.entry_id, segment, item.payload_offset, len(record.payload))
                    cache.put(record.ledger_id, record.entry_id, record.payload)
                kind = (item.kind or LedgerKind.OTHER).value
                size = len(record.payload)
                stats.add_entry.inc()
                stats.write_bytes.inc(size)
                stats.entries_by_kind.inc(kind=kind)
                stats.bytes_by_kind.inc(size, kind=kind)
                stats.append_latency.observe(now - item.accepted_at)
            elif isinstance(record, DeleteRecord):
                usage.note_delete(segment, record.ledger_id)
                reclaim = True
            else:
                usage.note(segment, record.ledger_id)
                book.confirm(record)
                states_changed = states_changed or isinstance(record, CreateRecord | SealRecord)
        if states_changed:
            self._refresh_gauges()
        if reclaim:
            if written.new_segment:
                self.stats.journal_segments.set(self.journal.segment_count())
            self._schedule_reclaim()

    def _fatal(self, err: BaseException) -> None:
        log.critical("the journal failed (%r); the ledger store cannot continue", err)
        self._on_fatal(err)

    def _active_segment(self) -> int:
        active = self.journal.active
        assert active is not None
        return active.segment_no

    def _schedule_reclaim(self) -> None:
        if self._reclaiming is None or self._reclaiming.done():
            self._reclaiming = asyncio.get_running_loop().create_task(self._reclaim())

    async def _reclaim(self) -> None:
        segments = self.usage.collect(self._active_segment())
        if segments:
            freed = await asyncio.get_running_loop().run_in_executor(self._writer, self.journal.remove, segments)
            self.stats.reclaimed_bytes.inc(freed)
            log.info("reclaimed %d journal segments (%.1f MB) holding only deleted ledgers",
                     len(segments), freed / 1e6)
        self._refresh_gauges()

    def _refresh_gauges(self) -> None:
        self.stats.set_ledger_counts(self.book.state_counts)
        self.stats.journal_segments.set(self.journal.segment_count())
        self.stats.journal_disk_bytes.set(self.journal.disk_bytes())

    # ---- lifecycle -----------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Wait for queued records to be durable, then release files, threads and the lock."""
        await self.committer.drain()
        if self._reclaiming is not None:
            await asyncio.gather(self._reclaiming, return_exceptions=True)
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        self.journal.close()
        self._lock.release()
