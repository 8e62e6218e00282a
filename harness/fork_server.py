"""`python -m harness.fork_server`: starts our Python services by forking one warm interpreter.

Why. Every service of the embedded cluster (`python -m embedded.broker --config F`, the ledger and
metadata stores, the fault proxy) is a fresh interpreter that spends most of its start importing:
about 0.4-0.8 CPU-seconds each on this project's 2-core machine, where `make test` starts some 400
of them in tests/cluster alone (measured with process accounting, 2026-12-02). This process imports
a service's module once and forks a child for each start of it; a fork costs milliseconds.

Theory of operation. The owner (the process that starts services: `targets.processes` through
`harness.fork_client`) starts this server with pipes on its stdin and stdout and sends one JSON
request per line; the server answers each on its stdout, one JSON object per line:

* `{"id": N, "module": M, "args": [...], "env": {...}, "cwd": D, "log": F, "title": T}` -> `{"id": N,
  "pid": P}` (or `{"id": N, "error": "..."}`): imported if new (its `__main__` as a plain module,
  so its `if __name__ == "__main__"` block does not run here), then forked; the child is what
  `python -m M args...` would be, started as `targets.processes` starts a service: a session of its
  own, stdin from /dev/null, stdout and stderr appended to F, exactly `env` as its environment, D
  as its directory, unbuffered output, and T as its command line in /proc (so `ps` and the tests
  that look for leftover processes by their command line see the service, not this server).
* whenever a child ends: `{"exited": P, "code": C}`, C as `subprocess.Popen.returncode` gives it
  (negative: killed by that signal). The children are this server's, so it reaps them.

The server ends when its stdin closes (the owner is gone, however it ended); its children go on, as
services started with `start_new_session` do, and a service that watches its owner (`parent_pid`,
`harness.service`) watches this server instead (`FORKED_FOR_ENV`): it ends with its owner.

What a fork inherits that a fresh interpreter would not have, and why each is harmless here (or
refused by the owner, `harness.fork_client.forkable_env`): the modules' import-time state (our
services read no environment and start nothing at import; the test
tests/unit/test_fork_server.py holds the `__main__` guard); `random`'s state (Python reseeds it in
every forked child); the interpreter's start-up settings (`PYTHONHASHSEED`, `PYTHONPATH` and every
other `PYTHON*` variable: the owner forks only when the child's would equal this server's). One
thing differs: every child of one server shares its hash seed where new interpreters draw one each,
so a set of strings iterates in the same order in each of them; a run's services never compare
such orders across processes.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import runpy
import select
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, NoReturn

from harness.procfs import stat_fields_of

#: in a forked service's environment: "<owner pid>:<fork server pid>" (see harness.service)
FORKED_FOR_ENV = "TXNBENCH_FORKED_FOR"
#: the room this server's command line keeps for its children's (see `set_command_line`)
TITLE_ROOM_BYTES = 4096


def exit_code_of(exit: SystemExit) -> int:
    """The status `sys.exit(x)` gives a process: None 0, an int itself, anything else printed and 1."""
    code = exit.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def command_line_area(stat: str) -> tuple[int, int] | None:
    """Where this process's command line lies in its memory (`arg_start`, `arg_end`: fields 48 and
    49 of /proc/self/stat, proc(5)); None when the kernel does not say."""
    fields = stat_fields_of(stat)
    if len(fields) < 47:
        return None
    start, end = int(fields[45]), int(fields[46])
    return (start, end) if 0 < start < end else None


def title_bytes(title: str, room: int) -> bytes | None:
    """`title` laid over a command line area of `room` bytes, as setproctitle(3) does: the title,
    its end, then filler up to a last byte that is not zero, which tells the kernel to read the
    title up to its end (proc_pid_cmdline_read). None when it does not fit."""
    raw = title.encode()
    if b"\0" in raw or len(raw) + 2 > room:
        return None
    return raw + b"\0" * (room - len(raw) - 1) + b" "


def set_command_line(title: str) -> bool:
    """Show `title` as this process's command line in /proc (Linux); False when it cannot be done.

    Written through /proc/self/mem into the area the kernel reads; this server starts with
    TITLE_ROOM_BYTES of room on its own command line, so a service's command fits."""
    try:
        area = command_line_area(Path("/proc/self/stat").read_text())
        if area is None:
            return False
        laid = title_bytes(title, area[1] - area[0])
        if laid is None:
            return False
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(area[0])
            memory.write(laid)
        return True
    except OSError:
        return False


