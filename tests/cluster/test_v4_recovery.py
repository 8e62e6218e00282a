"""kill -9 the broker that owns a topic with open transactions: its buffer and pending acks recover from their logs.

The topic's new owner rebuilds the transaction buffer (snapshot, then the data ledger
after it) and the subscription's pending acks (replay of the pending-ack log). While
the transactions stay open, their messages stay invisible and their acknowledged
messages stay held (not delivered again, even though the consumer reconnected); when
the coordinator, on the other broker, then commits or aborts them, the new owner
applies the decisions: committed acks are never delivered again, aborted ones are,
and the committed message becomes visible.
"""

from __future__ import annotations

import time

from harness.client import ConnectionLostError, NotReadyError, Producer, PulsarClient, Transaction
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v4_transactions import (
    TXN_SETTINGS,
    payload,
    read_all,
    topic_on,
    v4_client,
    value_of,
)


def send_or_refused(producer: Producer, data: bytes) -> bool:
    """True when the send was stored; False when it was refused because the connection is down."""
    try:
        producer.send(data)
    except (ConnectionLostError, NotReadyError):
        return False
    return True


def txn_on(client: PulsarClient, coordinators: set[int]) -> Transaction:
    """A transaction of one of `coordinators` (NEW_TXN goes round robin; the others are aborted)."""
    for _ in range(16):
        txn = client.new_transaction(timeout_s=120)
        if txn.id.most in coordinators:
            return txn
        txn.abort()
    raise AssertionError(f"no transaction landed on coordinators {coordinators}")


def test_buffer_and_pending_acks_survive_the_topic_owner_being_killed(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings=TXN_SETTINGS)
    topic = topic_on(1, "recover")
    with v4_client(cluster) as client:
        owners = client.coordinator_brokers(timeout_s=20)
        safe = {tc for tc, url in owners.items() if url == cluster.records["broker-0"].service_url}
        assert safe, f"every coordinator is on the broker to kill: {owners}"
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "work", sub_type="Shared")
        for i in range(3):
            producer.send(payload(f"m{i}"))
        received = {value_of(m.data): m for m in (consumer.receive(timeout_s=10) for _ in range(3)) if m}
        assert sorted(received) == ["m0", "m1", "m2"]
        to_commit, to_abort, producing = (txn_on(client, safe) for _ in range(3))
        consumer.acknowledge(received["m0"], txn=to_commit)
        consumer.acknowledge(received["m1"], txn=to_abort)
        consumer.acknowledge(received["m2"])
        producer.send(payload("t1"), txn=producing)

        cluster.kill("broker-1")   # the topic's owner; the coordinators of the three live on broker-0
        # The producer reaches the new owner once the dead one's session expires. A send
        # refused meanwhile fails at once (not stored: its broker was dead), so retrying
        # is bounded by time, not by a count a fast failure would use up in milliseconds.
        deadline = time.monotonic() + 60
        while not send_or_refused(producer, payload("after")):   # any other error fails the test
            assert time.monotonic() < deadline, "no send reached the topic's new owner within 60 s"
            time.sleep(0.2)
        seen = consumer.receive(timeout_s=5)
        assert seen is None, f"{value_of(seen.data)} was delivered while held or behind an open transaction"

        to_commit.commit()
        to_abort.abort()
        again = consumer.receive(timeout_s=10)
        assert again is not None and value_of(again.data) == "m1"
        consumer.acknowledge(again)
        producing.commit()
        got = [value_of(m.data) for m in (consumer.receive(timeout_s=10) for _ in range(2)) if m]
        assert got == ["t1", "after"]
        assert consumer.receive(timeout_s=2) is None   # m0 (committed ack) never comes back
    assert read_all(cluster, [topic])[topic] == ["m0", "m1", "m2", "t1", "after"]
