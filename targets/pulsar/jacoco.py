"""JaCoCo on a real Pulsar cluster's JVMs: the jars, the agent, and the dump client.

Theory of operation. `--coverage` (`txnbench run|bench|chaos --target pulsar`) starts every
broker and the bookie with JaCoCo's agent in `tcpserver` mode on a port of their own
(`agent_option`): the agent counts which probes of Pulsar's classes ran, in memory, and
hands them out over TCP when asked. Chaos kills JVMs with SIGKILL, which loses what an agent
holds, so the harness asks first: `CoverageCollector` dumps every covered JVM every
`DUMP_EVERY_S`, and once more right before the cluster's process control kills, stops or
pauses one (`PulsarCluster.kill/stop/pause`), and before the cluster goes down. Each dump
resets the agent's counts, so a dump file holds exactly what ran since the one before:
`coverage/parts/<service>-<life>-<seq>.exec`, indexed with its wall-clock window in
`coverage/dumps.jsonl`. A life is one start of one JVM (a restart begins the next).
`targets.pulsar.coverage_report` later merges the parts per life and in all, and tells from
the windows when each recovery method first ran. What was lost is recorded, not guessed: a
life that ended with no dump before it (a JVM that exited on its own) lost what ran since its
last dump, and the index says how long that was; a kill right after its dump loses the
milliseconds between them.

The wire protocol is JaCoCo's own (`org.jacoco.core.runtime.RemoteControlWriter`/`Reader`,
over `ExecutionDataWriter`'s block format, format version 0x1007): the client sends the
header block `01 C0C0 1007` and a dump command `40 <dump> <reset>`; the agent answers with
its own header, one session-info block (`10`: id, start, dump time) and one block per class
that ran (`11`: class id, name, probe booleans packed eight to a byte), then `20` (command
done). Those bytes up to the `20`, header included, are exactly an `.exec` file. A graceful
stop (SIGTERM) also makes the agent push its data to a connected client as the JVM exits
(dumponexit): `stop` keeps a connection open through the stop and saves that push too.

The jars (`maven/jacoco/pom.xml`: the agent's `runtime` jar, the CLI's `nodeps` jar,
`org.jacoco.core` with its ASM for our timeline program) are resolved with Maven once into
`.txnbench/pulsar/jacoco/lib-<pom digest>/` (`ensure_jacoco`), like the release's jars.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from harness.errors import EnvironmentProblem
from harness.results import write_json_atomic
from targets.cache_lock import building
from targets.pulsar.jars import MVN_TIMEOUT_S, _run_mvn, cache_root, mvn_binary, pom_digest

POM = Path(__file__).parent / "maven" / "jacoco" / "pom.xml"
STAMP = "jacoco-{digest}.json"
#: Pulsar's classes, and the managed ledger (org.apache.bookkeeper.mledger, inside the broker)
INCLUDES = ("org.apache.pulsar.*", "org.apache.bookkeeper.mledger.*")
#: The JVMs that run with the agent: the brokers (kind `broker`) and the bookie
COVERED_KINDS = ("broker", "bookie")
DUMP_EVERY_S = 10.0
DUMP_TIMEOUT_S = 10.0
PARTS_DIR = "parts"
INDEX = "dumps.jsonl"

# ---- the exec-data format and the remote-control protocol ----------------------------------------

BLOCK_HEADER = 0x01
BLOCK_SESSIONINFO = 0x10
BLOCK_EXECUTIONDATA = 0x11
BLOCK_CMDOK = 0x20
BLOCK_CMDDUMP = 0x40
MAGIC_NUMBER = 0xC0C0
FORMAT_VERSION = 0x1007
HEADER = struct.pack(">BHH", BLOCK_HEADER, MAGIC_NUMBER, FORMAT_VERSION)


class ExecFormatError(Exception):
    """Bytes that are not JaCoCo execution data of the format this client speaks."""


def dump_command(dump: bool = True, reset: bool = False) -> bytes:
    """What a client sends: its header, then the dump command."""
    return HEADER + bytes([BLOCK_CMDDUMP, int(dump), int(reset)])


@dataclass
class ExecData:
    """One dump: the `.exec` file's bytes and what they hold."""

    data: bytes                  # header + session infos + execution data: an .exec file
    sessions: list[str] = field(default_factory=list)
    classes: int = 0             # classes with at least one probe hit
    probes_hit: int = 0
    complete: bool = True        # False: the stream ended before the agent said the dump was done

    @property
    def empty(self) -> bool:
        return self.classes == 0


