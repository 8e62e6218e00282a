"""The durable store: group commit, no answer before fsync, recovery, snapshots (files, no sockets)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from embedded.metadata.durable import DataDirLocked, DurabilityConfig, DurableStore, StoreFailed
from embedded.metadata.model import EventType, Notification
from embedded.metadata.snapshot import list_snapshots
from embedded.metadata.state import KEY_SPACE_END, Delete, Put, SessionOpen
from embedded.metadata.wal import CorruptLog, encode_record, list_segments
from tests.waiting import run

WAIT_S = 10.0


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_store(path: Path, clock: Clock | None = None, **kw: Any) -> DurableStore:
    store = DurableStore(DurabilityConfig(path, **kw), clock_ms=clock or Clock())
    store.recover()
    return store


class GatedSync:
    """Blocks the WAL thread inside fsync until released, to observe what waits for it."""

    def __init__(self, store: DurableStore) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self._real = store._writer.sync
        store._writer.sync = self  # type: ignore[method-assign]

    def __call__(self) -> None:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(WAIT_S), "test never released the gated fsync"
        self._real()


def test_nothing_is_acknowledged_or_notified_before_its_fsync(tmp_path: Path) -> None:
    async def main() -> None:
        delivered: list[tuple[int, tuple[Notification, ...]]] = []
        store = DurableStore(DurabilityConfig(tmp_path), clock_ms=Clock(), on_durable=delivered.extend)
        store.recover()
        gate = GatedSync(store)
        applied, lsn = store.execute(Put("/a", "1"))
        assert applied.result.key == "/a" and lsn == 1
        waiter = asyncio.ensure_future(store.wait_durable(lsn))
        reader = asyncio.ensure_future(store.wait_durable(store.applied_lsn))
        await asyncio.to_thread(gate.entered.wait, WAIT_S)
        await asyncio.sleep(0)
        assert not waiter.done() and not reader.done() and delivered == []
        assert store.durable_lsn == 0
        gate.release.set()
        await asyncio.wait_for(asyncio.gather(waiter, reader), WAIT_S)
        assert store.durable_lsn == 1
        assert delivered == [(1, (Notification(EventType.CREATED, "/a", 1),))]
        await store.close()

    run(main)


def test_writes_arriving_during_an_fsync_share_the_next_one(tmp_path: Path) -> None:
    async def main() -> None:
        store = open_store(tmp_path)
        gate = GatedSync(store)
        _, first = store.execute(Put("/first", "x"))
        await asyncio.to_thread(gate.entered.wait, WAIT_S)
        lsns = [store.execute(Put(f"/k/{i}", str(i)))[1] for i in range(50)]
        gate.release.set()
        await asyncio.wait_for(asyncio.gather(*(store.wait_durable(n) for n in [first, *lsns])), WAIT_S)
        assert store.fsyncs == 2 and gate.calls == 2
        assert store.wal_records == 51
        await store.close()

    run(main)


def test_recovery_replays_the_log_exactly(tmp_path: Path) -> None:
    async def main() -> tuple[Any, int]:
        store = open_store(tmp_path)
        for i in range(30):
            store.execute(Put(f"/k/{i % 7}", str(i), secondary_indexes=(("ix", str(i % 3)),)))
        store.execute(Delete("/k/3"))
        _, lsn = store.execute(Put("/seq", "s", partition_key="p", sequence_keys_deltas=(1,)))
        await store.wait_durable(lsn)
        image = store.state.export()
        await store.close()
        return image, lsn

    image, lsn = run(main)
    again = open_store(tmp_path)
    assert again.last_recovery is not None
    assert again.applied_lsn == lsn == again.last_recovery.replayed
    assert sorted(again.state.export().records, key=lambda r: r.key) == sorted(image.records, key=lambda r: r.key)
    assert again.state.list("0", "9", use_index="ix") == sorted(
        (r.key for r in image.records if r.secondary_indexes), key=lambda k: (
            dict(next(r for r in image.records if r.key == k).secondary_indexes)["ix"], k))
    run(again.close)


def test_a_torn_tail_is_ignored_and_truncated(tmp_path: Path) -> None:
    async def write(n: int) -> None:
        store = open_store(tmp_path)
        lsn = 0
        for i in range(n):
            _, lsn = store.execute(Put(f"/t/{i}", "v"))
        await store.wait_durable(lsn)
        await store.close()

    run(lambda: write(5))
    newest = list_segments(tmp_path / "wal")[-1][1]
    torn = encode_record(b'{"lsn":6,"ms":1,"op":"put","key":"/t/torn","value":"v"}')[:-3]
    with newest.open("ab") as f:
        f.write(torn)
    store = open_store(tmp_path)
    assert store.last_recovery is not None
    assert store.last_recovery.truncated_bytes == len(torn)
    assert store.state.list("/t/", "/t0") == [f"/t/{i}" for i in range(5)]
    run(store.close)
    run(lambda: write(1))   # appends continue after the truncated tail
    store = open_store(tmp_path)
    assert store.last_recovery is not None
    assert store.applied_lsn == 6 and store.last_recovery.truncated_bytes == 0
    run(store.close)


def test_damage_in_a_sealed_segment_is_an_error(tmp_path: Path) -> None:
    async def write() -> None:
        store = open_store(tmp_path)
        _, lsn = store.execute(Put("/a", "v"))
        await store.wait_durable(lsn)
        await store.close()

    run(write)
    run(write)   # a second segment (each start opens a new one)
    first = list_segments(tmp_path / "wal")[0][1]
    first.write_bytes(first.read_bytes()[:-2])
    with pytest.raises(CorruptLog, match="sealed segment"):
        open_store(tmp_path)


def test_a_snapshot_asked_for_while_one_ends_is_joined_not_run_beside_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A snapshot that finds itself behind asks for the next one as it ends; `snapshot_now` waiting
    for it then started a second one at the same lsn, and the two wrote one temporary file (make
    test failed once: `snapshot at lsn 45 failed ... No such file or directory`, an older snapshot
    left behind)."""
    async def main() -> int:
        store = open_store(tmp_path, snapshot_every_records=1000)
        lsn = 0
        for i in range(5):
            _, lsn = store.execute(Put(f"/s/{i:03d}", "v"))
            await store.wait_durable(lsn)
        store.request_snapshot()
        await asyncio.sleep(0)                          # it has started and counted from zero ...
        store._since_snapshot_records = 10_000          # ... and ends behind: it asks for the next
        await store.snapshot_now()
        await store.close()
        return lsn

    lsn = run(main)
    assert "failed" not in caplog.text
    assert [snap_lsn for snap_lsn, _ in list_snapshots(tmp_path / "snapshots")] == [lsn]
    assert not list((tmp_path / "snapshots").glob("*.tmp"))


