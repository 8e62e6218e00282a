"""client-kill and client-isolate: the faults that make clients abandon transactions."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from faults.kinds import client_isolate, client_kill, kill
from faults.selectors import ClientsSelector, LoadSelector, SelectorError, parse_selector
from faults.triggers import matches
from faults.validate import check_scenario
from harness import load_control
from harness.config import parse_scenario
from harness.errors import ConfigError
from harness.history import HistoryRecorder, OpF, OpType, RunClock
from harness.history.events import event_of
from tests.unit.faults.test_nemesis import World, config, wait_for


class FakeLoad:
    """The load process's side of harness.load_control, in memory."""

    def __init__(self, workers: tuple[str, ...] = ("w0", "w1")) -> None:
        self.running = list(workers)
        self.calls: list[tuple[str, str]] = []

    def kill(self, request_id: str, worker: str, seed: int = 0) -> Mapping[str, Any]:
        chosen = self.running[seed % len(self.running)] if worker == "random" else worker
        self.running.remove(chosen)
        self.calls.append(("kill", chosen))
        return {"writer": chosen, "pid": 4242}

    def start(self, request_id: str, replaces: str) -> Mapping[str, Any]:
        writer = load_control.replacement_writer(replaces, 2)
        self.running.append(writer)
        self.calls.append(("start", writer))
        return {"writer": writer, "pid": 4343}

    def close(self) -> None:
        return None


def test_selectors_for_clients_and_load_workers() -> None:
    assert parse_selector("clients") == ClientsSelector("clients")
    assert parse_selector("load:random") == LoadSelector("load:random")
    assert parse_selector("load:1") == LoadSelector("load:1", 1)
    for bad in ("clients:1", "load:x"):
        with pytest.raises(SelectorError):
            parse_selector(bad)
    assert client_isolate.KIND.accepts_selector(parse_selector("clients"))
    assert not kill.KIND.accepts_selector(parse_selector("clients"))
    assert not client_kill.KIND.accepts_selector(parse_selector("broker:0"))


def test_client_isolate_cuts_every_client_broker_link_and_heals_them(tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("schedule:\n  - {kind: client-isolate, at_s: 0, for_s: 1.2}", faults_s=3)
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, txn_timeout_s=1.0))
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.injected == 1)
        assert sorted(p for p, enabled in world.network.proxies().items() if not enabled) == \
            ["client-broker-0", "client-broker-1", "client-broker-2"]
        assert wait_for(lambda: nemesis.stats.healed == 1)
    assert world.clean()
    ok = next(h for h in world.history() if h["f"] == "fault" and h["type"] == "ok")
    assert ok["extra"]["kind"] == "client-isolate" and len(ok["extra"]["targets"]) == 3


def test_client_kill_records_the_worker_it_killed_and_its_replacement(tmp_path: Path) -> None:
    world = World(tmp_path)
    load = FakeLoad()
    world.env.load = load
    cfg = config("schedule:\n  - {kind: client-kill, at_s: 0, for_s: 0.2}", faults_s=2)
    cfg = dataclasses.replace(cfg, load=dataclasses.replace(cfg.load, workers=2))
    world.run_until(cfg, lambda stats: stats.healed == 1)
    killed = load.calls[0][1]
    assert load.calls == [("kill", killed), ("start", f"{killed}-2")]
    history = world.history()
    fault_ok = next(h for h in history if h["f"] == "fault" and h["type"] == "ok")
    heal_ok = next(h for h in history if h["f"] == "heal" and h["type"] == "ok")
    assert fault_ok["extra"]["effect"] == {"writer": killed, "pid": 4242}
    assert heal_ok["extra"]["effect"]["replaced"] == killed


def test_client_faults_are_refused_when_they_could_abandon_nothing() -> None:
    base = ("name: c\nworkload: {txn_timeout_s: 15}\nphases: {faults_s: 60}\n"
            "faults:\n  schedule:\n")
    with pytest.raises(ConfigError) as info:
        check_scenario(parse_scenario(base + "    - {kind: client-isolate, at_s: 0, for_s: 10}\n", source="c"))
    assert "faults.schedule[0].for_s" in str(info.value) and "15" in str(info.value)
    with pytest.raises(ConfigError) as info:
        check_scenario(parse_scenario(base + "    - {kind: client-kill, at_s: 0, for_s: 1}\n", source="c"))
    assert "load.workers" in str(info.value)
    check_scenario(parse_scenario(base.replace("name: c\n", "name: c\nload: {workers: 2}\n")
                                  + "    - {kind: client-kill, at_s: 0, for_s: 1}\n"
                                  + "    - {kind: client-isolate, at_s: 5, for_s: 16}\n", source="c"))


def test_the_load_control_channel_answers_each_request_once(tmp_path: Path) -> None:
    directory = tmp_path / "load-control"
    client = load_control.LoadControlClient(directory, timeout_s=5.0)
    served: list[dict[str, Any]] = []

    def serve_once() -> None:
        for _ in range(100):      # bounded: 10 s
            pending = list(load_control.pending_requests(directory))
            for request_id, body in pending:
                served.append(body)
                load_control.answer(directory, request_id, lambda b: {"writer": "w1", "pid": 7}
                                    if b["op"] == "kill" else (_ for _ in ()).throw(RuntimeError("no")), body)
            if len(served) >= 2:
                return
            threading.Event().wait(0.1)

    server = threading.Thread(target=serve_once)
    server.start()
    assert client.kill("f1", "random", seed=3) == {"ok": True, "writer": "w1", "pid": 7}
    with pytest.raises(load_control.LoadControlError, match="RuntimeError: no"):
        client.start("f1", "w1")
    server.join(10)
    assert [b["op"] for b in served] == ["kill", "start"] and served[0]["seed"] == 3
    assert list(load_control.pending_requests(directory)) == []
    assert load_control.replacement_writer("w1-2", 3) == "w1-3"


def test_an_unanswered_request_is_bounded(tmp_path: Path) -> None:
    client = load_control.LoadControlClient(tmp_path / "load-control", timeout_s=0.3)
    with pytest.raises(load_control.LoadControlError, match="did not answer"):
        client.kill("f9", "w0")


def test_a_triggered_client_kill_kills_the_worker_whose_transaction_set_it_off(tmp_path: Path) -> None:
    assert matches(event_of("w0", {"f": "send", "type": "ok", "txn": "1:2"}), OpF.SEND, OpType.OK)
    assert not matches(event_of("w0", {"f": "send", "type": "ok", "txn": None}), OpF.SEND, OpType.OK)  # a feeder's send
    world = World(tmp_path)
    load = FakeLoad(("w0", "w1", "w2"))
    world.env.load = load
    cfg = config("schedule:\n  - {kind: client-kill, at_s: 0, for_s: 0.2, trigger: {op: send, type: ok, "
                 "within_s: 5}}", faults_s=3)
    cfg = dataclasses.replace(cfg, load=dataclasses.replace(cfg.load, workers=3))
    w2 = HistoryRecorder(tmp_path / "history", "run-1", "w2", RunClock.start(), txn_path="v4")
    with world.nemesis(cfg) as nemesis:
        nemesis.start()

        def send() -> bool:
            inv = w2.invoke("w2/u1", OpF.SEND, txn="1:7", value="v", topic="t")
            w2.ok(inv, msg_id="1:0:-1")
            return nemesis.stats.injected == 1

        assert wait_for(send, timeout_s=5)
        assert wait_for(lambda: nemesis.stats.healed == 1)
    w2.close()
    assert load.calls[0] == ("kill", "w2")