def _exact(stream: BinaryIO, n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) < n:
        raise EOFError(f"stream ended: wanted {n} bytes, got {len(data or b'')}")
    return data


def _utf(stream: BinaryIO, out: io.BytesIO) -> str:
    """Java's `writeUTF`: a 2-byte length and modified UTF-8 (plain UTF-8 for class names)."""
    raw_len = _exact(stream, 2)
    raw = _exact(stream, struct.unpack(">H", raw_len)[0])
    out.write(raw_len + raw)
    return raw.decode("utf-8", errors="replace")


def _varint(stream: BinaryIO, out: io.BytesIO) -> int:
    """`CompactDataOutput.writeVarInt`: 7 bits a byte, low bits first, high bit = more."""
    value, shift = 0, 0
    while True:
        byte = _exact(stream, 1)
        out.write(byte)
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
        shift += 7
        if shift > 35:
            raise ExecFormatError("varint longer than 5 bytes")


def read_header(stream: BinaryIO) -> None:
    block = _exact(stream, 5)
    kind, magic, version = struct.unpack(">BHH", block)
    if kind != BLOCK_HEADER or magic != MAGIC_NUMBER:
        raise ExecFormatError(f"not JaCoCo execution data (starts {block.hex()})")
    if version != FORMAT_VERSION:
        raise ExecFormatError(f"JaCoCo exec format {version:#06x}; this client reads {FORMAT_VERSION:#06x}")


