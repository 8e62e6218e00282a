"""Start and stop one `python -m faults.proxy` process, for tests and the benchmark.

The cluster supervisor (`harness.targets.embedded`) has its own process control;
this is the small stand-alone version: write the config, start the process in its
own session, wait (bounded) until `<data_dir>/endpoints.json` names this pid and the
API answers, and stop it by pid (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import requests

from faults.proxy.service import ENDPOINTS_FILE


class ProxyProcessError(RuntimeError):
    pass


class ProxyProcess:
    def __init__(self, directory: Path, proxies: Sequence[Mapping[str, Any]] = (), *, api_port: int = 0,
                 parent_pid: int | None = None, log_level: str = "INFO") -> None:
        self.directory = directory
        self.config_path = directory / "proxy.json"
        self.data_dir = directory / "data"
        self.log_path = directory / "proxy.log"
        self.config: dict[str, Any] = {
            "name": "proxy", "host": "127.0.0.1", "data_dir": str(self.data_dir), "log_level": log_level,
            "api_port": api_port, "proxies": [dict(p) for p in proxies],
        }
        if parent_pid is not None:
            self.config["parent_pid"] = parent_pid
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoints: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        if self.process is None:
            raise ProxyProcessError("the proxy process is not started")
        return self.process.pid

    @property
    def url(self) -> str:
        return str(self.endpoints["api_url"])

    def listen(self, name: str) -> str:
        return str(self.endpoints["proxies"][name])

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "faults.proxy", "--config", str(self.config_path)]

    def start(self, timeout_s: float = 30.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config, indent=2), encoding="utf-8")
        (self.data_dir / ENDPOINTS_FILE).unlink(missing_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ProxyProcessError(f"the proxy exited with {self.process.returncode} at start-up:\n"
                                        + self.log_tail())
            if self._ready():
                return
            time.sleep(0.05)
        self.stop()
        raise ProxyProcessError(f"the proxy was not ready within {timeout_s} s:\n" + self.log_tail())

    def _ready(self) -> bool:
        try:
            endpoints = json.loads((self.data_dir / ENDPOINTS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if endpoints.get("pid") != self.pid:
            return False
        try:
            requests.get(f"{endpoints['api_url']}/version", timeout=2).raise_for_status()
        except requests.RequestException:
            return False
        self.endpoints = endpoints
        return True

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout_s`; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        return self.process.returncode

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].split()[0] in ("Z", "X")
