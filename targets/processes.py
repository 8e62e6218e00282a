"""Starting, signalling and stopping local service processes by pid.

Theory of operation. A service is started once with `Popen(start_new_session=True)`,
so a Ctrl-C in the user's terminal reaches the orchestrator only, which then stops
services in order. Its pid and its kernel start time (field 22 of /proc/<pid>/stat)
are recorded together: before any signal is sent, the pair is checked again, so a
recycled pid is never signalled by mistake. A process we started ourselves is also
reaped (`Popen.wait`) so no zombie is left; one started by an earlier `cluster up`
was adopted by init, which reaps it.

`ManagedProcess` is any such process; `ServiceProcess` is one of our services (or
ZooKeeper): it also writes its config before each start, knows when it is ready (its
`/health`, or what a subclass says) and reads its `/metrics`. The embedded target and
the tools (`tools/launch.py`) start every service through it, so start-up, readiness,
stopping and the log tail in errors are written once.

Ready also means holding its own ports (`ServiceProcess.ports`): a port chosen free can be
taken by another process before the service binds it (another cluster's broker, say), and
that process may answer the readiness probe. `listening_ports(pid)` reads which ports a
process listens on (Linux's /proc), so a probe answered by someone else is not readiness;
`said_address_in_use()` reads the service's log since its start for a failed bind.
targets/ports.py moves such a service to new ports and starts it again.
"""

from __future__ import annotations

import collections
import contextlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, Self

import requests

from harness import covered
from harness.entrypoints import python_m, runnable_name
from harness.fork_client import fork_service
from harness.metrics import parse_prometheus_text
from harness.procfs import stat_fields
from harness.results import write_json_atomic

#: Every service binds the loopback address only.
HOST = "127.0.0.1"


#: ports this process handed out lately, never handed out again while remembered
_RECENT_PORTS: collections.deque[int] = collections.deque(maxlen=4096)
_PORTS_LOCK = threading.Lock()
_PORT_DRAWS_PER_PORT = 64
#: the kernel's range of ephemeral ports (the source ports of outgoing connections, bind(0))
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: the lowest port handed out: services get ports between this and the ephemeral range
LOWEST_SERVICE_PORT = 20000


