"""The supervisor: a service that exits on its own is recorded as an `exit` fault and started again.

Seen on Pulsar 4.0.8 (#47): the bookie shut itself down after a metadata partition and the rest
of a chaos run happened without it, with no cause in the history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faults import supervisor as supervisor_module
from faults.resolution import ServiceTarget
from faults.supervisor import EXIT_KIND, MAX_RESTARTS, Supervisor
from harness.history import HistoryRecorder, RunClock
from tests.unit.faults.fakes import FakeControl
from tests.unit.faults.test_nemesis import World, config, wait_for

SERVICES = ("metadata", "ledger", "broker-0", "broker-1")


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.control = FakeControl(list(SERVICES))
        self.recorder = HistoryRecorder(tmp_path / "history", "run-1", "nemesis", RunClock.start(), txn_path="v4")
        self.held: set[str] = set()
        self.claimed: set[str] = set()
        self.failures: list[str] = []
        self.lines: list[str] = []
        self.supervisor = Supervisor(self.control, SERVICES, self.recorder, busy=self.busy, claim=self.claim,
                                     release=self.claimed.discard, say=self.lines.append,
                                     fail=self.failures.append)

    def busy(self) -> frozenset[str]:
        return frozenset(self.held | self.claimed)

    def claim(self, resource: str) -> bool:
        if resource in self.held or resource in self.claimed:
            return False
        self.claimed.add(resource)
        return True

    def history(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.recorder.file_path.read_text().splitlines()]


def test_a_service_that_exits_on_its_own_is_recorded_and_started_again(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.control.state["ledger"] = "stopped"          # the bookie shut itself down
    assert h.supervisor.check_once() == []          # seen down once: maybe a state in passing
    assert h.supervisor.check_once() == ["ledger"]
    assert h.control.state["ledger"] == "running"
    assert h.control.calls == [("start", "ledger")]
    events = [(e["f"], e["type"], e["extra"]["kind"], e["extra"]["targets"]) for e in h.history()]
    assert events == [("fault", "invoke", EXIT_KIND, ["ledger"]), ("fault", "ok", EXIT_KIND, ["ledger"]),
                      ("heal", "invoke", EXIT_KIND, ["ledger"]), ("heal", "ok", EXIT_KIND, ["ledger"])]
    assert h.history()[0]["process"] == "nemesis/supervisor"
    assert h.supervisor.stats.exits == {"ledger": 1}
    assert not h.failures and not h.claimed


def test_a_service_a_fault_holds_down_is_never_touched(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.control.state["broker-0"] = "stopped"         # killed by the nemesis, its window still open
    h.held.add(ServiceTarget("broker-0").resource)
    for _ in range(5):
        assert h.supervisor.check_once() == []
    assert h.control.calls == [] and h.control.state["broker-0"] == "stopped"
    assert not h.recorder.file_path.exists() or h.history() == []


def test_a_service_that_comes_back_between_checks_is_left_alone(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.control.state["broker-1"] = "stopped"
    h.supervisor.check_once()
    h.control.state["broker-1"] = "running"          # a fault's heal started it meanwhile
    h.supervisor.check_once()
    h.control.state["broker-1"] = "stopped"
    assert h.supervisor.check_once() == []          # the count starts again
    assert h.control.calls == []


def test_a_service_that_keeps_exiting_fails_the_run_naming_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    for _ in range(MAX_RESTARTS + 1):
        h.control.state["metadata"] = "stopped"
        h.supervisor.check_once()
        h.supervisor.check_once()
    assert h.control.calls.count(("start", "metadata")) == MAX_RESTARTS
    assert len(h.failures) == 1 and "metadata exited on its own" in h.failures[0]


def test_a_restart_that_fails_is_recorded_as_unknown_and_fails_the_run(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.control.fail_on.add("start")
    h.control.state["ledger"] = "stopped"
    h.supervisor.check_once()
    h.supervisor.check_once()
    heal = [e for e in h.history() if e["f"] == "heal"]
    assert [e["type"] for e in heal] == ["invoke", "info"]
    assert len(h.failures) == 1 and "could not be started again" in h.failures[0]


def test_the_nemesis_supervises_while_it_runs_and_reports_the_exits(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor_module, "CHECK_EVERY_S", 0.02)
    world = World(tmp_path)
    control = world.control      # a local, so the lambdas below see it narrowed
    assert control is not None
    cfg = config("schedule:\n  - {kind: kill, target: broker:1, at_s: 0, for_s: 0.5}", faults_s=3)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: ("kill", "broker-1") in control.calls)
        control.state["broker-0"] = "stopped"      # exits on its own while broker-1 is killed
        assert wait_for(lambda: nemesis.stats.healed == 1 and control.state["broker-0"] == "running")
        progress = nemesis.progress()
    assert progress["service_exits"] == {"broker-0": 1}
    starts = [c for c in control.calls if c[0] == "start"]
    assert sorted(starts) == [("start", "broker-0"), ("start", "broker-1")]   # broker-1 only by its heal
    exits = [e for e in world.history() if e["extra"] and e["extra"].get("kind") == EXIT_KIND]
    assert {e["extra"]["targets"][0] for e in exits} == {"broker-0"}
    assert world.clean()
