"""v5 end to end with the brokers on Oxia's protocol (`metadataStoreUrl=oxia`).

Every broker keeps its metadata through `OxiaMetadataClient` (the real `oxia` client) over
its own proxy link to the store's Oxia frontend: ownership, the v5 coordinators' leader
elections, transaction headers and op records, decision events, watches. An atomic
produce over two scalable topics must be all or nothing, as on our own protocol, and
the store must have served the brokers only through Oxia's protocol.
"""

from __future__ import annotations

import pytest

from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_helpers import (
    admin_of,
    broker_metric,
    metric_sum,
    new_client,
    read_all,
    receive_values,
    scrape,
    start_v5,
    values,
)

pytestmark = pytest.mark.cluster

# The Python client heartbeats every 2 s at the least: a session needs comfortably more.
OXIA_SETTINGS = {"metadataStoreUrl": "oxia", "metadataStoreSessionTimeoutMillis": 6000}


def test_atomic_produce_and_commit_on_the_oxia_backend(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory, **OXIA_SETTINGS)
    metadata = cluster.records["metadata"]
    assert metadata.metrics_url is not None
    admin = admin_of(cluster)
    first, second = "topic://public/default/oxia-a", "topic://public/default/oxia-b"
    admin.create_scalable_topic(first, 2)
    admin.create_scalable_topic(second, 2)
    with new_client(cluster) as client:
        consumers = [client.subscribe(t, "check") for t in (first, second)]
        producers = [client.create_producer(t) for t in (first, second)]

        committed = client.new_transaction(60)
        for i in range(10):
            for topic_index, producer in enumerate(producers):
                producer.send(f"c-{topic_index}-{i}", key=f"key-{i}", txn=committed)
        assert all(c.receive(0.5) is None for c in consumers), "uncommitted messages were delivered"
        committed.commit()
        got = [receive_values(c, 10, 15.0) for c in consumers]
        assert [sorted(g) for g in got] == [sorted(f"c-{t}-{i}" for i in range(10)) for t in (0, 1)]

        aborted = client.new_transaction(60)
        for i in range(5):
            for topic_index, producer in enumerate(producers):
                producer.send(f"a-{topic_index}-{i}", key=f"key-{i}", txn=aborted)
        aborted.abort()
        for topic_index, producer in enumerate(producers):
            producer.send(f"plain-{topic_index}", key="key-0")
        assert [receive_values(c, 1, 15.0) for c in consumers] == [["plain-0"], ["plain-1"]]

        final = [values(read_all(client, t)) for t in (first, second)]
        for topic_index, seen in enumerate(final):
            assert sorted(seen) == sorted([f"c-{topic_index}-{i}" for i in range(10)] + [f"plain-{topic_index}"])

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
