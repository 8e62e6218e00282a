"""Readers and read_to_end: empty topics, log order, open transactions, partitions, reconnects."""

from __future__ import annotations

import pytest

from harness.client import (
    BatchingConfig,
    LastMessageIdFailedError,
    LastMessageIdLostError,
    LastMessageIdUnansweredError,
    PulsarClient,
    ReadIncompleteError,
)
from harness.wire import CommandType as T
from harness.wire import MessageId, ServerError, commands
from tests.unit.client.fake_broker import BrokerConnection, FakeCluster, arrived, wait_for

TOPIC = "persistent://public/default/final"


def test_empty_topic_reads_nothing_at_once(cluster: FakeCluster, client: PulsarClient) -> None:
    reader = client.create_reader(TOPIC)
    assert reader.read_to_end(2) == []
    subscribe = cluster.commands(T.SUBSCRIBE)[0].body
    assert not subscribe.durable and subscribe.subscription.startswith("reader-")
    assert MessageId.from_proto(subscribe.start_message_id) == MessageId.EARLIEST
    assert cluster.kinds(T.GET_LAST_MESSAGE_ID) == [T.GET_LAST_MESSAGE_ID]


def test_read_to_end_returns_everything_in_log_order(cluster: FakeCluster,
                                                     client: PulsarClient) -> None:
    producer = client.create_producer(TOPIC)
    for i in range(5):
        producer.send(f"v{i}".encode())
    batched = client.create_producer(TOPIC, batching=BatchingConfig(max_messages=3,
                                                                    max_delay_s=5))
    for future in [batched.send_async(f"b{i}".encode()) for i in range(3)]:
        future.result(2)
    read = client.create_reader(TOPIC).read_to_end(3)
    assert [m.data for m in read] == [b"v0", b"v1", b"v2", b"v3", b"v4", b"b0", b"b1", b"b2"]
    assert [m.message_id for m in read] == sorted(m.message_id for m in read)


def test_an_open_transaction_does_not_make_the_read_wait(cluster: FakeCluster,
                                                         client: PulsarClient) -> None:
    producer = client.create_producer(TOPIC)
    producer.send(b"committed")
    txn = client.new_transaction()
    producer.send(b"pending", txn=txn)
    producer.send(b"after-pending")  # held back behind the open transaction
    read = client.create_reader(TOPIC).read_to_end(2)
    assert [m.data for m in read] == [b"committed"]
    txn.commit()
    read = client.create_reader(TOPIC).read_to_end(2)
    assert [m.data for m in read] == [b"committed", b"pending", b"after-pending"]


def test_partitions_are_read_in_index_order(cluster: FakeCluster, client: PulsarClient) -> None:
    cluster.partitioned[TOPIC] = 3
    producer = client.create_producer(TOPIC)
    for i in range(9):
        producer.send(f"{i}".encode())
    read = client.create_reader(TOPIC).read_to_end(3)
    partitions = [m.message_id.partition for m in read]
    assert partitions == sorted(partitions) and len(read) == 9


def test_deadline_before_the_end_raises_with_the_partial_read(cluster: FakeCluster,
                                                              client: PulsarClient) -> None:
    client.create_producer(TOPIC).send(b"only")

    def beyond(conn: BrokerConnection, event) -> bool:
        ledger = cluster.topic(TOPIC).ledger_id
        conn.reply(commands.get_last_message_id_response(event.body.request_id,
                                                         MessageId(ledger, 5)))
        return True

    cluster.brokers[0].intercept(T.GET_LAST_MESSAGE_ID, beyond)
    reader = client.create_reader(TOPIC)
    with pytest.raises(ReadIncompleteError) as info:
        reader.read_to_end(0.3)
    assert [m.data for m in info.value.messages] == [b"only"]
    assert info.value.missing == [TOPIC]


def test_reader_resumes_after_a_reconnect_without_repeating(cluster: FakeCluster,
                                                            client: PulsarClient) -> None:
    producer = client.create_producer(TOPIC)
    for i in range(4):
        producer.send(f"{i}".encode())
    reader = client.create_reader(TOPIC, receiver_queue_size=2)
    first = [arrived(reader.read_next(2)), arrived(reader.read_next(2))]
    cluster.brokers[0].drop_connections()
    wait_for(lambda: len(cluster.commands(T.SUBSCRIBE)) == 2, what="reader resubscribed")
    rest = [arrived(reader.read_next(3)), arrived(reader.read_next(3))]
    assert [m.data for m in first + rest] == [b"0", b"1", b"2", b"3"]
    resubscribe = cluster.commands(T.SUBSCRIBE)[-1].body
    assert MessageId.from_proto(resubscribe.start_message_id).entry_id == 1


