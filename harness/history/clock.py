"""The run clock: one monotonic time base for every writer on a host.

`time_ns` in the history is `time.monotonic_ns()` minus the run's base. Linux's
CLOCK_MONOTONIC is shared by all processes on a host, so a base chosen by the
orchestrator and handed to child processes (environment variable
TXNBENCH_RUN_BASE_NS) gives every writer the same timeline.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

BASE_ENV = "TXNBENCH_RUN_BASE_NS"


@dataclass(frozen=True)
class RunClock:
    base_ns: int

    @classmethod
    def start(cls) -> RunClock:
        return cls(time.monotonic_ns())

    @classmethod
    def from_env(cls) -> RunClock:
        """The base the orchestrator exported, or a fresh one when run standalone."""
        raw = os.environ.get(BASE_ENV)
        return cls(int(raw)) if raw else cls.start()

    def export(self, env: dict[str, str]) -> dict[str, str]:
        env[BASE_ENV] = str(self.base_ns)
        return env

    def now_ns(self) -> int:
        return time.monotonic_ns() - self.base_ns

    @staticmethod
    def wall_ms() -> float:
        return time.time() * 1000.0
