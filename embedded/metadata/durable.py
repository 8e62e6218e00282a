"""The durable store: state machine + write-ahead log with group commit + snapshots.

Theory of operation. `execute(command)` runs on the event loop: it applies the
command to the in-memory `MetadataState` (a definite error changes nothing and is
raised at once) and, when the state changed, appends `{lsn, ms, command}` to the
pending log buffer. One flusher task hands the whole buffer to a single WAL thread
that writes it and fsyncs once, then marks every lsn in it durable: mutations that
arrive while an fsync is running share the next one (group commit). Callers await
`wait_durable(lsn)` before answering, so nothing is acknowledged before its fsync.
Reads await the lsn applied when they ran, so no reply (value, CAS conflict, watch
event) ever exposes a state that a crash could still take back. Notifications are
released through `on_durable` in lsn order once their record is durable.

Snapshots: when enough log has accumulated, the state is copied (records are
immutable, so the copy is shallow and fast), the log is rotated at that lsn by a
marker in the pending buffer, the copy is written to a snapshot file by another
thread, and segments wholly covered by the snapshot are deleted. Recovery loads the
newest snapshot, replays the newer log records through the same state machine
(commands are deterministic given their logged `ms`), truncates a torn tail, fsyncs
the newest segment (a kill -9 leaves its unsynced records in the page cache, and they
were just replayed) and gives every session a fresh deadline. An fsync failure is fatal: the store stops
accepting and acknowledging (`StoreFailed`), because the page cache may no longer
match the disk.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedded import planted_bugs
from embedded.metadata.model import MetadataError, Notification
from embedded.metadata.snapshot import (
    CorruptSnapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from embedded.metadata.state import (
    Applied,
    Command,
    DeleteRange,
    MetadataState,
    command_from_wire,
    command_to_wire,
)
from embedded.metadata.wal import (
    CorruptLog,
    SegmentWriter,
    decode_records,
    encode_record,
    fsync_dir,
    fsync_file,
    list_segments,
    truncate_file,
)

log = logging.getLogger(__name__)


def wall_ms() -> int:
    return int(time.time() * 1000)


class StoreFailed(Exception):
    """The log could not be written; nothing more is accepted or acknowledged."""


class DataDirLocked(Exception):
    """Another process holds the data directory."""


@dataclass(frozen=True)
class DurabilityConfig:
    data_dir: Path
    snapshot_every_records: int = 50_000
    snapshot_every_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class RecoveryReport:
    snapshot_lsn: int
    snapshot_records: int
    replayed: int
    truncated_bytes: int
    seconds: float
    applied_lsn: int


@dataclass(frozen=True)
class FlushStats:
    """One group commit: how many log records shared one fsync."""

    records: int
    bytes: int
    fsyncs: int
    seconds: float


@dataclass
class _Rotate:
    first_lsn: int
    done: asyncio.Future[None] = field(repr=False)


DurableCallback = Callable[[list[tuple[int, tuple[Notification, ...]]]], None]
#: A log record's changes as recovery replayed them: (lsn, logged ms, notifications, the
#: `[min, max)` of a range delete).
ReplayedChanges = tuple[int, int, tuple[Notification, ...], tuple[str, str] | None]
#: How many replayed records' changes recovery keeps for the Oxia frontend, so a
#: notification stream resumed across a restart gets what it missed (Oxia keeps its
#: notifications in its database for a retention window).
REPLAYED_CHANGES_KEPT = 10_000


class DurableStore:
    def __init__(self, config: DurabilityConfig, *, clock_ms: Callable[[], int] = wall_ms,
                 on_durable: DurableCallback | None = None,
                 on_flush: Callable[[FlushStats], None] | None = None) -> None:
        self.config = config
        self.state = MetadataState()
        self.applied_lsn = 0
        self.durable_lsn = 0
        self._key_lsn: dict[str, int] = {}   # keys whose newest mutation is not durable yet -> its lsn
        self.fsyncs = 0
        self.wal_bytes = 0
        self.wal_records = 0
        self.snapshots = 0
        self.last_recovery: RecoveryReport | None = None
        self._clock = clock_ms
        self._on_durable = on_durable
        self._on_flush = on_flush
        self._wal_dir = config.data_dir / "wal"
        self._snap_dir = config.data_dir / "snapshots"
        self._writer = SegmentWriter(self._wal_dir)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metadata-wal")
        self._pending: list[bytes | _Rotate] = []
        self._undelivered: collections.deque[tuple[int, tuple[Notification, ...]]] = collections.deque()
        self._replayed: collections.deque[ReplayedChanges] = collections.deque(maxlen=REPLAYED_CHANGES_KEPT)
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self._flusher: asyncio.Task[None] | None = None
        self._snapshot_task: asyncio.Task[Path | None] | None = None
        self._since_snapshot_records = 0
        self._since_snapshot_bytes = 0
        self._failure: BaseException | None = None
        self._lock_fd: int | None = None
        self._closed = False

    # ---- recovery -----------------------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Load snapshot + log and open the log for appending. Blocking; call before serving."""
        started = time.perf_counter()
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_data_dir()
        snapshot = self._newest_snapshot()
        now = self._clock()
        lsn = 0
        snapshot_records = 0
        if snapshot is not None:
            self.state = MetadataState.from_image(snapshot.image, now)
            lsn = snapshot.lsn
            snapshot_records = len(snapshot.image.records)
        replayed, truncated = 0, 0
        segments = list_segments(self._wal_dir)
        for i, (_first, path) in enumerate(segments):
            is_last = i == len(segments) - 1
            if not is_last and segments[i + 1][0] <= lsn + 1:
                continue   # wholly covered by the snapshot
            data = path.read_bytes()
            decoded = decode_records(data)
            if decoded.torn(len(data)):
                if not is_last:
                    raise CorruptLog(f"{path}: damaged record at byte {decoded.valid_bytes} in a sealed segment; "
                                     f"the store cannot recover past it (restore {self.config.data_dir} from a copy)")
                truncated = len(data) - decoded.valid_bytes
                log.warning("%s: ignoring a torn tail of %d bytes (never acknowledged)", path, truncated)
                truncate_file(path, decoded.valid_bytes)
            for payload in decoded.payloads:
                entry = json.loads(payload)
                entry_lsn = int(entry["lsn"])
                if entry_lsn <= lsn:
                    continue
                if entry_lsn != lsn + 1:
                    raise CorruptLog(f"{path}: log jumps from lsn {lsn} to {entry_lsn}")
                try:
                    cmd = command_from_wire(entry)
                    applied = self.state.apply(cmd, int(entry["ms"]))
                except MetadataError as err:
                    raise CorruptLog(f"{path}: record {entry_lsn} does not replay: {err}") from None
                lsn = entry_lsn
                replayed += 1
                if applied.notifications:
                    self._replayed.append((lsn, int(entry["ms"]), applied.notifications,
                                           (cmd.min, cmd.max) if isinstance(cmd, DeleteRange) else None))
        if segments:
            # after a kill -9 its last records may be in the page cache only (their fsync never
            # returned) and were replayed: make them durable before anything builds on them
            fsync_file(segments[-1][1])
            self._writer.mark_synced(segments[-1][1])
        self.state.reset_session_deadlines(self._clock())
        self.applied_lsn = self.durable_lsn = lsn
        self._writer.open(lsn + 1)
        self._since_snapshot_records = replayed
        report = RecoveryReport(snapshot.lsn if snapshot else 0, snapshot_records, replayed, truncated,
                                time.perf_counter() - started, lsn)
        self.last_recovery = report
        return report

    def take_replayed_changes(self) -> list[ReplayedChanges]:
        """The changes of the last `REPLAYED_CHANGES_KEPT` log records recovery replayed (those
        since the snapshot), oldest first; handed out once."""
        out = list(self._replayed)
        self._replayed.clear()
        return out

    def _newest_snapshot(self) -> Any:
        for lsn, path in reversed(list_snapshots(self._snap_dir)):
            try:
                return read_snapshot(path)
            except (CorruptSnapshot, OSError, ValueError, KeyError, IndexError, TypeError) as err:
                raise CorruptSnapshot(f"snapshot {path} (lsn {lsn}) is unreadable: {err}; "
                                      f"restore {self.config.data_dir} from a copy") from None
        return None

    def release(self) -> None:
        """Give the data directory's lock up after a `recover` that raised (a process that goes on
        without this store, such as a test, may then open it again)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _lock_data_dir(self) -> None:
        fd = os.open(self.config.data_dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DataDirLocked(f"{self.config.data_dir} is in use by another metadata store process; "
                                f"stop it or give this one another data_dir") from None
        self._lock_fd = fd

    # ---- execution ----------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self._clock()

    def execute(self, cmd: Command) -> tuple[Applied[Any], int]:
        """Apply `cmd` now; returns the outcome and the lsn to await before answering."""
        if self._failure is not None:
            raise StoreFailed(f"the write-ahead log failed: {self._failure}")
        now = self._clock()
        applied = self.state.apply(cmd, now)
        if applied.mutated:
            self._log(cmd, now, applied.notifications)
        return applied, self.applied_lsn

    def _log(self, cmd: Command, now: int, notifications: tuple[Notification, ...]) -> None:
        self.applied_lsn += 1
        for n in notifications:
            self._key_lsn[n.key] = self.applied_lsn
        entry = {"lsn": self.applied_lsn, "ms": now, **command_to_wire(cmd)}
        record = encode_record(json.dumps(entry, separators=(",", ":")).encode())
        self._pending.append(record)
        if notifications:
            self._undelivered.append((self.applied_lsn, notifications))
        self._since_snapshot_records += 1
        self._since_snapshot_bytes += len(record)
        self._kick()
        if (self._since_snapshot_records >= self.config.snapshot_every_records
                or self._since_snapshot_bytes >= self.config.snapshot_every_bytes):
            self.request_snapshot()

    def key_lsn(self, key: str) -> int:
        """The lsn of `key`'s newest mutation that is not durable yet; 0 when its state is durable.

        A read of one key only has to wait for that: the state it returns is durable once
        the key's own last write is, whatever else is still in the group commit.
        """
        return self._key_lsn.get(key, 0)

    async def wait_durable(self, lsn: int) -> None:
        if lsn <= self.durable_lsn or planted_bugs.on(planted_bugs.METADATA_ACK_BEFORE_WAL):
            return   # (with the planted bug, DELIBERATELY, before the WAL record is even written)
        if self._failure is not None:
            raise StoreFailed(f"the write-ahead log failed: {self._failure}")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((lsn, fut))
        await fut

    # ---- group commit -------------------------------------------------------------------------

    def _kick(self) -> None:
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending and self._failure is None:
                batch, self._pending = self._pending, []
                upto = self.applied_lsn
                try:
                    stats = await loop.run_in_executor(self._executor, self._write_batch, batch)
                except OSError as err:
                    self._fail(err)
                    return
                self.durable_lsn = upto
                self.fsyncs += stats.fsyncs
                self.wal_bytes += stats.bytes
                self.wal_records += stats.records
                for item in batch:
                    if isinstance(item, _Rotate) and not item.done.done():
                        item.done.set_result(None)
                if self._on_flush is not None:
                    self._on_flush(stats)
                self._release()
        finally:
            self._flusher = None

    def _write_batch(self, batch: list[bytes | _Rotate]) -> FlushStats:
        """WAL thread: write the batch and fsync once (plus once per rotation)."""
        started = time.perf_counter()
        chunks: list[bytes] = []
        records = nbytes = fsyncs = 0
        dirty = False
        for item in batch:
            if isinstance(item, _Rotate):
                if chunks:
                    data = b"".join(chunks)
                    self._writer.write(data)
                    nbytes += len(data)
                    chunks = []
                self._writer.rotate(item.first_lsn)
                fsyncs += 1
                dirty = False
            else:
                chunks.append(item)
                records += 1
                dirty = True
        if chunks:
            data = b"".join(chunks)
            self._writer.write(data)
            nbytes += len(data)
        if dirty:
            self._writer.sync()
            fsyncs += 1
        return FlushStats(records, nbytes, fsyncs, time.perf_counter() - started)

    def _release(self) -> None:
        if self._key_lsn:
            durable = self.durable_lsn
            self._key_lsn = {k: v for k, v in self._key_lsn.items() if v > durable}
        ready: list[tuple[int, tuple[Notification, ...]]] = []
        while self._undelivered and self._undelivered[0][0] <= self.durable_lsn:
            ready.append(self._undelivered.popleft())
        if ready and self._on_durable is not None:
            try:
                self._on_durable(ready)
            except Exception:   # a delivery bug must not stall acknowledgements
                log.exception("delivering notifications failed")
        while self._waiters and self._waiters[0][0] <= self.durable_lsn:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def _fail(self, err: BaseException) -> None:
        log.critical("write-ahead log failed, refusing all further work: %s", err)
        self._failure = err
        exc = StoreFailed(f"the write-ahead log failed: {err}")
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(exc)
        for item in self._pending:
            if isinstance(item, _Rotate) and not item.done.done():
                item.done.set_exception(exc)
        self._pending.clear()

    @property
    def failed(self) -> bool:
        return self._failure is not None

    @property
    def snapshot_running(self) -> bool:
        return self._snapshot_task is not None and not self._snapshot_task.done()

    # ---- snapshots ----------------------------------------------------------------------------

    def request_snapshot(self) -> None:
        if self._closed:
            return
        if self._snapshot_task is None or self._snapshot_task.done():
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot())

    async def snapshot_now(self) -> Path | None:
        """Take a snapshot of at least the state at the call and return its path. One runs at a time:
        a running one is waited for (it began before the call), and one it asked for as it ended
        (being behind) is joined, not run beside: two at one lsn would write one temporary file."""
        if self._snapshot_task is not None and not self._snapshot_task.done():
            await self._snapshot_task
        if self._snapshot_task is None or self._snapshot_task.done():
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot())
        return await self._snapshot_task

    async def _snapshot(self) -> Path | None:
        lsn = self.applied_lsn
        image = self.state.export()
        self._since_snapshot_records = 0
        self._since_snapshot_bytes = 0
        rotated: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append(_Rotate(lsn + 1, rotated))
        self._kick()
        started = time.perf_counter()
        try:
            path = await asyncio.to_thread(write_snapshot, self._snap_dir, lsn, image)
            await rotated
            await asyncio.to_thread(self._remove_obsolete, lsn)
        except (OSError, StoreFailed) as err:
            log.error("snapshot at lsn %d failed (the log still has everything): %s", lsn, err)
            return None
        self.snapshots += 1
        log.info("snapshot at lsn %d: %d records in %.2fs", lsn, len(image.records), time.perf_counter() - started)
        if (self._since_snapshot_records >= self.config.snapshot_every_records
                or self._since_snapshot_bytes >= self.config.snapshot_every_bytes):
            asyncio.get_running_loop().call_soon(self.request_snapshot)   # fell behind while writing
        return path

    def _remove_obsolete(self, lsn: int) -> None:
        for first, path in list_segments(self._wal_dir):
            if first <= lsn:
                path.unlink(missing_ok=True)
        for snap_lsn, path in list_snapshots(self._snap_dir):
            if snap_lsn < lsn:
                path.unlink(missing_ok=True)
        for tmp in self._snap_dir.glob("*.tmp"):
            if tmp.name != f"snapshot-{lsn:020d}.jsonl.tmp":
                tmp.unlink(missing_ok=True)
        fsync_dir(self._wal_dir)
        fsync_dir(self._snap_dir)

    # ---- shutdown -----------------------------------------------------------------------------

    async def close(self) -> None:
        self._closed = True
        if self._snapshot_task is not None:
            with contextlib.suppress(Exception):
                await self._snapshot_task
        for _ in range(1000):   # bounded: each round flushes what was pending
            if self._flusher is None:
                break
            with contextlib.suppress(Exception):
                await self._flusher
        await asyncio.get_running_loop().run_in_executor(self._executor, self._writer.close)
        self._executor.shutdown(wait=True)
        self.release()
