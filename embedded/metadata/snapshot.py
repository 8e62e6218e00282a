"""Snapshot files: the whole state at one log position, written atomically.

Theory of operation. `snapshot-<lsn, 20 digits>.jsonl` holds a header line, one line
per session, one line per record and a trailer line with the CRC32 of every byte
before it. It is written to a temporary name, fsynced, renamed and the directory
fsynced, so a snapshot file either is complete or does not exist under its final
name. Lines are encoded one at a time so that a writer thread never holds the GIL
for long (the event loop keeps answering while a snapshot is written). A snapshot at
`lsn` contains the effect of every log record up to and including `lsn`.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedded.metadata.model import Record, Version
from embedded.metadata.state import SessionInfo, StateImage
from embedded.metadata.wal import fsync_dir

FORMAT = "txnbench-metadata-snapshot"
FORMAT_VERSION = 1
_SNAPSHOT_RE = re.compile(r"^snapshot-(\d{20})\.jsonl$")


class CorruptSnapshot(Exception):
    pass


@dataclass(frozen=True)
class LoadedSnapshot:
    lsn: int
    image: StateImage
    path: Path


def snapshot_name(lsn: int) -> str:
    return f"snapshot-{lsn:020d}.jsonl"


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    out = []
    if directory.is_dir():
        for entry in directory.iterdir():
            match = _SNAPSHOT_RE.match(entry.name)
            if match:
                out.append((int(match.group(1)), entry))
    return sorted(out)


def _record_line(r: Record) -> list[Any]:
    v = r.version
    return [r.key, r.value, v.version_id, v.created_ms, v.modified_ms, v.modifications_count,
            v.ephemeral, v.session_id, r.partition_key, [list(p) for p in r.secondary_indexes]]


def _record_from_line(a: list[Any]) -> Record:
    return Record(a[0], a[1], Version(a[2], a[3], a[4], a[5], a[6], a[7]), a[8],
                  tuple(map(tuple, a[9])) if a[9] else ())


def write_snapshot(directory: Path, lsn: int, image: StateImage) -> Path:
    """Blocking; returns the final path once the snapshot is durable."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / snapshot_name(lsn)
    tmp = directory / (snapshot_name(lsn) + ".tmp")
    crc = 0
    with open(tmp, "wb") as f:
        def line(obj: Any) -> None:
            nonlocal crc
            data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
            crc = zlib.crc32(data, crc)
            f.write(data)

        line({"format": FORMAT, "version": FORMAT_VERSION, "lsn": lsn,
              "last_version_id": image.last_version_id, "last_session_id": image.last_session_id,
              "sessions": len(image.sessions), "records": len(image.records)})
        for s in image.sessions:
            line([s.session_id, s.timeout_ms, s.client])
        for r in image.records:
            line(_record_line(r))
        f.write(json.dumps({"end": True, "crc": crc}).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(directory)
    return final


def read_snapshot(path: Path) -> LoadedSnapshot:
    data = path.read_bytes()
    lines = data.split(b"\n")
    if len(lines) < 3 or lines[-1] != b"":
        raise CorruptSnapshot(f"{path}: truncated")
    body_end = len(data) - len(lines[-2]) - 1
    try:
        trailer = json.loads(lines[-2])
        header = json.loads(lines[0])
    except ValueError as err:
        raise CorruptSnapshot(f"{path}: {err}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != FORMAT_VERSION:
        raise CorruptSnapshot(f"{path}: not a version {FORMAT_VERSION} {FORMAT}")
    if (not isinstance(trailer, dict) or not trailer.get("end")
            or trailer.get("crc") != zlib.crc32(memoryview(data)[:body_end])):
        raise CorruptSnapshot(f"{path}: no trailer or a checksum mismatch (cut short at a line, or damaged)")
    n_sessions, n_records = int(header["sessions"]), int(header["records"])
    body = lines[1:-2]
    if len(body) != n_sessions + n_records:
        raise CorruptSnapshot(f"{path}: expected {n_sessions + n_records} lines, found {len(body)}")
    rows = json.loads(b"[" + b",".join(body) + b"]") if body else []   # one C call: fast start-up
    sessions = tuple(SessionInfo(int(a[0]), int(a[1]), str(a[2])) for a in rows[:n_sessions])
    records = tuple(map(_record_from_line, rows[n_sessions:]))
    image = StateImage(int(header["last_version_id"]), int(header["last_session_id"]), records, sessions)
    return LoadedSnapshot(int(header["lsn"]), image, path)
