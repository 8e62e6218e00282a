"""v5 acceptance on the embedded cluster: PIP-473 transactions on PIP-460 scalable topics.

With our client (`harness.client`, v5: WATCH_TC_ASSIGNMENTS, SCALABLE_TOPIC_LOOKUP,
`scalable` coordinator commands) against two brokers:

* a transaction over two scalable topics is all or nothing: nothing is visible before
  the commit, everything after it; an aborted one is never visible; nothing is
  written to any data ledger to commit or abort;
* splitting and merging segments while transactions are open (their producers are
  rerouted to the children inside the same transactions) keeps them all or nothing,
  and ending them does not stall on the sealed segments;
* the metadata-store operations per committed transaction (`txnbench_metadata_ops_total`).
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from harness.client.errors import SetupError
from harness.metrics import parse_prometheus_text
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_helpers import (
    admin_of,
    broker_metric,
    commit_abort_and_read,
    metric_sum,
    new_client,
    read_all,
    receive_values,
    scrape,
    start_v5,
    values,
)


def test_atomic_produce_across_two_scalable_topics(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory)
    admin = admin_of(cluster)
    first, second = "topic://public/default/atomic-a", "topic://public/default/atomic-b"
    admin.create_scalable_topic(first, 2)
    admin.create_scalable_topic(second, 3)
    assert len(admin.scalable_topic_metadata(second)["segments"]) == 3
    data_entries_before = broker_metric(cluster, "txnbench_ml_add_entries_total", lambda labels: labels.get("kind") == "data")
    commit_abort_and_read(cluster, first, second, aborted=10)

    data_entries = broker_metric(cluster, "txnbench_ml_add_entries_total",
                                 lambda labels: labels.get("kind") == "data") - data_entries_before
    assert data_entries == 42, "one entry per message: no commit or abort marker in the data ledgers"
    assert broker_metric(cluster, "pulsar_txn_committed_total") == 1
    assert broker_metric(cluster, "pulsar_txn_aborted_total") == 1
    assert broker_metric(cluster, "pulsar_txn_metadata_store_op_writes_total") >= 40
    assert broker_metric(cluster, "pulsar_txn_metadata_store_header_cas_total",
                         lambda labels: labels.get("result") == "ok") == 2


def test_split_and_merge_while_transactions_are_open(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory)
    admin = admin_of(cluster)
    topic = "topic://public/default/reshape"
    admin.create_scalable_topic(topic, 2)
    keys = [f"key-{k}" for k in range(8)]
    with new_client(cluster) as client:
        consumer = client.subscribe(topic, "ordered")
        producer = client.create_producer(topic)
        txns = {name: client.new_transaction(60) for name in ("one", "two", "three")}
        sent: dict[str, list[str]] = defaultdict(list)

        def send_round(round_no: int) -> None:
            for name, txn in txns.items():
                for key in keys:
                    value = f"{name}-{round_no}-{key}"
                    producer.send(value, key=key, txn=txn)
                    sent[name].append(value)

        send_round(0)
        split = admin.split_segment(topic, 0)                 # 0 -> 2, 3 while all three are open
        assert split["segments"]["0"]["state"] == "SEALED"
        send_round(1)                                         # rerouted to the children, same txns
        merged = admin.merge_segments(topic, 3, 1)            # 3 + 1 -> 4
        assert sorted(s for s, seg in merged["segments"].items() if seg["state"] == "ACTIVE") == ["2", "4"]
        send_round(2)
        sealed = "segment://public/default/reshape/8000-ffff-1"
        with new_client(cluster) as other, pytest.raises(SetupError, match="TopicTerminatedError"):
            other.create_producer(sealed)   # a sealed segment takes no producer

        end_times = {}
        for name, action in (("one", "commit"), ("two", "abort"), ("three", "commit")):
            started = time.monotonic()
            getattr(txns[name], action)()
            end_times[name] = time.monotonic() - started
        print("\nend of transactions after a split and a merge (s):", {k: round(v, 3) for k, v in end_times.items()})
        assert max(end_times.values()) < 3.0, f"ending a transaction stalled: {end_times}"

        expected = sent["one"] + sent["three"]
        received = receive_values(consumer, len(expected), 30.0)
        assert sorted(received) == sorted(expected)
        final = values(read_all(client, topic))
        assert sorted(final) == sorted(expected), "a split or merge broke all-or-nothing"
        for name in ("one", "three"):   # per key, the rounds arrive in order: parents before children
            for key in keys:
                rounds = [int(v.split("-")[1]) for v in received if v.startswith(f"{name}-") and v.endswith(key)]
                assert rounds == sorted(rounds), f"{name}/{key} out of order: {rounds}"
    stats = admin.scalable_topic_stats(topic)
    assert stats["subscriptions"]["ordered"]["msgBacklog"] == 0
    assert {s["state"] for s in stats["segments"].values()} == {"ACTIVE", "SEALED"}


def test_metadata_store_operations_per_committed_transaction(cluster_factory: ClusterFactory) -> None:
    """Measure `txnbench_metadata_ops_total` per committed transaction (printed; see the README)."""
    cluster = start_v5(cluster_factory, txnbenchV5GcIntervalMillis=600_000)
    admin = admin_of(cluster)
    source, sink = "topic://public/default/ops-in", "topic://public/default/ops-out"
    admin.create_scalable_topic(source, 1)
    admin.create_scalable_topic(sink, 1)
    metadata_url = cluster.records["metadata"].metrics_url or ""
    count = 40
    with new_client(cluster) as client:
        feeder = client.create_producer(source)
        for i in range(count):
            feeder.send(f"in-{i}", key=f"k{i}")
        consumer = client.subscribe(source, "ctp")
        producer = client.create_producer(sink)
        warm = client.new_transaction(60)   # the first transaction pays the one-off lookups
        producer.send("warm", key="w", txn=warm)
        warm.commit()

        def ops() -> float:
            return metric_sum(scrape(metadata_url), "txnbench_metadata_ops_total")

        def settled(before: float) -> float:
            # wait until the participants' cleanup is done: two equal readings 0.5 s apart
            last, now = before, ops()
            for _ in range(60):
                if now == last:
                    return now
                time.sleep(0.5)
                last, now = now, ops()
            return now

        produce_start = settled(ops())
        for i in range(count):
            txn = client.new_transaction(60)
            producer.send(f"out-{i}", key=f"k{i}", txn=txn)
            txn.commit()
        produce_ops = (settled(produce_start) - produce_start) / count

        ctp_start = settled(ops())
        for _ in range(count):
            message = consumer.receive(10.0)
            assert message is not None
            txn = client.new_transaction(60)
            producer.send(message.data.decode().replace("in", "out2"), key=message.key, txn=txn)
            consumer.acknowledge(message, txn=txn)
            txn.commit()
        ctp_ops = (settled(ctp_start) - ctp_start) / count
    by_op = parse_prometheus_text(__import__("requests").get(metadata_url, timeout=10).text)
    print(f"\nmetadata-store ops per committed txn: produce-only (1 send) {produce_ops:.1f}, "
          f"consume-transform-produce (1 ack + 1 send) {ctp_ops:.1f}")
    print({labels: v for (name, labels), v in by_op.items() if name == "txnbench_metadata_ops_total"})
    assert 0 < produce_ops < 40 and 0 < ctp_ops < 60
