"""The store on real files (no sockets): durability, recovery, torn tails, corruption, reclamation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from embedded.ledger.journal import list_segments
from embedded.ledger.journal_format import BATCH_HEADER_SIZE
from embedded.ledger.model import (
    MAX_ENTRY_BYTES,
    Fenced,
    LedgerKind,
    LedgerMetadata,
    LedgerState,
    NoSuchLedger,
)
from embedded.ledger.records import JournalCorrupt
from embedded.ledger.store import LedgerStore

T = TypeVar("T")
DATA = LedgerMetadata(LedgerKind.DATA, "topic")
TXN = LedgerMetadata(LedgerKind.TXN_LOG, "tc-0")


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(fn(), 60))


async def _open(path: Path, **kwargs: int) -> LedgerStore:
    return await LedgerStore.open(path, **kwargs)  # type: ignore[arg-type]


def _journal_files(data_dir: Path) -> list[Path]:
    return [p for _, p in list_segments(data_dir / "journal")]


def test_everything_survives_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        store = await _open(tmp_path)
        a = await store.create(DATA)
        b = await store.create(TXN)
        c = await store.create(DATA)
        ids = await asyncio.gather(*[store.append(a, b"a%d" % i) for i in range(100)])
        assert ids == list(range(100))
        await store.append(b, b"tx")
        assert await store.fence(b) == 0
        assert await store.close_ledger(a) == 99
        await store.delete(c)
        assert store.stats.entries_by_kind.get(kind="data") == 100
        assert store.stats.entries_by_kind.get(kind="txn-log") == 1
        await store.shutdown()

        store = await _open(tmp_path)
        assert [(i.ledger_id, i.state, i.last_entry_id) for i in store.list_ledgers()] == [
            (a, LedgerState.CLOSED, 99), (b, LedgerState.FENCED, 0)]
        assert await store.read(a, 98, 99) == [b"a98", b"a99"]
        with pytest.raises(Fenced):
            await store.append(b, b"late")
        with pytest.raises(NoSuchLedger):
            store.info(c)
        assert await store.create(DATA) == c + 1      # the deleted last id is not reused
        assert store.list_ledgers(LedgerKind.TXN_LOG)[0].ledger_id == b
        await store.shutdown()

    run(main)


def test_reads_come_from_disk_when_not_cached_and_are_split_by_size(tmp_path: Path) -> None:
    async def main() -> None:
        store = await _open(tmp_path, cache_bytes=0)
        ledger = await store.create(DATA)
        payloads = [bytes([i]) * (1000 + i) for i in range(20)]
        for p in payloads:
            await store.append(ledger, p)
        assert await store.read(ledger, 0, 19) == payloads
        assert store.stats.cache_misses.get() == 20
        part = await store.read(ledger, 5, 19, max_bytes=3000)
        assert part == payloads[5:7]                              # a prefix that fits
        assert await store.read(ledger, 5, 5, max_bytes=1) == payloads[5:6]   # always one entry
        big = bytes(range(256)) * (MAX_ENTRY_BYTES // 256)
        big_id = await store.append(ledger, big)
        assert (await store.read(ledger, big_id, big_id))[0] == big
        await store.shutdown()

    run(main)


def test_unacknowledged_torn_tail_is_cut_and_later_writes_stay_readable(tmp_path: Path) -> None:
    async def main() -> None:
        store = await _open(tmp_path)
        ledger = await store.create(DATA)
        for i in range(10):
            await store.append(ledger, b"e%d" % i)
        await store.shutdown()
        newest = _journal_files(tmp_path)[-1]
        size = newest.stat().st_size
        with newest.open("r+b") as f:      # the last batch loses its end, then garbage follows
            f.truncate(size - 2)
            f.seek(0, 2)
            f.write(b"\xde\xad" * 50)

        store = await _open(tmp_path)
        assert store.recovery is not None and store.recovery.torn_bytes > 0
        assert store.info(ledger).last_entry_id == 8        # entry 9 was in the torn batch
        assert await store.append(ledger, b"again") == 9
        await store.shutdown()

        store = await _open(tmp_path)                        # no garbage was left mid-journal
        assert store.recovery is not None and store.recovery.torn_bytes == 0
        assert await store.read(ledger, 8, 9) == [b"e8", b"again"]
        await store.shutdown()

    run(main)


def test_a_crc_mismatch_mid_journal_refuses_to_start(tmp_path: Path) -> None:
    async def main() -> None:
        store = await _open(tmp_path)
        ledger = await store.create(DATA)
        for i in range(5):
            await store.append(ledger, b"payload-%d" % i)
        await store.shutdown()
        segment = next(p for p in _journal_files(tmp_path) if b"payload-2" in p.read_bytes())
        data = bytearray(segment.read_bytes())
        position = data.index(b"payload-2")
        data[position] ^= 0x20
        segment.write_bytes(bytes(data))
        with pytest.raises(JournalCorrupt, match="CRC mismatch"):
            await _open(tmp_path)

    run(main)


def test_a_second_store_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        store = await _open(tmp_path)
        with pytest.raises(RuntimeError, match="in use by another ledger store"):
            await _open(tmp_path)
        await store.shutdown()

    run(main)


def test_segments_of_deleted_ledgers_are_reclaimed_and_ids_stay_unique(tmp_path: Path) -> None:
    async def main() -> None:
        store = await _open(tmp_path, segment_bytes=4096)
        keep = await store.create(DATA)
        drop = [await store.create(TXN) for _ in range(3)]
        for round_ in range(40):
            for ledger in drop:
                await store.append(ledger, bytes(200))
            if round_ % 10 == 0:
                await store.append(keep, b"k%d" % round_)
        files_before = len(_journal_files(tmp_path))
        for ledger in drop:
            await store.delete(ledger)
        for _ in range(3):                      # rotate past the segments holding the deletes
            await store.append(keep, bytes(4096))
        for _ in range(500):                    # reclamation runs on the writer thread: bounded wait
            if store.stats.reclaimed_bytes.get() > 0:
                break
            await asyncio.sleep(0.01)
        assert store.stats.reclaimed_bytes.get() > 0
        assert len(_journal_files(tmp_path)) < files_before
        assert await store.read(keep, 0, 3) == [b"k0", b"k10", b"k20", b"k30"]
        await store.shutdown()

        store = await _open(tmp_path, segment_bytes=4096)
        assert [i.ledger_id for i in store.list_ledgers()] == [keep]
        assert await store.read(keep, 0, 3) == [b"k0", b"k10", b"k20", b"k30"]
        newer = await store.create(DATA)
        assert newer == drop[-1] + 1
        await store.delete(keep)
        await store.delete(newer)
        await store.shutdown()

        store = await _open(tmp_path, segment_bytes=4096)   # everything deleted: ids still grow
        assert store.list_ledgers() == []
        assert await store.create(DATA) == drop[-1] + 2
        await store.shutdown()

    run(main)


@pytest.mark.parametrize("lost", [0, 2], ids=["segment-with-the-creation", "segment-in-the-middle"])
def test_a_missing_segment_is_detected(tmp_path: Path, lost: int) -> None:
    async def main() -> None:
        store = await _open(tmp_path, segment_bytes=1024)
        ledger = await store.create(DATA)
        for _ in range(20):
            await store.append(ledger, bytes(300))
        await store.shutdown()
        files = _journal_files(tmp_path)
        assert len(files) > 3
        files[lost].unlink()
        with pytest.raises(JournalCorrupt, match="records are missing"):
            await _open(tmp_path, segment_bytes=1024)

    run(main)


def test_batch_header_size_matches_the_documented_layout() -> None:
    assert BATCH_HEADER_SIZE == 24
