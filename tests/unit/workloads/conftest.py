"""Fixtures: a load context around the fake client, a history folder, a controllable clock."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config import RunConfig, parse_scenario
from harness.history import HistoryRecorder
from tests.unit.workloads.fakes import FakeClient
from workloads.context import LoadContext
from workloads.topology import plan


class ManualClock:
    """A run clock whose time moves only when a test says so."""

    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now = start_ns
        self.base_ns = 0

    def now_ns(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)

    @staticmethod
    def wall_ms() -> float:
        return time.time() * 1000.0


class ClockedStop(threading.Event):
    """A stop flag whose timed waits advance a ManualClock instead of sleeping."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        if self.is_set():
            return True
        if timeout is not None:
            self.waits.append(timeout)
            self.clock.advance(timeout)
        return self.is_set()


def scenario(text: str) -> RunConfig:
    return parse_scenario(text, source="test.yaml", default_name="t")


class Harness:
    """A load context over a fake client, plus ways to read what it recorded."""

    def __init__(self, tmp: Path, config: RunConfig, clock: ManualClock) -> None:
        self.config = config
        self.client = FakeClient()
        self.clock = clock
        self.stop = ClockedStop(clock)
        self.topology = plan(config, "run1")
        self.recorder = HistoryRecorder(tmp / "history", "run1", "w0", clock, txn_path=config.path.value)  # type: ignore[arg-type]
        self.requests: list[tuple[str, str, float, int, BaseException | None]] = []
        self.ctx = LoadContext(config=config, topology=self.topology, client=self.client, recorder=self.recorder,
                               clock=clock, writer="w0", fire=lambda *a: self.requests.append(a),  # type: ignore[arg-type]
                               stopping=self.stop)

    def ops(self) -> list[dict[str, Any]]:
        self.recorder._file.flush()
        lines = self.recorder.file_path.read_text().splitlines()
        return [json.loads(line) for line in lines]

    def ops_of(self, process: str | None = None, f: str | None = None) -> list[dict[str, Any]]:
        return [op for op in self.ops() if (process is None or op["process"] == process)
                and (f is None or op["f"] == f)]


@pytest.fixture
def make_harness(tmp_path: Path) -> Iterator[Callable[[str], Harness]]:
    made: list[Harness] = []

    def make(text: str) -> Harness:
        harness = Harness(tmp_path / f"h{len(made)}", scenario(text), ManualClock())
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.recorder.close()
