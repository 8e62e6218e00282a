"""v4 end to end with the cluster's metadata service a real ZooKeeper (`metadataStoreUrl=zk`).

The cluster starts ZooKeeper 3.9 from PySpark's jars as its `metadata` service; every broker
keeps its metadata in it through `ZkMetadataClient` over its own proxy link: ownership,
the coordinators' assignment, managed-ledger lists and cursors. An atomic produce to two
topics on two brokers must be all or nothing, and a kill -9 of ZooKeeper followed by its
restart keeps the cluster's metadata (the data folder survives).
"""

from __future__ import annotations

import time

from harness.client.client import PulsarClient
from harness.client.transaction import Transaction
from targets.embedded import HOST
from targets.zookeeper import srvr_ok
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v4_failover import broker_named
from tests.cluster.test_v4_transactions import (
    TXN_SETTINGS,
    payload,
    read_all,
    topic_on,
    v4_client,
    value_of,
)
from tests.waiting import wait_until

ZK_SETTINGS = {**TXN_SETTINGS, "metadataStoreUrl": "zk"}


def test_atomic_produce_on_zookeeper_and_its_data_survives_a_kill(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings=ZK_SETTINGS)
    metadata = cluster.records["metadata"]
    assert metadata.program == "zookeeper" and metadata.config_path.name == "zoo.cfg"
    assert srvr_ok(HOST, metadata.ports["client_port"])
    brokers_conf = [cluster.records[f"broker-{i}"].config_path.read_text() for i in range(2)]
    assert all('"metadataStoreUrl": "zk:127.0.0.1:' in text for text in brokers_conf)

    left, right = topic_on(0, "zk-atomic"), topic_on(1, "zk-atomic")
    with v4_client(cluster) as client:
        to_left, to_right = client.create_producer(left), client.create_producer(right)
        watcher = client.subscribe(left, "watch", sub_type="Failover")
        committed = client.new_transaction(timeout_s=60)
        aborted = client.new_transaction(timeout_s=60)
        to_left.send(payload("c-left"), txn=committed)
        to_right.send(payload("c-right"), txn=committed)
        to_left.send(payload("x-left"), txn=aborted)
        to_right.send(payload("x-right"), txn=aborted)
        assert watcher.receive(timeout_s=0.5) is None   # nothing before the decision
        committed.commit()
        aborted.abort()
        got = watcher.receive(timeout_s=15)
        assert got is not None and value_of(got.data) == "c-left"
        watcher.acknowledge(got)
    assert read_all(cluster, [left, right]) == {left: ["c-left"], right: ["c-right"]}

    data = metadata.config_path.parents[2] / "data" / "metadata"
    assert any((data / "txnlog").rglob("log.*")), "ZooKeeper wrote no transaction log"
    cluster.kill("metadata")
    cluster.start("metadata")   # same zoo.cfg, same data folder
    assert read_all(cluster, [left, right]) == {left: ["c-left"], right: ["c-right"]}


def test_v5_atomic_produce_on_zookeeper(cluster_factory: ClusterFactory) -> None:
    """v5 on ZooKeeper: sequence keys (op records, events) and index scans emulated, watches recursive."""
    from tests.cluster.test_v5_helpers import admin_of, commit_abort_and_read, start_v5

    cluster = start_v5(cluster_factory, metadataStoreUrl="zk")
    assert cluster.records["metadata"].program == "zookeeper"
    admin = admin_of(cluster)
    first, second = "topic://public/default/zk-a", "topic://public/default/zk-b"
    admin.create_scalable_topic(first, 2)
    admin.create_scalable_topic(second, 2)
    commit_abort_and_read(cluster, first, second, aborted=1)

def test_a_killed_and_restarted_broker_serves_its_coordinators_before_its_old_session_expires(
        cluster_factory: ClusterFactory) -> None:
    """The restarted broker finds its predecessor's owner znodes, whose session ZooKeeper keeps
    for the session timeout (a kill -9 closes nothing), and must take them over at once, as
    Pulsar's ResourceLockImpl does (delete the stale lock, create it again). It once answered
    TransactionCoordinatorNotFound until the old session expired (a versioned setData of an
    ephemeral znode was refused): chaos run 20261127-163805-chaos-chaos, three commits stalled 30 s."""
    session_s = 40.0
    cluster = cluster_factory(brokers=2, settings={**ZK_SETTINGS, "metadataStoreSessionTimeoutMillis": 40_000})
    with v4_client(cluster, operation_timeout_s=15) as client:
        owners = wait_until(lambda: client.coordinator_brokers(timeout_s=10), 30, message="coordinator owners")
        victim_url = owners[0]
        victim = broker_named(cluster, victim_url)
        theirs = {tc for tc, url in owners.items() if url == victim_url}
        # NEW_TXN prefers coordinators already connected, so the victim's may get none until its
        # handlers are ready (CI run of 2026-11-29: 6 transactions, all on the other broker).
        opened = wait_until(lambda: _opened_until_one_on(client, theirs, 2 * len(owners)), 30,
                            message=f"a transaction on the victim's coordinators {theirs}")
        assert opened is not None     # wait_until returns the first truthy value
        pending = [txn for txn in opened if txn.id.most in theirs]
        cluster.kill(victim)
        cluster.start(victim)
        restarted = time.monotonic()
        for txn in pending:
            txn.commit()   # the op timeout (15 s) is well short of the old session's 40 s
        took = time.monotonic() - restarted
        assert took < session_s / 2, f"commits took {took:.1f} s after the restart"
        moved = client.coordinator_brokers(timeout_s=10)
        assert {tc for tc, url in moved.items() if url == victim_url} >= theirs
        for txn in opened:
            if txn not in pending:
                txn.abort()


def _opened_until_one_on(client: PulsarClient, tc_ids: set[int], count: int) -> list[Transaction] | None:
    """`count` new transactions if one of them is on a coordinator in `tc_ids`; else abort them
    all and answer None (wait_until asks again)."""
    opened = [client.new_transaction(timeout_s=120) for _ in range(count)]
    if any(txn.id.most in tc_ids for txn in opened):
        return opened
    for txn in opened:
        txn.abort()
    return None
