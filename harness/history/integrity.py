"""What a run wrote to its history, recorded as it ends, and whether the files are still that.

Theory of operation. A writer killed mid-write leaves a torn last line, and the reader
forgives exactly that line. But a file cut at any byte looks the same when looked at
alone: the half of a history that is left reads as a writer that died, and its
missing operations as anomalies of the cluster. So the run says what it wrote. When a
run ends (the load stopped, the drain finished, every history writer closed), the
orchestrator records each history file in the manifest (`history_files`, RECORD_KEY):
its size, its number of lines, and a digest of each block of it (the first 16 hex digits
of the block's SHA-256; blocks of `block_bytes`, at least MIN_BLOCK_BYTES, at most
MAX_BLOCKS of them, so a large file's record stays small and damage can still be placed).

`verify_history` compares a history folder with that record. Damage is: a recorded
file that is missing; a block of the recorded bytes whose content differs (placed at
the first line that is not a JSON object, else at the block's lines); a file shorter
than recorded (cut: placed at the first line missing or cut); a file longer than
recorded (lines written after the run ended); and a non-empty history file the record
does not name. A torn last line the run itself left is in the record, so it is still
forgiven. Runs whose manifests predate the record have none: `verify_history` is then
not called, and only what the reader can see alone (a torn last line) is known.

Reading is streamed block by block: one pass over each file, no more memory than a block.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.history.reader import history_files

__all__ = ["MAX_BLOCKS", "MIN_BLOCK_BYTES", "RECORD_KEY", "Damage", "block_bytes", "record_history",
           "verify_history", "verify_writers"]

RECORD_KEY = "history_files"
RECORD_SCHEMA = 1
MIN_BLOCK_BYTES = 64 * 1024
MAX_BLOCKS = 256
_DIGITS = 16


@dataclass(frozen=True)
class Damage:
    """One damaged history file: `line` is the first damaged line (1-based), None when not placed."""

    file: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        where = f"history/{self.file}" + (f": line {self.line}" if self.line is not None else "")
        return f"{where}: {self.problem}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "problem": self.problem}


def block_bytes(size: int) -> int:
    """The block size of a file of `size` bytes: MIN_BLOCK_BYTES, or more so there are at most MAX_BLOCKS."""
    blocks = -(-size // MAX_BLOCKS)
    return max(MIN_BLOCK_BYTES, -(-blocks // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_DIGITS]


def record_file(path: Path) -> dict[str, Any]:
    """One file's entry of the record: bytes, lines (newlines), block_bytes, blocks (digests)."""
    size = path.stat().st_size
    step = block_bytes(size)
    digests: list[str] = []
    lines = done = 0
    with path.open("rb") as f:
        while done < size:
            data = f.read(min(step, size - done))
            if not data:
                break
            digests.append(_digest(data))
            lines += data.count(b"\n")
            done += len(data)
    return {"bytes": done, "lines": lines, "block_bytes": step, "blocks": digests}


def record_history(history_dir: Path) -> dict[str, Any]:
    """The record of every `*.jsonl` in `history_dir`, as the manifest keeps it under RECORD_KEY."""
    return {"schema": RECORD_SCHEMA, "files": {p.name: record_file(p) for p in history_files(history_dir)}}


def _first_bad_line(data: bytes) -> tuple[int, str] | None:
    """(offset in lines, why) of the first line of `data` (whole lines) that is not a JSON object."""
    for number, raw in enumerate(data.split(b"\n")):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            return number, f"not valid JSON ({err.msg} at column {err.colno})"
        except ValueError:                 # not UTF-8
            return number, "not valid JSON (not UTF-8 text)"
        if not isinstance(obj, dict):
            return number, "not a JSON object"
    return None


