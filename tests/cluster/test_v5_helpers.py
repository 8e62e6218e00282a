"""Shared pieces of the v5 cluster tests (this module holds no tests itself).

A v5 cluster here is the embedded cluster on path v5 (`path_settings(TxnPath.V5)`)
with the fast failover settings of `conftest.FAST_SETTINGS` and short v5 sweep
intervals; clients are `harness.client.PulsarClient(txn_path="v5")`, which find the
coordinators through WATCH_TC_ASSIGNMENTS and the segments through SCALABLE_TOPIC_LOOKUP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import requests

from harness.client import PulsarClient
from harness.client.admin import AdminClient
from harness.client.consumer import Message
from harness.metrics import parse_prometheus_text
from harness.txn_paths import TxnPath
from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import ClusterFactory

V5_SETTINGS: dict[str, Any] = {
    "txnbenchV5TimeoutSweepIntervalMillis": 1000,
    "txnbenchV5GcIntervalMillis": 5000,
    "txnbenchV5GcRetentionMillis": 60_000,
}


def start_v5(factory: ClusterFactory, brokers: int = 2, **settings: Any) -> EmbeddedCluster:
    return factory(path=TxnPath.V5, brokers=brokers, settings={**V5_SETTINGS, **settings})


def broker_names(cluster: EmbeddedCluster) -> list[str]:
    return sorted(n for n in cluster.records if n.startswith("broker-"))


def service_url(cluster: EmbeddedCluster) -> str:
    hosts = [cluster.records[n].service_url.removeprefix("pulsar://")   # type: ignore[union-attr]
             for n in broker_names(cluster)]
    return "pulsar://" + ",".join(hosts)


def admin_of(cluster: EmbeddedCluster, skip: Iterable[str] = ()) -> AdminClient:
    for name in broker_names(cluster):
        if name not in skip and cluster.is_running(name):
            return AdminClient(cluster.records[name].admin_url or "", timeout_s=30)
    raise AssertionError("no broker is running")


def new_client(cluster: EmbeddedCluster, **settings: Any) -> PulsarClient:
    return PulsarClient(service_url(cluster), txn_path="v5", **{"operation_timeout_s": 30.0, **settings})


def values(messages: Iterable[Message]) -> list[str]:
    return [m.data.decode() for m in messages]


def read_all(client: PulsarClient, topic: str, timeout_s: float = 30.0) -> list[Message]:
    """Every readable message of `topic` from the start (segments parents first), via a reader."""
    with client.create_reader(topic) as reader:
        return reader.read_to_end(timeout_s)


def receive_values(consumer: Any, count: int, timeout_s: float, ack: bool = True) -> list[str]:
    """Receive (and ack) until `count` messages arrived or `timeout_s` passed."""
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        message = consumer.receive(max(0.05, min(1.0, deadline - time.monotonic())))
        if message is None:
            continue
        out.append(message.data.decode())
        if ack:
            consumer.acknowledge(message)
    return out


def commit_abort_and_read(cluster: EmbeddedCluster, first: str, second: str, aborted: int) -> None:
    """Across two scalable topics: a transaction's 10 sends to each are not delivered before its
    commit and are after it; an aborted one's `aborted` sends to each never are, a plain send after
    it is; the final reads hold exactly the committed and the plain values."""
    with new_client(cluster) as client:
        consumers = [client.subscribe(t, "check") for t in (first, second)]
        producers = [client.create_producer(t) for t in (first, second)]
        committed = client.new_transaction(60)
        for i in range(10):
            for topic_index, producer in enumerate(producers):
                producer.send(f"c-{topic_index}-{i}", key=f"key-{i}", txn=committed)
        assert all(c.receive(0.5) is None for c in consumers), "uncommitted messages were delivered"
        committed.commit()
        got = [receive_values(c, 10, 15.0) for c in consumers]
        assert [sorted(g) for g in got] == [sorted(f"c-{t}-{i}" for i in range(10)) for t in (0, 1)]
        txn = client.new_transaction(60)
        for i in range(aborted):
            for topic_index, producer in enumerate(producers):
                producer.send(f"a-{topic_index}-{i}", key=f"key-{i}", txn=txn)
        txn.abort()
        for topic_index, producer in enumerate(producers):
            producer.send(f"plain-{topic_index}", key="key-0")
        assert [receive_values(c, 1, 15.0) for c in consumers] == [["plain-0"], ["plain-1"]]
        final = [values(read_all(client, t)) for t in (first, second)]
    for topic_index, seen in enumerate(final):
        assert sorted(seen) == sorted([f"c-{topic_index}-{i}" for i in range(10)] + [f"plain-{topic_index}"])


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = requests.get(url, timeout=10)
    response.raise_for_status()
    return parse_prometheus_text(response.text)


def metric_sum(parsed: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
               where: Callable[[dict[str, str]], bool] = lambda labels: True) -> float:
    return sum(v for (n, labels), v in parsed.items() if n == name and where(dict(labels)))


def broker_metric(cluster: EmbeddedCluster, name: str, where: Callable[[dict[str, str]], bool] = lambda _: True,
                  skip: Iterable[str] = ()) -> float:
    total = 0.0
    for broker in broker_names(cluster):
        if broker in skip or not cluster.is_running(broker):
            continue
        total += metric_sum(scrape(cluster.records[broker].metrics_url or ""), name, where)
    return total


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.1) -> float:
    """Poll `predicate` (bounded); returns the seconds it took."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s}s")
        time.sleep(interval_s)
    return time.monotonic() - started
