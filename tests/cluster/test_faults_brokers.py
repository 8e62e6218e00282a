"""Faults against the real embedded brokers, seen by the real client (harness.client).

What needs Pulsar semantics: a partitioned broker is unreachable for clients and they
come back after the heal; a killed broker's topics move and it rejoins when restarted;
a terminated topic rejects sends. The nemesis runs as a run drives it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from faults.nemesis import Nemesis
from harness.client import PulsarClient, TopicTerminatedError
from harness.client.admin import AdminClient
from harness.config import parse_scenario
from harness.errors import OperationError
from harness.history import HistoryRecorder, RunClock
from targets.embedded import EmbeddedCluster
from targets.processes import ProcessState
from tests.cluster.conftest import ClusterFactory, quiet_nemesis
from tests.waiting import wait_for

TOPICS = ("persistent://public/default/faults-0", "persistent://public/default/faults-1")


@dataclass(frozen=True)
class Topology:
    topics: tuple[str, ...] = TOPICS


@pytest.fixture
def v4(cluster_factory: ClusterFactory) -> EmbeddedCluster:
    cluster = cluster_factory(path="v4", brokers=2)
    admin = AdminClient(cluster.info().admin_url, timeout_s=10)
    for topic in TOPICS:
        admin.create_topic(topic)
    return cluster


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[HistoryRecorder]:
    rec = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path="v4")
    yield rec
    rec.close()


def nemesis(cluster: EmbeddedCluster, recorder: HistoryRecorder, fault: str, faults_s: float = 120) -> Nemesis:
    config = parse_scenario(f"name: broker-faults\npath: v4\nphases: {{faults_s: {faults_s}}}\n"
                            f"faults:\n  quiet_s: 0\n  schedule:\n    - {fault}\n", source="test")
    return quiet_nemesis(config, cluster, recorder, topology=Topology())


def history(recorder: HistoryRecorder) -> list[dict[str, Any]]:
    return [json.loads(line) for line in recorder.file_path.read_text().splitlines()]


def owner_of(cluster: EmbeddedCluster, topic: str) -> str:
    """The broker (service name) that owns `topic` now, by the admin lookup."""
    answer = AdminClient(cluster.info().admin_url, timeout_s=10).lookup(topic)
    broker = cluster.info().broker_for_url(answer["brokerUrl"])
    assert broker is not None, answer
    return broker.name


def test_clients_cannot_reach_a_partitioned_broker_and_come_back_after_the_heal(
        v4: EmbeddedCluster, recorder: HistoryRecorder) -> None:
    topic = TOPICS[0]
    owner = owner_of(v4, topic)
    index = owner.rsplit("-", 1)[1]
    url = v4.info().service(owner).service_url
    assert url is not None
    with PulsarClient(url, operation_timeout_s=3) as client:
        producer = client.create_producer(topic)
        producer.send(b'{"v": "before"}')
        with nemesis(v4, recorder, f"{{kind: partition, target: 'client-broker:{index}', at_s: 0, for_s: 60}}") \
                as nem:
            nem.start()
            assert wait_for(lambda: nem.stats.injected == 1, 20)
            with pytest.raises(OperationError):
                producer.send(b'{"v": "during"}', timeout_s=2)
            with pytest.raises(OperationError), PulsarClient(url, operation_timeout_s=2) as other:
                other.create_producer(topic, timeout_s=2)
        assert wait_for(lambda: _sends(producer), 20)           # the producer reconnected by itself
    assert [(h["f"], h["type"]) for h in history(recorder)] == [
        ("fault", "invoke"), ("fault", "ok"), ("heal", "invoke"), ("heal", "ok")]


def _sends(producer: Any) -> bool:
    try:
        producer.send(b'{"v": "after"}', timeout_s=2)
    except OperationError:
        return False
    return True


def test_a_killed_broker_loses_its_topics_and_rejoins_when_healed(v4: EmbeddedCluster,
                                                                  recorder: HistoryRecorder) -> None:
    topic = TOPICS[1]
    owner = owner_of(v4, topic)
    pid = v4.processes[owner].pid
    with nemesis(v4, recorder, f"{{kind: kill, target: '{owner.replace('broker-', 'broker:')}', at_s: 0, "
                               f"for_s: 60}}") as nem:
        nem.start()
        assert wait_for(lambda: nem.stats.injected == 1, 20)
        assert v4.processes[owner].state == ProcessState.STOPPED
        survivor = next(b for b in ("broker-0", "broker-1") if b != owner)
        assert wait_for(lambda: _owner_or_none(v4, topic) == survivor, 30)   # after the session expires
    assert v4.processes[owner].state == ProcessState.RUNNING and v4.processes[owner].pid != pid
    health = v4.info().service(owner).admin_url
    assert requests.get(f"{health}/health", timeout=5).status_code == 200
    with PulsarClient(v4.info().service_url, operation_timeout_s=10) as client:
        client.create_producer(topic).send(b'{"v": "after"}')


def _owner_or_none(cluster: EmbeddedCluster, topic: str) -> str | None:
    try:
        return owner_of(cluster, topic)
    except Exception:
        return None


def test_terminate_topic_is_recorded_as_not_healable_and_sends_are_rejected(v4: EmbeddedCluster,
                                                                            recorder: HistoryRecorder) -> None:
    with PulsarClient(v4.info().service_url, operation_timeout_s=10) as client:
        producer = client.create_producer(TOPICS[1])
        producer.send(b'{"v": "before"}')
        with nemesis(v4, recorder, "{kind: terminate, target: 'topic:1', at_s: 0, for_s: 0}", faults_s=2) as nem:
            nem.start()
            assert wait_for(lambda: nem.stats.not_healable == 1, 20)
        with pytest.raises(TopicTerminatedError):
            producer.send(b'{"v": "after"}')
    ops = history(recorder)
    assert [(h["f"], h["type"]) for h in ops] == [("fault", "invoke"), ("fault", "ok")]
    assert ops[1]["extra"]["targets"] == [TOPICS[1]] and ops[1]["extra"]["healable"] is False


@pytest.mark.parametrize("path", ["v4", "v5"])
def test_killing_the_coordinator_kills_the_broker_hosting_it(cluster_factory: ClusterFactory, tmp_path: Path,
                                                              path: str) -> None:
    """v4: the owner of an assign-topic partition; v5: the leader of a coordinator."""
    from faults.coordinators import make_coordinator_locator

    cluster = cluster_factory(path=path, brokers=2)
    info = cluster.info()
    locator = make_coordinator_locator(info, info.txn_path, timeout_s=10)
    before = locator.coordinator_brokers()
    host = info.broker_for_url(before[0])
    assert host is not None
    recorder = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path=path)
    config = parse_scenario(f"name: coordinator\npath: {path}\nphases: {{faults_s: 120}}\nfaults:\n"
                            "  schedule:\n    - {kind: kill, target: 'coordinator:0', at_s: 0, for_s: 60}\n",
                            source="test")
    with quiet_nemesis(config, cluster, recorder) as nem:
        nem.start()
        assert wait_for(lambda: nem.stats.injected == 1, 20)
        assert str(nem.in_effect()[0].targets[0]) == host.name
        assert cluster.processes[host.name].state == ProcessState.STOPPED
        survivor = next(s for s in info.by_role(host.role) if s.name != host.name)
        # once the dead broker's session expires, coordinator 0 moves to the survivor
        assert wait_for(lambda: _coordinator_host(locator, 0) == survivor.service_url, 30)
    recorder.close()
    assert cluster.processes[host.name].state == ProcessState.RUNNING
    extra = history(recorder)[0]["extra"]
    assert extra["selector"] == "coordinator:0" and extra["targets"] == [host.name]


def _coordinator_host(locator: Any, tc_id: int) -> str | None:
    try:
        return locator.coordinator_brokers().get(tc_id)
    except OperationError:
        return None


SCALABLE = "topic://public/default/faults-scalable"


@dataclass(frozen=True)
class ScalableTopology:
    topics: tuple[str, ...] = (SCALABLE,)


def test_split_merge_and_seal_change_a_scalable_topics_active_segments(cluster_factory: ClusterFactory,
                                                                       tmp_path: Path) -> None:
    from faults.admin import active_segment_names
    from faults.resolution import parse_segment_name
    from harness.client.hashing import segment_hash

    cluster = cluster_factory(path="v5", brokers=2)
    admin = AdminClient(cluster.info().admin_url, timeout_s=10)
    admin.create_scalable_topic(SCALABLE, segments=2)

    def active() -> list[str]:
        return active_segment_names(SCALABLE, admin.scalable_topic_metadata(SCALABLE))

    assert len(active()) == 2
    recorder = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path="v5")
    config = parse_scenario("name: segments\npath: v5\nphases: {faults_s: 10}\nfaults:\n  quiet_s: 0\n"
                            "  schedule:\n"
                            "    - {kind: split, target: 'segment:0', at_s: 0, for_s: 0}\n"
                            "    - {kind: merge, target: 'topic:0', at_s: 1, for_s: 0}\n"
                            "    - {kind: terminate, target: 'segment:0', at_s: 2, for_s: 0}\n", source="test")
    seen: list[int] = []
    with quiet_nemesis(config, cluster, recorder, topology=ScalableTopology()) as nem:
        nem.start()
        for done in (1, 2, 3):
            assert wait_for(lambda d=done: nem.stats.not_healable + nem.stats.failed == d, 20)  # type: ignore[misc]
            seen.append(len(active()))
        assert nem.stats.failed == 0, history(recorder)
    recorder.close()
    assert seen[:2] == [3, 2]                       # split: 2 -> 3; merge: 3 -> 2
    ops = [h for h in history(recorder) if h["type"] == "ok"]
    assert [h["extra"]["kind"] for h in ops] == ["split", "merge", "terminate"]
    split, merge, seal = (h["extra"]["targets"] for h in ops)
    assert len(split) == 1 and len(merge) == 2 and len(seal) == 1
    sealed = parse_segment_name(seal[0])
    assert sealed is not None
    inside = next(k for k in (f"k{i}" for i in range(10_000))
                  if sealed.hash_start <= segment_hash(k) <= sealed.hash_end)
    outside = next(k for k in (f"k{i}" for i in range(10_000))
                   if not sealed.hash_start <= segment_hash(k) <= sealed.hash_end)
    with PulsarClient(cluster.info().service_url, txn_path="v5", operation_timeout_s=5) as client:
        producer = client.create_producer(SCALABLE)
        producer.send(b'{"v": "open"}', key=outside)
        with pytest.raises(OperationError):        # the sealed segment takes no more writes
            producer.send(b'{"v": "sealed"}', key=inside)


def test_a_graceful_restart_moves_ownership_at_once_and_the_broker_rejoins(v4: EmbeddedCluster,
                                                                           recorder: HistoryRecorder) -> None:
    """SIGTERM: the broker releases its topics while it stops, so the survivor takes them
    without waiting for a session to expire; the heal starts it again."""
    topic = TOPICS[0]
    owner = owner_of(v4, topic)
    survivor = next(b for b in ("broker-0", "broker-1") if b != owner)
    with PulsarClient(v4.info().service_url, operation_timeout_s=10) as client:
        producer = client.create_producer(topic)
        producer.send(b'{"v": "before"}')
        with nemesis(v4, recorder, f"{{kind: restart, target: '{owner.replace('broker-', 'broker:')}', "
                                   "at_s: 0, for_s: 60}") as nem:
            nem.start()
            assert wait_for(lambda: nem.stats.injected == 1, 20)
            assert v4.processes[owner].state == ProcessState.STOPPED
            assert wait_for(lambda: _sends(producer), 15)       # the producer found the new owner
            assert _owner_or_none(v4, topic) == survivor
        assert v4.processes[owner].state == ProcessState.RUNNING
    kinds = [(h["f"], h["type"], h["extra"]["kind"]) for h in history(recorder)]
    assert kinds == [("fault", "invoke", "restart"), ("fault", "ok", "restart"),
                     ("heal", "invoke", "restart"), ("heal", "ok", "restart")]


def test_unloading_a_topic_and_a_segment_keeps_them_serving(cluster_factory: ClusterFactory,
                                                           tmp_path: Path) -> None:
    cluster = cluster_factory(path="v5", brokers=2)
    admin = AdminClient(cluster.info().admin_url, timeout_s=10)
    admin.create_scalable_topic(SCALABLE, segments=2)
    recorder = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path="v5")
    config = parse_scenario("name: unload\npath: v5\nphases: {faults_s: 10}\nfaults:\n  quiet_s: 0\n"
                            "  schedule:\n"
                            "    - {kind: unload, target: 'segment:0', at_s: 0, for_s: 0}\n"
                            "    - {kind: unload, target: 'topic:0', at_s: 0.5, for_s: 0}\n", source="test")
    with PulsarClient(cluster.info().service_url, txn_path="v5", operation_timeout_s=10) as client:
        producer = client.create_producer(SCALABLE)
        for i in range(10):
            producer.send(b'{"v": "before"}', key=f"k{i}")
        with quiet_nemesis(config, cluster, recorder, topology=ScalableTopology()) as nem:
            nem.start()
            assert wait_for(lambda: nem.stats.not_healable + nem.stats.failed == 2, 20)
            assert nem.stats.failed == 0, history(recorder)
        for i in range(10):                         # every segment is served again after a lookup
            producer.send(b'{"v": "after"}', key=f"k{i}")
    recorder.close()
    ok = [h for h in history(recorder) if h["type"] == "ok"]
    assert [h["extra"]["kind"] for h in ok] == ["unload", "unload"]
    assert ok[0]["extra"]["targets"][0].startswith("segment://") and ok[1]["extra"]["targets"] == [SCALABLE]
