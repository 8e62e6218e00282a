"""Locating coordinators with a fresh client, against the client's fake brokers (v4 and v5)."""

from __future__ import annotations

import random

import pytest

from faults.coordinators import ClientCoordinatorLocator, all_brokers_url, make_coordinator_locator
from faults.resolution import ResolveContext, resolve_service
from faults.selectors import ServiceSelector, parse_selector
from harness.target import ClusterInfo, ServiceInfo, ServiceRole
from harness.txn_paths import TxnPath
from tests.unit.client.fake_broker import FakeCluster
from tests.unit.faults.fakes import cluster_info


def as_cluster(fake: FakeCluster) -> ClusterInfo:
    services = tuple(ServiceInfo(f"broker-{i}", ServiceRole.BROKER, "running", service_url=b.url)
                     for i, b in enumerate(fake.brokers))
    return ClusterInfo("embedded", TxnPath.V4, fake.url, "http://127.0.0.1:1", services=services)


@pytest.mark.parametrize("path", [TxnPath.V4, TxnPath.V5])
def test_the_locator_follows_a_moved_coordinator(path: TxnPath) -> None:
    fake = FakeCluster(brokers=2, v5=path is TxnPath.V5, tc_count=2)
    try:
        cluster = as_cluster(fake)
        locator = make_coordinator_locator(cluster, path, timeout_s=5)
        assert isinstance(locator, ClientCoordinatorLocator)
        assert locator.service_url == all_brokers_url(cluster)
        assert locator.coordinator_brokers() == {0: fake.brokers[0].url, 1: fake.brokers[1].url}
        fake.set_tc_leader(0, fake.brokers[1])
        assert locator.coordinator_brokers()[0] == fake.brokers[1].url
        selector = parse_selector("coordinator:0")
        assert isinstance(selector, ServiceSelector)
        ctx = ResolveContext(cluster=cluster, rng=random.Random(1),
                             coordinator_brokers=locator.coordinator_brokers)
        assert resolve_service(selector, ctx).name == "broker-1"
    finally:
        fake.stop()


def test_all_brokers_url_names_every_broker() -> None:
    assert all_brokers_url(cluster_info(3)) == "pulsar://127.0.0.1:10000,127.0.0.1:10001,127.0.0.1:10002"


def test_a_coordinator_on_a_brokers_internal_listener_is_that_broker() -> None:
    # Real Pulsar 5.0.1 (v5) names the broker's internal listener in coordinator assignments,
    # not the client-facing URL: chaos run 20261127-081354-chaos-v5 refused both of its
    # coordinator kills with "coordinator 1 is on pulsar://127.0.0.1:37409, which is none of
    # this cluster's brokers".
    services = tuple(ServiceInfo(f"broker-{i}", ServiceRole.BROKER, "running",
                                 service_url=f"pulsar://127.0.0.1:{40000 + i}",
                                 internal_urls=(f"pulsar://127.0.0.1:{37000 + i}",))
                     for i in range(2))
    cluster = ClusterInfo("pulsar", TxnPath.V5, "pulsar://127.0.0.1:40000,127.0.0.1:40001",
                          "http://127.0.0.1:1", services=services)
    internal = cluster.broker_for_url("pulsar://127.0.0.1:37001")
    assert internal is not None
    assert internal.name == "broker-1"
    client_facing = cluster.broker_for_url("pulsar://127.0.0.1:40000")
    assert client_facing is not None
    assert client_facing.name == "broker-0"
    assert cluster.broker_for_url("pulsar://127.0.0.1:1") is None
    ctx = ResolveContext(cluster=cluster, rng=random.Random(1),
                         coordinator_brokers=lambda: {1: "pulsar://127.0.0.1:37001"})
    selector = parse_selector("coordinator")
    assert isinstance(selector, ServiceSelector)
    assert resolve_service(selector, ctx).name == "broker-1"


def test_the_locator_finds_a_partitions_owner_where_it_moved() -> None:
    """`broker:trigger` asks, when the fault is injected, which broker owns a partition now."""
    fake = FakeCluster(brokers=2)
    try:
        locator = make_coordinator_locator(as_cluster(fake), TxnPath.V4, timeout_s=5)
        partition = "persistent://public/txnbench/t-partition-1"
        fake.owners[partition] = fake.brokers[0]
        assert locator.owner_broker(partition) == fake.brokers[0].url
        fake.owners[partition] = fake.brokers[1]
        assert locator.owner_broker(partition) == fake.brokers[1].url
    finally:
        fake.stop()
