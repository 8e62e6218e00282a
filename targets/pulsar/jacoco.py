"""JaCoCo on a real Pulsar cluster's JVMs: the jars, the agents, and the dump client.

Theory of operation. `--coverage` (`txnbench run|bench|chaos --target pulsar`) starts every
broker and the bookie with two Java agents (`agent_options`): JaCoCo's own (`output=none`),
which counts which probes of Pulsar's classes ran, in memory; and our dump server
(`jacoco_dump/DumpServer.java`, compiled once into `txnbench-dump.jar`), which answers on a
port of the JVM's own with what JaCoCo counted. Chaos kills JVMs with SIGKILL, which loses
what an agent holds, so the harness asks first: `CoverageCollector` dumps every covered JVM
every `DUMP_EVERY_S`, and right before the cluster's process control kills or pauses one
(`PulsarCluster.kill/stop/pause`; the nemesis, the supervisor and the drain's cold restart
all act through it), and before the cluster goes down. A graceful stop (SIGTERM) is dumped
before it and then every `STOP_DUMP_EVERY_S` while the JVM shuts down, until it is gone: a
broker's shutdown unloads its topics and coordinators, recovery code in its own right. Each
dump resets the counts, so a dump file holds exactly what ran since the one before:
`coverage/parts/<service>-<life>-<seq>.exec`, indexed with its wall-clock window in
`coverage/dumps.jsonl`. A life is one start of one JVM (a restart begins the next).
`targets.pulsar.coverage_report` later merges the parts per life and in all, and tells from
the windows when each recovery method first ran. What was lost is recorded, not guessed: a
kill loses the moment between its dump and the SIGKILL, a stop the moment between its last
dump and the JVM's end, and a life that ended with no dump before it (a JVM that exited on
its own) what ran since its last dump; the index says how long each was.

Why a server of ours rather than JaCoCo's `output=tcpserver`: JaCoCo closes its server in its
shutdown hook, which runs beside Pulsar's own, so nothing a broker ran while shutting down
could be dumped (measured: 18.5 s of eleven graceful stops lost in one chaos run). Ours is a
daemon thread that answers until the JVM halts. Its protocol: the client sends one byte (1:
reset after reading) and reads an `.exec` file's bytes to the end of the stream, JaCoCo's
`ExecutionDataWriter` format (version 0x1007): the header block `01 C0C0 1007`, a
session-info block (`10`: id, start, dump time), and one block per class that ran (`11`:
class id, name, probe booleans packed eight to a byte); `parse_exec` checks and counts it.

The jars (`maven/jacoco/pom.xml`: the agent's `runtime` jar, the CLI's `nodeps` jar,
`org.jacoco.core` with its ASM for our timeline program) are resolved with Maven once into
`.txnbench/pulsar/jacoco/lib-<pom digest>/` (`ensure_jacoco`), like the release's jars; our two
Java programs are compiled beside them on first use (`compile_program`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
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
#: while a JVM shuts down gracefully: dumped this often until it is gone
STOP_DUMP_EVERY_S = 0.2
DUMP_SOURCE = Path(__file__).parent / "jacoco_dump" / "DumpServer.java"
TIMELINE_SOURCE = Path(__file__).parent / "jacoco_timeline" / "CoverageTimeline.java"
COMPILE_TIMEOUT_S = 300
PARTS_DIR = "parts"
INDEX = "dumps.jsonl"

# ---- the exec-data format and the remote-control protocol ----------------------------------------

BLOCK_HEADER = 0x01
BLOCK_SESSIONINFO = 0x10
BLOCK_EXECUTIONDATA = 0x11
MAGIC_NUMBER = 0xC0C0
FORMAT_VERSION = 0x1007
HEADER = struct.pack(">BHH", BLOCK_HEADER, MAGIC_NUMBER, FORMAT_VERSION)


class ExecFormatError(Exception):
    """Bytes that are not JaCoCo execution data of the format this client speaks."""


@dataclass
class ExecData:
    """One dump: the `.exec` file's bytes and what they hold."""

    data: bytes                  # header + session infos + execution data: an .exec file
    sessions: list[str] = field(default_factory=list)
    classes: int = 0             # classes with at least one probe hit
    probes_hit: int = 0

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


def read_blocks(stream: BinaryIO) -> ExecData:
    """The blocks after a header, to the end of the stream, copied into an .exec file's bytes."""
    out = io.BytesIO()
    out.write(HEADER)
    result = ExecData(b"")
    while True:
        first = stream.read(1)
        if not first:
            break
        kind = first[0]
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
    return read_blocks(stream)


