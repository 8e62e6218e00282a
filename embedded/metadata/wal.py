"""Write-ahead log: record codec (sans-IO) and segment files (blocking I/O).

Theory of operation. A log record is `[length u32 BE][crc32 u32 BE][payload]`, where
the CRC covers the payload. The log is a sequence of segment files
`wal-<first lsn, 20 digits>.log`; records carry consecutive log sequence numbers
(lsn) inside their payload. A crash can only tear the tail of the newest segment,
because a segment is fsynced before the next one is created: `decode_records` stops
at the first record that is short or fails its CRC and reports where the valid
prefix ends, and recovery truncates the file there (those bytes were never
acknowledged). Segments wholly covered by a snapshot are deleted after the snapshot
is durable, which bounds recovery time.

`SegmentWriter` is used from one thread at a time (the store's WAL thread). After each
fsync returns (and before the store acknowledges what it covered) it records the segment
and its durable length in the fsync mark (`harness.sync_mark`), which the power-loss crash
fault reads to destroy only what was never fsynced. Opening a segment fsyncs it, so a
segment recovery appends to holds nothing that is only in the page cache.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from harness.sync_mark import SyncMarkWriter

HEADER = struct.Struct(">II")
MAX_RECORD = 64 * 1024 * 1024
_SEGMENT_RE = re.compile(r"^wal-(\d{20})\.log$")


class CorruptLog(Exception):
    """The log is damaged somewhere other than a torn tail; recovery cannot continue safely."""


def encode_record(payload: bytes) -> bytes:
    if len(payload) > MAX_RECORD:
        raise ValueError(f"log record of {len(payload)} bytes exceeds {MAX_RECORD}")
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True)
class Decoded:
    """Whole, CRC-valid records from the start of a buffer; `valid_bytes` is where they end."""

    payloads: list[bytes]
    valid_bytes: int

    def torn(self, total: int) -> bool:
        return self.valid_bytes < total


def decode_records(buf: bytes | memoryview) -> Decoded:
    view = memoryview(buf)
    payloads: list[bytes] = []
    pos, end = 0, len(view)
    while end - pos >= HEADER.size:
        length, crc = HEADER.unpack_from(view, pos)
        if length == 0 or length > MAX_RECORD or end - pos - HEADER.size < length:
            break
        payload = bytes(view[pos + HEADER.size:pos + HEADER.size + length])
        if zlib.crc32(payload) != crc:
            break
        payloads.append(payload)
        pos += HEADER.size + length
    return Decoded(payloads, pos)


def segment_name(first_lsn: int) -> str:
    return f"wal-{first_lsn:020d}.log"


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """Segments as (first lsn, path), oldest first."""
    out = []
    if directory.is_dir():
        for entry in directory.iterdir():
            match = _SEGMENT_RE.match(entry.name)
            if match:
                out.append((int(match.group(1)), entry))
    return sorted(out)


def fsync_file(path: Path) -> None:
    """fsync a file or a directory by its path (a directory: its entries, after a create or rename)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    fsync_file(directory)


_sync = getattr(os, "fdatasync", os.fsync)


class SegmentWriter:
    """Appends to the newest segment; `sync()` makes everything written durable."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None
        self.first_lsn = 0
        self._name = ""
        self._size = 0
        self._mark: SyncMarkWriter | None = None

    def open(self, first_lsn: int) -> None:
        """Append to segment `first_lsn` (created if missing; an existing one must be empty)."""
        self.close()
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / segment_name(first_lsn)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.first_lsn = first_lsn
        _sync(self._fd)
        fsync_dir(self.directory)
        self._name, self._size = path.name, os.fstat(self._fd).st_size
        if self._mark is None:
            self._mark = SyncMarkWriter(self.directory)
        self._mark.record(self._name, self._size)

    def write(self, data: bytes) -> None:
        if self._fd is None:
            raise RuntimeError("write-ahead log is not open")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
            self._size += written

    def mark_synced(self, path: Path) -> None:
        """Record `path`'s whole length as durable, the caller having just fsynced it (recovery: the
        segment it replayed, before the next one exists). Without this the mark stays where the last
        crash left it, and a power loss while the next segment is created would tear bytes recovery
        made durable, leaving a torn record in a sealed segment (targets/power_loss.py)."""
        if self._mark is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._mark = SyncMarkWriter(self.directory)
        self._mark.record(path.name, path.stat().st_size)

    def sync(self) -> None:
        if self._fd is not None:
            _sync(self._fd)
            if self._mark is not None:
                self._mark.record(self._name, self._size)

    def rotate(self, first_lsn: int) -> None:
        """Seal the current segment (fsync) and start `first_lsn`."""
        self.sync()
        self.open(first_lsn)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._mark is not None:
            self._mark.close()
            self._mark = None



def truncate_file(path: Path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)