def read_blocks(stream: BinaryIO, *, until_ok: bool, first_byte: bytes = b"") -> ExecData:
    """Blocks after a header, copied into an .exec file: until the agent's `CMDOK` (`until_ok`:
    a dump's answer) or the end of the stream (a file). `first_byte`: the first block's type, when
    the caller already read it."""
    out = io.BytesIO()
    out.write(HEADER)
    result = ExecData(b"")
    pending = first_byte
    while True:
        first, pending = (pending, b"") if pending else (stream.read(1), b"")
        if not first:
            if until_ok:
                result.complete = False
            break
        kind = first[0]
        if kind == BLOCK_CMDOK:
            break
        if kind == BLOCK_HEADER:                  # a file merged by concatenation repeats it
            rest = _exact(stream, 4)
            magic, version = struct.unpack(">HH", rest)
            if magic != MAGIC_NUMBER or version != FORMAT_VERSION:
                raise ExecFormatError(f"bad header block inside the data ({rest.hex()})")
            continue
        if kind == BLOCK_SESSIONINFO:
            out.write(first)
            result.sessions.append(_utf(stream, out))
            out.write(_exact(stream, 16))         # start and dump time, ms
        elif kind == BLOCK_EXECUTIONDATA:
            out.write(first)
            out.write(_exact(stream, 8))          # class id
            _utf(stream, out)                     # class name
            count = _varint(stream, out)
            packed = _exact(stream, (count + 7) // 8)
            out.write(packed)
            result.classes += 1
            result.probes_hit += sum(bin(b).count("1") for b in packed)
        else:
            raise ExecFormatError(f"unknown block type {kind:#04x}")
    result.data = out.getvalue()
    return result


def parse_exec(data: bytes) -> ExecData:
    """An .exec file's content, checked and counted."""
    stream = io.BytesIO(data)
    read_header(stream)
    return read_blocks(stream, until_ok=False)


def dump(host: str, port: int, *, reset: bool = True, timeout_s: float = DUMP_TIMEOUT_S) -> ExecData:
    """Ask the agent at host:port for its execution data (and reset it); OSError/EOFError when it
    does not answer, ExecFormatError when it answers something else."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(dump_command(True, reset))
        with sock.makefile("rb") as stream:
            read_header(stream)
            result = read_blocks(stream, until_ok=True)
    if not result.complete:
        raise EOFError("the agent closed the connection before it finished the dump")
    return result


class ExitWatch:
    """A connection held open through a graceful stop: the agent pushes its data to it on exit,
    from its shutdown hook, which runs beside the JVM's others (Pulsar's own shutdown among them):
    what ran after the push is not in it. `arrived_ms` says when the push came."""

    def __init__(self, host: str, port: int, timeout_s: float = DUMP_TIMEOUT_S, wait_s: float = 300.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.sendall(HEADER)               # the agent reads a header before any command
        self.sock.settimeout(wait_s)
        self.result: ExecData | None = None
        self.arrived_ms: float | None = None
        self.accepted = threading.Event()
        self._thread = threading.Thread(target=self._read, name="jacoco-exit-watch", daemon=True)
        self._thread.start()
        # The agent serves one connection at a time and pushes to the one it holds when its JVM
        # exits: until it accepted this one (it sends its header then), a stop would find it still
        # holding the dump's connection just closed, and push nowhere.
        self.accepted.wait(timeout_s)

    def _read(self) -> None:
        try:
            with self.sock.makefile("rb") as stream:
                read_header(stream)             # the agent's, sent as it accepts the connection
                self.accepted.set()
                first = stream.read(1)          # blocks until the push (or the end: a SIGKILL)
                if not first:
                    return
                self.arrived_ms = time.time() * 1000
                self.result = read_blocks(stream, until_ok=True, first_byte=first)
        except (OSError, EOFError, ExecFormatError):
            return
        finally:
            self.sock.close()

    def collect(self, timeout_s: float = 5.0) -> ExecData | None:
        """What the agent pushed while its JVM exited (None: nothing came, e.g. a SIGKILL)."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            self._thread.join(1.0)
        return self.result


# ---- the jars ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JacocoJars:
    lib: Path

    def _one(self, pattern: str) -> Path:
        found = sorted(self.lib.glob(pattern))
        if not found:
            raise EnvironmentProblem(f"no {pattern} in {self.lib}; remove that folder and run again")
        return found[-1]

    @property
    def agent(self) -> Path:
        return self._one("org.jacoco.agent-*-runtime.jar")

    @property
    def cli(self) -> Path:
        return self._one("org.jacoco.cli-*-nodeps.jar")

    @property
    def core_classpath(self) -> list[Path]:
        """org.jacoco.core and ASM: what the timeline program compiles and runs against."""
        return [p for p in sorted(self.lib.glob("*.jar")) if p.name.startswith(("org.jacoco.core-", "asm"))]

    @property
    def version(self) -> str:
        return self.agent.name.removeprefix("org.jacoco.agent-").removesuffix("-runtime.jar")


