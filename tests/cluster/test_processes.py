"""Process control by pid: kill -9, pause/resume, and recycled-pid safety."""

from __future__ import annotations

import sys
from pathlib import Path

from targets.processes import ManagedProcess, ProcessState, process_state
from tests.waiting import wait_for


def _sleeper(tmp_path: Path) -> ManagedProcess:
    proc = ManagedProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"],
                          tmp_path / "sleeper.log")
    proc.start()
    return proc


def test_kill_is_immediate_and_reaped(tmp_path: Path) -> None:
    proc = _sleeper(tmp_path)
    try:
        assert proc.state == ProcessState.RUNNING
        proc.kill()
        assert proc.state == ProcessState.STOPPED
        assert proc.exit_code() == -9
    finally:
        proc.stop()


def test_pause_and_resume(tmp_path: Path) -> None:
    import signal

    proc = _sleeper(tmp_path)
    try:
        proc.signal(signal.SIGSTOP)
        assert wait_for(lambda: proc.state == ProcessState.PAUSED)
        proc.signal(signal.SIGCONT)
        assert wait_for(lambda: proc.state == ProcessState.RUNNING)
    finally:
        proc.stop()
    assert proc.state == ProcessState.STOPPED


def test_stop_a_paused_process(tmp_path: Path) -> None:
    import signal

    proc = _sleeper(tmp_path)
    proc.signal(signal.SIGSTOP)
    assert wait_for(lambda: proc.state == ProcessState.PAUSED)
    proc.stop(timeout_s=5)
    assert proc.state == ProcessState.STOPPED


def test_a_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    proc = _sleeper(tmp_path)
    try:
        assert proc.pid is not None and proc.start_time is not None
        assert process_state(proc.pid, proc.start_time + 1) == ProcessState.STOPPED
        ghost = ManagedProcess("ghost", [], tmp_path / "g.log", pid=proc.pid, start_time=proc.start_time + 1)
        assert ghost.signal(__import__("signal").SIGKILL) is False
        assert proc.state == ProcessState.RUNNING
    finally:
        proc.stop()
