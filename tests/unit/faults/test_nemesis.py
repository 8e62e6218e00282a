"""The nemesis with fake actions: what it records, and that it always heals."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from faults import nemesis as nemesis_module
from faults.environment import FaultEnvironment, topology_topics
from faults.model import Fault, FaultAction
from faults.nemesis import Nemesis, NemesisError, NemesisStats
from faults.schedule import plan_run
from harness.config import RunConfig, parse_scenario
from harness.errors import ConfigError
from harness.history import HistoryRecorder, RunClock
from harness.txn_paths import TxnPath
from tests.unit.faults.fakes import (
    FakeAdmin,
    FakeControl,
    FakeLocator,
    FakeNetwork,
    cluster_info,
    v5_segments,
)
from tests.waiting import wait_for

TOPICS = tuple(f"persistent://public/txnbench/t{i}" for i in range(4))


def config(faults_yaml: str, faults_s: float = 5.0, path: str = "v4", seed: int = 1,
           cluster: str = "cluster: {brokers: 3}\n", overrun_s: float = 0.0) -> RunConfig:
    body = "\n".join("  " + line for line in faults_yaml.strip().splitlines())
    phases = f"{{faults_s: {faults_s}, faults_overrun_s: {overrun_s}}}"
    return parse_scenario(f"name: unit\nseed: {seed}\npath: {path}\nphases: {phases}\n"
                          f"{cluster}faults:\n{body}\n", source="unit.yaml")


class World:
    """A fake cluster and everything the nemesis needs, plus its history file."""

    def __init__(self, tmp_path: Path, path: TxnPath = TxnPath.V4, brokers: int = 3,
                 control: bool = True, topics: tuple[str, ...] = TOPICS) -> None:
        self.cluster = cluster_info(brokers, path)
        self.network = FakeNetwork([link.name for link in self.cluster.links])
        self.control = FakeControl([s.name for s in self.cluster.services]) if control else None
        self.admin = FakeAdmin(segments_by_topic={t: v5_segments(t.rsplit("/", 1)[1], 2) for t in topics})
        self.locator = FakeLocator({0: "pulsar://127.0.0.1:10001", 1: "pulsar://127.0.0.1:10002"})
        self.env = FaultEnvironment(cluster=self.cluster, txn_path=path, control=self.control,
                                    network=self.network, admin=self.admin, coordinators=self.locator,
                                    topics=topics)
        self.recorder = HistoryRecorder(tmp_path / "history", "run-1", "nemesis", RunClock.start(),
                                        txn_path=path.value)
        self.lines: list[str] = []

    def nemesis(self, cfg: RunConfig, **kwargs: Any) -> Nemesis:
        return Nemesis(config=cfg, timeline=plan_run(cfg), cluster=self.cluster, control=self.control,
                       recorder=self.recorder, environment=self.env, progress=self.lines.append, **kwargs)

    def run_until(self, cfg: RunConfig, done: Callable[[NemesisStats], bool]) -> None:
        """Run `cfg`'s timeline until `done(stats)`, then leave the nemesis (it heals)."""
        with self.nemesis(cfg) as nemesis:
            nemesis.start()
            assert wait_for(lambda: done(nemesis.stats))

    def history(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.recorder.file_path.read_text().splitlines()]

    def clean(self) -> bool:
        return self.network.clean() and (self.control is None or self.control.clean())


def ops(history: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(h["process"], h["f"], h["type"]) for h in history]


