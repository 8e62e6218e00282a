"""v5 end to end with the brokers on Oxia's protocol (`metadataStoreUrl=oxia`).

Every broker keeps its metadata through `OxiaMetadataClient` (the real `oxia` client) over
its own proxy link to the store's Oxia frontend: ownership, the v5 coordinators' leader
elections, transaction headers and op records, decision events, watches. An atomic
produce over two scalable topics must be all or nothing, as on our own protocol, and
the store must have served the brokers only through Oxia's protocol; killing the broker
that leads the coordinators hands them over once its Oxia session expires, atomically.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_failover import (
    TOPICS,
    TXN_TIMEOUT_S,
    Outcomes,
    no_open_transactions,
    writer,
)
from tests.cluster.test_v5_helpers import (
    admin_of,
    broker_metric,
    broker_names,
    metric_sum,
    new_client,
    read_all,
    receive_values,
    scrape,
    start_v5,
    values,
    wait_until,
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


def test_killing_the_coordinator_leader_on_the_oxia_backend(cluster_factory: ClusterFactory) -> None:
    """kill -9 of the broker leading the coordinators: its Oxia session expires in the store,
    the survivor's elections (through the real client's notifications) take over, and every
    transaction stays all or nothing (the run of test_v5_failover.py, on Oxia's protocol)."""
    cluster = start_v5(cluster_factory, brokers=2, **OXIA_SETTINGS)
    admin = admin_of(cluster)
    for topic in TOPICS:
        admin.create_scalable_topic(topic, 2)
    out = Outcomes()
    stop = threading.Event()
    with new_client(cluster) as client:
        leaders = client.coordinator_brokers()
        by_url = {cluster.records[n].service_url: n for n in broker_names(cluster)}
        victim = Counter(by_url[url] for url in leaders.values()).most_common(1)[0][0]
        survivor = next(n for n in broker_names(cluster) if n != victim)
        threads = [threading.Thread(target=writer, args=(client, f"w{i}", stop, out), daemon=True)
                   for i in range(2)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(out.committed) >= 10, 60, "committed transactions before the kill")
        cluster.kill(victim)
        killed_at = time.monotonic()
        survivor_url = cluster.records[survivor].service_url
        wait_until(lambda: set(client.coordinator_brokers().values()) == {survivor_url}, 60,
                   "the survivor leading every coordinator partition", 0.2)
        wait_until(lambda: sum(t > killed_at for t in out.commit_times) >= 10, 90, "commits after the takeover")
        stop.set()
        for thread in threads:
            thread.join(60)
        assert not any(t.is_alive() for t in threads)
        wait_until(lambda: no_open_transactions(admin_of(cluster, skip=[victim])), TXN_TIMEOUT_S + 30,
                   "every transaction to have ended")
        visible = [set(values(read_all(client, t, 60))) for t in TOPICS]
    for value in out.committed:
        assert all(value in seen for seen in visible), f"committed {value} is not fully visible"
    for value in out.aborted:
        assert not any(value in seen for seen in visible), f"aborted {value} is visible"
    for value in out.unknown:
        assert len({value in seen for seen in visible}) == 1, f"{value} is partly visible"
    assert broker_metric(cluster, "txnbench_v5_tc_leader", skip=[victim]) == 4   # all 4 partitions here
