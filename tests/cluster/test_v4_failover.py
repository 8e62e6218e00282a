"""kill -9 the broker hosting a coordinator in the middle of a transactional run (v4 and v4-batched).

Acceptance criterion (issue 5): every transaction in flight when the broker dies ends
committed or aborted (by the client, by recovery of the coordinator from its log on
another broker, or by timeout), and none is half visible. Workers run atomic
two-topic transactions while the broker serving coordinator 0 is killed; afterwards
the real pulsar-client reads both topics from the start, and for every transaction
either both of its values are visible or neither. A commit the client saw succeed
must be visible, an abort (or a commit that definitely failed) must not.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

import pytest
import requests

from harness.errors import DefiniteError, IndeterminateError, OperationError
from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v4_transactions import TXN_SETTINGS, payload, read_all, topic_on, v4_client
from tests.waiting import wait_until

TXN_TIMEOUT_S = 8.0


@dataclass
class Txn:
    values: tuple[str, str]
    outcome: str = "unknown"   # committed, aborted, unknown


@dataclass
class Run:
    txns: list[Txn] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)

    def add(self, txn: Txn) -> None:
        with self.lock:
            self.txns.append(txn)


def worker(cluster: EmbeddedCluster, run: Run, name: str, left: str, right: str) -> None:
    with v4_client(cluster, operation_timeout_s=10) as client:
        to_left = to_right = None
        for i in range(100_000):   # bounded by the run's stop event
            if run.stop.is_set():
                return
            try:
                if to_left is None or to_right is None:
                    to_left, to_right = client.create_producer(left), client.create_producer(right)
                txn = client.new_transaction(timeout_s=TXN_TIMEOUT_S)
            except OperationError as err:
                run.errors.append(f"{name}: setup: {err}")
                time.sleep(0.2)
                continue
            record = Txn((f"{name}-{i}-l", f"{name}-{i}-r"))
            run.add(record)
            try:
                to_left.send(payload(record.values[0]), txn=txn)
                to_right.send(payload(record.values[1]), txn=txn)
            except OperationError as err:
                run.errors.append(f"{name}: send: {err}")
                record.outcome = "aborted"   # COMMIT is never sent: it aborts (now or by timeout)
                with contextlib.suppress(OperationError):
                    txn.abort()
                continue
            try:
                if i % 4 == 3:
                    txn.abort()
                    record.outcome = "aborted"
                else:
                    txn.commit()
                    record.outcome = "committed"
            except DefiniteError:
                record.outcome = "aborted"
            except IndeterminateError as err:
                run.errors.append(f"{name}: end: {err}")
                record.outcome = "unknown"


def broker_named(cluster: EmbeddedCluster, url: str) -> str:
    return next(n for n, r in cluster.records.items() if r.service_url == url)


def coordinator_stats(cluster: EmbeddedCluster, broker: str) -> dict[str, dict[str, object]]:
    url = cluster.records[broker].admin_url
    stats: dict[str, dict[str, object]] = requests.get(f"{url}/admin/v3/transactions/coordinatorStats", timeout=5).json()
    return stats


# v4 on ZooKeeper is the shipped default; v4-batched keeps our store covered. v4 on our store
# adds nothing either does not, so it runs with `make test-slow` (make test's 15 minutes).
@pytest.mark.parametrize(("path", "store"), [pytest.param("v4", "", marks=pytest.mark.slow), ("v4-batched", ""),
                                             ("v4", "zk")])
def test_kill_the_coordinators_broker_mid_run_leaves_no_transaction_half_visible(
        cluster_factory: ClusterFactory, path: str, store: str) -> None:
    """`store` zk: the brokers' ownership and coordinators live in a real ZooKeeper, so the
    victim's ephemeral znodes go when ZooKeeper expires its session."""
    cluster = cluster_factory(path=path, brokers=2, settings={**TXN_SETTINGS, "metadataStoreUrl": store})
    left, right = topic_on(0, f"kill-{path}"), topic_on(1, f"kill-{path}")
    run = Run()
    with v4_client(cluster) as probe:
        owners = wait_until(lambda: probe.coordinator_brokers(timeout_s=10), 30, message="coordinator owners")
        victim = broker_named(cluster, owners[0])
        survivor = next(n for n in cluster.records if n.startswith("broker-") and n != victim)
        threads = [threading.Thread(target=worker, args=(cluster, run, f"w{k}", left, right), daemon=True)
                   for k in range(4)]
        for thread in threads:
            thread.start()
        wait_until(lambda: sum(t.outcome == "committed" for t in run.txns) >= 20, 60, message="traffic")
        # Kill while a transaction is in flight: a worker between two transactions has none,
        # so sampling once could find all four idle (it did, once, in CI).
        in_flight = wait_until(lambda: sum(t.outcome == "unknown" for t in run.txns), 10, interval_s=0.001,
                               message="a transaction in flight")
        before_kill = len(run.txns)
        cluster.kill(victim)
        wait_until(lambda: sum(t.outcome == "committed" for t in run.txns[before_kill:]) >= 20, 90,
                   interval_s=0.2, message="commits after the kill")
        run.stop.set()
        assert in_flight >= 1
        for thread in threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        moved = wait_until(lambda: probe.coordinator_brokers(timeout_s=10), 30, message="coordinators found again")
        assert set(moved) == {0, 1, 2, 3} and all(broker_named(cluster, url) == survivor for url in moved.values())

    def all_ended() -> bool:
        stats = coordinator_stats(cluster, survivor)
        return len(stats) == 4 and all(s["ongoingTxnSize"] == 0 for s in stats.values())

    wait_until(all_ended, TXN_TIMEOUT_S + 30, interval_s=0.5, message="every transaction ended")
    stats = coordinator_stats(cluster, survivor)
    assert stats["0"]["recoverySeconds"] > 0   # type: ignore[operator]
    metrics = requests.get(f"{cluster.records[survivor].admin_url}/metrics", timeout=5).text
    assert 'pulsar_txn_coordinator_recovery_seconds{coordinator_id="0"}' in metrics

    seen = read_all(cluster, [left, right])
    visible = set(seen[left]) | set(seen[right])
    assert len(visible) == len(seen[left]) + len(seen[right])   # no value twice
    half, lost, leaked = [], [], []
    for txn in run.txns:
        shown = [v in visible for v in txn.values]
        if any(shown) and not all(shown):
            half.append(txn)
        if txn.outcome == "committed" and not all(shown):
            lost.append(txn)
        if txn.outcome == "aborted" and any(shown):
            leaked.append(txn)
    assert not half, f"half-visible transactions: {half[:5]}"
    assert not lost, f"committed transactions not visible: {lost[:5]}"
    assert not leaked, f"aborted transactions visible: {leaked[:5]}"
    known = {v for t in run.txns for v in t.values}
    assert visible <= known
    counts = {o: sum(t.outcome == o for t in run.txns) for o in ("committed", "aborted", "unknown")}
    assert counts["committed"] >= 40 and counts["aborted"] >= 5, counts
