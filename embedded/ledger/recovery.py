"""Rebuild the store from its journal at start-up.

Theory of operation. Segments are read oldest first, each whole into memory, and
validated by `journal_format.scan_segment` (only the newest may end in a torn tail).
Every record of every intact batch is replayed through the pure `LedgerBook` in
journal order, entries are indexed by location (never copied), and `SegmentUsage`
learns which ledgers live in which segment. A torn tail is cut off the file (and the
truncation fsynced) so later batches are never written after garbage, and a newest
segment whose header was torn is removed. Every segment kept is fsynced: after a kill -9
its last batches may sit in the page cache unsynced (their fsync never returned), and
recovery replays them, so they must be durable before anything that builds on them
(a seal at their last entry, in the next segment) is acknowledged. The next ledger id is the largest of every
segment header's high-water mark and every ledger id seen, plus one where needed, so
ids are never reused even after the segments that created them were reclaimed.
Writing then continues in a fresh segment.

Records that do not fit (of a ledger never created, or an entry after a gap, a seal
that disagrees with the entries) are expected for deleted ledgers whose segments were
partly reclaimed: they are fine exactly when that ledger's deletion is still on disk
(`reclaim` keeps it until the ledger's last other record is gone). For any other
ledger they mean the journal lost records, and recovery fails loudly.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from embedded.ledger.book import LedgerBook, Replayed
from embedded.ledger.index import EntryIndex
from embedded.ledger.journal import (
    DEFAULT_SEGMENT_BYTES,
    Journal,
    SegmentFile,
    fsync_directory,
    list_segments,
)
from embedded.ledger.journal_format import BatchRef, scan_segment
from embedded.ledger.reclaim import SegmentUsage
from embedded.ledger.records import (
    DeleteRecord,
    JournalCorrupt,
    RecordType,
    decode_metadata_record,
    decode_seal_record,
    iter_records,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryStats:
    segments: int
    batches: int
    records: int
    entries: int
    journal_bytes: int
    torn_bytes: int
    seconds: float


@dataclass
class Recovered:
    book: LedgerBook
    index: EntryIndex
    usage: SegmentUsage
    journal: Journal
    stats: RecoveryStats


def _replay_segment(buf: bytes, segment_no: int, batches: tuple[BatchRef, ...], book: LedgerBook,
                    index: EntryIndex, usage: SegmentUsage, misfits: dict[int, str]) -> tuple[int, int]:
    """Replay one segment's batches; returns (records, entries). Misfit records go to `misfits`."""
    records = entries = 0
    seen: set[int] = set()
    replay_entry, add_to_index, applied = book.replay_entry, index.add, Replayed.APPLIED
    for batch in batches:
        refs = iter_records(buf, batch.body_start, batch.body_end)
        records += len(refs)
        for ref in refs:
            ledger_id = ref.ledger_id
            if ledger_id not in seen:
                seen.add(ledger_id)
                usage.note(segment_no, ledger_id)
            rtype = ref.type
            if rtype is RecordType.ENTRY:
                entries += 1
                outcome = replay_entry(ledger_id, ref.aux)
                if outcome is applied:
                    add_to_index(ledger_id, ref.aux, segment_no, ref.payload_offset, ref.payload_size)
                elif ledger_id not in misfits:
                    misfits[ledger_id] = f"entry {ref.aux} in {segment_no}: {outcome.value}"
                continue
            payload = buf[ref.payload_offset:ref.payload_offset + ref.payload_size]
            if rtype is RecordType.CREATE:
                book.replay(decode_metadata_record(ref, payload))
            elif rtype is RecordType.SEAL:
                seal = decode_seal_record(ref, payload)
                outcome = book.replay(seal)
                if outcome is not applied and ledger_id not in misfits:
                    misfits[ledger_id] = f"{seal.state.value} at entry {seal.last_entry_id} in {segment_no}: {outcome.value}"
            else:
                book.replay(DeleteRecord(ledger_id))
                index.drop(ledger_id)
                usage.note_delete(segment_no, ledger_id)
    return records, entries


def recover(directory: Path, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> Recovered:
    """Open the journal in `directory` (created if missing) and rebuild the state; blocking."""
    started = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    book, index, usage = LedgerBook(), EntryIndex(), SegmentUsage()
    misfits: dict[int, str] = {}
    segments: dict[int, SegmentFile] = {}
    found = list_segments(directory)
    last_seq = 0
    n_batches = n_records = n_entries = journal_bytes = torn_bytes = 0
    try:
        for position, (segment_no, path) in enumerate(found):
            is_last = position == len(found) - 1
            buf = path.read_bytes()
            scan = scan_segment(buf, last=is_last, name=path.name)
            journal_bytes += len(buf)
            if scan.header is None:
                log.warning("removing %s: its header was torn in a crash and it holds no batch", path.name)
                path.unlink()
                fsync_directory(directory)
                torn_bytes += len(buf)
                continue
            if scan.header.segment_no != segment_no:
                raise JournalCorrupt(f"{path.name}: header says segment {scan.header.segment_no}")
            book.next_ledger_id = max(book.next_ledger_id, scan.header.next_ledger_id)
            if scan.batches:
                if scan.batches[0].seq <= last_seq:
                    raise JournalCorrupt(f"{path.name}: batch {scan.batches[0].seq} is not after batch {last_seq}")
                last_seq = scan.batches[-1].seq
            records, entries = _replay_segment(buf, segment_no, scan.batches, book, index, usage, misfits)
            n_batches += len(scan.batches)
            n_records += records
            n_entries += entries
            usage.add_segment(segment_no)
            if scan.torn_bytes:
                log.warning("%s: cutting a torn tail of %d bytes at byte %d (never acknowledged)",
                            path.name, scan.torn_bytes, scan.valid_end)
                torn_bytes += scan.torn_bytes
                fd = os.open(path, os.O_RDWR)
                try:
                    os.ftruncate(fd, scan.valid_end)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            segments[segment_no] = segment = Journal.open_segment(segment_no, path, scan.valid_end)
            if is_last:
                os.fsync(segment.fd)   # older segments were fsynced before the next was created
            del buf
    except BaseException:
        for segment in segments.values():
            segment.retire()
        raise
    unexplained = {ledger_id: why for ledger_id, why in misfits.items() if not usage.is_deleted(ledger_id)}
    if unexplained:
        for segment in segments.values():
            segment.retire()
        detail = "; ".join(f"ledger {lid}: {why}" for lid, why in sorted(unexplained.items())[:5])
        raise JournalCorrupt(f"journal records are missing (a segment file lost or damaged?): {detail}; "
                             f"restore {directory} from a copy, or remove it to start empty")
    journal = Journal(directory, segments, next_seq=last_seq + 1, segment_bytes=segment_bytes)
    if segments:   # the newest segment was fsynced above: a power loss may no longer take what it holds
        journal.mark_synced(segments[max(segments)])
    stats = RecoveryStats(len(segments), n_batches, n_records, n_entries, journal_bytes, torn_bytes,
                          time.perf_counter() - started)
    return Recovered(book, index, usage, journal, stats)