def test_a_timeline_runs_and_every_fault_is_recorded_and_healed(tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("""
quiet_s: 0.05
schedule:
  - {kind: partition, target: client-broker:1, at_s: 0, for_s: 0.1}
  - {kind: latency, target: broker-ledger:0, at_s: 0.2, for_s: 0.1, params: {latency_ms: 30, jitter_ms: 5}}
  - {kind: kill, target: coordinator:1, at_s: 0.4, for_s: 0.1}
  - {kind: pause, target: metadata, at_s: 0.6, for_s: 0.1}
  - {kind: partition, target: broker-broker:0-1, at_s: 0.8, for_s: 0.1, params: {direction: outbound}}
""", faults_s=3)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.healed == 5)
        nemesis.raise_if_failed()
        progress = nemesis.progress()   # the whole timeline ran: nothing unreached
        assert progress["started"] == progress["windows"] == 5 and progress["unreached"] == []
    # what was done, from the fakes' logs in order (sampling the state missed 0.1 s windows on a busy machine)
    assert world.network.calls == [
        ("disable", "client-broker-1"), ("enable", "client-broker-1"),
        ("add", "broker-0-ledger", "txnbench-f2-latency-upstream", ("latency", "upstream", {"latency": 30, "jitter": 5})),
        ("add", "broker-0-ledger", "txnbench-f2-latency-downstream",
         ("latency", "downstream", {"latency": 30, "jitter": 5})),
        ("remove", "broker-0-ledger", "txnbench-f2-latency-upstream"),
        ("remove", "broker-0-ledger", "txnbench-f2-latency-downstream"),
        # one way, from broker 0 to broker 1: upstream of 0->1, downstream of 1->0
        ("add", "broker-0-broker-1", "txnbench-f5-timeout-upstream", ("timeout", "upstream", {"timeout": 0})),
        ("add", "broker-1-broker-0", "txnbench-f5-timeout-downstream", ("timeout", "downstream", {"timeout": 0})),
        ("remove", "broker-0-broker-1", "txnbench-f5-timeout-upstream"),
        ("remove", "broker-1-broker-0", "txnbench-f5-timeout-downstream")]
    assert world.control is not None and world.control.calls == [
        ("kill", "broker-2"), ("start", "broker-2"), ("pause", "metadata"), ("resume", "metadata")]
    assert world.clean()
    history = world.history()
    for n in range(1, 6):
        assert ops([h for h in history if h["process"] == f"nemesis/f{n}"]) == [
            (f"nemesis/f{n}", "fault", "invoke"), (f"nemesis/f{n}", "fault", "ok"),
            (f"nemesis/f{n}", "heal", "invoke"), (f"nemesis/f{n}", "heal", "ok")]
    kill = [h for h in history if h["process"] == "nemesis/f3"]
    assert kill[0]["extra"]["kind"] == "kill" and kill[0]["extra"]["targets"] == ["broker-2"]
    assert kill[0]["extra"]["effects"] == ["stops"]   # what the analysis reads (it names no kind)
    assert kill[0]["extra"]["selector"] == "coordinator:1" and kill[0]["extra"]["params"] == {}
    assert all(h["writer"] == "nemesis" and h["path"] == "v4" for h in history)
    assert [h["index"] for h in history] == list(range(len(history)))
    assert world.control is not None and world.control.calls[:2] == [("kill", "broker-2"), ("start", "broker-2")]


def in_effect_then(tmp_path: Path, leave: Callable[[Nemesis], None]) -> World:
    """Start a long partition, wait until it is in effect, then leave the block via `leave`."""
    world = World(tmp_path)
    cfg = config("schedule:\n  - {kind: partition, target: broker:0, at_s: 0, for_s: 60}\n"
                 "  - {kind: kill, target: ledger, at_s: 0, for_s: 60}", faults_s=120)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: not world.network.enabled["client-broker-0"])
        assert not world.clean()
        leave(nemesis)
    return world


def test_leaving_the_block_heals_what_is_in_effect(tmp_path: Path) -> None:
    world = in_effect_then(tmp_path, lambda _n: None)
    assert world.clean()
    heals = [h for h in world.history() if h["f"] == "heal"]
    assert [(h["process"], h["type"]) for h in heals] == [("nemesis/f1", "invoke"), ("nemesis/f1", "ok")]


def test_an_exception_in_the_block_heals(tmp_path: Path) -> None:
    def boom(_n: Nemesis) -> None:
        raise ValueError("load process died")

    with pytest.raises(ValueError, match="load process died"):
        in_effect_then(tmp_path, boom)


def test_keyboard_interrupt_heals(tmp_path: Path) -> None:
    worlds: list[World] = []
    original = World.__init__

    def remember(self: World, *a: Any, **k: Any) -> None:
        original(self, *a, **k)
        worlds.append(self)

    def ctrl_c(_n: Nemesis) -> None:
        raise KeyboardInterrupt

    World.__init__ = remember  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            in_effect_then(tmp_path, ctrl_c)
    finally:
        World.__init__ = original  # type: ignore[method-assign]
    assert worlds[0].clean()
    assert [h["type"] for h in worlds[0].history() if h["f"] == "heal"] == ["invoke", "ok"]


