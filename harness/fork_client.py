"""The owner's side of the fork server (`harness.fork_server`): one server per process, started on
first use, and a handle to each forked service that answers as much of `subprocess.Popen` as
`targets.processes` asks (pid, poll, wait, returncode).

Why a handle and not Popen: a forked service is the server's child, not the owner's, so the owner
cannot wait for it; the server reports each exit (`{"exited": pid, "code": c}`) and the handle
waits for that report. A server that is gone (it ends with its owner; it could crash) reports
nothing more: a handle then answers None and the caller's /proc reading decides (a process that is
gone is stopped, `targets.processes.process_state`).

`TXNBENCH_FORK_SERVER=0` turns the server off: every service is then started as a new interpreter.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from harness import fork_server
from harness.entrypoints import python_m
from harness.procfs import stat_fields

log = logging.getLogger(__name__)

#: set to "0" to start every service as a new interpreter
SWITCH_ENV = "TXNBENCH_FORK_SERVER"
#: how long a start may wait for the server's answer (an import of a broker's modules: ~0.5 s)
ANSWER_TIMEOUT_S = 60.0
#: how long a handle waits for the exit report of a process /proc already shows ended
EXIT_REPORT_WAIT_S = 2.0
#: what the server's environment and a child's may differ in: it is set again in the child
_RESET_IN_CHILD = frozenset({"PYTHONUNBUFFERED"})


def interpreter_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The variables a Python interpreter reads when it starts (`PYTHON*`), which a fork cannot
    change for its child: the hash seed, the import path, warnings, the bytecode cache, ..."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k not in _RESET_IN_CHILD}


def forkable_env(server_env: Mapping[str, str], child_env: Mapping[str, str]) -> bool:
    """A child with `child_env` is what the server would fork: the same interpreter settings."""
    return interpreter_settings(server_env) == interpreter_settings(child_env)


def _ended(pid: int) -> bool:
    """/proc says `pid` is gone or a zombie (its exit is being reported)."""
    fields = stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X", "x")


class ForkedProcess:
    """One forked service: `pid`, `poll()`, `wait(timeout)` and `returncode`, as Popen has them."""

    def __init__(self, server: ForkServer, pid: int, argv: Sequence[str]) -> None:
        self.server = server
        self.pid = pid
        self.args = list(argv)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid, 0.0)
            if self.returncode is None and _ended(self.pid):
                self.returncode = self.server.exit_code(self.pid, EXIT_REPORT_WAIT_S)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self.server.exit_code(self.pid, timeout)
        if code is None:
            code = self.poll()
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        self.returncode = code
        return code


class Reports:
    """What a fork server said, in its order: answers by request id, exit codes by pid. Read by one
    thread (`record`), waited on by any (`answer`, `exit_code`)."""

    def __init__(self) -> None:
        self._state = threading.Condition()
        self._answers: dict[int, dict[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self.open = True

    def record(self, message: Mapping[str, Any]) -> None:
        with self._state:
            if "exited" in message:
                self._exits[int(message["exited"])] = int(message["code"])
            elif "id" in message:
                self._answers[int(message["id"])] = dict(message)
                if "pid" in message:   # a recycled pid: its earlier holder's exit is not this one's
                    self._exits.pop(int(message["pid"]), None)
            self._state.notify_all()

    def close(self) -> None:
        """The server said its last: nobody waits for more."""
        with self._state:
            self.open = False
            self._state.notify_all()

    def _wait(self, ready: Callable[[], bool], timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ready() and self.open:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            self._state.wait(left)

    def answer(self, request_id: int, timeout: float) -> dict[str, Any] | None:
        """The answer to `request_id` (taken), waiting up to `timeout`; None when none came."""
        with self._state:
            self._wait(lambda: request_id in self._answers, timeout)
            return self._answers.pop(request_id, None)

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """The exit code reported for `pid`, waiting up to `timeout` (None: while the server speaks)."""
        with self._state:
            self._wait(lambda: pid in self._exits, timeout)
            return self._exits.get(pid)


class ForkServer:
    """A running fork server and what it has reported (`Reports`)."""

    def __init__(self) -> None:
        self.owner_pid = os.getpid()
        self.env = dict(os.environ)
        self._errors: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - open while the server lives
        room = " " * fork_server.TITLE_ROOM_BYTES
        self._process = subprocess.Popen(
            python_m(fork_server, room), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors,
            start_new_session=True, close_fds=True, env=self.env)
        self.pid = self._process.pid
        self._requests = self._process.stdin
        self._send_lock = threading.Lock()
        self.reports = Reports()
        self._next_id = 0
        threading.Thread(target=self._read, name=f"fork-server-{self.pid}", daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            with contextlib.suppress(ValueError):
                self.reports.record(json.loads(line))
        self.reports.close()

    @property
    def running(self) -> bool:
        return self.reports.open and self._process.poll() is None

    def errors(self) -> str:
        """What the server wrote to its stderr (its last lines): why it ended, when it did."""
        with contextlib.suppress(OSError):
            self._errors.seek(0)
            return self._errors.read().decode(errors="replace")[-2000:]
        return ""

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """The exit code the server reported for `pid`, waiting up to `timeout`; None when none came."""
        return self.reports.exit_code(pid, timeout)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ForkedProcess | None:
        """Fork `python -m <module> args...` (argv as `harness.entrypoints.python_m` makes it) with
        exactly `env`, its output appended to `log_path`; None when the server cannot (the
        caller starts a new interpreter instead)."""
        title = " ".join(argv)
        if len(title.encode()) + 2 > fork_server.TITLE_ROOM_BYTES or not forkable_env(self.env, env):
            return None
        with self._send_lock:
            self._next_id += 1
            request_id = self._next_id
            request = {"id": request_id, "module": argv[2], "args": list(argv[3:]), "env": dict(env),
                       "cwd": os.getcwd(), "log": str(log_path), "title": title}
            try:
                assert self._requests is not None
                self._requests.write(json.dumps(request).encode() + b"\n")
                self._requests.flush()
            except (OSError, ValueError):
                return None
        answer = self.reports.answer(request_id, ANSWER_TIMEOUT_S)
        if answer is None or "pid" not in answer:
            why = (answer or {}).get("error") or f"no answer; its stderr: {self.errors() or '(empty)'}"
            log.warning("fork server (pid %d) did not start %s: %s", self.pid, argv[2], why)
            return None
        return ForkedProcess(self, int(answer["pid"]), argv)

    def close(self, timeout_s: float = 5.0) -> None:
        """End the server (its children go on): close its requests; kill it if it lingers."""
        with contextlib.suppress(OSError, ValueError):
            if self._requests is not None:
                self._requests.close()
        try:
            self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout_s)


_SERVER: ForkServer | None = None
_SERVER_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "1") != "0"


def shared_server() -> ForkServer | None:
    """This process's fork server, started on first use (again after it ended, or in a forked copy
    of this process, which must not share its parent's pipes); None when turned off."""
    global _SERVER
    if not enabled():
        return None
    with _SERVER_LOCK:
        if _SERVER is None or _SERVER.owner_pid != os.getpid() or not _SERVER.running:
            _SERVER = ForkServer()
        return _SERVER


def fork_service(argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ForkedProcess | None:
    """Start `python -m <module> args...` by the fork server: None when it cannot (turned off, a
    different interpreter or settings, the server failed), and the caller starts it anew."""
    if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m":
        return None
    server = shared_server()
    return server.spawn(argv, env, log_path) if server is not None else None
