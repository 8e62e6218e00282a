"""Reading history folders back, forgiving exactly one thing: a torn last line.

A writer killed mid-write can leave its file ending in a partial line. That
line is skipped (and counted). Anything else that does not parse (a bad line
in the middle of a file) means the file is not a history we can trust, and is
an error: the checker turns it into an `unknown` verdict instead of guessing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class HistoryFormatError(ValueError):
    """A history file has a malformed line that is not a torn tail."""


@dataclass
class HistoryScan:
    """What `read_history_dir` found, file by file."""

    files: list[Path] = field(default_factory=list)
    torn_tails: list[Path] = field(default_factory=list)
    lines: int = 0


def iter_history_file(path: Path, scan: HistoryScan | None = None) -> Iterator[dict[str, Any]]:
    """Yield each line of one history file as a dict, skipping a torn last line."""
    with path.open("rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    for number, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as err:
            raise HistoryFormatError(f"{path}: line {number} is not valid JSON ({err})") from None
        if not isinstance(obj, dict):
            raise HistoryFormatError(f"{path}: line {number} is not a JSON object")
        if scan is not None:
            scan.lines += 1
        yield obj
    if tail.strip():
        try:
            obj = json.loads(tail)
        except ValueError:
            if scan is not None:
                scan.torn_tails.append(path)
            return
        # A complete object without its newline: the write finished but the newline
        # did not. The object is whole, so keep it.
        if isinstance(obj, dict):
            if scan is not None:
                scan.lines += 1
            yield obj


def history_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.jsonl") if p.is_file())


def history_bytes(directory: Path) -> int:
    """The size of the history's files (0 when `directory` is missing): what sizes a check's Spark session."""
    return sum(p.stat().st_size for p in history_files(directory)) if directory.is_dir() else 0


def read_history_dir(directory: Path) -> tuple[list[dict[str, Any]], HistoryScan]:
    """Every line of every `*.jsonl` file in `directory`, in file then line order."""
    scan = HistoryScan()
    ops: list[dict[str, Any]] = []
    for path in history_files(directory):
        scan.files.append(path)
        ops.extend(iter_history_file(path, scan))
    return ops, scan
