"""v4 transactions on the embedded cluster, with our client and checked by the real pulsar-client.

Acceptance criteria (issue 5): atomic produce to two topics commits all or nothing;
abort hides the messages; acking one message in two transactions conflicts; committed
acks are never delivered again; aborted acks are delivered again; afterwards the real
`pulsar-client` reads every topic from the start and sees every committed value and
none of the aborted ones. The topics are placed on different brokers so the
coordinator's END_TXN_ON_PARTITION crosses a broker-to-broker link.

The helpers here are shared by the other `test_v4*` modules.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

import pulsar
import pytest
import requests

from embedded.broker.lookup_policy import choose_broker
from harness.client import PulsarClient, TransactionConflictError
from harness.wire import (
    CommandType,
    InitialPosition,
    MessageId,
    SubType,
    TxnAction,
    TxnId,
    commands,
)
from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import ClusterFactory, WireClient, lookup_until_connect, service_urls
from tests.waiting import wait_until

TXN_SETTINGS: dict[str, Any] = {"txnbenchTxnEndRetryIntervalMillis": 300}
ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


def topic_on(broker_id: int, prefix: str, brokers: int = 2) -> str:
    """A fresh topic name that the lookup policy places on `broker_id` (while all brokers live)."""
    for _ in range(1000):
        name = f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"
        if choose_broker(name, set(range(brokers))) == broker_id:
            return name
    raise AssertionError("no topic name hashes to that broker")


def payload(value: str) -> bytes:
    """The harness's payload format: JSON with the unique value."""
    return json.dumps({"v": value, "i": [], "p": ""}).encode()


def value_of(data: bytes) -> str:
    return str(json.loads(data)["v"])


def read_all(cluster: EmbeddedCluster, topics: Iterable[str], *, quiet_ms: int = 1500) -> dict[str, list[str]]:
    """Every value the real pulsar-client reads from each topic's start (until `quiet_ms` brings nothing)."""
    client = pulsar.Client(service_urls(cluster), operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    out: dict[str, list[str]] = {}
    try:
        for topic in topics:
            reader = client.create_reader(topic, pulsar.MessageId.earliest)
            values: list[str] = []
            for _ in range(100_000):   # bounded: ends at the first quiet period
                try:
                    message = reader.read_next(timeout_millis=quiet_ms)
                except pulsar.Timeout:
                    break
                values.append(value_of(message.data()))
            reader.close()
            out[topic] = values
    finally:
        client.close()
    return out


def v4_client(cluster: EmbeddedCluster, *, operation_timeout_s: float = 20, **settings: Any) -> PulsarClient:
    return PulsarClient(service_urls(cluster), txn_path="v4", operation_timeout_s=operation_timeout_s, **settings)


def test_atomic_produce_to_two_topics_is_all_or_nothing_and_abort_hides(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings=TXN_SETTINGS)
    left, right = topic_on(0, "atomic"), topic_on(1, "atomic")
    with v4_client(cluster) as client:
        to_left, to_right = client.create_producer(left), client.create_producer(right)
        watcher = client.subscribe(left, "watch", sub_type="Failover")
        committed = client.new_transaction(timeout_s=60)
        aborted = client.new_transaction(timeout_s=60)
        to_left.send(payload("before"))
        to_left.send(payload("c-left"), txn=committed)
        to_right.send(payload("c-right"), txn=committed)
        to_left.send(payload("x-left"), txn=aborted)
        to_right.send(payload("x-right"), txn=aborted)
        to_left.send(payload("after"))
        first = watcher.receive(timeout_s=10)
        assert first is not None and value_of(first.data) == "before"
        watcher.acknowledge(first)
        assert watcher.receive(timeout_s=0.5) is None   # the open transactions hold back everything after them
        committed.commit()
        got = watcher.receive(timeout_s=10)
        assert got is not None and value_of(got.data) == "c-left"
        watcher.acknowledge(got)
        assert watcher.receive(timeout_s=0.5) is None   # "after" is still behind the open aborted transaction
        aborted.abort()
        got = watcher.receive(timeout_s=10)
        assert got is not None and value_of(got.data) == "after"   # x-left and the markers are skipped
        watcher.acknowledge(got)
        assert watcher.receive(timeout_s=0.5) is None
    seen = read_all(cluster, [left, right])
    assert seen == {left: ["before", "c-left", "after"], right: ["c-right"]}


def test_transactional_acks_conflict_commit_for_good_and_abort_to_redeliver(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings=TXN_SETTINGS)
    topic = topic_on(1, "acks")
    with v4_client(cluster) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "work", sub_type="Shared")
        for i in range(5):
            producer.send(payload(f"m{i}"))
        messages = {value_of(m.data): m for m in (consumer.receive(timeout_s=10) for _ in range(5)) if m is not None}
        assert sorted(messages) == [f"m{i}" for i in range(5)]
        first, second, third = (client.new_transaction(timeout_s=60) for _ in range(3))
        consumer.acknowledge(messages["m0"], txn=first)
        with pytest.raises(TransactionConflictError):
            consumer.acknowledge(messages["m0"], txn=second)
        second.abort()
        consumer.acknowledge(messages["m1"], txn=third)
        third.abort()   # the ack is released: m1 is delivered again
        again = consumer.receive(timeout_s=10)
        assert again is not None and value_of(again.data) == "m1" and again.redelivery_count >= 1
        first.commit()  # m0 is acknowledged for good
        consumer.close()
        consumer = client.subscribe(topic, "work", sub_type="Shared")
        redelivered = []
        for _ in range(10):
            message = consumer.receive(timeout_s=2)
            if message is None:
                break
            redelivered.append(value_of(message.data))
        assert sorted(redelivered) == ["m1", "m2", "m3", "m4"]
    assert read_all(cluster, [topic])[topic] == [f"m{i}" for i in range(5)]
    # the pending-ack log is a managed ledger in the namespace, hidden from topic lists as Pulsar hides it
    listed = requests.get(f"{cluster.records['broker-0'].admin_url}/admin/v2/persistent/public/default",
                          timeout=5).json()
    assert topic in listed and not [t for t in listed if "__transaction" in t]