def test_heal_all_is_idempotent_and_silent_once_the_history_is_closed(tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("schedule:\n  - {kind: pause, target: broker:1, at_s: 0, for_s: 60}", faults_s=120)
    nemesis = world.nemesis(cfg)
    nemesis.start()
    assert wait_for(lambda: world.control is not None and world.control.state["broker-1"] == "paused")
    nemesis.heal_all()
    nemesis.heal_all()
    lines = len(world.history())
    world.recorder.close()
    nemesis.heal_all()
    assert world.clean() and not nemesis.running and nemesis.in_effect() == []
    assert len(world.history()) == lines == 4


def test_failed_injections_are_recorded_as_fail_or_info(tmp_path: Path) -> None:
    world = World(tmp_path)
    assert world.control is not None
    world.control.state["broker-0"] = "stopped"          # cannot be paused: certainly not injected
    world.network.fail_on.add("add")                     # the toxic call fails: outcome unknown
    cfg = config("""
quiet_s: 0
schedule:
  - {kind: pause, target: broker:0, at_s: 0, for_s: 0.05}
  - {kind: latency, target: client-broker:0, at_s: 0.1, for_s: 0.05}
  - {kind: kill, target: coordinator:7, at_s: 0.2, for_s: 0.05}
""", faults_s=2)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.failed == 2 and nemesis.stats.healed == 1)
        nemesis.raise_if_failed()           # failed injections are results, not nemesis failures
    history = world.history()
    pause = [h for h in history if h["process"] == "nemesis/f1"]
    assert [(h["f"], h["type"]) for h in pause] == [("fault", "invoke"), ("fault", "fail")]
    assert pause[1]["error"].startswith("NotInjected: broker-0 is not running")
    latency = [h for h in history if h["process"] == "nemesis/f2"]
    assert [(h["f"], h["type"]) for h in latency] == [("fault", "invoke"), ("fault", "info"),
                                                     ("heal", "invoke"), ("heal", "ok")]
    assert "add failed on purpose" in latency[1]["error"]
    kill = [h for h in history if h["process"] == "nemesis/f3"]
    assert [(h["f"], h["type"]) for h in kill] == [("fault", "invoke"), ("fault", "fail")]
    assert kill[0]["extra"]["targets"] == [] and "no transaction coordinator 7" in kill[1]["error"]
    assert kill[0]["extra"]["effects"] == ["stops"]
    assert world.control.calls == [] and world.network.clean()   # the pause never ran; the toxic is gone


def test_a_heal_that_fails_is_the_nemesis_failure_and_is_retried_on_exit(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(tmp_path)
    assert world.control is not None
    world.control.fail_on.add("start")
    monkeypatch.setattr(nemesis_module, "HEAL_ATTEMPTS", 2)
    cfg = config("schedule:\n  - {kind: kill, target: broker:1, at_s: 0, for_s: 0.05}", faults_s=5)
    nemesis = world.nemesis(cfg)
    nemesis.start()
    assert wait_for(lambda: nemesis.stats.heal_failures == 1)
    with pytest.raises(NemesisError, match=r"could not heal f1 kill broker-1 after 2 attempts: Boom: start "
                                           r"broker-1 failed on purpose; the cluster may still be broken"):
        nemesis.raise_if_failed()
    assert [f.fault_id for f in nemesis.in_effect()] == ["f1"]
    world.control.fail_on.clear()
    nemesis.heal_all()
    assert world.clean() and nemesis.in_effect() == []
    heals = [(h["f"], h["type"]) for h in world.history() if h["f"] == "heal"]
    assert heals == [("heal", "invoke"), ("heal", "info"), ("heal", "invoke"), ("heal", "ok")]


def test_an_action_that_hangs_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(tmp_path)
    release = threading.Event()

    class Hanging:
        def inject(self, fault: Fault) -> None:
            release.wait(5)

        def heal(self, fault: Fault) -> None:
            pass

    monkeypatch.setattr(nemesis_module, "NETWORK_TIMEOUT_S", 0.2)
    cfg = config("schedule:\n  - {kind: partition, target: client-broker:0, at_s: 0, for_s: 0.1}", faults_s=3)
    actions: dict[str, FaultAction] = {"partition": Hanging()}
    with world.nemesis(cfg, actions=actions) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.unknown == 1 and nemesis.stats.healed == 1, 3)
    release.set()
    fault = [h for h in world.history() if h["f"] == "fault"]
    assert fault[1]["type"] == "info" and "did not finish within 0.2 s" in fault[1]["error"]


