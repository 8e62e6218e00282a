"""The PIP-473 review's GC race, reproduced on purpose: a slow participant loses committed acks.

The review (lhotari, on PIP-473's "Garbage collection"): if a participant has not
materialized a commit when the GC sweep's retention window has passed, the sweep
"forces deletion of any leftovers"; when the participant then commits, its
`idx:acks-by-segment-subscription` query returns nothing, so the committed acks are
never applied to the cursor.

Here the subscription `slow-sub` waits 2 s before materializing every decision
(`txnbenchV5ParticipantDelayMillis`), and the coordinator collects transactions 0.3 s
after they end. A consumer acknowledges 5 messages in one transaction and commits:

* with the PIP's rule (`txnbenchV5GcLeftoverOps: force-delete`), the 5 messages are
  delivered again to the subscription after the commit succeeded. In a history that is
  an `ack` op (ok) in a transaction whose `txn-commit` is ok, followed by a `receive`
  of the same value on the same subscription: the checker reports it as `lost-ack`
  ("a message acked in a committed transaction was delivered again to that
  subscription afterwards");
* with what Pulsar 5.0 ships (`redrive`: keep the header and re-publish the decision
  while op records remain), nothing is delivered again and the backlog drains.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from harness.client.consumer import Message
from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_helpers import (
    admin_of,
    broker_metric,
    new_client,
    start_v5,
    wait_until,
)

RACE: dict[str, Any] = {"txnbenchV5GcRetentionMillis": 300, "txnbenchV5GcIntervalMillis": 200,
        "txnbenchV5ParticipantDelayMillis": 2000, "txnbenchV5ParticipantDelayMatch": "|slow-sub"}


@pytest.mark.parametrize("policy", ["force-delete", "redrive"])
def test_gc_before_a_slow_participant_loses_committed_acks(cluster_factory: ClusterFactory, policy: str) -> None:
    cluster = start_v5(cluster_factory, txnbenchV5GcLeftoverOps=policy, **RACE)
    with acks_committed_on_a_slow_subscription(cluster, "topic://public/default/gc-race") as consumer:
        if policy == "force-delete":
            assert_acks_lost(cluster, consumer)
            assert broker_metric(cluster, "txnbench_v5_gc_forced_op_records_total") == 5
        else:
            assert_acks_kept(cluster, consumer)
            assert broker_metric(cluster, "txnbench_v5_gc_redrives_total") >= 1


@contextmanager
def acks_committed_on_a_slow_subscription(cluster: EmbeddedCluster, topic: str) -> Iterator[Any]:
    """Five messages on a new `topic`, received on `slow-sub` and acknowledged in one transaction that
    commits (the header CAS is the decision); its consumer, to see what comes back."""
    admin_of(cluster).create_scalable_topic(topic, 1)
    with new_client(cluster) as client:
        producer = client.create_producer(topic)
        for i in range(5):
            producer.send(f"m{i}", key=f"k{i}")
        consumer = client.subscribe(topic, "slow-sub")
        received: list[Message] = []
        wait_until(lambda: _take(consumer, received) >= 5, 20, "the 5 messages")
        txn = client.new_transaction(60)
        for message in received:
            consumer.acknowledge(message, txn=txn)
        txn.commit()
        yield consumer


def assert_acks_lost(cluster: EmbeddedCluster, consumer: Any) -> None:
    """The 5 committed acks were lost: their messages are delivered again."""
    again: list[Message] = []
    wait_until(lambda: _take(consumer, again) >= 5, 30, "the committed-but-lost acks' messages to be delivered again")
    assert sorted(m.data.decode() for m in again) == [f"m{i}" for i in range(5)]
    assert broker_metric(cluster, "txnbench_v5_pending_ack_lost_total") == 5


def assert_acks_kept(cluster: EmbeddedCluster, consumer: Any) -> None:
    """The slow participant applied the 5 committed acks: nothing comes back."""
    admin = admin_of(cluster)
    wait_until(lambda: admin.scalable_topic_stats(consumer.topic)["subscriptions"]["slow-sub"]["msgBacklog"] == 0,
               30, "the slow participant to apply the committed acks")
    assert consumer.receive(1.0) is None, "a committed ack was lost"
    assert broker_metric(cluster, "txnbench_v5_pending_ack_lost_total") == 0


def _take(consumer: object, into: list[Message]) -> int:
    message = consumer.receive(0.2)   # type: ignore[attr-defined]
    if message is not None:
        into.append(message)
    return len(into)
