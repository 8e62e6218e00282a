"""A power-loss crash of a store process (LazyFS-like): what it does to the store's log files.

Why. A kill -9 leaves everything the process wrote in the page cache: the log files are
whole, and recovery never meets a torn record. A power loss (or a kernel crash) loses
what was written but not yet fsynced, and may keep part of it: the newest record cut
mid-way, or the file's new length kept while its newest bytes never reached the disk
(read back as zeros). That is what the stores' recovery of torn tails and torn segment
headers is for, and only such a crash reaches it.

Sound by construction. Each of our stores records, after every fsync and before it
acknowledges what that fsync covered, the log file it appends to and its durable length
(`harness.sync_mark`). After the process is dead the crash reads that mark and damages
only bytes past it: in the marked file, those after the durable length; files of the log
named after it (created after the last recorded fsync) wholly. Nothing acknowledged lies
there. Of those unsynced bytes it keeps a random prefix (the seed decides) and either
cuts the rest off (`truncate`) or zeroes it (`zero`: the length reached the disk, the
data did not); at least one unsynced byte is always lost, so the write in flight is torn
or dropped. A service without a mark (a broker, ZooKeeper) loses nothing: its crash is a
plain kill -9.

`plan_tear` is pure (unit-tested without files or processes); `apply_tear` does the I/O.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from harness.sync_mark import MARK_FILE, Mark, read_mark

#: how deep under a service's data directory to look for fsync marks (a store keeps its log one
#: or two levels down: ledger `journal/`, metadata `wal/`)
MARK_SEARCH_DEPTH = 3


class TearMode(StrEnum):
    TRUNCATE = "truncate"   # the unsynced tail is gone: the file ends mid-record
    ZERO = "zero"           # the file kept its length but the unsynced bytes read back as zeros


@dataclass(frozen=True)
class Tear:
    """Keep `keep` bytes of `file_name` (of `size`); the rest is cut off or zeroed."""

    file_name: str
    size: int
    keep: int
    mode: TearMode

    def describe(self) -> str:
        return f"{self.file_name}: kept {self.keep} of {self.size} bytes, {self.size - self.keep} {self.mode.value}"


def log_skeleton(name: str) -> str:
    """A log file's name with its digits zeroed: the files of one log share it."""
    return re.sub(r"\d", "0", name)


def unsynced_files(mark: Mark, files: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(name, size, durable length) of each log file holding bytes the mark does not cover.

    Log files are those named like the marked one (same name with other digits); those named
    before it are durable whole (a store fsyncs a file before it creates the next)."""
    skeleton = log_skeleton(mark.file_name)
    out = []
    for name, size in sorted(files):
        if log_skeleton(name) != skeleton or name < mark.file_name:
            continue
        durable = min(mark.length, size) if name == mark.file_name else 0
        if size > durable:
            out.append((name, size, durable))
    return out


def is_new_log_file(mark: Mark | None, name: str) -> bool:
    """Whether `name`, just created beside the fsync mark `mark`, is a log file the mark does not
    cover yet (the store rolled to it, or opened it at its first write after a restart)."""
    return mark is not None and log_skeleton(name) == log_skeleton(mark.file_name) and name > mark.file_name


def plan_tear(mark: Mark | None, files: Sequence[tuple[str, int]], rng: random.Random) -> list[Tear]:
    """What a power loss does to one store's log: a tear of each file with unsynced bytes.

    Each keeps a random number of its unsynced bytes, fewer than all of them, so the newest
    write is lost or torn; the mode is drawn per file. No mark: nothing is known durable, so
    nothing is touched (the crash is then a plain kill -9)."""
    if mark is None:
        return []
    tears = []
    for name, size, durable in unsynced_files(mark, files):
        keep = durable + rng.randrange(size - durable)
        tears.append(Tear(name, size, keep, rng.choice((TearMode.TRUNCATE, TearMode.ZERO))))
    return tears


def log_files(directory: Path) -> list[tuple[str, int]]:
    return [(p.name, p.stat().st_size) for p in directory.iterdir() if p.is_file() and p.name != MARK_FILE]


def unsynced_bytes(directory: Path) -> int:
    """How many bytes of the store's log are written but not fsynced right now (0 without a mark)."""
    mark = read_mark(directory)
    if mark is None:
        return 0
    try:
        return sum(size - durable for _name, size, durable in unsynced_files(mark, log_files(directory)))
    except FileNotFoundError:   # a file removed while we looked: look again next time
        return 0


def apply_tear(directory: Path, tears: Sequence[Tear]) -> None:
    """Damage the files as planned, and fsync them (the damage is what the disk now holds)."""
    for tear in tears:
        fd = os.open(directory / tear.file_name, os.O_RDWR)
        try:
            if tear.mode is TearMode.TRUNCATE:
                os.ftruncate(fd, tear.keep)
            else:
                os.pwrite(fd, bytes(tear.size - tear.keep), tear.keep)
            os.fsync(fd)
        finally:
            os.close(fd)


def store_directories(data_dir: Path) -> list[Path]:
    """A service's data directory and those under it, `MARK_SEARCH_DEPTH` levels deep, in order:
    where a store keeps its log, its marks and its snapshots."""
    found: list[Path] = []
    level = [data_dir] if data_dir.is_dir() else []
    for _ in range(MARK_SEARCH_DEPTH):
        found += level
        level = [child for d in level for child in sorted(d.iterdir()) if child.is_dir()]
    return found


def mark_directories(data_dir: Path) -> list[Path]:
    """The directories under a service's data directory that hold an fsync mark (bounded depth)."""
    return [d for d in store_directories(data_dir) if (d / MARK_FILE).is_file()]


def crash_store_files(data_dir: Path, rng: random.Random) -> list[str]:
    """After the process died: tear every log under `data_dir` past its mark; what was lost, in words."""
    lost = []
    for directory in mark_directories(data_dir):
        tears = plan_tear(read_mark(directory), log_files(directory), rng)
        apply_tear(directory, tears)
        lost += [f"{directory.name}/{t.describe()}" for t in tears]
    return lost