def test_topic_faults_are_not_healable(tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("schedule:\n  - {kind: terminate, target: topic:2, at_s: 0, for_s: 0}", faults_s=1)
    world.run_until(cfg, lambda stats: stats.not_healable == 1)
    assert world.admin.calls == [("terminate_topic", TOPICS[2])]
    history = world.history()
    assert [(h["f"], h["type"]) for h in history] == [("fault", "invoke"), ("fault", "ok")]
    assert history[1]["extra"]["healable"] is False and history[1]["extra"]["targets"] == [TOPICS[2]]


def test_a_topic_fault_whose_outcome_is_unknown_is_not_healed(tmp_path: Path) -> None:
    # Pulsar 3.2.0 answered a terminate HTTP 500 after terminating one partition of two: the fault
    # may be in effect and nothing undoes it, so no heal may be recorded (the oracle would read the
    # topic as back from that moment on)
    world = World(tmp_path)

    def half_done(topic: str) -> None:
        world.admin.calls.append(("terminate_topic", topic))
        raise RuntimeError("HTTP 500: BadVersionException")

    world.admin.terminate_topic = half_done  # type: ignore[method-assign]
    cfg = config("schedule:\n  - {kind: terminate, target: topic:2, at_s: 0, for_s: 0}", faults_s=1)
    world.run_until(cfg, lambda stats: stats.not_healable == 1)
    history = world.history()
    assert [(h["f"], h["type"]) for h in history] == [("fault", "invoke"), ("fault", "info")]
    assert world.lines[-1].endswith("it may be in effect and stays")


def test_v5_segment_faults(tmp_path: Path) -> None:
    topics = tuple(f"topic://public/txnbench/t{i}" for i in range(2))
    world = World(tmp_path, TxnPath.V5, topics=topics)
    cfg = config("""
quiet_s: 0
schedule:
  - {kind: split, target: segment:0, at_s: 0, for_s: 0}
  - {kind: merge, target: topic:1, at_s: 0.05, for_s: 0}
  - {kind: terminate, target: topic:1, at_s: 0.1, for_s: 0}
""", faults_s=1, path="v5")
    world.run_until(cfg, lambda stats: stats.not_healable == 3)
    split, merge, seal = world.admin.calls
    assert split[0] == "split" and split[1] == topics[0] and split[2] in (0, 1)
    assert merge == ("merge", topics[1], 0, 1)
    assert seal[0] == "terminate_segment" and seal[1] in world.admin.segments_by_topic[topics[1]]


def test_slow_participant_delays_the_brokers_metadata_link_past_gc_retention(tmp_path: Path) -> None:
    world = World(tmp_path, TxnPath.V5)
    world.cluster.settings.update({"transactionCoordinatorScalableTopicsGcRetentionSeconds": 0.1,
                                   "transactionCoordinatorScalableTopicsGcIntervalSeconds": 0.1})
    cfg = config("schedule:\n  - {kind: slow-participant, target: broker:2, at_s: 0, for_s: 2.5}",
                 faults_s=4, path="v5")
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: bool(world.network.toxics["broker-2-metadata"]))
        assert world.network.toxics["broker-2-metadata"] == {
            "txnbench-f1-latency-downstream": ("latency", "downstream", {"latency": 2200, "jitter": 0})}
    assert world.clean()
    with pytest.raises(ConfigError, match=r"faults.schedule\[0\].for_s: the slow participant needs 2.2 s"):
        world.nemesis(config("schedule:\n  - {kind: slow-participant, at_s: 0, for_s: 1}", path="v5"))