def test_a_second_read_does_not_wait_for_an_end_an_earlier_one_delivered(cluster: FakeCluster,
                                                                         client: PulsarClient) -> None:
    """The drainer reads in rounds: a round can end while one partition is still short of its
    end, and the next call must not wait again for the partitions that got there (the broker
    sends each message once; the self-test's drain stalled on that)."""
    cluster.partitioned[TOPIC] = 2
    producer = client.create_producer(TOPIC)
    for i in range(4):
        producer.send(f"{i}".encode())
    reader = client.create_reader(TOPIC)
    assert len(reader.read_to_end(3)) == 4
    assert reader.read_to_end(3) == []             # at once: both partitions are at their end
    client.create_producer(f"{TOPIC}-partition-0").send(b"later")
    assert [m.data for m in reader.read_to_end(3)] == [b"later"]


def test_a_reader_started_at_the_last_message_has_nothing_to_read(cluster: FakeCluster,
                                                                  client: PulsarClient) -> None:
    producer = client.create_producer(TOPIC)
    ids = [producer.send(f"{i}".encode()).message_id for i in range(3)]
    assert client.create_reader(TOPIC, start=ids[-1]).read_to_end(3) == []    # the start is exclusive
    assert [m.data for m in client.create_reader(TOPIC, start=ids[1]).read_to_end(3)] == [b"2"]
    assert client.create_reader(TOPIC, start=MessageId.LATEST).read_to_end(3) == []


def test_a_connection_dropped_on_the_last_message_id_is_told_apart_and_an_end_of_topic_ends_the_read(
        cluster: FakeCluster, client: PulsarClient) -> None:
    """Pulsar 2.10-4.0.3 closes the connection on GET_LAST_MESSAGE_ID for a terminated topic it
    loaded again (apache/pulsar#24063): the reader says so, and can read to REACHED_END_OF_TOPIC."""
    producer = client.create_producer(TOPIC)
    for i in range(3):
        producer.send(f"{i}".encode())
    cluster.terminate(TOPIC)

    def close_the_connection(conn: BrokerConnection, event) -> bool:
        conn.drop()
        return True

    cluster.brokers[0].intercept(T.GET_LAST_MESSAGE_ID, close_the_connection)
    reader = client.create_reader(TOPIC)
    with pytest.raises(LastMessageIdLostError) as info:
        reader.read_to_end(3)
    assert info.value.part == TOPIC
    asked = len(cluster.commands(T.GET_LAST_MESSAGE_ID))
    assert [m.data for m in reader.read_to_end(5, ask_last=False)] == [b"0", b"1", b"2"]
    assert len(cluster.commands(T.GET_LAST_MESSAGE_ID)) == asked, "asked the last message id again"
    assert reader.consumer.reached_end_of_topic


def test_a_last_message_id_never_answered_is_told_apart(cluster: FakeCluster, client: PulsarClient) -> None:
    """Pulsar 3.2 on a terminated topic it loaded again never answers GET_LAST_MESSAGE_ID (its
    NullPointerException stays inside a future: apache/pulsar#24063)."""
    client.create_producer(TOPIC).send(b"only")
    cluster.brokers[0].intercept(T.GET_LAST_MESSAGE_ID, lambda conn, event: True)
    with pytest.raises(LastMessageIdUnansweredError) as info:
        client.create_reader(TOPIC).read_to_end(0.5)
    assert info.value.part == TOPIC
    assert not isinstance(info.value, ReadIncompleteError)


def test_a_last_message_id_answered_with_an_error_is_told_apart(cluster: FakeCluster, client: PulsarClient) -> None:
    """Pulsar 3.3 on a terminated topic it loaded again, with a transaction buffer, answers
    GET_LAST_MESSAGE_ID with `UnknownError: Failed to recover Transaction Buffer.` every time (the
    release matrix of 2026-12-03); the drain must know which request failed to read around it."""
    client.create_producer(TOPIC).send(b"only")
    cluster.terminate(TOPIC)

    def refuse(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.error(event.body.request_id, ServerError.UnknownError,
                                  "Failed to recover Transaction Buffer."))
        return True

    cluster.brokers[0].intercept(T.GET_LAST_MESSAGE_ID, refuse)
    reader = client.create_reader(TOPIC)
    with pytest.raises(LastMessageIdFailedError) as info:
        reader.read_to_end(3)
    assert info.value.part == TOPIC and "Failed to recover Transaction Buffer" in str(info.value.cause)
    assert [m.data for m in reader.read_to_end(3, ask_last=False)] == [b"only"]
