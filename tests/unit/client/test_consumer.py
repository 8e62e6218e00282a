"""Consumers: subscribe/flow/receive, acks with receipts, batches, redelivery, failover, reconnects."""

from __future__ import annotations

import pytest

from harness.client import (
    BatchingConfig,
    ConnectionLostError,
    InvalidStateError,
    PulsarClient,
    ServerFailedError,
    SubType,
)
from harness.client.consumer import ack_set_words
from harness.wire import AckType, MessageId, Payload, ServerError, commands
from harness.wire import CommandType as T
from tests.unit.client.fake_broker import (
    BrokerConnection,
    FakeCluster,
    arrived,
    drop,
    once,
    wait_for,
)

TOPIC = "persistent://public/default/events"


def _fill(client: PulsarClient, count: int, **kwargs) -> None:
    producer = client.create_producer(TOPIC, **kwargs)
    futures = [producer.send_async(f"m{i}".encode(), key=f"k{i}") for i in range(count)]
    for future in futures:
        future.result(2)


def test_subscribe_flow_receive_and_ack_with_receipt(cluster: FakeCluster,
                                                     client: PulsarClient) -> None:
    _fill(client, 3)
    consumer = client.subscribe(TOPIC, "s", consumer_name="c1")
    subscribe = cluster.commands(T.SUBSCRIBE)[0].body
    assert (subscribe.topic, subscribe.subscription, subscribe.subType) == (TOPIC, "s", 0)
    assert subscribe.initialPosition == 1  # Earliest
    assert subscribe.consumer_name == "c1"
    assert wait_for(lambda: cluster.commands(T.FLOW))[0].body.messagePermits == 1000
    messages = [arrived(consumer.receive(2)) for _ in range(3)]
    assert [m.data for m in messages] == [b"m0", b"m1", b"m2"]
    assert [m.key for m in messages] == ["k0", "k1", "k2"]
    assert all(m.topic == TOPIC and m.segment is None and m.redelivery_count == 0
               for m in messages)
    for message in messages:
        consumer.acknowledge(message)
    acks = cluster.commands(T.ACK)
    assert [a.body.message_id[0].entryId for a in acks] == [0, 1, 2]
    assert all(a.body.HasField("request_id") and a.body.ack_type == AckType.Individual
               for a in acks)
    assert consumer.receive(0.05) is None


def test_ack_error_in_the_receipt_is_classified(cluster: FakeCluster,
                                                client: PulsarClient) -> None:
    _fill(client, 1)
    consumer = client.subscribe(TOPIC, "s")
    message = arrived(consumer.receive(2))

    def fail(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.ack_response(event.body.consumer_id, event.body.request_id,
                                         error=ServerError.PersistenceError, message="bk down"))
        return True

    cluster.brokers[0].intercept(T.ACK, once(fail))
    with pytest.raises(ServerFailedError) as info:
        consumer.acknowledge(message)
    assert not info.value.definite
    consumer.acknowledge(message)


def test_ack_lost_with_the_connection_is_indeterminate(cluster: FakeCluster,
                                                       client: PulsarClient) -> None:
    _fill(client, 1)
    consumer = client.subscribe(TOPIC, "s")
    message = arrived(consumer.receive(2))
    cluster.brokers[0].intercept(T.ACK, once(drop))
    with pytest.raises(ConnectionLostError):
        consumer.acknowledge(message)


def test_batches_are_unpacked_and_acked_by_batch_index(cluster: FakeCluster,
                                                       client: PulsarClient) -> None:
    _fill(client, 4, batching=BatchingConfig(max_messages=4, max_delay_s=5))
    consumer = client.subscribe(TOPIC, "s")
    messages = [arrived(consumer.receive(2)) for _ in range(4)]
    ledger = cluster.topic(TOPIC).ledger_id
    assert [m.message_id for m in messages] == [MessageId(ledger, 0, i, -1, 4) for i in range(4)]
    assert [m.msg_id for m in messages] == [f"{ledger}:0:{i}" for i in range(4)]
    assert [m.sequence_id for m in messages] == [0, 1, 2, 3]
    consumer.acknowledge(messages[1])
    ack = cluster.commands(T.ACK)[-1].body.message_id[0]
    assert (ack.entryId, ack.batch_size) == (0, 4)
    assert list(ack.ack_set) == ack_set_words(4, [0, 2, 3])
    consumer.close()
    # a new consumer gets only the three still-unacked indexes (the broker's ack_set)
    again = client.subscribe(TOPIC, "s")
    redelivered = [arrived(again.receive(2)) for _ in range(3)]
    assert [m.message_id.batch_index for m in redelivered] == [0, 2, 3]


def test_ack_set_words_are_java_bitset_longs() -> None:
    assert ack_set_words(3, [0, 2]) == [0b101]
    assert ack_set_words(65, [63, 64]) == [-(1 << 63), 1]


