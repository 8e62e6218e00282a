"""Failover: kill -9 the broker that owns a topic while a real producer and consumer run.

Acceptance criteria (issue 4): both clients reconnect to another broker, no message
whose send was acknowledged is lost, and nothing acknowledged is delivered again. The
Python client sends acks without receipts, so "acknowledged" means: covered by the
cursor state the owner had *persisted* (read from its internal stats just before the
kill). A second test checks the stronger promise for acks with receipts, at the wire
level: an ACK answered by ACK_RESPONSE is never delivered again after the owner dies.
"""

from __future__ import annotations

import threading
import time
import uuid

import pulsar
import pytest
import requests

from harness.wire import (
    Command,
    CommandType,
    MessageId,
    commands,
)
from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import (
    ClusterFactory,
    Traffic,
    consume,
    lookup_until_connect,
    produce,
    service_urls,
    subscribe,
)
from tests.waiting import wait_until

SETTINGS = {"txnbenchTxnExtensions": [], "managedLedgerDefaultMarkDeleteRateLimit": 5.0}


def owner_of(cluster: EmbeddedCluster, topic: str, via: str) -> str:
    """The broker service name whose advertised URL the lookup returns."""
    local = topic.rsplit("/", 1)[1]
    url = cluster.records[via].admin_url
    data = requests.get(f"{url}/lookup/v2/topic/persistent/public/default/{local}", timeout=5).json()
    for name, record in cluster.records.items():
        if record.service_url == data["brokerUrl"]:
            return name
    raise AssertionError(f"lookup answered an unknown broker {data}")


def live_broker(cluster: EmbeddedCluster, dead: str) -> str:
    return next(n for n in sorted(cluster.records) if n.startswith("broker-") and n != dead)


def persisted_acks(cluster: EmbeddedCluster, owner: str, topic: str, subscription: str) -> tuple[tuple[int, int],
                                                                                                  list[list[int]]]:
    local = topic.rsplit("/", 1)[1]
    stats = requests.get(f"{cluster.records[owner].admin_url}/admin/v2/persistent/public/default/{local}/internalStats",
                         timeout=5).json()
    cursor = stats["cursors"][subscription]
    ledger, entry = (int(x) for x in cursor["persistedMarkDeletePosition"].split(":"))
    return (ledger, entry), cursor["persistedIndividuallyDeletedMessages"]


def covered(position: tuple[int, int], mark_delete: tuple[int, int], ranges: list[list[int]]) -> bool:
    if position <= mark_delete:
        return True
    return any(position[0] == lid and first <= position[1] <= last for lid, first, last in ranges)


def test_kill_9_of_the_owner_moves_the_topic_and_loses_nothing(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings=SETTINGS)
    topic = f"persistent://public/default/failover-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(service_urls(cluster), operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    traffic = Traffic()
    total = 1500
    threads = [threading.Thread(target=consume, args=(client, topic, traffic), daemon=True),
               threading.Thread(target=produce, args=(client, topic, traffic, total), daemon=True)]
    try:
        threads[0].start()
        wait_until(lambda: requests.get(f"{cluster.info().admin_url}/admin/v2/persistent/public/default",
                                        timeout=5).json(), 20, message="the topic exists")
        threads[1].start()
        wait_until(lambda: len(traffic.received) >= 300, 30, message="300 messages consumed before the kill")
        owner = owner_of(cluster, topic, "broker-0")
        time.sleep(0.5)   # let the owner persist some acks
        mark_delete, ranges = persisted_acks(cluster, owner, topic, "sub")
        assert mark_delete[1] >= 0 or ranges, "no acknowledgement was persisted before the kill"
        killed_at = time.monotonic()
        cluster.kill(owner)
        survivor = live_broker(cluster, owner)

        wait_until(lambda: not threads[1].is_alive(), 90, message="the producer finished after the failover")
        wait_until(lambda: set(traffic.acked_sends) <= {v for _, v, _ in traffic.received}, 60,
                   message="every acknowledged send was consumed")
    finally:
        traffic.stop.set()
        for thread in threads:
            thread.join(timeout=30)
        client.close()

    assert not traffic.send_errors, traffic.send_errors[:5]
    assert len(traffic.acked_sends) == total
    after_kill = [(v, p) for t, v, p in traffic.received if t > killed_at]
    assert after_kill, "nothing was consumed after the kill"
    redelivered_acked = [(v, p) for v, p in after_kill if covered(p, mark_delete, ranges)]
    assert not redelivered_acked, f"acknowledged (persisted) messages delivered again: {redelivered_acked[:5]}"
    assert owner_of(cluster, topic, survivor) == survivor
    old_ledgers = {p[0] for t, _, p in traffic.received if t < killed_at}
    written_by_survivor = [v for v, p in traffic.acked_sends.items() if p[0] not in old_ledgers]
    assert written_by_survivor, "no send was acknowledged by the new owner"


# ---- acks with receipts, at the wire level ------------------------------------------------------


def test_acks_answered_with_a_receipt_survive_kill_9(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings={**SETTINGS, "managedLedgerDefaultMarkDeleteRateLimit": 0.1})
    topic = f"persistent://public/default/receipts-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(service_urls(cluster), operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"r{i}".encode()) for i in range(20)]
    finally:
        client.close()
    entry_url = cluster.records["broker-0"].service_url
    assert entry_url is not None
    owner_url = lookup_until_connect(entry_url, topic, 20)
    wire = subscribe(owner_url, topic, 20)
    delivered = []
    for _ in range(20):
        message = wire.wait(lambda c: c.type is CommandType.MESSAGE)
        delivered.append(MessageId.from_proto(message.body.message_id))
    acked = [delivered[i] for i in (0, 1, 2, 5, 7, 11)]   # with the 1/10 s rate limit only receipts persist soon
    for request_id, message_id in enumerate(acked, start=100):
        wire.send(commands.ack(1, [message_id], request_id=request_id))
    for request_id in range(100, 100 + len(acked)):
        def is_its_ack_response(c: Command, r: int = request_id) -> bool:
            return c.type is CommandType.ACK_RESPONSE and c.body.request_id == r

        answer = wire.wait(is_its_ack_response)
        assert commands.error_of(answer) is None
    wire.close()
    owner = next(n for n, r in cluster.records.items() if r.service_url == owner_url)
    cluster.kill(owner)

    survivor = live_broker(cluster, owner)
    survivor_url = cluster.records[survivor].service_url or ""
    # until the dead owner's session expires, lookups still name it; then the survivor takes over
    new_owner_url = wait_until(lambda: (url := lookup_until_connect(survivor_url, topic, 5)) == survivor_url and url,
                               30, interval_s=0.2, message="the survivor owns the topic")
    assert isinstance(new_owner_url, str)     # wait_until returns the first truthy value: the url
    wire = subscribe(new_owner_url, topic, 20)
    again = []
    for _ in range(20 - len(acked)):
        message = wire.wait(lambda c: c.type is CommandType.MESSAGE)
        again.append(MessageId.from_proto(message.body.message_id))
    with pytest.raises(TimeoutError):
        wire.wait(lambda c: c.type is CommandType.MESSAGE, 1.0)
    wire.close()
    assert {(m.ledger_id, m.entry_id) for m in again}.isdisjoint({(m.ledger_id, m.entry_id) for m in acked})
    assert len(again) == 20 - len(acked)
    assert {(i.ledger_id(), i.entry_id()) for i in ids} == {(m.ledger_id, m.entry_id) for m in delivered}
