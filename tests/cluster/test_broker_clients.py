"""The broker as the real Pulsar C++ client (`pulsar-client`) sees it.

One cluster (v4 path, 2 brokers, transaction paths not installed) serves every test
in this module; each test uses its own topics.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest
import requests

from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import started_clusters
from tests.waiting import wait_until

NO_TXN_PATHS: dict[str, list[str]] = {"txnbenchTxnExtensions": []}   # module names


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    base: Path = tmp_path_factory.mktemp("clients")
    with started_clusters(base) as start:
        yield start(settings=NO_TXN_PATHS)


@pytest.fixture
def client(cluster: EmbeddedCluster) -> Iterator[pulsar.Client]:
    c = pulsar.Client(cluster.info().service_url, operation_timeout_seconds=15,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        yield c
    finally:
        c.close()


def topic_name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def admin_url(cluster: EmbeddedCluster) -> str:
    return cluster.info().admin_url


def produce_batched(client: pulsar.Client, topic: str, count: int) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=5, block_if_queue_full=True)
    ids: list[pulsar.MessageId] = []
    errors: list[pulsar.Result] = []

    def done(result: pulsar.Result, message_id: pulsar.MessageId) -> None:
        if result == pulsar.Result.Ok:
            ids.append(message_id)
        else:
            errors.append(result)

    for i in range(count):
        producer.send_async(f"v{i:05d}".encode(), done)
    producer.flush()
    wait_until(lambda: len(ids) + len(errors) == count, 30, message="all send callbacks")
    producer.close()
    assert not errors, errors[:5]
    return ids


def test_batched_messages_reach_a_shared_subscription_exactly_once_and_a_reader_sees_all(
        client: pulsar.Client, cluster: EmbeddedCluster) -> None:
    topic = topic_name("batched")
    consumers = [client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared,
                                  initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=200,
                                  consumer_name=f"c{i}") for i in range(2)]
    ids = produce_batched(client, topic, 2000)
    assert len({(m.ledger_id(), m.entry_id()) for m in ids}) < 2000, "messages were not batched"

    received: dict[str, int] = {}
    per_consumer = [0, 0]
    deadline = time.monotonic() + 60
    while len(received) < 2000 and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                message = consumer.receive(timeout_millis=50)
            except pulsar.Timeout:
                continue
            value = message.data().decode()
            received[value] = received.get(value, 0) + 1
            per_consumer[index] += 1
            consumer.acknowledge(message)
    assert len(received) == 2000, f"received {len(received)} distinct values"
    assert all(n == 1 for n in received.values()), "a message was delivered twice"
    assert min(per_consumer) > 0, f"one consumer got nothing: {per_consumer}"
    for consumer in consumers:   # nothing more arrives: no redelivery of acknowledged messages
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=300)

    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    seen = []
    for _ in range(2000):
        seen.append(reader.read_next(timeout_millis=10_000).data().decode())
    assert seen == [f"v{i:05d}" for i in range(2000)]
    assert not reader.has_message_available()
    reader.close()

    def backlog_is_zero() -> bool:
        stats = requests.get(f"{admin_url(cluster)}/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/stats",
                             timeout=5).json()
        return stats["subscriptions"]["shared"]["msgBacklog"] == 0
    wait_until(backlog_is_zero, 10, message="the shared subscription's backlog drains")


def test_exclusive_refuses_a_second_consumer_and_failover_switches_on_close(client: pulsar.Client) -> None:
    topic = topic_name("exclusive")
    first = client.subscribe(topic, "excl")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "excl")
    first.close()

    producer = client.create_producer(topic, batching_enabled=False)
    a = client.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a",
                         initial_position=pulsar.InitialPosition.Earliest)
    b = client.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b",
                         initial_position=pulsar.InitialPosition.Earliest)
    for i in range(10):
        producer.send(f"m{i}".encode())
    message = a.receive(timeout_millis=5000)   # "a" sorts first: it is the active consumer
    assert message.data() == b"m0"
    with pytest.raises(pulsar.Timeout):
        b.receive(timeout_millis=300)
    a.acknowledge(message)
    a.close()   # the rest goes to "b", starting after what "a" acknowledged
    got = [b.receive(timeout_millis=5000).data() for _ in range(9)]
    assert got[0] == b"m1" and set(got) == {f"m{i}".encode() for i in range(1, 10)}


def test_partitioned_topic_spreads_over_partitions(client: pulsar.Client, cluster: EmbeddedCluster) -> None:
    topic = topic_name("partitioned")
    local = topic.rsplit("/", 1)[1]
    response = requests.put(f"{admin_url(cluster)}/admin/v2/persistent/public/default/{local}/partitions",
                            json=4, timeout=5)
    assert response.status_code == 204, response.text
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(4)]
    consumer = client.subscribe(topic, "all", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(40):
        producer.send(f"p{i}".encode(), partition_key=str(i))
    got = set()
    for _ in range(40):
        message = consumer.receive(timeout_millis=10_000)
        got.add(message.data())
        consumer.acknowledge(message)
    assert got == {f"p{i}".encode() for i in range(40)}
    owners = set()
    for i in range(4):
        lookup = requests.get(f"{admin_url(cluster)}/lookup/v2/topic/persistent/public/default/{local}-partition-{i}",
                              timeout=5, allow_redirects=True).json()
        owners.add(lookup["brokerUrl"])
    assert owners <= {r.service_url for r in cluster.records.values() if r.service_url}


def test_negative_ack_and_seek_redeliver(client: pulsar.Client) -> None:
    topic = topic_name("redeliver")
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100,
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"n{i}".encode()) for i in range(3)]
    first = consumer.receive(timeout_millis=5000)
    consumer.negative_acknowledge(first)
    seen = [consumer.receive(timeout_millis=5000) for _ in range(3)]
    redelivered = [m for m in seen if m.data() == first.data()]
    assert redelivered and redelivered[0].redelivery_count() >= 1
    for m in seen:
        consumer.acknowledge(m)
    consumer.seek(pulsar.MessageId.earliest)   # back to the start: everything again
    again = {consumer.receive(timeout_millis=10_000).data() for _ in range(3)}
    assert again == {b"n0", b"n1", b"n2"}
    consumer.seek(ids[1])   # the client treats a consumer's seek id as exclusive: n2 follows
    assert consumer.receive(timeout_millis=10_000).data() == b"n2"


def test_terminated_topic_refuses_producers_and_ends_readers(client: pulsar.Client, cluster: EmbeddedCluster) -> None:
    topic = topic_name("terminated")
    local = topic.rsplit("/", 1)[1]
    producer = client.create_producer(topic, batching_enabled=False)
    last = [producer.send(f"t{i}".encode()) for i in range(3)][-1]
    producer.close()
    response = requests.post(f"{admin_url(cluster)}/admin/v2/persistent/public/default/{local}/terminate",
                             timeout=10, allow_redirects=True)
    assert response.status_code == 200, response.text
    assert (response.json()["ledgerId"], response.json()["entryId"]) == (last.ledger_id(), last.entry_id())
    with pytest.raises(pulsar.TopicTerminated):
        client.create_producer(topic)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(timeout_millis=5000).data() for _ in range(3)] == [b"t0", b"t1", b"t2"]
    wait_until(lambda: reader.has_message_available() is False, 5, message="reader at the end")
    reader.close()


def test_terminating_a_partitioned_topic_terminates_every_partition_at_its_owner(
        client: pulsar.Client, cluster: EmbeddedCluster) -> None:
    """`POST .../terminate/partitions` (the v4 chaos terminate of a partitioned topic) was a 404."""
    topic = topic_name("terminated-parted")
    local = topic.rsplit("/", 1)[1]
    base = f"{admin_url(cluster)}/admin/v2/persistent/public/default/{local}"
    assert requests.put(f"{base}/partitions", json=3, timeout=5).status_code == 204
    producer = client.create_producer(topic, batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(6):
        producer.send(f"q{i}".encode(), partition_key=str(i))
    producer.close()
    response = requests.post(f"{base}/terminate/partitions", timeout=30, allow_redirects=True)
    assert response.status_code == 200, response.text
    assert sorted(response.json()) == ["0", "1", "2"]
    for i in range(3):
        with pytest.raises(pulsar.TopicTerminated):
            client.create_producer(f"{topic}-partition-{i}")
    missing = requests.post(f"{admin_url(cluster)}/admin/v2/persistent/public/default/{local}-none"
                            "/terminate/partitions", timeout=10)
    assert missing.status_code == 404


def test_admin_rest_tenants_namespaces_and_stats_redirect_to_the_owner(client: pulsar.Client,
                                                                        cluster: EmbeddedCluster) -> None:
    base = admin_url(cluster)
    assert requests.get(f"{base}/admin/v2/clusters", timeout=5).json() == ["txnbench"]
    assert requests.get(f"{base}/admin/v2/brokers/health", timeout=5).text == "ok"
    assert {"public", "pulsar"} <= set(requests.get(f"{base}/admin/v2/tenants", timeout=5).json())
    assert requests.put(f"{base}/admin/v2/tenants/acme", json={"adminRoles": [], "allowedClusters": ["txnbench"]},
                        timeout=5).status_code == 204
    assert requests.put(f"{base}/admin/v2/namespaces/acme/orders", timeout=5).status_code == 204
    assert requests.put(f"{base}/admin/v2/namespaces/acme/orders", timeout=5).status_code == 409
    assert requests.get(f"{base}/admin/v2/namespaces/acme", timeout=5).json() == ["acme/orders"]
    producer = client.create_producer("persistent://acme/orders/o1")
    producer.send(b"x")
    assert "persistent://acme/orders/o1" in requests.get(f"{base}/admin/v2/persistent/acme/orders", timeout=5).json()
    for record in cluster.records.values():   # every broker answers, the owner directly, others by redirect
        if record.admin_url:
            stats = requests.get(f"{record.admin_url}/admin/v2/persistent/acme/orders/o1/stats", timeout=5)
            assert stats.status_code == 200 and stats.json()["msgInCounter"] == 1
    missing = requests.get(f"{base}/admin/v2/persistent/public/default/no-such-topic-{uuid.uuid4().hex[:6]}/stats",
                           timeout=5)
    assert missing.status_code == 404
    metrics = requests.get(f"{base}/metrics", timeout=5).text
    assert "pulsar_in_messages_total" in metrics and "txnbench_ml_add_entries_total" in metrics


def test_schemas_and_pattern_subscriptions(client: pulsar.Client) -> None:
    topic = topic_name("typed")
    consumer = client.subscribe(topic, "s", schema=pulsar.schema.StringSchema(),
                                initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, schema=pulsar.schema.StringSchema())
    producer.send("hello")
    assert consumer.receive(timeout_millis=5000).value() == "hello"

    prefix = f"pat{uuid.uuid4().hex[:6]}"
    for suffix in ("one", "two"):
        client.create_producer(f"persistent://public/default/{prefix}-{suffix}").send(suffix.encode())
    pattern = client.subscribe(re.compile(f"persistent://public/default/{prefix}-.*"), "p",
                               initial_position=pulsar.InitialPosition.Earliest)
    got = {pattern.receive(timeout_millis=10_000).data() for _ in range(2)}
    assert got == {b"one", b"two"}