def test_capabilities_are_checked_when_the_nemesis_is_built(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"faults.schedule\[0\].kind: crash cannot run here: the target cannot "
                                          r"tear or damage a store's files"):
        World(tmp_path / "crash").nemesis(config("schedule:\n  - {kind: crash, target: ledger, at_s: 0}"))
    world = World(tmp_path, control=False)
    with pytest.raises(ConfigError, match=r"scenario unit: faults.schedule\[0\].kind: kill cannot run here: "
                                          r"the target cannot kill, start or pause processes"):
        world.nemesis(config("schedule:\n  - {kind: kill, at_s: 0}"))
    world.env.coordinators = None
    with pytest.raises(ConfigError, match=r"faults.schedule\[0\].target: 'client-broker:coordinator' needs "
                                          r"to locate the coordinators"):
        world.nemesis(config("schedule:\n  - {kind: partition, target: client-broker:coordinator, at_s: 0}"))
    world.env.topics = ()
    with pytest.raises(ConfigError, match="terminate cannot run here: the run has no workload topology"):
        world.nemesis(config("schedule:\n  - {kind: terminate, at_s: 0}"))
    with pytest.raises(ConfigError, match="there is no broker 3"):   # planned on 4, the cluster has 3
        world.nemesis(config("schedule:\n  - {kind: partition, target: broker-metadata:3, at_s: 0}",
                             cluster="cluster: {brokers: 4}\n"))


def test_random_faults_in_one_window_never_share_a_target(tmp_path: Path) -> None:
    world = World(tmp_path, brokers=2)
    cfg = config("""
quiet_s: 0
random: {kinds: [kill, pause], every_s: 0.1, for_s: 0.05, target: process:random}
""", faults_s=1.5, seed=5)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: not nemesis.running, 5)
        timeline = nemesis.timeline
    targets = {h["process"]: h["extra"]["targets"][0] for h in world.history()
               if h["f"] == "fault" and h["type"] == "ok"}
    shared = 0
    for window in timeline.windows:
        chosen = [targets[f"nemesis/{f.fault_id}"] for f in window.faults if f"nemesis/{f.fault_id}" in targets]
        assert len(chosen) == len(set(chosen)), f"a window reused a target: {chosen}"
        shared += len(chosen) > 1
    assert shared >= 1                  # some windows really held two faults at once
    assert world.clean()


def test_topology_topics_accepts_the_plan_and_its_dict() -> None:
    class Topic:
        def __init__(self, name: str) -> None:
            self.name = name

    class Plan:
        def __init__(self) -> None:
            self.topics = [Topic("persistent://a/b/t0"), Topic("persistent://a/b/t1")]

        def to_dict(self) -> dict[str, Any]:
            return {"topics": [t.name for t in self.topics]}

    assert topology_topics(Plan()) == ("persistent://a/b/t0", "persistent://a/b/t1")
    assert topology_topics(Plan().to_dict()) == ("persistent://a/b/t0", "persistent://a/b/t1")
    assert topology_topics({"topics": [{"name": "x"}]}) == ("x",)
    assert topology_topics(None) == ()


def test_start_twice_is_refused(tmp_path: Path) -> None:
    world = World(tmp_path)
    with world.nemesis(config("schedule:\n  - {kind: kill, target: broker:0, at_s: 0, for_s: 0.01}",
                              faults_s=0.5)) as nemesis:
        nemesis.start()
        with pytest.raises(RuntimeError, match="already started"):
            nemesis.start()


def test_a_slow_participant_must_keep_its_metadata_session(tmp_path: Path) -> None:
    world = World(tmp_path, TxnPath.V5)
    world.cluster.settings.update({"transactionCoordinatorScalableTopicsGcRetentionSeconds": 20,
                                   "transactionCoordinatorScalableTopicsGcIntervalSeconds": 10})
    cfg = config("schedule:\n  - {kind: slow-participant, at_s: 0, for_s: 40}", faults_s=60, path="v5")
    with pytest.raises(ConfigError, match=r"params.latency_ms: a 32 s delay outlasts the brokers' metadata "
                                          r"session \(30 s\).*set metadataStoreSessionTimeoutMillis above 32000"):
        world.nemesis(cfg)
    world.cluster.settings["metadataStoreSessionTimeoutMillis"] = 60_000
    world.nemesis(cfg).heal_all()


