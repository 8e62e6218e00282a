"""The fork server with real processes: a forked service is what a new interpreter would be (its
arguments, directory, exact environment, session, stdin, output and command line), its exit is
reported as Popen reports one, and it falls back to a new interpreter when it cannot fork."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.entrypoints import python_m
from harness.fork_client import SWITCH_ENV, ForkedProcess, ForkServer
from harness.fork_server import FORKED_FOR_ENV
from targets.processes import ManagedProcess, ProcessState
from tests.cluster import fork_target
from tests.cluster.conftest import end_owner_and_orphan
from tests.waiting import wait_for
from tools.launch import process_gone


@pytest.fixture
def server() -> Iterator[ForkServer]:
    started = ForkServer()
    yield started
    started.close()


def _argv(tmp_path: Path, name: str, **config: Any) -> list[str]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    return python_m(fork_target, "--config", str(path))


def _seen(log: Path) -> dict[str, Any]:
    line = next(line for line in log.read_text().splitlines() if line.startswith("{"))
    seen: dict[str, Any] = json.loads(line)
    return seen


def _spawn(server: ForkServer, tmp_path: Path, name: str, **config: Any) -> tuple[ForkedProcess, Path]:
    log = tmp_path / f"{name}.log"
    env = {**server.env, "ONLY_HERE": name}
    child = server.spawn(_argv(tmp_path, name, **config), env, log)
    assert child is not None, server.errors()
    return child, log


def test_a_forked_service_starts_as_a_new_interpreter_would(server: ForkServer, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _argv(tmp_path, "first", exit=3)
    child = server.spawn(argv, {**server.env, "ONLY_HERE": "yes"}, tmp_path / "first.log")
    assert child is not None
    assert child.wait(timeout=30) == 3 and child.poll() == 3
    seen = _seen(tmp_path / "first.log")
    assert seen["argv"] == argv[3:] and seen["name"] == "__main__" and seen["pid"] == child.pid
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == {**server.env, "ONLY_HERE": "yes", FORKED_FOR_ENV: f"{os.getpid()}:{server.pid}"}
    assert seen["session"] == child.pid                 # a session of its own, as start_new_session gives
    assert seen["stdin"] == ""                          # /dev/null


def test_two_forks_draw_different_random_numbers(server: ForkServer, tmp_path: Path) -> None:
    first, first_log = _spawn(server, tmp_path, "a")
    second, second_log = _spawn(server, tmp_path, "b")
    assert first.wait(timeout=30) == 0 and second.wait(timeout=30) == 0
    assert _seen(first_log)["random"] != _seen(second_log)["random"]


def test_an_uncaught_error_exits_1_with_its_traceback_in_the_log(server: ForkServer, tmp_path: Path) -> None:
    child, log = _spawn(server, tmp_path, "raises", **{"raise": "planted failure"})
    assert child.wait(timeout=30) == 1
    assert "RuntimeError: planted failure" in log.read_text()


def test_a_killed_service_reports_the_signal_and_shows_its_own_command_line(server: ForkServer,
                                                                              tmp_path: Path) -> None:
    child, _ = _spawn(server, tmp_path, "sleeps", sleep_s=60)
    def command() -> str:
        return Path(f"/proc/{child.pid}/cmdline").read_bytes().rstrip(b"\0").decode()
    assert wait_for(lambda: command() == " ".join(child.args)), command()   # set by the child once forked
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL


def test_a_service_outlives_the_server_and_its_owner_check_sees_the_server_end(server: ForkServer,
                                                                                 tmp_path: Path) -> None:
    child, _ = _spawn(server, tmp_path, "outlives", sleep_s=60)
    try:
        assert Path(f"/proc/{child.pid}/stat").exists()
        server.close()
        assert not server.running
        assert wait_for(lambda: os.getpgid(child.pid) >= 0 and _parent_of(child.pid) != server.pid)
        assert child.poll() is None                     # no report any more: /proc decides
    finally:
        os.kill(child.pid, signal.SIGKILL)


def _parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2:].split()[1])


def test_other_interpreter_settings_are_not_forked(server: ForkServer, tmp_path: Path) -> None:
    env = {**server.env, "PYTHONHASHSEED": "12345" if server.env.get("PYTHONHASHSEED") != "12345" else "1"}
    assert server.spawn(_argv(tmp_path, "seeded"), env, tmp_path / "seeded.log") is None


@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_managed_service_is_forked_unless_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       switch: str) -> None:
    monkeypatch.setenv(SWITCH_ENV, switch)
    proc = ManagedProcess("target", _argv(tmp_path, "managed", sleep_s=60), tmp_path / "managed.log")
    proc.start()
    try:
        assert isinstance(proc.popen, ForkedProcess) is (switch == "1")
        assert wait_for(lambda: (tmp_path / "managed.log").read_text().count("{") > 0)
        assert proc.state == ProcessState.RUNNING
        proc.kill()
        assert proc.state == ProcessState.STOPPED and proc.exit_code() == -signal.SIGKILL
    finally:
        proc.stop()
    assert "==== starting target" in (tmp_path / "managed.log").read_text()
    assert sys.executable in (tmp_path / "managed.log").read_text()


OWNER_SCRIPT = """
import json, os, sys, time
from pathlib import Path
from targets.processes import ManagedProcess, module_argv
import faultproxy
config_path = Path(sys.argv[1])
config = json.loads(config_path.read_text())
config["parent_pid"] = os.getpid()
config_path.write_text(json.dumps(config))
proxy = ManagedProcess("proxy", module_argv(faultproxy, config_path), Path(sys.argv[2]))
proxy.start()
print(type(proxy.popen).__name__, proxy.pid, flush=True)
time.sleep(120)
"""


def test_a_forked_service_ends_when_its_owner_is_killed(tmp_path: Path) -> None:
    """A run killed with -9 leaves no orphan: its fork server ends, and the service watching its
    owner (`parent_pid`) sees the server, its parent, go."""
    data_dir = tmp_path / "data"
    config_path = tmp_path / "proxy.json"
    config_path.write_text(json.dumps({"name": "proxy", "host": "127.0.0.1", "data_dir": str(data_dir),
                                       "api_port": 0, "proxies": []}))
    owner = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(config_path), str(tmp_path / "proxy.log")],
                             stdout=subprocess.PIPE, text=True, start_new_session=True,
                             env={**os.environ, SWITCH_ENV: "1"})
    service_pid: int | None = None
    try:
        assert owner.stdout is not None
        kind, pid = owner.stdout.readline().split()
        service_pid = int(pid)
        assert kind == "ForkedProcess"
        endpoints = data_dir / "endpoints.json"
        assert wait_for(lambda: endpoints.exists() and json.loads(endpoints.read_text())["pid"] == service_pid,
                        timeout_s=30), (tmp_path / "proxy.log").read_text()
        time.sleep(2.5)                 # the service checks its owner every second: it is still there
        assert not process_gone(service_pid), (tmp_path / "proxy.log").read_text()
        owner.kill()
        owner.wait(10)
        assert wait_for(lambda: process_gone(service_pid), timeout_s=15), "the proxy outlived its owner"
    finally:
        end_owner_and_orphan(owner, service_pid)



def test_an_uncaught_keyboard_interrupt_ends_the_service_by_sigint(server: ForkServer, tmp_path: Path) -> None:
    """As an interpreter does (Python 3.8+): the owner sees the signal, not an exit code."""
    child, log = _spawn(server, tmp_path, "interrupted", interrupt=True)
    assert child.wait(timeout=30) == -signal.SIGINT
    assert "KeyboardInterrupt" in log.read_text()