def dump(host: str, port: int, *, reset: bool = True, timeout_s: float = DUMP_TIMEOUT_S) -> ExecData:
    """Ask the dump server at host:port for JaCoCo's execution data (and reset it); OSError or
    EOFError when it does not answer, ExecFormatError when it answers something else."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(b"\x01" if reset else b"\x00")
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        raise EOFError("the dump server closed the connection without an answer")
    return parse_exec(data)


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


def agent_options(agent_jar: Path, dump_jar: Path, port: int, host: str = "127.0.0.1",
                  includes: Iterable[str] = INCLUDES) -> list[str]:
    """A covered JVM's `-javaagent:` options: JaCoCo counting Pulsar's classes (no output of its
    own), then our dump server on host:port (after JaCoCo's: it asks JaCoCo's agent for the data)."""
    return [f"-javaagent:{agent_jar}=output=none,includes={':'.join(includes)},jmx=false",
            f"-javaagent:{dump_jar}={host}:{port}"]


def _digest(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def compile_program(source: Path, classpath: Sequence[Path], folder: Path, say: Callable[[str], None],
                    *, release: int = 11) -> Path:
    """`source` compiled (javac of a JDK 17+, `--release`) into `<folder>/classes`, once; the folder."""
    from targets.pulsar.txn_check import _javac, find_jdk

    classes, stamp = folder / "classes", folder / "compiled.json"
    if stamp.is_file() and classes.is_dir():
        return classes
    java, _major = find_jdk(17)
    with building(folder.with_name(folder.name + ".lock"), f"{source.name} (Java)", say,
                  wait_s=COMPILE_TIMEOUT_S + 60):
        if stamp.is_file() and classes.is_dir():
            return classes
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        scratch = Path(tempfile.mkdtemp(prefix="classes-", dir=folder))
        argv = [str(_javac(java)), "-nowarn", "--release", str(release), "-encoding", "UTF-8", "-d", str(scratch),
                "-cp", os.pathsep.join(str(p) for p in classpath), str(source)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise EnvironmentProblem(f"compiling {source.name} failed: {(done.stderr or done.stdout)[-2000:]}")
        scratch.rename(classes)
        write_json_atomic(stamp, {"source": str(source), "javac": str(java)})
    return classes


def ensure_dump_agent(jars: JacocoJars, say: Callable[[str], None] | None = None) -> Path:
    """`txnbench-dump.jar`, our dump server as a Java agent (DumpServer.java), built once."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    folder = jars.lib.parent / f"dump-{_digest(DUMP_SOURCE.read_bytes(), jars.agent.name.encode())}"
    jar = folder / "txnbench-dump.jar"
    if jar.is_file():
        return jar
    classes = compile_program(DUMP_SOURCE, [jars.agent], folder, say, release=8)
    scratch = folder / "txnbench-dump.jar.tmp"
    with zipfile.ZipFile(scratch, "w") as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nPremain-Class: DumpServer\n\n")
        for path in sorted(classes.rglob("*.class")):
            out.write(path, path.relative_to(classes).as_posix())
    scratch.replace(jar)
    return jar


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
        try:
            result = dump(self.host, life.port, reset=True)
        except (OSError, EOFError, ExecFormatError) as err:
            self._record(event="dump", service=life.service, life=life.life, reason=reason, ok=False,
                         error=f"{type(err).__name__}: {err}")
            return False
        self._save(life, result, reason)
        return True

    def _save(self, life: _Life, result: ExecData, reason: str) -> None:
        """One good dump: its file (when it holds anything) and its window in the index."""
        begin = life.last_dump_ms if life.last_dump_ms is not None else life.started_ms
        end = time.time() * 1000
        life.last_dump_ms = end
        life.seq += 1
        name = f"{life.service}-{life.life}-{life.seq:04d}.exec"
        if not result.empty:
            (self.parts / name).write_bytes(result.data)
        self._record(event="dump", service=life.service, life=life.life, seq=life.seq, reason=reason, ok=True,
                     file=f"{PARTS_DIR}/{name}" if not result.empty else None, from_ms=round(begin, 1),
                     to_ms=round(end, 1), classes=result.classes, probes_hit=result.probes_hit)

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
        """Dump, stop gracefully, and dump every STOP_DUMP_EVERY_S while the JVM shuts down (its
        shutdown unloads topics and coordinators) until `stop` returns: the JVM is gone."""
        with self._lock(service):
            life = self.lives.get(service)
            if life is None or life.ended:
                stop()
                return
            self._dump_locked(life, "before stop")
            done = threading.Event()

            def shutdown_dumps() -> None:
                while not done.wait(STOP_DUMP_EVERY_S):
                    try:
                        result = dump(self.host, life.port, reset=True, timeout_s=2.0)
                    except (OSError, EOFError, ExecFormatError):
                        continue     # between the JVM's last answer and its end; stop() ends the loop
                    self._save(life, result, "during stop")

            dumper = threading.Thread(target=shutdown_dumps, name=f"jacoco-stop-{service}", daemon=True)
            dumper.start()
            try:
                stop()
            finally:
                done.set()
                dumper.join(timeout=5.0)
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
