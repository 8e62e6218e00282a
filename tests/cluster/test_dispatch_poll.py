"""Experiment 6's polling dispatchers (`txnbenchDispatchHorizonPollMillis`) on the v5 path.

By default a transaction decision that moves a segment's read horizon wakes its
dispatchers at once. With the setting, dispatchers learn of a decision only at the
next poll of the horizon, while appends still wake them (the ledger notifies its
readers either way). The probe compares the two designs' end-to-end latency; these
tests pin the behaviour it relies on without timing anything: with a poll that never
comes in the test's lifetime, a committed transaction stays undelivered until an
append wakes the dispatcher, and with a short poll it is delivered on its own.
"""

from __future__ import annotations

from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_helpers import admin_of, new_client, receive_values, start_v5

TOPIC = "topic://public/default/poll"


def _commit_two(client: object) -> None:
    producer = client.create_producer(TOPIC)   # type: ignore[attr-defined]
    txn = client.new_transaction(60)   # type: ignore[attr-defined]
    for i in range(2):
        producer.send(f"c-{i}", key="k", txn=txn)
    txn.commit()


def test_without_a_poll_a_decision_waits_for_the_next_append(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory, brokers=1, txnbenchDispatchHorizonPollMillis=3_600_000)
    admin_of(cluster).create_scalable_topic(TOPIC, 1)
    with new_client(cluster) as client:
        consumer = client.subscribe(TOPIC, "s")
        _commit_two(client)
        assert consumer.receive(1.5) is None, "a decision woke the dispatcher although only a poll should"
        client.create_producer(TOPIC).send("plain", key="k")   # an append wakes it, and it reads past the decision
        assert sorted(receive_values(consumer, 3, 15.0)) == ["c-0", "c-1", "plain"]


def test_a_short_poll_delivers_a_decision_on_its_own(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory, brokers=1, txnbenchDispatchHorizonPollMillis=100)
    admin_of(cluster).create_scalable_topic(TOPIC, 1)
    with new_client(cluster) as client:
        consumer = client.subscribe(TOPIC, "s")
        _commit_two(client)
        assert sorted(receive_values(consumer, 2, 15.0)) == ["c-0", "c-1"]