def test_restart_stops_gracefully_and_starts_when_healed(tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("schedule:\n  - {kind: restart, target: broker:1, at_s: 0, for_s: 0.2}", faults_s=2)
    world.run_until(cfg, lambda stats: stats.healed == 1)
    assert world.control is not None
    assert world.control.calls == [("stop", "broker-1"), ("start", "broker-1")]
    assert world.clean()
    assert [(h["f"], h["type"]) for h in world.history()] == [
        ("fault", "invoke"), ("fault", "ok"), ("heal", "invoke"), ("heal", "ok")]
    assert world.history()[0]["extra"]["kind"] == "restart"


def test_restart_of_a_stopped_process_is_not_injected(tmp_path: Path) -> None:
    world = World(tmp_path)
    assert world.control is not None
    world.control.state["broker-0"] = "stopped"
    cfg = config("schedule:\n  - {kind: restart, target: broker:0, at_s: 0, for_s: 0.1}", faults_s=1)
    world.run_until(cfg, lambda stats: stats.failed == 1)
    assert ("stop", "broker-0") not in world.control.calls


def test_unload_moves_ownership_of_a_topic_or_one_segment(tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("quiet_s: 0\nschedule:\n  - {kind: unload, target: topic:3, at_s: 0, for_s: 0}", faults_s=1)
    world.run_until(cfg, lambda stats: stats.not_healable == 1)
    assert world.admin.calls == [("unload_topic", TOPICS[3])]

    topics = tuple(f"topic://public/txnbench/t{i}" for i in range(2))
    v5 = World(tmp_path / "v5", TxnPath.V5, topics=topics)
    cfg = config("quiet_s: 0\nschedule:\n  - {kind: unload, target: segment:1, at_s: 0, for_s: 0}\n"
                 "  - {kind: unload, target: topic:0, at_s: 0.05, for_s: 0}", faults_s=1, path="v5")
    v5.run_until(cfg, lambda stats: stats.not_healable == 2)
    (kind, segment), whole = v5.admin.calls
    assert kind == "unload_segment" and segment in v5.admin.segments_by_topic[topics[1]]
    assert whole == ("unload_topic", topics[0])


def test_a_triggered_fault_waits_for_the_loads_next_commit(tmp_path: Path) -> None:
    world = World(tmp_path)
    worker = world.recorder.file_path.parent / "w0.jsonl"
    worker.write_text(json.dumps({"writer": "w0", "process": "w0/u1", "index": 0, "f": "txn-commit",
                                  "type": "invoke", "txn": "1:1"}) + "\n")     # old: not a trigger
    cfg = config("schedule:\n  - {kind: partition, target: broker-broker:0-1, at_s: 0, for_s: 0.1, "
                 "trigger: {op: txn-commit, within_s: 10}}", faults_s=12)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        time.sleep(0.2)                                   # the nemesis is waiting: nothing injected yet
        assert nemesis.stats.injected == 0 and world.network.clean()
        with worker.open("a") as handle:
            handle.write(json.dumps({"writer": "w0", "process": "w0/u2", "index": 1, "f": "txn-commit",
                                     "type": "invoke", "txn": "1:2"}) + "\n")
        assert wait_for(lambda: nemesis.stats.healed == 1)
    trigger = world.history()[0]["extra"]["trigger"]
    assert trigger["fired"] is True and trigger["seen"]["txn"] == "1:2" and trigger["op"] == "txn-commit"


def test_a_trigger_that_never_comes_injects_at_its_deadline(tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("schedule:\n  - {kind: kill, target: broker:0, at_s: 0, for_s: 0.1, "
                 "trigger: {op: txn-commit, type: ok, within_s: 0.2}}", faults_s=5)
    world.run_until(cfg, lambda stats: stats.healed == 1)
    trigger = world.history()[0]["extra"]["trigger"]
    assert trigger["fired"] is False and trigger["waited_s"] >= 0.2 and "seen" not in trigger


def test_windows_the_faults_phase_ends_before_are_reported_as_never_run(tmp_path: Path) -> None:
    # the first kill's heal (a restart) takes longer than the plan counts, so the timeline
    # slips and the last window is still ahead when the phase ends: the run must say so
    world = World(tmp_path)
    assert world.control is not None
    world.control.delays["start"] = 0.5
    cfg = config("""
quiet_s: 0
schedule:
  - {kind: kill, target: coordinator:1, at_s: 0, for_s: 0.1, quiet_s: 0}
  - {kind: partition, target: client-broker:1, at_s: 0.2, for_s: 0.4, quiet_s: 0}
  - {kind: pause, target: metadata, at_s: 0.8, for_s: 0.05}
""", faults_s=1.0)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: not nemesis.running, timeout_s=10)
        progress = nemesis.progress()
    assert progress["windows"] == 3 and progress["started"] == 2
    assert progress["last_late_s"] >= 0.3       # the partition began after the restart, not at 0.2 s
    # planned at 0.8 s of a 1 s phase; the slip put it past the end
    assert progress["unreached"] == [{"window": 3, "at_s": 0.8, "faults": ["pause metadata"]}]
    assert world.clean()


SLIPPING = """
quiet_s: 0
schedule:
  - {kind: kill, target: coordinator:1, at_s: 0, for_s: 0.1, quiet_s: 0}
  - {kind: partition, target: client-broker:1, at_s: 0.2, for_s: 0.4, quiet_s: 0}
  - {kind: pause, target: metadata, at_s: 0.8, for_s: 0.05}
"""


def test_an_overrun_lets_a_slipping_timeline_play_its_windows_after_the_planned_end(tmp_path: Path) -> None:
    # the same slip as above, with time allowed past the plan: the last window runs late, and
    # the thread ends by itself once it has healed (the run's faults phase waits for that)
    world = World(tmp_path)
    assert world.control is not None
    world.control.delays["start"] = 0.5
    with world.nemesis(config(SLIPPING, faults_s=1.0, overrun_s=30.0)) as nemesis:
        nemesis.start()
        assert wait_for(lambda: not nemesis.running, timeout_s=10)
        progress = nemesis.progress()
        assert nemesis.stats.healed == 3
    assert progress["windows"] == progress["started"] == 3 and progress["unreached"] == []
    assert [e["f"] for e in world.history() if e["type"] == "ok"] == ["fault", "heal"] * 3
    assert world.clean()


def test_the_overrun_bounds_a_timeline_that_slips_past_it(tmp_path: Path) -> None:
    world = World(tmp_path)
    assert world.control is not None
    world.control.delays["start"] = 2.0     # the first heal ends at about 2.1 s, past 1 s + 0.5 s
    with world.nemesis(config(SLIPPING, faults_s=1.0, overrun_s=0.5)) as nemesis:
        nemesis.start()
        assert wait_for(lambda: not nemesis.running, timeout_s=10)
        progress = nemesis.progress()
    assert progress["started"] == 1 and [u["window"] for u in progress["unreached"]] == [2, 3]
    assert world.clean()


def test_overlapping_faults_are_injected_at_their_offsets_and_healed_each_after_its_own_time(
        tmp_path: Path) -> None:
    world = World(tmp_path)
    cfg = config("""
schedule:
  - {kind: pause, target: ledger, at_s: 0, for_s: 0.6,
     overlap: [{kind: restart, target: "broker:1", after_s: 0.1, for_s: 0},
               {kind: kill, target: "broker:2", after_s: 0.2, for_s: 0.1}]}
""", faults_s=3)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.healed == 3)
        nemesis.raise_if_failed()
    assert world.control is not None and world.clean()
    # the ledger store stays paused while broker 1 restarts and broker 2 dies and comes back
    assert world.control.calls == [("pause", "ledger"), ("stop", "broker-1"), ("start", "broker-1"),
                                   ("kill", "broker-2"), ("start", "broker-2"), ("resume", "ledger")]
    steps = [(h["process"], h["f"], h["type"]) for h in world.history() if h["type"] == "invoke"]
    assert steps == [("nemesis/f1", "fault", "invoke"), ("nemesis/f2", "fault", "invoke"),
                     ("nemesis/f2", "heal", "invoke"), ("nemesis/f3", "fault", "invoke"),
                     ("nemesis/f3", "heal", "invoke"), ("nemesis/f1", "heal", "invoke")]
    invoked = {(h["process"], h["f"]): h["time_ns"] / 1e9 for h in world.history() if h["type"] == "invoke"}
    assert invoked[("nemesis/f3", "fault")] - invoked[("nemesis/f1", "fault")] >= 0.19
    assert invoked[("nemesis/f1", "heal")] - invoked[("nemesis/f1", "fault")] >= 0.59


def test_a_slow_topic_operation_holds_neither_the_windows_clock_nor_its_topic(tmp_path: Path) -> None:
    """Four unloads 0.15 s apart, each answered after 2 s, inside a 0.8 s pause: each is sent at its
    offset and the pause is healed on time (in line, the pause lasted until the fourth answer), the
    same topic is unloaded again while its last unload is under way, and the next window waits."""
    world = World(tmp_path)
    world.admin.unload_takes_s = 2.0   # margins of over a second on a busy machine
    cfg = config("""
quiet_s: 0
schedule:
  - {kind: pause, target: ledger, at_s: 0, for_s: 0.8,
     overlap: [{kind: unload, target: "topic:0", after_s: 0.05, for_s: 0},
               {kind: unload, target: "topic:0", after_s: 0.2, for_s: 0},
               {kind: unload, target: "topic:0", after_s: 0.35, for_s: 0},
               {kind: unload, target: "topic:0", after_s: 0.5, for_s: 0}]}
  - {kind: kill, target: "broker:1", at_s: 0.9, for_s: 0.1}
""", faults_s=6)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.healed == 2, timeout_s=15)
        nemesis.raise_if_failed()
    assert world.admin.calls == [("unload_topic", TOPICS[0])] * 4
    at = {(h["process"], h["f"], h["type"]): h["time_ns"] / 1e9 for h in world.history()}
    start = at[("nemesis/f1", "fault", "invoke")]
    unloads = [f"nemesis/f{n}" for n in range(2, 6)]
    assert all((u, "fault", "ok") in at for u in unloads)
    first_answer = at[(unloads[0], "fault", "ok")]
    # every unload was sent before the first was answered, and the pause healed before any answer
    assert all(at[(u, "fault", "invoke")] < first_answer for u in unloads)
    assert at[("nemesis/f1", "heal", "invoke")] - start >= 0.79
    assert at[("nemesis/f1", "heal", "invoke")] < first_answer
    # the next window began only after the last unload's answer
    assert at[("nemesis/f6", "fault", "invoke")] >= max(at[(u, "fault", "ok")] for u in unloads)
    assert world.clean()