def test_ack_set_words_drop_trailing_zero_words_as_java_does() -> None:
    """The last message of a batch (a batch of one) is acked with no ack set, as Java's client sends
    it; a `[0]` reached a broker path no Java client does (two transactions both committed the same
    single-message batch on 2.10.5 and 3.2.0 in the release matrix)."""
    assert ack_set_words(1, []) == []
    assert ack_set_words(2, []) == []
    assert ack_set_words(128, [0]) == [1]


def test_cumulative_ack(cluster: FakeCluster, client: PulsarClient) -> None:
    _fill(client, 3)
    consumer = client.subscribe(TOPIC, "s", sub_type=SubType.Failover)
    messages = [arrived(consumer.receive(2)) for _ in range(3)]
    consumer.acknowledge_cumulative(messages[2])
    ack = cluster.commands(T.ACK)[-1].body
    assert ack.ack_type == AckType.Cumulative and ack.message_id[0].entryId == 2
    assert cluster.topic(TOPIC).subscriptions["s"].acked == {0, 1, 2}


def test_cumulative_ack_on_shared_is_refused_locally(cluster: FakeCluster,
                                                     client: PulsarClient) -> None:
    _fill(client, 1)
    consumer = client.subscribe(TOPIC, "s", sub_type="Shared")
    message = arrived(consumer.receive(2))
    with pytest.raises(InvalidStateError) as info:
        consumer.acknowledge_cumulative(message)
    assert info.value.definite
    assert not cluster.commands(T.ACK)


def test_negative_ack_redelivers_with_a_higher_count(cluster: FakeCluster,
                                                     client: PulsarClient) -> None:
    _fill(client, 1)
    consumer = client.subscribe(TOPIC, "s", sub_type=SubType.Shared)
    first = arrived(consumer.receive(2))
    consumer.negative_acknowledge(first)
    redeliver = wait_for(lambda: cluster.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES))[0].body
    assert [d.entryId for d in redeliver.message_ids] == [0]
    again = arrived(consumer.receive(2))
    assert again.data == first.data and again.redelivery_count == 1


def test_redeliver_all_drops_the_local_queue(cluster: FakeCluster, client: PulsarClient) -> None:
    _fill(client, 3)
    consumer = client.subscribe(TOPIC, "s")
    wait_for(lambda: len(consumer._queue) == 3, what="three queued")
    consumer.redeliver_unacknowledged()
    body = wait_for(lambda: cluster.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES))[0].body
    assert len(body.message_ids) == 0
    got = [arrived(consumer.receive(2)) for _ in range(3)]
    assert [m.data for m in got] == [b"m0", b"m1", b"m2"]
    assert all(m.redelivery_count == 1 for m in got)
    assert consumer.receive(0.05) is None  # the stale copies were dropped


def test_failover_redelivery_raises_the_consumer_epoch_and_drops_older_messages(
        cluster: FakeCluster, client: PulsarClient) -> None:
    """PIP-84: a MESSAGE dispatched before a Failover consumer's redelivery (stamped with the
    older epoch) reaches the client after it; delivering it too would hand the application
    m0 twice and out of order (Java's `isValidConsumerEpoch` drops it)."""
    _fill(client, 3)
    consumer = client.subscribe(TOPIC, "fo", sub_type=SubType.Failover)
    wait_for(lambda: len(consumer._queue) == 3, what="three queued")
    assert cluster.commands(T.SUBSCRIBE)[-1].body.consumer_epoch == 0
    first = cluster.topic(TOPIC).entries[0]

    def stale_copy_first(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.message(event.body.consumer_id, MessageId(cluster.topic(TOPIC).ledger_id, 0),
                                    Payload.parse(first.payload), consumer_epoch=0))
        return False   # then redeliver as usual

    cluster.brokers[0].intercept(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, once(stale_copy_first))
    consumer.redeliver_unacknowledged()
    body = wait_for(lambda: cluster.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES))[0].body
    assert body.consumer_epoch == 1
    got = [arrived(consumer.receive(2)) for _ in range(3)]
    assert [m.data for m in got] == [b"m0", b"m1", b"m2"]
    assert all(m.redelivery_count == 1 for m in got)
    assert consumer.receive(0.1) is None   # the copy of the older epoch was dropped