def test_a_redelivery_queued_by_an_abort_is_dropped_once_another_transactions_ack_commits(
        cluster_factory: ClusterFactory) -> None:
    """Wire level, with the consumer out of permits so the redelivery stays queued: abort T1
    (its ack is released and the message queued for redelivery), T2 acks the same message
    and commits, then permits arrive: the queued redelivery must be skipped (Pulsar's replay
    skips acknowledged positions), so the message is never dispatched after the commit."""
    cluster = cluster_factory(brokers=1, settings=TXN_SETTINGS)
    url = cluster.records["broker-0"].service_url or ""
    topic = "persistent://public/default/queued-redelivery"
    owner = lookup_until_connect(url, topic, 20)
    producer = WireClient(owner)
    assert commands.error_of(producer.request(lambda r: commands.producer(topic, 7, r),
                                              CommandType.PRODUCER_SUCCESS)) is None
    meta = commands.message_metadata("p", 1, 1)
    producer.send(commands.send(7, 1, meta, payload("m0")))
    producer.wait(lambda c: c.type is CommandType.SEND_RECEIPT)
    coordinator = WireClient(url)
    coordinator.request(lambda r: commands.lookup(f"{ASSIGN}-partition-0", r), CommandType.LOOKUP_RESPONSE)
    wait_until(lambda: commands.error_of(coordinator.request(
        lambda r: commands.tc_client_connect_request(r, 0), CommandType.TC_CLIENT_CONNECT_RESPONSE)) is None,
        20, interval_s=0.1, message="coordinator 0 loaded")
    consumer = WireClient(owner)
    consumer.send(commands.subscribe(topic, "s", 1, 1, sub_type=SubType.Shared,
                                     initial_position=InitialPosition.Earliest))
    consumer.wait(lambda c: c.type is CommandType.SUCCESS)
    consumer.send(commands.flow(1, 1))   # one permit: after this delivery the consumer takes nothing more
    message = MessageId.from_proto(consumer.wait(lambda c: c.type is CommandType.MESSAGE).body.message_id)

    def checked(answer: Any) -> Any:
        assert commands.error_of(answer) is None, commands.describe(answer)
        return answer

    def new_txn() -> TxnId:
        answer = checked(coordinator.request(lambda r: commands.new_txn(r, 0, timeout_ms=60_000),
                                             CommandType.NEW_TXN_RESPONSE))
        txn = commands.txn_of(answer)
        assert txn is not None
        checked(coordinator.request(lambda r: commands.add_subscription_to_txn(r, txn, [(topic, "s")]),
                                    CommandType.ADD_SUBSCRIPTION_TO_TXN_RESPONSE))
        return txn

    first, second = new_txn(), new_txn()
    checked(consumer.request(lambda r: commands.ack(1, [message], txn=first, request_id=r), CommandType.ACK_RESPONSE))
    checked(coordinator.request(lambda r: commands.end_txn(r, first, TxnAction.ABORT), CommandType.END_TXN_RESPONSE))
    checked(consumer.request(lambda r: commands.ack(1, [message], txn=second, request_id=r), CommandType.ACK_RESPONSE))
    checked(coordinator.request(lambda r: commands.end_txn(r, second, TxnAction.COMMIT), CommandType.END_TXN_RESPONSE))
    consumer.send(commands.flow(1, 10))
    with pytest.raises(TimeoutError):
        consumer.wait(lambda c: c.type is CommandType.MESSAGE, timeout_s=2)
    for client in (consumer, coordinator, producer):
        client.close()
