"""The power-loss crash (targets/power_loss.py) and the fsync marks it reads (harness.sync_mark):
the tear plan is pure; the stores' recovery from a torn log is checked on real files, no sockets."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from embedded.ledger.journal import _pwrite_all, list_segments
from embedded.ledger.journal_format import SEGMENT_HEADER_SIZE
from embedded.ledger.model import LedgerKind, LedgerMetadata
from embedded.ledger.records import CreateRecord, EntryRecord
from embedded.ledger.records import encode_record as ledger_record
from embedded.ledger.recovery import recover
from embedded.ledger.store import LedgerStore
from embedded.metadata.durable import DurabilityConfig, DurableStore
from embedded.metadata.state import Put
from embedded.metadata.wal import SegmentWriter, encode_record, segment_name
from harness.sync_mark import MARK_BYTES, MARK_FILE, Mark, decode_mark, encode_mark, read_mark
from targets.power_loss import (
    Tear,
    TearMode,
    apply_tear,
    crash_store_files,
    mark_directories,
    plan_tear,
    unsynced_bytes,
    unsynced_files,
)

SEG = "segment-000000000002.log"
NEXT = "segment-000000000003.log"


def test_the_mark_round_trips_and_has_a_fixed_size() -> None:
    data = encode_mark(Mark(SEG, 1234))
    assert len(data) == MARK_BYTES
    assert decode_mark(data) == Mark(SEG, 1234)
    assert decode_mark(b"") is None
    assert decode_mark(b" " * MARK_BYTES) is None
    with pytest.raises(ValueError):
        encode_mark(Mark("a b", 1))


def test_only_bytes_past_the_mark_are_unsynced() -> None:
    files = [("segment-000000000001.log", 500), (SEG, 900), (NEXT, 40), ("LOCK", 5)]
    assert unsynced_files(Mark(SEG, 700), files) == [(SEG, 900, 700), (NEXT, 40, 0)]
    assert unsynced_files(Mark(SEG, 900), files) == [(NEXT, 40, 0)]
    assert unsynced_files(Mark(NEXT, 40), files) == []


def test_a_tear_never_touches_durable_bytes_and_always_loses_the_newest_write() -> None:
    files = [("segment-000000000001.log", 500), (SEG, 900), (NEXT, 40)]
    modes = set()
    for seed in range(300):
        tears = plan_tear(Mark(SEG, 700), files, random.Random(seed))
        assert [t.file_name for t in tears] == [SEG, NEXT]
        seg, nxt = tears
        assert 700 <= seg.keep < 900 and 0 <= nxt.keep < 40
        modes.add(seg.mode)
    assert modes == {TearMode.TRUNCATE, TearMode.ZERO}
    assert plan_tear(None, files, random.Random(1)) == []                 # nothing known durable: no loss
    assert plan_tear(Mark(NEXT, 40), files, random.Random(1)) == []       # everything fsynced: no loss


def test_a_tear_truncates_or_zeroes_the_file(tmp_path: Path) -> None:
    for name in ("a.log", "b.log"):
        (tmp_path / name).write_bytes(b"x" * 10)
    apply_tear(tmp_path, [Tear("a.log", 10, 4, TearMode.TRUNCATE), Tear("b.log", 10, 6, TearMode.ZERO)])
    assert (tmp_path / "a.log").read_bytes() == b"xxxx"
    assert (tmp_path / "b.log").read_bytes() == b"xxxxxx" + bytes(4)


def _ledger_journal(tmp_path: Path, batches: int, in_flight: bool = True) -> tuple[Path, list[bytes]]:
    """A journal with `batches` acknowledged batches, then (`in_flight`) a batch written but never
    fsynced."""
    directory = tmp_path / "journal"
    recovered = recover(directory)
    journal = recovered.journal
    journal.start_segment(2)
    meta = LedgerMetadata(LedgerKind.DATA, "topic")
    bodies = [ledger_record(CreateRecord(1, meta))] + [ledger_record(EntryRecord(1, i, b"%d" % i * 50))
                                                       for i in range(batches - 1)]
    for body in bodies:
        journal.write_batch([body], 2)
    segment = journal.active
    assert segment is not None
    assert read_mark(directory) == Mark(segment.path.name, segment.size)
    if in_flight:
        _pwrite_all(segment.fd, b"Z" * 300, segment.size)     # its fdatasync never returned
    journal.close()
    return directory, bodies


@pytest.mark.parametrize("seed", range(12))
def test_the_ledger_journal_recovers_every_acknowledged_batch_after_a_torn_crash(tmp_path: Path, seed: int) -> None:
    directory, _bodies = _ledger_journal(tmp_path, batches=5)
    assert unsynced_bytes(directory) == 300
    lost = crash_store_files(tmp_path, random.Random(seed))
    assert len(lost) == 1
    recovered = recover(directory)
    assert recovered.stats.batches == 5
    assert recovered.stats.torn_bytes > 0 or lost[0].endswith("0 zero")
    recovered.journal.close()


def test_a_torn_new_ledger_segment_header_is_removed(tmp_path: Path) -> None:
    directory, _ = _ledger_journal(tmp_path, batches=2, in_flight=False)
    segments_before = [n for n, _ in list_segments(directory)]
    new = directory / f"segment-{segments_before[-1] + 1:012d}.log"
    new.write_bytes(b"TBLEDGJ1" + bytes(20))     # created after the last fsync; its header's fsync never returned
    assert unsynced_bytes(directory) == SEGMENT_HEADER_SIZE
    crash_store_files(tmp_path, random.Random(3))
    recovered = recover(directory)
    assert [n for n, _ in list_segments(directory)] == segments_before
    assert recovered.stats.batches == 2
    recovered.journal.close()


def test_a_crashed_ledger_store_keeps_every_acknowledged_entry(tmp_path: Path) -> None:
    async def main() -> None:
        store = await LedgerStore.open(tmp_path)
        ledger = await store.create(LedgerMetadata(LedgerKind.DATA, "topic"))
        for i in range(20):
            await store.append(ledger, b"e%d" % i)
        segment = store.journal.active
        assert segment is not None
        _pwrite_all(segment.fd, b"\x4c\x4a\x42\x4b" + b"q" * 60, segment.size)   # a batch in flight
        await store.shutdown()
        assert crash_store_files(tmp_path, random.Random(5))
        store = await LedgerStore.open(tmp_path)
        assert await store.read(ledger, 0, 19) == [b"e%d" % i for i in range(20)]
        assert await store.append(ledger, b"after") == 20
        await store.shutdown()

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("seed", range(8))
def test_the_metadata_store_recovers_every_acknowledged_record_after_a_torn_crash(tmp_path: Path,
                                                                                  seed: int) -> None:
    async def main() -> None:
        store = DurableStore(DurabilityConfig(tmp_path), clock_ms=lambda: 1_000)
        store.recover()
        for i in range(10):
            _applied, lsn = store.execute(Put(f"/k{i}", "v"))
            await store.wait_durable(lsn)
        await store.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    wal = tmp_path / "wal"
    assert mark_directories(tmp_path) == [wal]
    writer = SegmentWriter(wal)             # a record written, its fsync never returned
    writer.open(11)
    writer.write(encode_record(b'{"lsn":11,"ms":1000,"op":"put"}'))
    assert read_mark(wal) == Mark(segment_name(11), 0)
    assert unsynced_bytes(wal) > 0
    assert crash_store_files(tmp_path, random.Random(seed))
    store = DurableStore(DurabilityConfig(tmp_path), clock_ms=lambda: 1_000)
    report = store.recover()
    assert report.applied_lsn == 10
    assert all(store.state.get(f"/k{i}") is not None for i in range(10))
    asyncio.run(store.close())


def test_recovery_fsyncs_the_segment_it_replayed(tmp_path: Path) -> None:
    """A kill -9 leaves a batch whose fsync never returned in the page cache; recovery replays it,
    so it must make it durable before the mark moves to the next segment."""
    directory, _ = _ledger_journal(tmp_path, batches=1)
    recovered = recover(directory)      # the in-flight "Z" bytes are a torn tail: cut and fsynced
    recovered.journal.start_segment(recovered.book.next_ledger_id)
    mark = read_mark(directory)
    assert mark is not None and mark.length == SEGMENT_HEADER_SIZE
    assert unsynced_bytes(directory) == 0
    recovered.journal.close()


def _rewind_mark(directory: Path, mark: Mark) -> None:
    """The mark as a crash left it: the newest writes reached the disk whole, their fsync never returned."""
    (directory / MARK_FILE).write_bytes(encode_mark(mark))


@pytest.mark.parametrize("seed", range(6))
def test_a_crash_as_the_metadata_store_opens_its_next_segment_keeps_what_recovery_replayed(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash loop (targets/embedded.py): a power loss that kept two unsynced records whole, then
    one more as recovery creates its next segment. Recovery fsynced the replayed segment; it must
    record that in the mark, or the second loss tears it and it becomes a sealed segment with a torn
    record the store refuses to start on (seen under load in test_broker_store_restart[-crash])."""
    async def write(store: DurableStore, keys: range) -> None:
        for i in keys:
            _applied, lsn = store.execute(Put(f"/k{i}", "v"))
            await store.wait_durable(lsn)

    store = DurableStore(DurabilityConfig(tmp_path), clock_ms=lambda: 1_000)
    store.recover()
    asyncio.run(asyncio.wait_for(write(store, range(10)), 60))
    wal = tmp_path / "wal"
    at_ten = read_mark(wal)
    asyncio.run(asyncio.wait_for(write(store, range(10, 12)), 60))
    asyncio.run(store.close())
    assert at_ten is not None
    _rewind_mark(wal, at_ten)

    def killed_in_open(self: SegmentWriter, first_lsn: int) -> None:
        (self.directory / segment_name(first_lsn)).write_bytes(b"")   # created; the kill came first
        raise RuntimeError("killed as it opened its next segment")

    with monkeypatch.context() as patched:
        patched.setattr(SegmentWriter, "open", killed_in_open)
        crashing = DurableStore(DurabilityConfig(tmp_path), clock_ms=lambda: 1_000)
        with pytest.raises(RuntimeError, match="killed"):
            crashing.recover()
        crashing.release()
    crash_store_files(tmp_path, random.Random(seed))
    store = DurableStore(DurabilityConfig(tmp_path), clock_ms=lambda: 1_000)
    assert store.recover().applied_lsn == 12
    asyncio.run(store.close())


def test_a_crash_as_the_ledger_journal_starts_its_next_segment_keeps_what_recovery_replayed(tmp_path: Path) -> None:
    """The ledger store's side of the same: recovery replays a batch whose fsync never returned and
    fsyncs it; a power loss while its first write creates the next segment must not take it."""
    directory, _ = _ledger_journal(tmp_path, batches=2, in_flight=False)
    segment_name_, size = list_segments(directory)[-1][1].name, list_segments(directory)[-1][1].stat().st_size
    recovered = recover(directory)
    recovered.journal.write_batch([ledger_record(EntryRecord(1, 1, b"third"))], recovered.book.next_ledger_id)
    recovered.journal.close()
    _rewind_mark(directory, Mark(segment_name_, size))      # the third batch's fsync never returned
    recovered = recover(directory)                           # replays it and fsyncs it
    assert recovered.stats.batches == 3
    new = directory / f"segment-{list_segments(directory)[-1][0] + 1:012d}.log"
    new.write_bytes(b"TBLEDGJ1")                             # its first write's new segment, then the crash
    recovered.journal.close()
    crash_store_files(tmp_path, random.Random(1))
    recovered = recover(directory)
    assert recovered.stats.batches == 3
    recovered.journal.close()