def _verify_file(path: Path, entry: Mapping[str, Any]) -> Damage | None:
    name = path.name
    want_bytes, want_lines = int(entry["bytes"]), int(entry["lines"])
    what = f"the run wrote {want_lines:,} line(s), {want_bytes:,} bytes"
    if not path.is_file():
        return Damage(name, None, f"missing: {what} to it")
    size = path.stat().st_size
    step = int(entry["block_bytes"])
    lines = 0            # newlines before the current block
    carry = b""          # the bytes of the current line that began in an earlier block
    done = 0             # bytes verified
    with path.open("rb") as f:
        for number, digest in enumerate(entry["blocks"]):
            start = number * step
            end = min(start + step, want_bytes)
            if end > size:
                break
            data = f.read(end - start)
            if _digest(data) != digest:
                # The block's lines, the one it ends inside included (read on to its end).
                after = f.read(step)
                end_of_line = after.find(b"\n")
                region = carry + data + (after[:end_of_line] if end_of_line >= 0 else after)
                if end_of_line < 0:        # the file ends in an unterminated line: a torn tail, not judged here
                    region = region[:max(0, region.rfind(b"\n"))]
                bad = _first_bad_line(region)
                first = lines + 1
                if bad is not None:
                    return Damage(name, first + bad[0], f"not the line the run wrote: {bad[1]} ({what})")
                last = lines + data.count(b"\n") + 1
                return Damage(name, first, f"the content of lines {first:,}-{last:,} (bytes {start:,}-{end - 1:,}) "
                                           f"differs from what the run wrote ({what}; the manifest's "
                                           f"{RECORD_KEY} holds a digest of each block)")
            lines += data.count(b"\n")
            cut = data.rfind(b"\n")
            carry = carry + data if cut < 0 else data[cut + 1:]
            done = end
            if done >= want_bytes:
                break
        # A file shorter than recorded ends inside a block its record cannot compare (less than a
        # block): its whole lines must still be JSON objects, and the rest is where it was cut.
        rest = carry + f.read(max(0, size - done)) if size < want_bytes else b""
    if size < want_bytes:
        cut = rest.rfind(b"\n")
        bad = _first_bad_line(rest[:cut]) if cut >= 0 else None
        if bad is not None:
            return Damage(name, lines + 1 + bad[0], f"not the line the run wrote: {bad[1]} ({what}, and "
                                                    f"{want_bytes - size:,} of its bytes are missing)")
        whole = lines + rest.count(b"\n")
        torn = size > 0 and not rest.endswith(b"\n")
        missing = f"{want_bytes - size:,} of its {want_bytes:,} bytes are missing"
        if torn:
            return Damage(name, whole + 1, f"cut in the middle of this line, {missing}: the run wrote "
                                           f"{want_lines:,} line(s), so lines {whole + 1:,}-{want_lines:,} are cut "
                                           "or missing (a cut history is not a torn last line)")
        return Damage(name, whole + 1, f"cut after line {whole:,}, {missing}: the run wrote {want_lines:,} line(s)")
    if size > want_bytes:
        return Damage(name, want_lines + 1, f"{size - want_bytes:,} bytes after the {want_bytes:,} the run wrote "
                                            f"({want_lines:,} line(s)): written after the run ended")
    return None


def verify_history(history_dir: Path, record: Mapping[str, Any]) -> list[Damage]:
    """Every damage of `history_dir` against `record` (record_history's shape), by file name.

    A record this code cannot read is one damage of its own (the manifest was changed)."""
    files = record.get("files") if isinstance(record, Mapping) else None
    if not isinstance(files, Mapping):
        return [Damage("*.jsonl", None, f"the manifest's {RECORD_KEY} cannot be read (no `files`), so the "
                                        "history cannot be compared with what the run wrote")]
    damage: list[Damage] = []
    for name in sorted(files):
        entry = files[name]
        try:
            found = _verify_file(history_dir / name, entry)
        except (KeyError, TypeError, ValueError):
            found = Damage(name, None, f"the manifest's {RECORD_KEY} entry for it cannot be read")
        if found is not None:
            damage.append(found)
    for path in history_files(history_dir):
        if path.name not in files and path.stat().st_size > 0:
            damage.append(Damage(path.name, None, f"not among the files the run wrote (the manifest's {RECORD_KEY}): "
                                                  "written after the run ended, or copied in from elsewhere"))
    return damage


def verify_writers(history_dir: Path, writers: Iterable[str]) -> list[Damage]:
    """Writers the manifest names (e.g. its load workers) whose history file is missing."""
    return [Damage(f"{w}.jsonl", None, "missing: the manifest names this writer, so the run had its history")
            for w in sorted(set(writers)) if not (history_dir / f"{w}.jsonl").is_file()]
