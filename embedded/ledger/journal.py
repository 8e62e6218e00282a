"""The journal's files: append a batch with one write and one fsync, read entries back by pread.

Theory of operation. Only one thread writes (the group committer's writer thread):
`write_batch` appends one batch to the active segment and fdatasyncs it; when the
active segment has reached `segment_bytes` it first opens a new one (header, fsync,
directory fsync), so a segment is complete before the next exists. Any thread may
`read`: it preads from the segment's file descriptor without touching the file
position. Removing a segment (space reclamation) unlinks it at once but closes its
descriptor only when the last in-flight read releases it, so a read racing a
deletion gets a clean error instead of another file's bytes.

A segment is named `segment-<number>.log`. The layout inside is `journal_format`.
The data directory is locked (flock on `LOCK`) so two stores never share it.

After each fsync returns, and before the batch it covered is acknowledged, the journal
records the segment and its durable length in the fsync mark (`harness.sync_mark`): the
power-loss crash fault reads it to destroy only what was never fsynced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from embedded.ledger.journal_format import (
    BATCH_HEADER_SIZE,
    SegmentHeader,
    encode_batch_header,
    encode_segment_header,
)
from harness.sync_mark import SyncMarkWriter

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_SEGMENT_NAME = re.compile(r"^segment-(\d{12})\.log$")


def segment_path(directory: Path, segment_no: int) -> Path:
    return directory / f"segment-{segment_no:012d}.log"


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """The segment files in `directory`, oldest first."""
    found = []
    for path in directory.iterdir():
        match = _SEGMENT_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    for _ in range(len(data) + 1):  # each round writes at least one byte or raises
        if not view:
            return
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.EIO, f"pwrite wrote {written} bytes")
        view, offset = view[written:], offset + written


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    for _ in range(size):
        if got >= size:
            break
        more = os.pread(fd, size - got, offset + got)
        if not more:
            raise OSError(errno.EIO, f"short read: {got} of {size} bytes at offset {offset}")
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class DirectoryLock:
    """An exclusive flock on `<directory>/LOCK`, released by the kernel if the process dies."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "LOCK"
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RuntimeError(f"{self.path.parent} is in use by another ledger store (pid {holder}); "
                               "stop that process or give this one another data_dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class SegmentFile:
    """One open segment; reads pin it so removal never closes a descriptor in use."""

    def __init__(self, segment_no: int, path: Path, fd: int, size: int) -> None:
        self.segment_no = segment_no
        self.path = path
        self.fd = fd
        self.size = size
        self._lock = threading.Lock()
        self._pins = 0
        self._retired = False

    @contextlib.contextmanager
    def pinned(self) -> Iterator[int]:
        with self._lock:
            if self._retired:
                raise FileNotFoundError(f"segment {self.segment_no} was reclaimed")
            self._pins += 1
        try:
            yield self.fd
        finally:
            with self._lock:
                self._pins -= 1
                close = self._retired and self._pins == 0
            if close:
                os.close(self.fd)

    def retire(self) -> None:
        with self._lock:
            self._retired = True
            close = self._pins == 0
        if close:
            os.close(self.fd)


@dataclass(frozen=True)
class BatchWritten:
    """Where a batch landed and what it cost."""

    segment: int
    body_offset: int
    seq: int
    bytes_written: int
    syncs: int
    new_segment: bool


class Journal:
    """The segment files of one data directory; see the module docstring for threading."""

    def __init__(self, directory: Path, segments: dict[int, SegmentFile], next_seq: int,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._segments = dict(segments)
        self.next_seq = next_seq
        self.active: SegmentFile | None = None
        self._mark = SyncMarkWriter(directory)

    def mark_synced(self, segment: SegmentFile) -> None:
        """Record `segment`'s length as durable, the caller having just fsynced it (recovery), so the
        power-loss crash never tears what recovery replayed and made durable."""
        self._mark.record(segment.path.name, segment.size)

    @staticmethod
    def open_segment(segment_no: int, path: Path, size: int) -> SegmentFile:
        return SegmentFile(segment_no, path, os.open(path, os.O_RDWR), size)

    # ---- writer thread -------------------------------------------------------------------------

    def start_segment(self, next_ledger_id: int) -> tuple[SegmentFile, int]:
        """Open a new active segment; returns it and the number of fsyncs it took."""
        segment_no = max(self._segments, default=0) + 1
        path = segment_path(self.directory, segment_no)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        header = encode_segment_header(SegmentHeader(segment_no, next_ledger_id))
        try:
            _pwrite_all(fd, header, 0)
            os.fdatasync(fd)
            fsync_directory(self.directory)
        except BaseException:
            os.close(fd)
            raise
        segment = SegmentFile(segment_no, path, fd, len(header))
        self._segments[segment_no] = segment
        self.active = segment
        self._mark.record(path.name, segment.size)
        return segment, 2

    def write_batch(self, records: Sequence[bytes], next_ledger_id: int) -> BatchWritten:
        """Append one batch and make it durable. `next_ledger_id` goes into a new segment's header."""
        syncs = 0
        new_segment = self.active is None or self.active.size >= self.segment_bytes
        if new_segment:
            _, syncs = self.start_segment(next_ledger_id)
        segment = self.active
        assert segment is not None
        body = b"".join(records)
        data = encode_batch_header(self.next_seq, body) + body
        offset = segment.size
        _pwrite_all(segment.fd, data, offset)
        os.fdatasync(segment.fd)
        segment.size += len(data)
        self._mark.record(segment.path.name, segment.size)
        written = BatchWritten(segment.segment_no, offset + BATCH_HEADER_SIZE, self.next_seq,
                               len(data), syncs + 1, new_segment)
        self.next_seq += 1
        return written

    def remove(self, segment_nos: Sequence[int]) -> int:
        """Unlink reclaimed segments in the given (safe) order; returns the bytes freed."""
        freed = 0
        for segment_no in segment_nos:
            segment = self._segments.pop(segment_no, None)
            if segment is None or segment is self.active:
                continue
            segment.path.unlink(missing_ok=True)
            fsync_directory(self.directory)   # the order of unlinks must survive a crash
            segment.retire()
            freed += segment.size
        return freed

    # ---- any thread ----------------------------------------------------------------------------

    def read(self, segment_no: int, offset: int, size: int) -> bytes:
        segment = self._segments.get(segment_no)
        if segment is None:
            raise FileNotFoundError(f"segment {segment_no} was reclaimed")
        with segment.pinned() as fd:
            return _pread_all(fd, size, offset)

    def segment_count(self) -> int:
        return len(self._segments)

    def disk_bytes(self) -> int:
        return sum(s.size for s in list(self._segments.values()))

    def close(self) -> None:
        for segment in list(self._segments.values()):
            segment.retire()
        self._segments.clear()
        self.active = None
        self._mark.close()
