"""Remote load workers: the messages between the master and `txnbench worker`, without I/O.

Theory of operation. A run whose scenario sets `load.remote_workers` makes its load process
a Locust master bound to `load.master_bind:load.master_port`. On each load host,
`txnbench worker --master HOST:PORT --processes N` (workloads.worker_host, "the host") joins it
over Locust's own message channel (ZeroMQ), with these custom messages:

1. `txnbench-hello` (host -> master): txnbench version, a digest of its code, host name,
   pid, how many processes it brings and, when given `--scenario`, its scenario's name and
   workload. The master answers `txnbench-welcome` (the load spec, the writer names it
   assigns, e.g. `r0`, `r1`: unique across hosts) or `txnbench-refused` (a version, code
   or scenario mismatch, or more workers than the run waits for), which the host prints
   and exits 2 on.
2. `txnbench-clock` round trips (host -> master -> host): the host's monotonic clock
   before and after, the master's run clock in between. The sample with the shortest round
   trip gives the offset (`estimate_offset`); the host's worker processes get a run-clock
   base corrected by it, so their `time_ns` is on the master's timeline within
   `uncertainty_ns` (half that round trip). Measured again at the end, to show the drift.
3. The host starts N Locust workers (`python -m workloads.runner --worker-name rK`), each
   writing `history/rK.jsonl` in the host's own folder, and ships every file's new
   complete lines to the master as it goes (`txnbench-history`: writer, offset, bytes,
   SHA-256 of the bytes; `HistoryGatherer` appends a chunk only at the offset it already
   has, so a lost or repeated chunk is re-sent, never duplicated). A worker process that
   dies is reported (`txnbench-worker-lost`) and the host ships its file to the last line
   it wrote: the history keeps everything that worker recorded.
4. When the master stops its users it sends `txnbench-finish`; the host stops its workers,
   ships the rest and sends `txnbench-history-done` per writer (size and SHA-256 of the
   whole file). The master compares them with its copy, then quits Locust.

A host that vanishes (machine down, network cut) leaves the master the lines shipped up
to its last chunk (at most `SHIP_INTERVAL_S` behind); the master records it as lost
(`workloads.json` -> the manifest's `load_workers`) and the checker names it in its
verdict. The gathered files follow the history contract unchanged: one file per writer.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import __version__

PROTOCOL = 1
SHIP_INTERVAL_S = 0.5
MAX_CHUNK_BYTES = 256 * 1024
CLOCK_SAMPLES = 8

HELLO = "txnbench-hello"
WELCOME = "txnbench-welcome"
REFUSED = "txnbench-refused"
CLOCK = "txnbench-clock"
CLOCK_REPLY = "txnbench-clock-reply"
HISTORY = "txnbench-history"
HISTORY_ACK = "txnbench-history-ack"
HISTORY_DONE = "txnbench-history-done"
WORKER_LOST = "txnbench-worker-lost"
FINISH = "txnbench-finish"
BYE = "txnbench-bye"
BYE_ACK = "txnbench-bye-ack"

_CODE_PACKAGES = ("harness", "workloads")


def code_digest(root: Path | None = None) -> str:
    """SHA-256 over the load-side source (harness/, workloads/): two hosts with the same digest
    run the same load code, whatever `__version__` says."""
    base = root or Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in _CODE_PACKAGES:
        for file in sorted((base / package).rglob("*.py")):
            digest.update(file.relative_to(base).as_posix().encode())
            digest.update(b"\0")
            digest.update(file.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Hello:
    """What a load host says when it joins."""

    version: str
    digest: str
    host: str
    pid: int
    processes: int
    scenario: str | None = None
    workload: Mapping[str, Any] | None = None
    protocol: int = PROTOCOL

    @classmethod
    def local(cls, processes: int, digest: str, scenario: str | None = None,
              workload: Mapping[str, Any] | None = None) -> Hello:
        return cls(version=__version__, digest=digest, host=socket.gethostname(), pid=os.getpid(),
                   processes=processes, scenario=scenario, workload=workload)

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "digest": self.digest, "host": self.host, "pid": self.pid,
                "processes": self.processes, "scenario": self.scenario,
                "workload": dict(self.workload) if self.workload is not None else None, "protocol": self.protocol}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hello:
        return cls(version=str(data.get("version")), digest=str(data.get("digest")), host=str(data.get("host")),
                   pid=int(data.get("pid") or 0), processes=int(data.get("processes") or 0),
                   scenario=data.get("scenario"), workload=data.get("workload"),
                   protocol=int(data.get("protocol") or 0))


def mismatch(hello: Hello, *, version: str, digest: str, scenario: str,
             workload: Mapping[str, Any]) -> str | None:
    """Why the master must refuse this host, or None. Each reason says what to do."""
    who = f"load host {hello.host} (pid {hello.pid})"
    if hello.protocol != PROTOCOL:
        return (f"{who} speaks remote-worker protocol {hello.protocol}, the master {PROTOCOL}: "
                "install the same txnbench on every load host")
    if hello.version != version:
        return (f"{who} runs txnbench {hello.version}, the master {version}: "
                "install the same txnbench on every load host")
    if hello.digest != digest:
        return (f"{who} runs different txnbench code than the master (code digest {hello.digest[:12]} "
                f"vs {digest[:12]}): check out the same commit on every load host")
    if hello.processes < 1:
        return f"{who} brings {hello.processes} processes; --processes must be at least 1"
    if hello.scenario is not None and hello.scenario != scenario:
        return (f"{who} was started for scenario {hello.scenario!r}, the master runs {scenario!r}: "
                "give the worker the master's scenario (or no --scenario)")
    if hello.workload is not None:
        differ = sorted(k for k in set(hello.workload) | set(workload)
                        if hello.workload.get(k) != workload.get(k))
        if differ:
            return (f"{who} has scenario {scenario!r} with a different workload ({', '.join(differ)} differ): "
                    "use the same scenario file on every host")
    return None


# ---- clock -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClockSample:
    """One round trip: the host's monotonic clock before and after, the master's run clock between."""

    sent_ns: int
    master_ns: int
    received_ns: int

    @property
    def rtt_ns(self) -> int:
        return self.received_ns - self.sent_ns


@dataclass(frozen=True)
class ClockEstimate:
    """`master run clock = host monotonic - base_ns`, within +-`uncertainty_ns`."""

    base_ns: int
    uncertainty_ns: int
    rtt_ns: int
    samples: int

    def to_dict(self) -> dict[str, int]:
        return {"base_ns": self.base_ns, "uncertainty_ns": self.uncertainty_ns, "rtt_ns": self.rtt_ns,
                "samples": self.samples}


def estimate_offset(samples: Iterable[ClockSample]) -> ClockEstimate:
    """Cristian's estimate from the sample with the shortest round trip: the master read its
    clock somewhere inside that trip, so assuming the middle is off by at most half of it."""
    usable = [s for s in samples if s.rtt_ns >= 0]
    if not usable:
        raise ValueError("no clock sample with a non-negative round trip")
    best = min(usable, key=lambda s: s.rtt_ns)
    middle = best.sent_ns + best.rtt_ns // 2
    return ClockEstimate(base_ns=middle - best.master_ns, uncertainty_ns=(best.rtt_ns + 1) // 2,
                         rtt_ns=best.rtt_ns, samples=len(usable))


# ---- history shipping ------------------------------------------------------------------------


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def complete_lines(data: bytes) -> bytes:
    """The prefix of `data` that ends with a newline: never ship half a line while it is written."""
    end = data.rfind(b"\n")
    return data[:end + 1] if end >= 0 else b""


@dataclass(frozen=True)
class Chunk:
    writer: str
    offset: int
    data: bytes
    sha256: str

    @classmethod
    def of(cls, writer: str, offset: int, data: bytes) -> Chunk:
        return cls(writer, offset, data, sha256_hex(data))

    def to_dict(self) -> dict[str, Any]:
        return {"writer": self.writer, "offset": self.offset, "data": self.data, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chunk:
        return cls(str(data["writer"]), int(data["offset"]), bytes(data["data"]), str(data["sha256"]))


def read_chunks(file: Path, offset: int, *, final: bool, limit: int = MAX_CHUNK_BYTES) -> list[Chunk]:
    """The file's bytes from `offset` as chunks of complete lines (all of them when `final`:
    a torn last line of a dead writer is shipped too; the reader ignores it)."""
    try:
        with file.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return []
    if not final:
        data = complete_lines(data)
    chunks: list[Chunk] = []
    position = 0
    while position < len(data):
        piece = data[position:position + limit]
        if not final and len(piece) == limit:
            piece = complete_lines(piece) or piece   # a line longer than a chunk is split
        chunks.append(Chunk.of(file.stem, offset + position, piece))
        position += len(piece)
    return chunks


@dataclass
class GatheredWriter:
    """The master's view of one remote writer's file."""

    writer: str
    host: str
    size: int = 0
    complete: bool = False          # the host said the file ends here, and the copy equals it
    lost: str | None = None         # why its process or host was lost mid-run
    host_gone: bool = False         # nothing more will come: the copy is what was shipped
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"writer": self.writer, "host": self.host, "bytes": self.size, "complete": self.complete,
                "lost": self.lost, "problem": self.problem}


@dataclass
class HistoryGatherer:
    """The master's copies of the remote writers' files, appended chunk by chunk.

    A chunk is taken only when its checksum holds and it starts where the copy ends; the
    answer (`accept`) is the copy's size, from which the host re-sends anything missing.
    """

    directory: Path
    writers: dict[str, GatheredWriter] = field(default_factory=dict)

    def expect(self, writer: str, host: str) -> None:
        self.writers.setdefault(writer, GatheredWriter(writer, host))

    def path(self, writer: str) -> Path:
        return self.directory / f"{writer}.jsonl"

    def accept(self, chunk: Chunk) -> tuple[int, str | None]:
        """Append the chunk if it fits; (the copy's size, a problem or None)."""
        entry = self.writers.get(chunk.writer)
        if entry is None:
            return 0, f"writer {chunk.writer!r} was not assigned by this master"
        if sha256_hex(chunk.data) != chunk.sha256:
            return entry.size, f"chunk at {chunk.offset} of {chunk.writer} fails its SHA-256; re-send it"
        if chunk.offset != entry.size:
            return entry.size, None if chunk.offset < entry.size else f"gap: chunk at {chunk.offset}, copy ends at {entry.size}"
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.path(chunk.writer).open("ab") as out:
            out.write(chunk.data)
        entry.size += len(chunk.data)
        return entry.size, None

    def finish(self, writer: str, size: int, sha256: str) -> str | None:
        """The host says the file is complete at `size` bytes with this digest; None when the copy equals it."""
        entry = self.writers.get(writer)
        if entry is None:
            return f"writer {writer!r} was not assigned by this master"
        if entry.size != size:
            return f"{writer}: the copy has {entry.size} bytes, the host's file {size}"
        copy = self.path(writer).read_bytes() if self.path(writer).exists() else b""
        if sha256_hex(copy) != sha256:
            entry.problem = f"{writer}: the copy's SHA-256 differs from the host's file"
            return entry.problem
        entry.complete, entry.problem = True, None
        return None

    def lose(self, writer: str, reason: str, *, host_gone: bool = False) -> None:
        """Its process (or, with `host_gone`, its whole host) was lost mid-run."""
        entry = self.writers.get(writer)
        if entry is None:
            return
        if entry.lost is None and not entry.complete:
            entry.lost = reason
        entry.host_gone = entry.host_gone or host_gone

    def pending(self) -> list[str]:
        """Writers whose complete file may still come."""
        return sorted(w for w, e in self.writers.items() if not e.complete and not e.host_gone)
