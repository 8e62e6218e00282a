"""Producers: receipts, sequence ids, batching, async sends, partitions, errors, reconnects."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from harness.client import (
    BatchingConfig,
    ConnectionLostError,
    NotReadyError,
    OperationTimeoutError,
    PulsarClient,
    ServerFailedError,
    TopicTerminatedError,
)
from harness.client.errors import ServerRejectedError
from harness.client.handler import HandlerState
from harness.client.hashing import partition_for_key
from harness.client.producer import _PartitionTargets
from harness.client.timers import Deadline
from harness.wire import CommandType as T
from harness.wire import MessageId, Payload, ServerError, commands, unpack_messages
from tests.unit.client.fake_broker import (
    BrokerConnection,
    FakeCluster,
    drop,
    once,
    silent,
    wait_for,
)

TOPIC = "persistent://public/default/orders"


def test_send_returns_the_broker_message_id_and_uses_consecutive_sequence_ids(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    receipts = [producer.send(f"v{i}".encode(), key=f"k{i}", properties={"n": str(i)})
                for i in range(3)]
    ledger = cluster.topic(TOPIC).ledger_id
    assert [r.message_id for r in receipts] == [MessageId(ledger, i) for i in range(3)]
    assert [r.msg_id for r in receipts] == [f"{ledger}:{i}:-1" for i in range(3)]
    assert all(r.topic == TOPIC and r.segment is None for r in receipts)
    sends = cluster.commands(T.SEND)
    assert [s.body.sequence_id for s in sends] == [0, 1, 2]
    assert sends[0].payload is not None
    first = sends[0].payload.metadata
    assert first.partition_key == "k0"
    assert {kv.key: kv.value for kv in first.properties} == {"n": "0"}
    assert not first.HasField("num_messages_in_batch")
    assert first.producer_name == "fake-1"  # the broker-assigned name
    producer_cmd = cluster.commands(T.PRODUCER)[0].body
    assert producer_cmd.topic == TOPIC and producer_cmd.txn_enabled
    assert not producer_cmd.user_provided_producer_name
    assert cluster.values(TOPIC) == [b"v0", b"v1", b"v2"]


def test_batching_sends_one_entry_and_gives_each_message_its_batch_index(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders", batching=BatchingConfig(max_messages=3,
                                                                        max_delay_s=5.0))
    futures = [producer.send_async(f"m{i}".encode(), key=f"k{i}") for i in range(3)]
    receipts = [f.result(2) for f in futures]
    ledger = cluster.topic(TOPIC).ledger_id
    assert [r.message_id for r in receipts] == [MessageId(ledger, 0, i) for i in range(3)]
    assert [r.msg_id for r in receipts] == [f"{ledger}:0:{i}" for i in range(3)]
    (send,) = cluster.commands(T.SEND)
    assert send.body.num_messages == 3 and send.body.highest_sequence_id == 2
    assert send.payload is not None
    assert send.payload.metadata.num_messages_in_batch == 3
    inner = unpack_messages(send.payload)
    assert [(m.data, m.key, m.single_metadata.sequence_id) for m in inner] == [
        (b"m0", "k0", 0), (b"m1", "k1", 1), (b"m2", "k2", 2)]


def test_batch_is_flushed_after_its_max_delay(cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders", batching=BatchingConfig(max_messages=100,
                                                                        max_delay_s=0.02))
    receipt = producer.send(b"alone")  # blocking send waits for the delayed flush
    assert receipt.message_id.batch_index == 0
    assert len(cluster.commands(T.SEND)) == 1


def test_send_async_runs_callbacks_with_the_receipt(cluster: FakeCluster,
                                                    client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    seen: list[str] = []
    done = threading.Event()

    def callback(future) -> None:
        seen.append(future.result(0).msg_id)
        if len(seen) == 5:
            done.set()

    for i in range(5):
        producer.send_async(f"{i}".encode(), callback=callback)
    assert done.wait(2)
    ledger = cluster.topic(TOPIC).ledger_id
    assert seen == [f"{ledger}:{i}:-1" for i in range(5)]


def test_partitioned_topic_routes_keys_by_murmur_hash(
        cluster: FakeCluster, client: PulsarClient) -> None:
    cluster.partitioned[TOPIC] = 4
    producer = client.create_producer(TOPIC)
    assert len(cluster.commands(T.PRODUCER)) == 4
    for key in ("alpha", "beta", "gamma", "delta", "k17"):
        receipt = producer.send(key.encode(), key=key)
        index = partition_for_key(key, 4)
        assert receipt.segment == f"{TOPIC}-partition-{index}"
        assert receipt.message_id.partition == index
        assert key.encode() in cluster.values(f"{TOPIC}-partition-{index}")
    unkeyed = {producer.send(b"x").segment for _ in range(4)}
    assert len(unkeyed) == 4  # round robin


def test_a_batching_producer_keeps_unkeyed_messages_on_one_partition_for_ten_batch_delays() -> None:
    """Java's RoundRobinPartitionMessageRouterImpl with batching (read in pulsar-client 4.0.8):
    partition = (now_ms / (10 x max delay) + random start) mod n. pulsar-perf's producers batch,
    so a transaction's messages to a topic go to one partition; ours sent one per partition and
    the peer's transactions registered and marked more partitions than pulsar-perf's (#27)."""
    now = [1_000_000]
    producers = [object() for _ in range(4)]
    targets = _PartitionTargets(producers, BatchingConfig(max_delay_s=0.002),   # type: ignore[arg-type]
                                clock_ms=lambda: now[0])
    deadline = Deadline.after(1)
    first = targets.pick(None, deadline)
    assert all(targets.pick(None, deadline) is first for _ in range(10))   # one 20 ms window
    now[0] += 19
    assert targets.pick(None, deadline) is first   # the window's last millisecond
    now[0] += 1
    assert targets.pick(None, deadline) is not first
    seen = set()
    for _ in range(4):
        now[0] += 20
        seen.add(id(targets.pick(None, deadline)))
    assert len(seen) == 4   # every partition in turn, one window each
    assert targets.pick("k17", deadline) is producers[partition_for_key("k17", 4)]
    unbatched = _PartitionTargets(producers)   # type: ignore[arg-type]
    assert len({id(unbatched.pick(None, deadline)) for _ in range(4)}) == 4


def test_send_error_from_a_terminated_topic_is_definite_and_sticks(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    producer.send(b"before")
    cluster.terminate(TOPIC)
    with pytest.raises(TopicTerminatedError) as info:
        producer.send(b"after")
    assert info.value.definite
    with pytest.raises(TopicTerminatedError):
        producer.send(b"again")
    assert len(cluster.commands(T.SEND)) == 2  # the third was refused locally


@pytest.mark.parametrize(("code", "definite"), [
    (ServerError.PersistenceError, False),
    (ServerError.ChecksumError, True),
    (ServerError.NotAllowedError, True),
])
def test_send_errors_are_classified_by_the_table(cluster: FakeCluster, client: PulsarClient,
                                                 code: ServerError, definite: bool) -> None:
    def fail(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.send_error(event.body.producer_id, event.body.sequence_id, code,
                                       "scripted"))
        return True

    producer = client.create_producer("orders")
    cluster.brokers[0].intercept(T.SEND, once(fail))
    with pytest.raises(ServerRejectedError if definite else ServerFailedError) as info:
        producer.send(b"x")
    assert info.value.definite is definite
    producer.send(b"fine")  # the producer keeps working


def test_connection_lost_with_a_send_in_flight_is_indeterminate_and_not_resent(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    producer.send(b"first")
    cluster.brokers[0].intercept(T.SEND, once(drop))
    with pytest.raises(ConnectionLostError) as info:
        producer.send(b"lost")
    assert not info.value.definite
    receipt = producer.send(b"after-reconnect", timeout_s=3)
    assert receipt.message_id.entry_id == 1
    assert len(cluster.commands(T.PRODUCER)) == 2  # re-created on a new connection
    assert len(cluster.commands(T.CONNECT)) == 2
    assert cluster.values(TOPIC) == [b"first", b"after-reconnect"]  # "lost" was never resent
    resend = cluster.commands(T.SEND)[-1].body
    assert resend.sequence_id == 2  # sequence ids keep counting across reconnects


def test_no_receipt_before_the_deadline_is_indeterminate(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    cluster.brokers[0].intercept(T.SEND, once(silent))
    with pytest.raises(OperationTimeoutError) as info:
        producer.send(b"x", timeout_s=0.2)
    assert not info.value.definite


def test_async_sends_past_the_send_timeout_are_swept(
        cluster: FakeCluster, make_client: Callable[..., PulsarClient]) -> None:
    client = make_client(cluster.url)
    producer = client.create_producer("orders", send_timeout_s=0.2)
    cluster.brokers[0].intercept(T.SEND, silent)
    future = producer.send_async(b"x", timeout_s=10)
    assert future.wait(3)
    assert isinstance(future.exception(), OperationTimeoutError)


def test_not_connected_before_the_deadline_is_definite(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    cluster.brokers[0].intercept(T.PRODUCER, silent)  # the re-create never completes
    cluster.brokers[0].drop_connections()
    target = producer.producers[0]
    wait_for(lambda: target.state is not HandlerState.READY, what="producer noticed the loss")
    with pytest.raises(NotReadyError) as info:
        producer.send(b"x", timeout_s=0.3)
    assert info.value.definite
    assert not [c for c in cluster.commands(T.SEND)]


def test_broker_closing_the_producer_makes_it_reconnect(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    producer.send(b"one")
    broker_conn = cluster.brokers[0].connections[0]
    producer_id = cluster.commands(T.PRODUCER)[0].body.producer_id
    broker_conn.reply(commands.close_producer(producer_id, 0))
    wait_for(lambda: len(cluster.commands(T.PRODUCER)) == 2, what="producer re-created")
    producer.send(b"two")
    assert cluster.values(TOPIC) == [b"one", b"two"]
    assert len(cluster.commands(T.CONNECT)) == 1  # same connection


def test_close_sends_close_producer_and_refuses_later_sends(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    producer.send(b"x")
    producer.close()
    assert cluster.kinds(T.CLOSE_PRODUCER) == [T.CLOSE_PRODUCER]
    with pytest.raises(Exception) as info:
        producer.send(b"y")
    assert info.value.definite  # type: ignore[attr-defined]


def test_payload_checksums_are_valid(cluster: FakeCluster, client: PulsarClient) -> None:
    client.create_producer("orders").send(b"checked")
    entry = cluster.topic(TOPIC).entries[0].payload
    assert Payload.parse(entry).checksum_ok


def test_concurrent_senders_keep_sequence_order_on_the_wire(
        cluster: FakeCluster, client: PulsarClient) -> None:
    producer = client.create_producer("orders")
    receipts: list[str] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        for i in range(25):
            receipt = producer.send(f"{index}-{i}".encode())
            with lock:
                receipts.append(receipt.msg_id)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(receipts) == len(set(receipts)) == 200
    sequence_ids = [c.body.sequence_id for c in cluster.commands(T.SEND)]
    assert sequence_ids == list(range(200))  # written in sequence order
