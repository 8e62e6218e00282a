"""Disk corruption of a store's durable files (the `corrupt` fault kind): one bit flipped.

Why. A crash (targets/power_loss.py) only ever damages what was never fsynced, and the stores
cut such torn tails. Damage to what was durable (a bit flipped by a disk, a controller or a
bad cable, Jepsen's file-corruption nemesis) is another failure: recovery must notice it and
refuse to start, naming the file, rather than serve what it misread or silently drop what
follows. The fault damages only files recovery reads whole and must find intact:

* `log`: a sealed log file, one before the newest (the ledger store's journal segments, the
  metadata store's write-ahead log segments). The newest is left alone: the end of it is a
  crash's to tear, and telling a flipped bit in its last record from a torn tail needs what a
  crash leaves after it.
* `snapshot`: the newest snapshot of the metadata store (the one its recovery loads).

Undone on heal (an operator restores the file from a copy): the flipped bit is flipped back.

`plan_damage` is pure (unit-tested without files); `flip_bit` does the I/O.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.sync_mark import read_mark
from harness.target import DamagedFile
from targets.power_loss import log_skeleton, mark_directories, store_directories

#: the metadata store's snapshot files (embedded/metadata/snapshot.py): `snapshot-<lsn>.jsonl`
SNAPSHOT_RE = re.compile(r"^snapshot-\d+\.jsonl$")


@dataclass(frozen=True)
class Damage:
    """Bit `bit` of byte `offset` of `path` flipped (flipping it again undoes it)."""

    path: Path
    offset: int
    bit: int

    def describe(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}: bit {self.bit} of byte {self.offset} flipped"


def sealed_log_files(data_dir: Path) -> list[Path]:
    """Each store log's files before its newest, under `data_dir` (found by their fsync marks)."""
    out: list[Path] = []
    for directory in mark_directories(data_dir):
        mark = read_mark(directory)
        if mark is None:
            continue
        skeleton = log_skeleton(mark.file_name)
        logs = sorted(p for p in directory.iterdir() if p.is_file() and log_skeleton(p.name) == skeleton)
        out += logs[:-1]
    return out


def newest_snapshots(data_dir: Path) -> list[Path]:
    """The newest snapshot file of each directory under `data_dir` that holds any (bounded depth)."""
    out: list[Path] = []
    for directory in store_directories(data_dir):
        snapshots = sorted(p for p in directory.iterdir() if p.is_file() and SNAPSHOT_RE.match(p.name))
        out += snapshots[-1:]
    return out


def candidates(data_dir: Path, which: DamagedFile) -> list[Path]:
    return sealed_log_files(data_dir) if which is DamagedFile.LOG else newest_snapshots(data_dir)


def plan_damage(files: Sequence[tuple[Path, int]], rng: random.Random) -> Damage | None:
    """One bit of one of the (non-empty) files, drawn from `rng`; None when every file is empty."""
    sized = [(path, size) for path, size in files if size > 0]
    if not sized:
        return None
    path, size = rng.choice(sized)
    return Damage(path, rng.randrange(size), rng.randrange(8))


def flip_bit(damage: Damage) -> None:
    """Flip the bit in place and fsync the file (the damage, or its repair, is what the disk holds)."""
    fd = os.open(damage.path, os.O_RDWR)
    try:
        byte = os.pread(fd, 1, damage.offset)
        if len(byte) != 1:
            raise ValueError(f"{damage.path} has no byte {damage.offset}")
        os.pwrite(fd, bytes([byte[0] ^ (1 << damage.bit)]), damage.offset)
        os.fsync(fd)
    finally:
        os.close(fd)
