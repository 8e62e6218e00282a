"""Run a metadata store as a child process (cluster tests, benchmarks, tools).

The cluster supervisor (`harness.targets.embedded`) is the production launcher; this
one exists because `embedded` must not import `harness`. It picks free loopback
ports once and keeps them across restarts (clients reconnect to the same address),
waits for `/health`, and stops or kill -9s the process by its pid only.
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
from typing import Any

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class StoreProcess:
    def __init__(self, base_dir: Path, *, name: str = "metadata", extra_config: dict[str, Any] | None = None,
                 oxia: bool = False) -> None:
        self.base_dir = base_dir
        self.name = name
        self.data_dir = base_dir / "data"
        self.log_path = base_dir / f"{name}.log"
        self.config_path = base_dir / f"{name}.json"
        self.rpc_port = free_port()
        self.http_port = free_port()
        self.oxia_port: int | None = free_port() if oxia else None   # Oxia's gRPC protocol beside ours
        self.extra_config = extra_config or {}
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.rpc_port}"

    @property
    def oxia_address(self) -> str:
        if self.oxia_port is None:
            raise RuntimeError(f"{self.name} was started without the Oxia protocol (StoreProcess(..., oxia=True))")
        return f"{HOST}:{self.oxia_port}"

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, timeout_s: float = 30.0) -> None:
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        config = {"name": self.name, "host": HOST, "data_dir": str(self.data_dir), "log_level": "INFO",
                  "parent_pid": os.getpid(), "rpc_port": self.rpc_port, "http_port": self.http_port,
                  **({"oxia_port": self.oxia_port} if self.oxia_port is not None else {}), **self.extra_config}
        self.config_path.write_text(json.dumps(config, indent=2))
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "embedded.metadata", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, close_fds=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode} while starting:\n{self.tail()}")
            if self.healthy():
                return
            time.sleep(0.05)
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

    def kill(self) -> None:
        """kill -9 and reap."""
        if self.running() and self.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL when it lingers."""
        if not self.running() or self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def __enter__(self) -> StoreProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
