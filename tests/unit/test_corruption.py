"""Disk corruption (targets/corruption.py): which files the `corrupt` fault may damage, and that
both stores' recovery refuses every bit it flips there. Real files and the stores' real recovery
code, no processes, no sockets."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from embedded.ledger.model import LedgerKind, LedgerMetadata
from embedded.ledger.records import CreateRecord, EntryRecord, JournalCorrupt
from embedded.ledger.records import encode_record as ledger_record
from embedded.ledger.recovery import recover
from embedded.metadata.durable import DurabilityConfig, DurableStore
from embedded.metadata.snapshot import CorruptSnapshot
from embedded.metadata.state import Put
from embedded.metadata.wal import CorruptLog
from harness.target import DamagedFile, NothingToDamage
from targets.corruption import (
    Damage,
    candidates,
    flip_bit,
    newest_snapshots,
    plan_damage,
    sealed_log_files,
)
from targets.embedded import EmbeddedCluster, EmbeddedSpec


def _ledger_journal(tmp_path: Path, segments: int) -> Path:
    """A ledger journal of `segments` segments (each start continues in a new one), two batches each."""
    directory = tmp_path / "ledger" / "journal"
    meta = LedgerMetadata(LedgerKind.DATA, "topic")
    for n in range(segments):
        recovered = recover(directory)
        journal = recovered.journal
        ledger_id = n + 1
        journal.write_batch([ledger_record(CreateRecord(ledger_id, meta))], ledger_id + 1)
        journal.write_batch([ledger_record(EntryRecord(ledger_id, 0, b"x" * 200))], ledger_id + 1)
        journal.close()
    return directory


def _metadata_store(tmp_path: Path, restarts: int, snapshot: bool) -> Path:
    """A metadata store's data directory; each restart begins a new log file; `snapshot` takes one first."""
    data_dir = tmp_path / "metadata"

    async def session(first: int) -> None:
        store = DurableStore(DurabilityConfig(data_dir), clock_ms=lambda: 1_000)
        store.recover()
        for i in range(first, first + 5):
            _applied, lsn = store.execute(Put(f"/k{i}", "v" * 40))
            await store.wait_durable(lsn)
        if snapshot and first == 0:
            await store.snapshot_now()
        await store.close()

    for n in range(restarts + 1):
        asyncio.run(asyncio.wait_for(session(n * 5), 60))
    return data_dir


def test_the_newest_log_file_is_never_a_candidate(tmp_path: Path) -> None:
    _ledger_journal(tmp_path / "one", segments=1)
    assert sealed_log_files(tmp_path / "one") == []
    assert candidates(tmp_path / "one", DamagedFile.SNAPSHOT) == []
    directory = _ledger_journal(tmp_path / "three", segments=3)
    segments = sorted(p for p in directory.iterdir() if p.name.startswith("segment-"))
    assert len(segments) == 3 and sealed_log_files(tmp_path / "three") == segments[:-1]


def test_a_plan_flips_one_bit_of_a_non_empty_file() -> None:
    files = [(Path("a"), 0), (Path("b"), 100)]
    for seed in range(20):
        damage = plan_damage(files, random.Random(seed))
        assert damage is not None and damage.path == Path("b") and 0 <= damage.offset < 100 and 0 <= damage.bit < 8
    assert plan_damage([(Path("a"), 0)], random.Random(1)) is None
    assert plan_damage(files, random.Random(5)) == plan_damage(files, random.Random(5))


def test_flipping_twice_restores_the_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\x00\xff" * 8)
    damage = Damage(path, 3, 6)
    flip_bit(damage)
    assert path.read_bytes()[3] == 0xff ^ 0x40
    assert "bit 6 of byte 3" in damage.describe()
    flip_bit(damage)
    assert path.read_bytes() == b"\x00\xff" * 8


@pytest.mark.parametrize("seed", range(16))
def test_the_ledger_store_refuses_a_flipped_bit_in_a_sealed_segment(tmp_path: Path, seed: int) -> None:
    directory = _ledger_journal(tmp_path, segments=3)
    files = [(p, p.stat().st_size) for p in candidates(tmp_path, DamagedFile.LOG)]
    damage = plan_damage(files, random.Random(seed))
    assert damage is not None
    flip_bit(damage)
    with pytest.raises(JournalCorrupt):
        recover(directory)
    flip_bit(damage)                       # the heal: the file restored from a copy
    recovered = recover(directory)
    assert recovered.stats.batches >= 6
    recovered.journal.close()


@pytest.mark.parametrize(("which", "seed"), [(DamagedFile.SNAPSHOT, s) for s in range(10)]
                         + [(DamagedFile.LOG, s) for s in range(10)])
def test_the_metadata_store_refuses_a_flipped_bit(tmp_path: Path, which: DamagedFile, seed: int) -> None:
    data_dir = _metadata_store(tmp_path, restarts=2, snapshot=which is DamagedFile.SNAPSHOT)
    if which is DamagedFile.SNAPSHOT:
        assert len(newest_snapshots(data_dir)) == 1
    files = [(p, p.stat().st_size) for p in candidates(data_dir, which)]
    damage = plan_damage(files, random.Random(seed))
    assert damage is not None
    flip_bit(damage)
    store = DurableStore(DurabilityConfig(data_dir), clock_ms=lambda: 1_000)
    with pytest.raises((CorruptLog, CorruptSnapshot)):
        store.recover()
    store.release()
    flip_bit(damage)
    store = DurableStore(DurabilityConfig(data_dir), clock_ms=lambda: 1_000)
    report = store.recover()
    assert report.applied_lsn == 15
    asyncio.run(store.close())


def test_a_store_without_a_file_to_damage_is_left_running(tmp_path: Path) -> None:
    """The cluster refuses before it kills anything: ZooKeeper's files are not ours, and a ledger
    journal of one segment has no sealed one (no process is started; none would be killed)."""
    cluster = EmbeddedCluster(EmbeddedSpec(directory=tmp_path))
    zookeeper = tmp_path / "data" / "metadata" / "version-2"
    zookeeper.mkdir(parents=True)
    (zookeeper / "snapshot.0").write_bytes(b"zk")
    with pytest.raises(NothingToDamage, match="ZooKeeper's files are its own"):
        cluster.corrupt("metadata", 1, "snapshot")
    _ledger_journal(tmp_path / "data", segments=1)
    with pytest.raises(NothingToDamage, match="only its newest log file"):
        cluster.corrupt("ledger", 1, "log")
    with pytest.raises(NothingToDamage, match="no snapshot"):
        cluster.corrupt("ledger", 1, "snapshot")


def test_a_snapshot_cut_short_at_a_line_is_refused_as_corrupt(tmp_path: Path) -> None:
    """A snapshot whose last lines are gone, cut right after a newline, ends in a body row (a JSON
    list): it was read as the trailer and raised AttributeError, which the store does not take
    for a damaged snapshot (it crashed with a traceback instead of naming the file)."""
    data_dir = _metadata_store(tmp_path, restarts=0, snapshot=True)
    (snapshot,) = newest_snapshots(data_dir)
    lines = snapshot.read_bytes().split(b"\n")
    snapshot.write_bytes(b"\n".join(lines[:-3]) + b"\n")    # the trailer and one row gone
    store = DurableStore(DurabilityConfig(data_dir), clock_ms=lambda: 1_000)
    with pytest.raises(CorruptSnapshot, match="no trailer"):
        store.recover()
    store.release()
