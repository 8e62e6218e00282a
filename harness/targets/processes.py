"""Starting, signalling and stopping local service processes by pid.

Theory of operation. A service is started once with `Popen(start_new_session=True)`,
so a Ctrl-C in the user's terminal reaches the orchestrator only, which then stops
services in order. Its pid and its kernel start time (field 22 of /proc/<pid>/stat)
are recorded together: before any signal is sent, the pair is checked again, so a
recycled pid is never signalled by mistake. A process we started ourselves is also
reaped (`Popen.wait`) so no zombie is left; one started by an earlier `cluster up`
was adopted by init, which reaps it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

#: Every service binds the loopback address only.
HOST = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now (all held open together, so distinct)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_port() -> int:
    """One port free on 127.0.0.1 right now."""
    return free_ports(1)[0]


class ProcessState:
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may contain spaces; fields follow the last ')'.
    rest = raw[raw.rfind(")") + 2:].split()
    return rest  # rest[0] is field 3 (state); field N is rest[N - 3]


def process_start_time(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def process_state(pid: int, start_time: int | None) -> str:
    """running, paused (SIGSTOP) or stopped (gone, zombie, or a recycled pid)."""
    fields = _stat_fields(pid)
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


@dataclass
class ManagedProcess:
    """A service process: its command, log file and, once started, pid and start time."""

    name: str
    argv: list[str]
    log_path: Path
    pid: int | None = None
    start_time: int | None = None
    popen: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str] | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n==== starting {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                close_fds=True,
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

    def kill(self) -> None:
        """kill -9 and wait until the process is gone (reaped when it is our child)."""
        if self.signal(signal.SIGKILL) and not self.wait_gone(10):
            raise RuntimeError(f"{self.name} (pid {self.pid}) survived SIGKILL for 10 s")

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (after SIGCONT, in case it is paused), then SIGKILL when it lingers."""
        if self.state == ProcessState.STOPPED:
            self.wait_gone(0.1)
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if not self.wait_gone(timeout_s):
            self.kill()

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])