def stacked_store_and_broker_kill(tmp_path: Path, store: str) -> World:
    """`store` killed 0.5 s with broker 1 killed inside it (0.1 s after, for 0.1 s), broker 1 unable to
    start while `store` is down; the nemesis must heal both without failing."""
    world = World(tmp_path)
    assert world.control is not None
    world.control.needs["broker-1"] = store
    cfg = config(f"""
schedule:
  - {{kind: kill, target: {store}, at_s: 0, for_s: 0.5,
     overlap: [{{kind: kill, target: "broker:1", after_s: 0.1, for_s: 0.1}}]}}
""", faults_s=4)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.healed == 2, timeout_s=15)
        nemesis.raise_if_failed()
        assert nemesis.stats.heal_failures == 0
    assert world.clean()
    assert world.control.calls[-2:] == [("start", store), ("start", "broker-1")]   # the broker after its store
    return world


def test_a_broker_is_started_only_once_the_metadata_store_it_needs_is_back(tmp_path: Path) -> None:
    world = stacked_store_and_broker_kill(tmp_path, "metadata")   # a broker cannot start without it
    assert world.control is not None
    # the broker's heal came due first, and waited for the store's: no start of it ever failed
    assert world.control.calls.count(("start", "broker-1")) == 1
    broker = [(h["f"], h["type"]) for h in world.history() if h["process"] == "nemesis/f2"]
    assert broker == [("fault", "invoke"), ("fault", "ok"), ("heal", "invoke"), ("heal", "ok")]