def _unbuffered_text(fd: int, mode: str) -> io.TextIOWrapper:
    """A text stream on `fd` with no buffer, as `PYTHONUNBUFFERED=1` gives a fresh interpreter."""
    return io.TextIOWrapper(io.FileIO(fd, mode, closefd=False), encoding="utf-8", errors="backslashreplace",
                            write_through=True, line_buffering=mode == "w")


def _run_module(module: str, args: list[str]) -> int:
    """`python -m module args...` in this process; returns its exit status (the interpreter's rules)."""
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = exit_code_of(exit)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT      # the interpreter ends by SIGINT itself then (`_child`)
    except BaseException:          # the interpreter prints any uncaught error and exits 1
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        threading._shutdown()      # type: ignore[attr-defined]  # the interpreter waits for its threads
    with contextlib.suppress(BaseException):
        import atexit
        atexit._run_exitfuncs()
    return code


def _child(request: dict[str, Any], owner_pid: int) -> NoReturn:
    """In the forked child: become the service the request describes, run it, and exit with its status.

    Every descriptor of the server's (its pipes to the owner, its wake-up pipe) is closed: the
    owner's pipe must close when the server ends, not when its last child does."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = _unbuffered_text(1, "w")
        sys.stderr = _unbuffered_text(2, "w")
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[FORKED_FOR_ENV] = f"{owner_pid}:{os.getppid()}"
        set_command_line(request.get("title") or " ".join([sys.executable, "-m", request["module"], *request["args"]]))
        code = _run_module(request["module"], list(request["args"]))
    except BaseException:          # nothing may return into the server's loop
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        if code < 0:               # ended by a signal, as an interpreter interrupted by Ctrl-C is
            with contextlib.suppress(BaseException):
                signal.signal(-code, signal.SIG_DFL)
                os.kill(os.getpid(), -code)
        os._exit(code & 0xFF)


def preload(module: str) -> None:
    """Import what `python -m module` imports, without running it: a package's `__main__` (or the
    module) as a plain module, then forgotten, so runpy runs it afresh in each child."""
    main = f"{module}.__main__"
    spec = importlib.util.find_spec(module)
    name = main if spec is not None and spec.submodule_search_locations is not None else module
    if name in sys.modules:
        return
    importlib.import_module(name)
    del sys.modules[name]


class Server:
    """The loop: requests from `requests_fd`, answers to `answers`, children reaped on SIGCHLD."""

    def __init__(self, requests_fd: int, answers: io.BufferedWriter) -> None:
        self.requests_fd = requests_fd
        self.answers = answers
        self.owner_pid = os.getppid()
        self.preloaded: set[str] = set()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)

    def send(self, message: dict[str, Any]) -> None:
        self.answers.write(json.dumps(message).encode() + b"\n")
        self.answers.flush()

    def spawn(self, request: dict[str, Any]) -> dict[str, Any]:
        module = request["module"]
        try:
            if module not in self.preloaded:
                preload(module)
                self.preloaded.add(module)
        except BaseException as err:   # the owner starts it the ordinary way instead
            return {"id": request.get("id"), "error": f"cannot import {module}: {err!r}"}
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, self.owner_pid)
        return {"id": request.get("id"), "pid": pid}

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})

    def serve(self) -> None:
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        pending = b""
        while True:
            readable, _, _ = select.select([self.requests_fd, self._wake_r], [], [])
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 512):
                        pass
                self.reap()
            if self.requests_fd in readable:
                chunk = os.read(self.requests_fd, 65536)
                if not chunk:
                    self.reap()
                    return                     # the owner is gone
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self.send(self.handle(line))

    def handle(self, line: bytes) -> dict[str, Any]:
        try:
            return self.spawn(json.loads(line))
        except BaseException as err:   # a bad request is answered, never fatal
            return {"error": f"bad request: {err!r}"}


def main() -> None:
    """Serve until the owner goes. The arguments are only room for the children's command lines."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)   # what the server or an import prints must not mix with the answers
    Server(0, answers).serve()


if __name__ == "__main__":
    main()