def ensure_jacoco(say: Callable[[str], None] | None = None, root: Path | None = None) -> JacocoJars:
    """JaCoCo's jars, resolved with Maven on first use into `<cache>/jacoco/lib-<digest>/` and reused."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    folder = (root or cache_root()) / "jacoco"
    digest = pom_digest(POM)
    lib, stamp = folder / f"lib-{digest}", folder / STAMP.format(digest=digest)
    if stamp.is_file() and lib.is_dir():
        return JacocoJars(lib)
    mvn = mvn_binary()
    with building(folder / f"lib-{digest}.lock", "JaCoCo's jars", say, wait_s=MVN_TIMEOUT_S + 60):
        if stamp.is_file() and lib.is_dir():
            return JacocoJars(lib)
        import shutil

        shutil.rmtree(lib, ignore_errors=True)
        log = folder / "maven.log"
        say(f"resolving JaCoCo's agent and CLI with Maven into {lib} (first use; progress in {log})")
        started = time.monotonic()
        _run_mvn([mvn, "-B", "-f", str(POM), f"-Djars.dir={lib}", "package"], log, "resolving JaCoCo's jars", say)
        jars = JacocoJars(lib)
        names = sorted(p.name for p in lib.glob("*.jar"))
        for needed in (lambda: jars.agent, lambda: jars.cli):
            needed()
        write_json_atomic(stamp, {"pom_digest": digest, "jars": names})
        say(f"JaCoCo {jars.version}: {len(names)} jars in {time.monotonic() - started:.0f} s")
    return JacocoJars(lib)


def agent_option(agent_jar: Path, port: int, host: str = "127.0.0.1", includes: Iterable[str] = INCLUDES) -> str:
    """The `-javaagent:` option of a covered JVM: a tcpserver on host:port, Pulsar's classes only."""
    return (f"-javaagent:{agent_jar}=output=tcpserver,address={host},port={port},"
            f"includes={':'.join(includes)},jmx=false")


# ---- collecting from a cluster's JVMs ----------------------------------------------------------------

@dataclass
class _Life:
    service: str
    life: int
    port: int
    started_ms: float
    seq: int = 0
    last_dump_ms: float | None = None    # the end of the window the last good dump closed
    ended: bool = False