def test_snapshots_truncate_the_log_and_recovery_uses_them(tmp_path: Path) -> None:
    async def main() -> Any:
        store = open_store(tmp_path, snapshot_every_records=10)
        lsn = 0
        for i in range(45):
            _, lsn = store.execute(Put(f"/s/{i:03d}", "v" * 10))
            await store.wait_durable(lsn)   # one at a time, so several snapshots happen
        await store.snapshot_now()
        image = store.state.export()
        await store.close()
        assert store.snapshots >= 2   # periodic ones (how many depends on timing) + the last
        return image

    image = run(main)
    snaps = list_snapshots(tmp_path / "snapshots")
    assert [lsn for lsn, _ in snaps] == [45]
    assert all(first > 45 for first, _ in list_segments(tmp_path / "wal"))
    store = open_store(tmp_path, snapshot_every_records=10)
    report = store.last_recovery
    assert report is not None
    assert (report.snapshot_lsn, report.snapshot_records, report.replayed) == (45, 45, 0)
    assert set(store.state.export().records) == set(image.records)
    run(store.close)


def test_sessions_survive_a_restart_with_a_fresh_deadline(tmp_path: Path) -> None:
    clock = Clock(1_000_000)

    async def main() -> int:
        store = open_store(tmp_path, clock)
        applied, _ = store.execute(SessionOpen(2000, "b0"))
        _, lsn = store.execute(Put("/owner/t", "b0", ephemeral=True, session_id=applied.result))
        await store.wait_durable(lsn)
        await store.close()
        return int(applied.result)

    sid = run(main)
    clock.now = 9_000_000   # long after the old deadline: the restart gives a new one
    store = open_store(tmp_path, clock)
    assert store.state.session_deadline(sid) == 9_002_000
    assert store.state.due_sessions(9_001_999) == []
    assert store.state.list("/owner/", "/owner0") == ["/owner/t"]
    run(store.close)


def test_a_second_process_cannot_open_the_same_directory(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    with pytest.raises(DataDirLocked, match="in use by another"):
        open_store(tmp_path)
    run(first.close)


def test_an_fsync_failure_stops_the_store(tmp_path: Path) -> None:
    async def main() -> None:
        store = open_store(tmp_path)

        def broken() -> None:
            raise OSError(5, "Input/output error")

        store._writer.sync = broken  # type: ignore[method-assign]
        _, lsn = store.execute(Put("/a", "1"))
        with pytest.raises(StoreFailed, match="Input/output error"):
            await asyncio.wait_for(store.wait_durable(lsn), WAIT_S)
        assert store.failed
        with pytest.raises(StoreFailed):
            store.execute(Put("/b", "1"))
        await store.close()

    run(main)


def test_recovery_of_an_empty_directory(tmp_path: Path) -> None:
    store = open_store(tmp_path / "fresh")
    assert store.applied_lsn == 0 and store.state.list("", KEY_SPACE_END) == []
    run(store.close)


def test_a_key_read_waits_only_for_that_keys_own_undurable_write(tmp_path: Path) -> None:
    """The read barrier of one key: committed state at once, its own pending write awaited."""
    async def main() -> None:
        store = open_store(tmp_path)
        store.execute(Put("/durable", "old"))
        await asyncio.wait_for(store.wait_durable(store.applied_lsn), WAIT_S)
        assert store.key_lsn("/durable") == 0
        gate = GatedSync(store)
        _, pending = store.execute(Put("/pending", "new"))
        await asyncio.to_thread(gate.entered.wait, WAIT_S)
        assert store.key_lsn("/durable") == 0 and store.key_lsn("/never") == 0
        assert store.key_lsn("/pending") == pending
        own = asyncio.ensure_future(store.wait_durable(store.key_lsn("/pending")))
        await asyncio.wait_for(store.wait_durable(store.key_lsn("/durable")), WAIT_S)   # answers at once
        await asyncio.sleep(0)
        assert not own.done()
        gate.release.set()
        await asyncio.wait_for(own, WAIT_S)
        assert store.key_lsn("/pending") == 0
        await store.close()

    run(main)