def service_port_range() -> range | None:
    """Ports below the kernel's ephemeral range (from LOWEST_SERVICE_PORT), or None where it is unknown
    or leaves fewer than 1,000 ports.

    Why: a service keeps its port across a restart (clients and the other servers know its
    address), so while it is down the port must stay free. A port from the ephemeral range does
    not: the kernel hands it to the next bind(0) or outgoing connection of any process (a
    pytest worker's cluster bound a killed broker's port, and the broker could not come back:
    "address already in use"). Below that range only an explicit bind takes it.
    """
    try:
        low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(LOWEST_SERVICE_PORT, low) if low - LOWEST_SERVICE_PORT >= 1000 else None


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now, none handed out by this process lately;
    below the kernel's ephemeral range where it is known (`service_port_range`).

    Why the memory: a port is free only until someone binds it, and the services given ports
    bind them later, when they start. Two services planned one after the other (a metadata store
    and a ledger store) could be handed the same port by the kernel; the second then failed to
    bind, and its readiness check, asking that port, got the first one's answer (a test saw a
    "ready" ledger store refuse every connection). Each draw's sockets stay bound until the
    draw ends, so no port repeats within it.
    """
    pool = service_port_range()
    sockets: list[socket.socket] = []
    chosen: list[int] = []
    with _PORTS_LOCK:
        try:
            for _ in range(count * _PORT_DRAWS_PER_PORT):
                if len(chosen) == count:
                    break
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(s)
                try:
                    s.bind((HOST, random.choice(pool) if pool is not None else 0))
                except OSError:
                    continue   # taken (by a service, or a port of ours still in TIME_WAIT)
                port = s.getsockname()[1]
                if port not in _RECENT_PORTS and port not in chosen:
                    chosen.append(port)
            if len(chosen) < count:
                raise OSError(f"found only {len(chosen)} of {count} free ports on {HOST} not handed out lately")
            _RECENT_PORTS.extend(chosen)
            return chosen
        finally:
            for s in sockets:
                s.close()


def free_port() -> int:
    """One port free on 127.0.0.1 right now."""
    return free_ports(1)[0]


#: How a failed bind reads in a server's log: Python's OSError (asyncio: "address already in use"),
#: Java's BindException ("Address already in use", netty's "bind(..) failed: Address already in use"),
#: Go's "bind: address already in use".
ADDRESS_IN_USE = re.compile(r"address already in use|java\.net\.BindException|EADDRINUSE", re.IGNORECASE)

_LISTEN = "0A"   # TCP_LISTEN in /proc/net/tcp's `st` column


def address_in_use(log_text: str) -> bool:
    """The text (a server's log) says a bind failed because the address was taken."""
    return ADDRESS_IN_USE.search(log_text) is not None


def _listening_inodes(tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> dict[int, int] | None:
    """socket inode -> port of every listening TCP socket (IPv4 and IPv6: a JVM binds 127.0.0.1 on
    a dual-stack socket); None when the tables cannot be read (not Linux)."""
    out: dict[int, int] = {}
    read_any = False
    for table in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read_any = True
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN:
                out[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return out if read_any else None


def listening_ports(pid: int) -> set[int] | None:
    """The TCP ports process `pid` listens on; None when that cannot be told (no /proc, not ours to read)."""
    inodes = _listening_inodes()
    if inodes is None:
        return None
    ports: set[int] = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return set()     # gone: it holds nothing
    except PermissionError:
        return None
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                port = inodes.get(int(target[8:-1]))
                if port is not None:
                    ports.add(port)
    return ports


class ProcessState:
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


def process_start_time(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[19]) if fields else None


def process_state(pid: int, start_time: int | None) -> str:
    """running, paused (SIGSTOP) or stopped (gone, zombie, or a recycled pid)."""
    fields = stat_fields(pid)
    if fields is None:
        return ProcessState.STOPPED
    if start_time is not None and int(fields[19]) != start_time:
        return ProcessState.STOPPED
    code = fields[0]
    if code in ("Z", "X", "x"):
        return ProcessState.STOPPED
    if code in ("T", "t"):
        return ProcessState.PAUSED
    return ProcessState.RUNNING


class ChildProcess(Protocol):
    """What a started process is asked: `subprocess.Popen`, or a service the fork server forked
    (`harness.fork_client.ForkedProcess`)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass
class ManagedProcess:
    """A service process: its command, log file and, once started, pid and start time."""

    name: str
    argv: list[str]
    log_path: Path
    pid: int | None = None
    start_time: int | None = None
    popen: ChildProcess | None = None
    #: where this start's lines begin in the log, and how far `said_address_in_use` has read
    log_start: int = field(default=0, init=False, repr=False)
    _log_scanned: int = field(default=0, init=False, repr=False)
    _log_said_in_use: bool = field(default=False, init=False, repr=False)

    def start(self, env: dict[str, str] | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n==== starting {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.log_start = self._log_scanned = log.tell()
            self._log_said_in_use = False
            environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
            forked = fork_service(self.argv, environment, self.log_path) if forkable(self.argv) else None
            self.popen = forked or subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env=environment, close_fds=True,
            )
        self.pid = self.popen.pid
        self.start_time = None
        for _ in range(200):  # /proc appears immediately; bounded just in case
            self.start_time = process_start_time(self.pid)
            if self.start_time is not None:
                break
            time.sleep(0.005)

    @property
    def state(self) -> str:
        if self.pid is None:
            return ProcessState.STOPPED
        if self.popen is not None and self.popen.poll() is not None:
            return ProcessState.STOPPED
        return process_state(self.pid, self.start_time)

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def signal(self, sig: signal.Signals) -> bool:
        """Send `sig` if the recorded process still exists; False when it is gone."""
        if self.pid is None or self.state == ProcessState.STOPPED:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)
            return True
        return False

    def wait_gone(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=0.05)
            if self.state == ProcessState.STOPPED:
                return True
            time.sleep(0.02)
        return self.state == ProcessState.STOPPED

    def running(self) -> bool:
        """Started and not gone (a paused process is still running)."""
        return self.state != ProcessState.STOPPED

    def kill(self) -> None:
        """kill -9 and wait until the process is gone (reaped when it is our child)."""
        if self.signal(signal.SIGKILL) and not self.wait_gone(10):
            raise RuntimeError(f"{self.name} (pid {self.pid}) survived SIGKILL for 10 s")

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM (after SIGCONT, in case it is paused), then SIGKILL when it lingers.

        Returns the exit code when the process is our child (None otherwise)."""
        if self.state == ProcessState.STOPPED:
            self.wait_gone(0.1)
            return self.exit_code()
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if not self.wait_gone(timeout_s):
            self.kill()
        return self.exit_code()

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def said_address_in_use(self) -> bool:
        """Its log since this start says a bind failed on a taken address (read incrementally)."""
        if self._log_said_in_use:
            return True
        overlap = 64   # a match split across two reads
        start = max(self.log_start, self._log_scanned - overlap)
        try:
            with self.log_path.open("rb") as log:
                log.seek(start)
                chunk = log.read()
        except FileNotFoundError:
            return False
        self._log_scanned = start + len(chunk)
        self._log_said_in_use = address_in_use(chunk.decode(errors="replace"))
        return self._log_said_in_use


#: the packages a service run under coverage traces (`harness.covered`): the cluster's own code
COVERAGE_SOURCES = ("embedded",)


def module_argv(module: ModuleType, config_path: Path, coverage_dir: Path | None = None) -> list[str]:
    """The command of one of our services: `python -m <module> --config <file>` (this interpreter).

    A module, not its name, so the import contracts see what starts what (harness.entrypoints).
    With `coverage_dir`, the module runs under coverage.py through `harness.covered`, which
    writes its data file there (and saves it every second, so a kill -9 keeps it)."""
    if coverage_dir is None:
        return python_m(module, "--config", str(config_path))
    sources = [arg for pkg in COVERAGE_SOURCES for arg in ("--source", pkg)]
    return python_m(covered, "--data-dir", str(coverage_dir), *sources, runnable_name(module), "--",
                    "--config", str(config_path))


def forkable(argv: Sequence[str]) -> bool:
    """`argv` is a command `module_argv` makes without coverage (`python -m <service> --config F`),
    which the fork server may start (`harness.fork_server`: our services, whose `__main__` runs
    nothing on import, tests/unit/test_fork_server.py). Under coverage a service runs as a new
    interpreter, so that its imports are traced too."""
    return len(argv) == 5 and argv[0] == sys.executable and argv[1] == "-m" and argv[3] == "--config"


class ServiceNotReady(RuntimeError):
    """A service exited while starting, or was not ready in time; the message ends with its log's tail.

    `pending` are the services still not ready (the one that exited first, when one did)."""

    def __init__(self, message: str, pending: Sequence[ServiceProcess]) -> None:
        super().__init__(message)
        self.pending = tuple(pending)


class ServiceExited(ServiceNotReady):
    """`pending[0]` exited during start-up."""


@dataclass
class ServiceProcess(ManagedProcess):
    """One service: its config file, how to tell it is ready, where its metrics are.

    `config` (when given) is written to `config_path` before every start, so a restart
    after a kill runs with the same config; a process attached from a state file has no
    `config` and starts with the file already there. `start` returns once the process
    is ready when `ready_timeout_s` (or its `timeout_s`) is set; without one it returns
    at once and the caller waits, e.g. for several services together (`wait_ready`).
    """

    config_path: Path | None = None
    config: Mapping[str, Any] | None = None
    health_url: str | None = None
    metrics_url: str | None = None
    ready_timeout_s: float | None = None
    #: the ports it must listen on itself to be ready (see the module docstring); () checks none
    ports: tuple[int, ...] = ()

    def write_config(self) -> None:
        if self.config is not None and self.config_path is not None:
            write_json_atomic(self.config_path, dict(self.config))

    def prepare(self) -> None:
        """What must exist before the process starts (its config file); subclasses add theirs."""
        self.write_config()

    def spawn(self, env: dict[str, str] | None = None) -> None:
        """Start the process itself (`ManagedProcess.start`); subclasses add what must follow at once."""
        super().start(env)

    def start(self, env: dict[str, str] | None = None, *, timeout_s: float | None = None) -> None:
        """Start; then, with a timeout (`timeout_s`, else `ready_timeout_s`), wait until ready.

        Raises ServiceExited when it exits while starting, ServiceNotReady when it is not
        ready in time (it is killed then, so nothing is left behind)."""
        self.prepare()
        self.spawn(env)
        wait_s = timeout_s if timeout_s is not None else self.ready_timeout_s
        if wait_s is None:
            return
        try:
            wait_ready([self], time.monotonic() + wait_s)
        except ServiceExited:
            raise ServiceExited(f"{self.name} exited with {self.exit_code()} while starting (see {self.log_path}):\n"
                                f"{self.tail()}", [self]) from None
        except ServiceNotReady:
            self.kill()
            raise ServiceNotReady(f"{self.name} was not ready within {wait_s:g} s (see {self.log_path}):\n"
                                  f"{self.tail()}", [self]) from None

    def healthy(self, session: requests.Session | None = None) -> bool:
        """Ready: its readiness probe answers (`answers`) and it holds its own `ports`."""
        return self.answers(session) and self.holds_its_ports()

    def holds_its_ports(self) -> bool:
        """It listens on every one of `ports` (True when there are none, or when /proc cannot tell)."""
        if not self.ports:
            return True
        if self.pid is None:
            return False
        held = listening_ports(self.pid)
        return held is None or set(self.ports) <= held

    def answers(self, session: requests.Session | None = None) -> bool:
        """Its readiness probe: `GET health_url` answers 200 (False without a health URL), and, when the
        answer names a pid (our services: `ok pid=N`), it is this process's: a port that another
        process bound meanwhile (one of our own services, planned on the same port) must not
        pass for this service's readiness."""
        if self.health_url is None:
            return False
        try:
            response = (session or requests).get(self.health_url, timeout=2)
        except requests.RequestException:
            return False
        if response.status_code != 200:
            return False
        answered = answering_pid(response.text)
        return answered is None or answered == self.pid

    def metrics_text(self, timeout_s: float = 5.0) -> str:
        """Its `/metrics` now (Prometheus text); raises requests' errors."""
        if self.metrics_url is None:
            raise RuntimeError(f"{self.name} serves no metrics")
        response = requests.get(self.metrics_url, timeout=timeout_s)
        response.raise_for_status()
        return response.text

    def metric(self, name: str, **labels: str) -> float:
        """One sample from `/metrics` (0 when absent)."""
        return parse_prometheus_text(self.metrics_text()).get((name, tuple(sorted(labels.items()))), 0.0)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def answering_pid(health_body: str) -> int | None:
    """The pid an `ok pid=N` health answer names; None for any other answer (a foreign service)."""
    head, _, rest = health_body.strip().partition(" pid=")
    if head != "ok" or not rest.isdigit():
        return None
    return int(rest)


def wait_ready(services: Sequence[ServiceProcess], deadline: float, poll_s: float = 0.05) -> None:
    """Until every service is healthy, bounded by `deadline` (time.monotonic()).

    Raises ServiceExited when one exits first, ServiceNotReady naming those still pending
    past the deadline; the caller decides what the message says and what to stop."""
    pending = list(services)
    with requests.Session() as session:
        while pending:
            for service in list(pending):
                if service.state == ProcessState.STOPPED:
                    raise ServiceExited(f"{service.name} exited during start-up (code {service.exit_code()}); "
                                        f"see {service.log_path}", [service])
                if service.healthy(session):
                    pending.remove(service)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ServiceNotReady(f"{', '.join(s.name for s in pending)} not ready in time; see "
                                      f"{pending[0].log_path}", pending)
            time.sleep(poll_s)
