"""v5 end to end with the brokers on Oxia's protocol (`metadataStoreUrl=oxia`).

Every broker keeps its metadata through `OxiaMetadataClient` (the real `oxia` client) over
its own proxy link to the store's Oxia frontend: ownership, the v5 coordinators' leader
elections, transaction headers and op records, decision events, watches. An atomic
produce over two scalable topics must be all or nothing, as on our own protocol, and
the store must have served the brokers only through Oxia's protocol; killing the broker
that leads the coordinators hands them over once its Oxia session expires, atomically.
"""

from __future__ import annotations

from typing import Any

from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_failover import (
    kill_the_coordinator_leader,
)
from tests.cluster.test_v5_helpers import (
    admin_of,
    broker_metric,
    commit_abort_and_read,
    metric_sum,
    scrape,
    start_v5,
)

# The Python client heartbeats every 2 s at the least: a session needs comfortably more.
OXIA_SETTINGS: dict[str, Any] = {"metadataStoreUrl": "oxia", "metadataStoreSessionTimeoutMillis": 6000}


def test_atomic_produce_and_commit_on_the_oxia_backend(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory, **OXIA_SETTINGS)
    metadata = cluster.records["metadata"]
    assert metadata.metrics_url is not None
    admin = admin_of(cluster)
    first, second = "topic://public/default/oxia-a", "topic://public/default/oxia-b"
    admin.create_scalable_topic(first, 2)
    admin.create_scalable_topic(second, 2)
    commit_abort_and_read(cluster, first, second, aborted=5)

    assert broker_metric(cluster, "pulsar_txn_committed_total") == 1
    assert broker_metric(cluster, "pulsar_txn_aborted_total") == 1
    store = scrape(metadata.metrics_url)
    oxia_writes = metric_sum(store, "txnbench_metadata_oxia_rpcs_total",
                             lambda labels: labels["rpc"] == "Write" and labels["code"] == "OK")
    puts = metric_sum(store, "txnbench_metadata_ops_total", lambda labels: labels["op"] == "put")
    assert oxia_writes >= 40, "the transactions' metadata went through Oxia's protocol"
    assert puts <= oxia_writes, "every put the store served came through Oxia's protocol"
    assert metric_sum(store, "txnbench_metadata_oxia_rpcs_total",
                      lambda labels: labels["rpc"] == "GetNotifications") >= 2   # one stream per broker


def test_killing_the_coordinator_leader_on_the_oxia_backend(cluster_factory: ClusterFactory) -> None:
    """kill -9 of the broker leading the coordinators: its Oxia session expires in the store,
    the survivor's elections (through the real client's notifications) take over, and every
    transaction stays all or nothing (the run of test_v5_failover.py, on Oxia's protocol)."""
    cluster = start_v5(cluster_factory, brokers=2, **OXIA_SETTINGS)
    victim, _ = kill_the_coordinator_leader(cluster, 10)
    assert broker_metric(cluster, "txnbench_v5_tc_leader", skip=[victim]) == 4   # all 4 partitions here
