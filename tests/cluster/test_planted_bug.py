"""A planted bug is really active when its setting is on, and only then.

`txnbenchBugV5GcRetentionInMillis` makes the v5 GC sweep read its retention window in
milliseconds. With a 30 s window and a subscription that materializes decisions 2 s
late, the correct sweep leaves the committed acks alone; the planted bug collects the
transaction's op records after 30 ms and the 5 committed acks are lost (their messages
come back), exactly the PIP-473 review's race that `test_v5_gc_race.py` provokes with a
short window instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from embedded import planted_bugs
from harness.client.consumer import Message
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_helpers import admin_of, broker_metric, new_client, start_v5, wait_until

pytestmark = pytest.mark.cluster

BUG = planted_bugs.V5_GC_RETENTION_UNITS
SLOW: dict[str, Any] = {"txnbenchV5GcRetentionMillis": 30_000, "txnbenchV5GcIntervalMillis": 200,
                        "txnbenchV5ParticipantDelayMillis": 2000, "txnbenchV5ParticipantDelayMatch": "|slow-sub",
                        "txnbenchV5GcLeftoverOps": "force-delete"}


@pytest.mark.parametrize("planted", [False, True], ids=["off", "on"])
def test_the_planted_gc_bug_loses_committed_acks_only_when_on(cluster_factory: ClusterFactory,
                                                             planted: bool) -> None:
    cluster = start_v5(cluster_factory, brokers=1, **SLOW, **({BUG: True} if planted else {}))
    admin = admin_of(cluster)
    topic = "topic://public/default/planted-gc"
    admin.create_scalable_topic(topic, 1)
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

        if planted:
            again: list[Message] = []
            wait_until(lambda: _take(consumer, again) >= 5, 30, "the lost acks' messages to come back")
            assert sorted(m.data.decode() for m in again) == [f"m{i}" for i in range(5)]
            assert broker_metric(cluster, "txnbench_v5_pending_ack_lost_total") == 5
        else:
            wait_until(lambda: admin.scalable_topic_stats(topic)["subscriptions"]["slow-sub"]["msgBacklog"] == 0,
                       30, "the slow participant to apply the committed acks")
            assert consumer.receive(1.0) is None, "a committed ack was lost without the planted bug"
            assert broker_metric(cluster, "txnbench_v5_pending_ack_lost_total") == 0
    assert ("PLANTED BUGS ON" in cluster.records["broker-0"].log_path.read_text()) is planted


def _take(consumer: object, into: list[Message]) -> int:
    message = consumer.receive(0.2)   # type: ignore[attr-defined]
    if message is not None:
        into.append(message)
    return len(into)