def test_a_heal_that_fails_while_other_stacked_faults_hold_is_tried_again_after_them(tmp_path: Path) -> None:
    world = stacked_store_and_broker_kill(tmp_path, "ledger")    # a dependency the nemesis does not know of
    broker = [(h["f"], h["type"]) for h in world.history() if h["process"] == "nemesis/f2"]
    assert broker == [("fault", "invoke"), ("fault", "ok"), ("heal", "invoke"), ("heal", "info"),
                      ("heal", "invoke"), ("heal", "ok")]
    assert any("not healed yet" in line for line in world.lines)


def test_a_heal_that_still_fails_when_its_window_is_over_fails_the_nemesis(tmp_path: Path) -> None:
    world = World(tmp_path)
    assert world.control is not None
    world.control.needs["broker-1"] = "ledger"        # never down here: the start fails for another reason
    world.control.state["ledger"] = "stopped"
    cfg = config("""
schedule:
  - {kind: kill, target: metadata, at_s: 0, for_s: 0.3,
     overlap: [{kind: kill, target: "broker:1", after_s: 0.1, for_s: 0.1}]}
""", faults_s=4)
    with world.nemesis(cfg) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.heal_failures == 1, timeout_s=15)
        with pytest.raises(NemesisError, match="could not heal f2 kill broker-1"):
            nemesis.raise_if_failed()
    world.control.state["ledger"] = "running"
