"""v5 (PIP-473) transactions and PIP-460 scalable topics, command by command."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from harness.client import FeatureNotSupportedError, PulsarClient, TxnState
from harness.client.hashing import segment_hash
from harness.wire import Command, TxnAction, TxnId, commands
from harness.wire import CommandType as T
from tests.unit.client.fake_broker import FakeCluster, arrived, coordinators_ready, wait_for

SCALABLE = "topic://public/default/orders"
TC_KINDS = (T.TC_CLIENT_CONNECT_REQUEST, T.NEW_TXN, T.ADD_PARTITION_TO_TXN,
            T.ADD_SUBSCRIPTION_TO_TXN, T.END_TXN)


@pytest.fixture
def v5(make_cluster: Callable[..., FakeCluster]) -> FakeCluster:
    cluster = make_cluster(2, v5=True, tc_count=2)
    cluster.create_scalable(SCALABLE, segments=2)
    return cluster


@pytest.fixture
def v5_client(v5: FakeCluster, make_client: Callable[..., PulsarClient]) -> PulsarClient:
    return make_client(v5.url, txn_path="v5")


def _key_for(segment_range: tuple[int, int], prefix: str = "k") -> str:
    low, high = segment_range
    return next(k for k in (f"{prefix}{i}" for i in range(10_000))
                if low <= segment_hash(k) <= high)


def test_v5_transaction_walk_command_by_command(v5: FakeCluster, v5_client: PulsarClient) -> None:
    producer = v5_client.create_producer(SCALABLE)
    lookup = v5.commands(T.SCALABLE_TOPIC_LOOKUP)[0].body
    assert lookup.topic == SCALABLE
    key = _key_for((0x0000, 0x7FFF))
    producer.send(b"seed", key=key)
    consumer = v5_client.subscribe(SCALABLE, "sub", sub_type="Shared")
    seed = arrived(consumer.receive(2))
    segment = v5.segment_topic(SCALABLE, 0)
    assert seed.segment == segment

    txn = v5_client.new_transaction(timeout_s=20)
    receipt = producer.send(b"a", key=key, txn=txn)
    consumer.acknowledge(seed, txn=txn)
    txn.commit()
    assert txn.state is TxnState.COMMITTED
    assert receipt.segment == segment and receipt.topic == SCALABLE

    # discovery is the watch, never the v4 assign topic
    assert v5.kinds(T.WATCH_TC_ASSIGNMENTS) == [T.WATCH_TC_ASSIGNMENTS]
    assert not [c for c in v5.commands(T.PARTITIONED_METADATA)
                if "transaction_coordinator_assign" in c.body.topic]
    assert not [c for c in v5.commands(T.LOOKUP) if "transaction_coordinator" in c.body.topic]
    tc_commands = v5.commands(*TC_KINDS)
    assert all(c.body.scalable for c in tc_commands)  # every coordinator command is flagged
    kinds = [c.type for c in tc_commands if c.type is not T.TC_CLIENT_CONNECT_REQUEST]
    assert kinds == [T.NEW_TXN, T.ADD_PARTITION_TO_TXN, T.ADD_SUBSCRIPTION_TO_TXN, T.END_TXN]
    add_partition = v5.commands(T.ADD_PARTITION_TO_TXN)[0].body
    assert list(add_partition.partitions) == [segment]  # the segment, as the Java v5 client does
    add_sub = v5.commands(T.ADD_SUBSCRIPTION_TO_TXN)[0].body.subscription[0]
    assert (add_sub.topic, add_sub.subscription) == (segment, "sub")
    sends = v5.commands(T.SEND)
    assert commands.txn_of(sends[-1]) == txn.id
    assert v5.values(segment) == [b"seed", b"a"]


def test_snapshot_points_handlers_at_leaders_and_a_push_retargets_them(
        v5: FakeCluster, v5_client: PulsarClient) -> None:
    b0, b1 = v5.brokers
    assert v5_client.coordinator_brokers() == {0: b0.url, 1: b1.url}
    coordinators_ready(v5_client, 2)
    connects = {c.body.tc_id: name for name, _, c in v5.log
                if c.type is T.TC_CLIENT_CONNECT_REQUEST}
    assert connects == {0: "b0", 1: "b1"}
    txn = v5_client.new_transaction()
    assert txn.id.most == 0
    v5.set_tc_leader(0, b1)  # leader election moved tc 0; the watch pushes the snapshot
    wait_for(lambda: v5_client.coordinator_brokers()[0] == b1.url, what="snapshot applied")
    wait_for(lambda: [c for c in b1.of_type(T.TC_CLIENT_CONNECT_REQUEST) if c.body.tc_id == 0],
             what="handler re-pointed at b1")
    txn.commit()
    assert [name for name, _, c in v5.log if c.type is T.END_TXN] == ["b1"]  # no NotFound detour


def test_v5_requires_the_discovery_feature(make_cluster: Callable[..., FakeCluster],
                                           make_client: Callable[..., PulsarClient]) -> None:
    cluster = make_cluster(1, tc_count=1)  # a 4.x broker: no v5 feature flags
    client = make_client(cluster.url, txn_path="v5")
    with pytest.raises(FeatureNotSupportedError, match="supports_tc_metadata_discovery") as info:
        client.new_transaction()
    assert info.value.definite
    assert not cluster.commands(T.WATCH_TC_ASSIGNMENTS)


def test_scalable_topics_need_the_v5_client(v5: FakeCluster,
                                            make_client: Callable[..., PulsarClient]) -> None:
    client = make_client(v5.url)
    with pytest.raises(FeatureNotSupportedError, match="txn_path='v5'"):
        client.create_producer(SCALABLE)


def test_keys_route_to_the_segment_covering_their_hash(v5: FakeCluster,
                                                       v5_client: PulsarClient) -> None:
    producer = v5_client.create_producer(SCALABLE)
    for i in range(20):
        key = f"key-{i}"
        receipt = producer.send(key.encode(), key=key)
        expected = 0 if segment_hash(key) <= 0x7FFF else 1
        assert receipt.segment == v5.segment_topic(SCALABLE, expected)
    topics = {c.body.topic for c in v5.commands(T.PRODUCER)}
    assert topics == {v5.segment_topic(SCALABLE, 0), v5.segment_topic(SCALABLE, 1)}


def test_send_refused_by_a_sealed_segment_is_retried_on_the_child(
        v5: FakeCluster, v5_client: PulsarClient) -> None:
    producer = v5_client.create_producer(SCALABLE)
    key = _key_for((0x0000, 0x3FFF))
    producer.send(b"before", key=key)
    left, _ = v5.split(SCALABLE, 0, push=False)  # sealed, but the watch hears of it later
    timer = threading.Timer(0.2, v5.push_dag, args=(SCALABLE,))
    timer.start()
    receipt = producer.send(b"after", key=key, timeout_s=3)
    timer.join()
    child = v5.segment_topic(SCALABLE, left)
    assert receipt.segment == child
    assert v5.values(child) == [b"after"]
    assert v5.values(v5.segment_topic(SCALABLE, 0)) == [b"before"]
    errors = [c for c in v5.commands(T.SEND)]
    assert len(errors) == 3  # before, the refused one, the retry on the child


def test_transactional_send_across_a_split_registers_the_new_segment(
        v5: FakeCluster, v5_client: PulsarClient) -> None:
    producer = v5_client.create_producer(SCALABLE)
    key = _key_for((0x0000, 0x3FFF))
    txn = v5_client.new_transaction()
    producer.send(b"one", key=key, txn=txn)
    left, _ = v5.split(SCALABLE, 0)
    dag = producer._dag
    assert dag is not None
    wait_for(lambda: dag.epoch == 2, what="new layout")
    producer.send(b"two", key=key, txn=txn)
    txn.commit()
    partitions = [list(c.body.partitions) for c in v5.commands(T.ADD_PARTITION_TO_TXN)]
    assert partitions == [[v5.segment_topic(SCALABLE, 0)], [v5.segment_topic(SCALABLE, left)]]


def test_consumer_reads_parent_segments_before_children(v5: FakeCluster,
                                                        v5_client: PulsarClient) -> None:
    producer = v5_client.create_producer(SCALABLE)
    key = _key_for((0x0000, 0x3FFF))
    for i in range(3):
        producer.send(f"old-{i}".encode(), key=key)
    left, _ = v5.split(SCALABLE, 0)
    dag = producer._dag
    assert dag is not None
    wait_for(lambda: dag.epoch == 2, what="new layout")
    for i in range(3):
        producer.send(f"new-{i}".encode(), key=key)
    consumer = v5_client.subscribe(SCALABLE, "ordered", sub_type="Shared")
    child = v5.segment_topic(SCALABLE, left)
    got = []
    for _ in range(6):
        message = arrived(consumer.receive(2))
        got.append(message.data)
        consumer.acknowledge(message)
    assert got == [b"old-0", b"old-1", b"old-2", b"new-0", b"new-1", b"new-2"]
    first_child_flow = next(i for i, (_, _, c) in enumerate(v5.log)
                            if c.type is T.FLOW and _topic_of(v5, c) == child)
    last_parent_ack = max(i for i, (_, _, c) in enumerate(v5.log)
                          if c.type is T.ACK and _topic_of(v5, c) == v5.segment_topic(SCALABLE, 0))
    assert first_child_flow > last_parent_ack  # the child was held until its parent drained


def _topic_of(cluster: FakeCluster, command: Command) -> str | None:
    for _, _, c in cluster.log:
        if c.type is T.SUBSCRIBE and c.body.consumer_id == command.body.consumer_id:
            return c.body.topic
    return None


def test_reader_reads_segments_parents_first(v5: FakeCluster, v5_client: PulsarClient) -> None:
    producer = v5_client.create_producer(SCALABLE)
    low_key = _key_for((0x0000, 0x3FFF))
    high_key = _key_for((0x8000, 0xFFFF))
    producer.send(b"p0", key=low_key)
    producer.send(b"p1", key=high_key)
    v5.split(SCALABLE, 0)
    dag = producer._dag
    assert dag is not None
    wait_for(lambda: dag.epoch == 2, what="new layout")
    producer.send(b"c0", key=low_key)
    reader = v5_client.create_reader(SCALABLE)
    read = reader.read_to_end(3)
    order = [m.data for m in read]
    assert sorted(order) == [b"c0", b"p0", b"p1"]
    assert order.index(b"p0") < order.index(b"c0")


def test_end_txn_routed_by_most_bits_on_v5(v5: FakeCluster, v5_client: PulsarClient) -> None:
    coordinators_ready(v5_client, 2)
    first, second = v5_client.new_transaction(), v5_client.new_transaction()
    first.abort()
    second.commit()
    ends = {name: (commands.txn_of(c), c.body.txn_action) for name, _, c in v5.log
            if c.type is T.END_TXN}
    assert ends == {"b0": (TxnId(0, 0), TxnAction.ABORT), "b1": (TxnId(1, 0), TxnAction.COMMIT)}


def test_v5_leader_broker_dies_and_the_watch_moves(v5: FakeCluster,
                                                   make_client: Callable[..., PulsarClient]) -> None:
    b0, b1 = v5.brokers
    client = make_client(f"pulsar://127.0.0.1:{b0.port},127.0.0.1:{b1.port}", txn_path="v5")
    coordinators_ready(client, 2)
    txn = client.new_transaction()
    assert txn.id.most == 0
    v5.tc_leaders[0] = b1  # elected elsewhere while b0 dies (no push from the dead broker)
    b0.stop()
    wait_for(lambda: len(v5.commands(T.WATCH_TC_ASSIGNMENTS)) == 2, what="watch re-opened on b1")
    wait_for(lambda: client.coordinator_brokers()[0] == b1.url, what="new leader learned")
    txn.commit(timeout_s=5)
    assert txn.state is TxnState.COMMITTED
    assert [name for name, _, c in v5.log if c.type is T.END_TXN] == ["b1"]