def test_redelivering_everything_while_disconnected_still_drops_the_queue(
        cluster: FakeCluster, client: PulsarClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's ConsumerImpl raises the epoch and clears its queue before it looks at the connection.
    Returning early while reconnecting handed a cumulative consumer the messages queued before its
    aborted transaction, and its next cumulative ack covered the aborted inputs (a v5 chaos run)."""
    _fill(client, 2)
    consumer = client.subscribe(TOPIC, "fo", sub_type=SubType.Failover)
    wait_for(lambda: len(consumer._queue) == 2, what="two queued")
    child = consumer.consumers[0]
    with monkeypatch.context() as patched:
        patched.setattr(type(child), "connection", property(lambda self: None))
        consumer.redeliver_unacknowledged()
    assert consumer.receive(0.1) is None            # the queued copies were dropped
    assert child._consumer_epoch == 1               # and the next attach subscribes with the new epoch
    assert not cluster.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES)


def test_shared_redelivery_sends_no_consumer_epoch(cluster: FakeCluster, client: PulsarClient) -> None:
    """Only Exclusive and Failover keep the epoch (Java's ConsumerImpl); a Shared consumer's
    messages are never filtered by it."""
    _fill(client, 1)
    consumer = client.subscribe(TOPIC, "s", sub_type=SubType.Shared)
    arrived(consumer.receive(2))
    consumer.redeliver_unacknowledged()
    body = wait_for(lambda: cluster.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES))[0].body
    assert not body.HasField("consumer_epoch")
    assert arrived(consumer.receive(2)).data == b"m0"


def test_permits_are_returned_after_half_the_queue(cluster: FakeCluster,
                                                   client: PulsarClient) -> None:
    _fill(client, 6)
    consumer = client.subscribe(TOPIC, "s", receiver_queue_size=4)
    got = []
    for _ in range(6):
        message = arrived(consumer.receive(2))
        got.append(message.data)
    flows = [f.body.messagePermits for f in cluster.commands(T.FLOW)]
    assert flows[0] == 4 and sum(flows) >= 6 and all(p == 2 for p in flows[1:])
    assert got == [f"m{i}".encode() for i in range(6)]


def test_failover_reports_the_active_consumer(cluster: FakeCluster, client: PulsarClient) -> None:
    first = client.subscribe(TOPIC, "fo", sub_type=SubType.Failover)
    second = client.subscribe(TOPIC, "fo", sub_type=SubType.Failover)
    wait_for(lambda: first.is_active is True and second.is_active is False, what="active flags")
    first.close()
    wait_for(lambda: second.is_active is True, what="failover to the second consumer")


def test_reconnect_resubscribes_and_drops_the_old_queue(cluster: FakeCluster,
                                                        client: PulsarClient) -> None:
    _fill(client, 2)
    consumer = client.subscribe(TOPIC, "s")
    wait_for(lambda: len(consumer._queue) == 2, what="two queued")
    cluster.brokers[0].drop_connections()
    wait_for(lambda: len(cluster.commands(T.SUBSCRIBE)) == 2, what="resubscribed")
    got = [arrived(consumer.receive(2)) for _ in range(2)]
    assert [m.data for m in got] == [b"m0", b"m1"]
    assert all(m.redelivery_count == 1 for m in got)  # redelivered, not the stale copies
    assert consumer.receive(0.1) is None


def test_end_of_topic_is_reported(cluster: FakeCluster, client: PulsarClient) -> None:
    _fill(client, 1)
    consumer = client.subscribe(TOPIC, "s")
    consumer.acknowledge(arrived(consumer.receive(2)))
    assert not consumer.reached_end_of_topic
    cluster.terminate(TOPIC)
    wait_for(lambda: consumer.reached_end_of_topic, what="REACHED_END_OF_TOPIC")


def test_unsubscribe_and_close(cluster: FakeCluster, client: PulsarClient) -> None:
    consumer = client.subscribe(TOPIC, "gone")
    consumer.unsubscribe()
    assert cluster.kinds(T.UNSUBSCRIBE) == [T.UNSUBSCRIBE]
    assert "gone" not in cluster.topic(TOPIC).subscriptions
    other = client.subscribe(TOPIC, "kept")
    other.close()
    assert cluster.kinds(T.CLOSE_CONSUMER) == [T.CLOSE_CONSUMER]
    with pytest.raises(Exception) as info:
        other.receive(0.1)
    assert info.value.definite  # type: ignore[attr-defined]


def test_partitioned_subscription_reads_every_partition(cluster: FakeCluster,
                                                        client: PulsarClient) -> None:
    cluster.partitioned[TOPIC] = 3
    producer = client.create_producer(TOPIC)
    for i in range(6):
        producer.send(f"p{i}".encode())
    consumer = client.subscribe(TOPIC, "s")
    got = [arrived(consumer.receive(2)) for _ in range(6)]
    assert sorted(m.data for m in got) == [f"p{i}".encode() for i in range(6)]
    assert {m.segment for m in got} == {f"{TOPIC}-partition-{i}" for i in range(3)}
    for message in got:
        consumer.acknowledge(message)
    acked = sum(len(cluster.topic(f"{TOPIC}-partition-{i}").subscriptions["s"].acked)
                for i in range(3))
    assert acked == 6


def test_arrival_time_is_when_the_frame_came_not_when_the_app_took_it(
        cluster: FakeCluster, client: PulsarClient) -> None:
    """A message waits in the receiver queue; `arrived_ns` keeps the broker-side moment."""
    import time

    _fill(client, 2)
    consumer = client.subscribe(TOPIC, "s")
    wait_for(lambda: cluster.commands(T.FLOW))
    time.sleep(0.3)  # the messages sit in the queue on purpose: the gap is what is measured
    before_receive = time.monotonic_ns()
    first = consumer.receive(2)
    assert first is not None and first.arrived_ns > 0
    assert first.arrived_ns <= before_receive - 100_000_000
