"""Run a ledger store as a child process (cluster tests, the benchmark, tools).

The cluster supervisor (`harness.targets.embedded`) is the production launcher; this
one exists because `embedded` must not import `harness`. It picks free loopback ports
once and keeps them across restarts, so clients reconnect to the same address after a
kill -9; it waits for /health and signals only the pid it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness.metrics import parse_prometheus_text

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LedgerProcess:
    """`python -m embedded.ledger` in `base_dir` (config, data, log), started and stopped by pid."""

    def __init__(self, base_dir: Path, *, name: str = "ledger", log_level: str = "INFO") -> None:
        self.base_dir = base_dir
        self.name = name
        self.log_level = log_level
        self.data_dir = base_dir / "data"
        self.log_path = base_dir / f"{name}.log"
        self.config_path = base_dir / f"{name}.json"
        self.rpc_port = free_port()
        self.http_port = free_port()
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.rpc_port}"

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start and wait until /health answers 200 (the journal has been replayed)."""
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        config = {"name": self.name, "host": HOST, "data_dir": str(self.data_dir), "log_level": self.log_level,
                  "parent_pid": os.getpid(), "rpc_port": self.rpc_port, "http_port": self.http_port}
        self.config_path.write_text(json.dumps(config, indent=2))
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "embedded.ledger", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, close_fds=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode} while starting "
                                   f"(see {self.log_path}):\n{self.tail()}")
            if self.healthy():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"{self.name} was not healthy within {timeout_s}s:\n{self.tail()}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.http_port}/health", timeout=1) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://{HOST}:{self.http_port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        """One sample from /metrics (0 when absent)."""
        return parse_prometheus_text(self.metrics_text()).get((name, tuple(sorted(labels.items()))), 0.0)

    def kill(self) -> None:
        """kill -9 and reap."""
        if self.running() and self.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL when it lingers; returns the exit code."""
        if self.popen is None:
            return None
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.returncode

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def __enter__(self) -> LedgerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
