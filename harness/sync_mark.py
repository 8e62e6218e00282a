"""The fsync mark: where a store's log is known durable, for the power-loss crash fault.

Why. A kill -9 keeps everything a process wrote in the page cache, so it never tears a
log; a power loss (or a kernel crash) loses what was written but not yet fsynced, and
may keep part of it. To model that honestly the fault must know which bytes were
fsynced: it may destroy those bytes only, never what a store acknowledged. So each of
our stores records, after every fsync of its append-only log returns and before it
acknowledges anything that fsync covered, the file it appends to and the length that
fsync made durable. The record lives in the file `SYNCED` beside the log, written in
place with one pwrite and never fsynced: it is instrumentation read after the process
died (the page cache outlives the process), not data the store recovers from.

Format: one line `<file name> <durable length>`, padded with spaces to `MARK_BYTES`.
Files of the log named after the marked one (by name order, which is creation order for
both stores) were created after the last fsync the mark records: none of their bytes
are durable. This module only reads and writes the mark (no project imports), so the
stores (embedded) and the fault (targets) share one definition.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MARK_FILE = "SYNCED"
MARK_BYTES = 128


@dataclass(frozen=True)
class Mark:
    """Everything in `file_name` up to `length` bytes, and every file before it, is durable."""

    file_name: str
    length: int


def encode_mark(mark: Mark) -> bytes:
    line = f"{mark.file_name} {mark.length}\n".encode()
    if len(line) > MARK_BYTES or " " in mark.file_name or mark.length < 0:
        raise ValueError(f"cannot record {mark}")
    return line.ljust(MARK_BYTES, b" ")


def decode_mark(data: bytes) -> Mark | None:
    """The mark in `data`, or None when there is none (a store that never fsynced its log)."""
    parts = data.split(b"\n", 1)[0].split()
    if len(parts) != 2 or not parts[1].isdigit():
        return None
    return Mark(parts[0].decode(), int(parts[1]))


def read_mark(directory: Path) -> Mark | None:
    try:
        return decode_mark((directory / MARK_FILE).read_bytes())
    except FileNotFoundError:
        return None


class SyncMarkWriter:
    """The store side: `record` after an fsync returned and before what it covered is acknowledged."""

    def __init__(self, directory: Path) -> None:
        self._fd: int | None = os.open(directory / MARK_FILE, os.O_RDWR | os.O_CREAT, 0o644)

    def record(self, file_name: str, length: int) -> None:
        if self._fd is not None:
            os.pwrite(self._fd, encode_mark(Mark(file_name, length)), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
