"""A port taken between its choice and the bind: the embedded cluster still comes up, and its records follow.

Seen on the pulsar target beside another job: a broker's port, chosen free, was taken by
another process before the broker bound it; the broker exited and the run failed. Here the
test itself takes the port: it wraps the cluster's port choice and listens on one chosen port
before any service starts. The service that owns it must exit, be moved to new ports and
start again (targets/ports.py), and everything that names it must follow: state.json, the
records and ClusterInfo, the running proxy's links, and clients' traffic through them.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator

import pulsar
import pytest

from harness.toxiproxy.client import ToxiproxyClient
from targets.embedded import EmbeddedCluster
from targets.ports import PortPlan
from targets.processes import HOST, listening_ports
from tests.cluster.conftest import ClusterFactory

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """`taken["key"] = (owner, name)` before the cluster starts: that port is listened on by this test
    from the moment it is chosen; `taken["port"]` is the port."""
    held: dict[str, object] = {}
    sockets: list[socket.socket] = []
    choose = EmbeddedCluster._choose_ports

    def choose_then_take(self: EmbeddedCluster) -> PortPlan:
        plan = choose(self)
        port = plan[held["key"]]   # type: ignore[index]
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((HOST, port))
        s.listen()
        sockets.append(s)
        held["port"] = port
        return plan

    monkeypatch.setattr(EmbeddedCluster, "_choose_ports", choose_then_take)
    try:
        yield held
    finally:
        for s in sockets:
            s.close()


def roundtrip(cluster: EmbeddedCluster, count: int = 5) -> list[str]:
    """Send `count` values and read them back through the cluster's service URL (every link it needs)."""
    topic = f"persistent://public/default/port-taken-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(cluster.info().service_url, operation_timeout_seconds=20,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        for i in range(count):
            producer.send(f"v{i}".encode())
        got = [consumer.receive(timeout_millis=20_000).data().decode() for _ in range(count)]
        return got
    finally:
        client.close()


@pytest.mark.parametrize(("owner", "name"), [("broker-0", "binary_port"), ("ledger", "rpc_port"),
                                             ("proxy", "api_port")])
def test_a_service_whose_port_was_taken_comes_up_on_another_and_the_records_follow(
        cluster_factory: ClusterFactory, taken: dict[str, object], owner: str, name: str) -> None:
    taken["key"] = (owner, name)
    cluster = cluster_factory()
    held = taken["port"]

    state = json.loads(cluster.state_path.read_text())
    moves = state["port_moves"]
    assert [m["service"] for m in moves] == [owner] and moves[0]["old"][name] == held
    new = moves[0]["new"][name]
    assert new != held
    record = cluster.records[owner]
    assert record.ports[name] == new
    services = {s["name"]: s for s in state["services"]}
    assert services[owner]["ports"][name] == new and services[owner]["pid"] == cluster.processes[owner].pid
    pid = cluster.processes[owner].pid
    assert pid is not None and new in (listening_ports(pid) or {new})

    # the links dial the new port: in the plan, in state.json and in the running proxy
    proxies = ToxiproxyClient(cluster.toxiproxy_url or "").proxies()
    for link in cluster.links:
        assert proxies[link.name].upstream == link.upstream and proxies[link.name].listen == link.listen
    if owner == "broker-0":
        dialled = {link.name: link.upstream for link in cluster.links if link.dest == "broker-0"}
        assert set(dialled) == {"client-broker-0", "broker-1-broker-0"}
        assert set(dialled.values()) == {f"{HOST}:{new}"}
    if owner == "ledger":
        assert {link.upstream for link in cluster.links if link.dest == "ledger"} == {f"{HOST}:{new}"}
    if owner == "proxy":
        assert cluster.toxiproxy_url == f"http://{HOST}:{new}" and state["toxiproxy_url"] == cluster.toxiproxy_url
    assert roundtrip(cluster) == [f"v{i}" for i in range(5)]