class CoverageCollector:
    """Every covered JVM's execution data, per life, dumped periodically and before each death.

    `running(service)` says whether a service's process runs now (not paused, not stopped):
    the periodic dumps ask only those."""

    def __init__(self, directory: Path, running: Callable[[str], bool], *, host: str = "127.0.0.1",
                 dump_every_s: float = DUMP_EVERY_S, say: Callable[[str], None] | None = None) -> None:
        self.directory = directory
        self.parts = directory / PARTS_DIR
        self.parts.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.running = running
        self.dump_every_s = dump_every_s
        self.say = say or (lambda text: None)
        self.lives: dict[str, _Life] = {}
        self._count: dict[str, int] = {}
        self._service_locks: dict[str, threading.Lock] = {}
        self._index_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- the index ----

    def _record(self, **entry: Any) -> None:
        entry = {"wall_ms": round(time.time() * 1000, 1), **entry}
        with self._index_lock, (self.directory / INDEX).open("a") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")

    def _lock(self, service: str) -> threading.Lock:
        with self._index_lock:
            return self._service_locks.setdefault(service, threading.Lock())

    # ---- lives ----

    def started(self, service: str, port: int) -> None:
        """A covered JVM started (its agent listens on `port`): a new life begins."""
        with self._lock(service):
            previous = self.lives.get(service)
            now = time.time() * 1000
            if previous is not None and not previous.ended:   # it died without us: its tail is lost
                self._end(previous, "exited", now)
            self._count[service] = self._count.get(service, 0) + 1
            self.lives[service] = _Life(service, self._count[service], port, now)
            self._record(event="start", service=service, life=self._count[service], port=port)
        if self._thread is None:
            self._thread = threading.Thread(target=self._periodic, name="jacoco-dumps", daemon=True)
            self._thread.start()

    def _end(self, life: _Life, how: str, now_ms: float) -> None:
        life.ended = True
        since = life.last_dump_ms if life.last_dump_ms is not None else life.started_ms
        self._record(event="end", service=life.service, life=life.life, how=how,
                     unrecorded_s=round(max(0.0, now_ms - since) / 1000, 3),
                     dumped=life.last_dump_ms is not None)

    def _dump_locked(self, life: _Life, reason: str) -> bool:
        begin = life.last_dump_ms if life.last_dump_ms is not None else life.started_ms
        try:
            result = dump(self.host, life.port, reset=True)
        except (OSError, EOFError, ExecFormatError) as err:
            self._record(event="dump", service=life.service, life=life.life, reason=reason, ok=False,
                         error=f"{type(err).__name__}: {err}")
            return False
        end = time.time() * 1000
        life.last_dump_ms = end
        life.seq += 1
        name = f"{life.service}-{life.life}-{life.seq:04d}.exec"
        if not result.empty:
            (self.parts / name).write_bytes(result.data)
        self._record(event="dump", service=life.service, life=life.life, seq=life.seq, reason=reason, ok=True,
                     file=f"{PARTS_DIR}/{name}" if not result.empty else None, from_ms=round(begin, 1),
                     to_ms=round(end, 1), classes=result.classes, probes_hit=result.probes_hit)
        return True

    def dump(self, service: str, reason: str, *, wait: bool = True) -> bool:
        """Dump one live JVM now (reset: the next dump starts empty); False when it could not."""
        lock = self._lock(service)
        if not lock.acquire(blocking=wait):
            return False
        try:
            life = self.lives.get(service)
            if life is None or life.ended:
                return False
            return self._dump_locked(life, reason)
        finally:
            lock.release()

    def before_kill(self, service: str, kill: Callable[[], None], how: str = "kill") -> None:
        """Dump, then `kill` (SIGKILL or SIGSTOP-free death): what ran between the two is lost."""
        with self._lock(service):
            life = self.lives.get(service)
            if life is not None and not life.ended:
                self._dump_locked(life, f"before {how}")
            try:
                kill()
            finally:
                if life is not None and not life.ended:
                    self._end(life, how, time.time() * 1000)

    def before_stop(self, service: str, stop: Callable[[], None]) -> None:
        """Dump, then stop gracefully with a connection open for the agent's push on exit."""
        with self._lock(service):
            life = self.lives.get(service)
            watch = None
            if life is not None and not life.ended:
                self._dump_locked(life, "before stop")
                with contextlib.suppress(OSError):
                    watch = ExitWatch(self.host, life.port)
            try:
                stop()
            finally:
                if life is not None and not life.ended:
                    pushed = watch.collect() if watch is not None else None
                    if pushed is not None and watch is not None and watch.arrived_ms is not None:
                        begin = life.last_dump_ms or life.started_ms
                        life.seq += 1
                        name = f"{life.service}-{life.life}-{life.seq:04d}.exec"
                        if not pushed.empty:
                            (self.parts / name).write_bytes(pushed.data)
                        self._record(event="dump", service=service, life=life.life, seq=life.seq,
                                     reason="exit push", ok=True,
                                     file=f"{PARTS_DIR}/{name}" if not pushed.empty else None,
                                     from_ms=round(begin, 1), to_ms=round(watch.arrived_ms, 1),
                                     classes=pushed.classes, probes_hit=pushed.probes_hit, complete=pushed.complete)
                        life.last_dump_ms = watch.arrived_ms   # the shutdown after the push is not recorded
                    self._end(life, "stop", time.time() * 1000)

    def before_pause(self, service: str) -> None:
        """A paused JVM cannot answer: dump it first, so its window closes at the pause."""
        self.dump(service, "before pause")

    # ---- periodic, and the end ----

    def _periodic(self) -> None:
        while not self._stop.wait(self.dump_every_s):
            for service in list(self.lives):
                if self._stop.is_set():
                    return
                life = self.lives.get(service)
                if life is None or life.ended:
                    continue
                try:
                    if self.running(service):
                        self.dump(service, "periodic", wait=False)   # busy: a kill or stop is dumping it
                except Exception as err:   # a dump must never take the run down
                    self.say(f"coverage dump of {service} failed: {err}")

    def close(self) -> None:
        """Final dumps of every live JVM, before the cluster stops them; the periodic thread ends."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=DUMP_TIMEOUT_S + 5)
        for service, life in list(self.lives.items()):
            if life.ended:
                continue
            alive = self.running(service)
            if alive:
                with self._lock(service):
                    self._dump_locked(life, "final")
            self._end(life, "down" if alive else "exited", time.time() * 1000)


def read_index(directory: Path) -> list[dict[str, Any]]:
    """The collector's index (coverage/dumps.jsonl); a torn last line is skipped."""
    path = directory / INDEX
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out
