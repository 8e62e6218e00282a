"""kill -9 of the v5 coordinator leader's broker in the middle of a transactional run.

Two writer threads keep running transactions (one message to each of two scalable
topics, then commit; a failed send aborts the transaction) while the broker leading
the most coordinator partitions is killed with SIGKILL. The survivor wins those partitions' elections once the dead
broker's metadata session expires and serves them at once: nothing is replayed
(`pulsar_txn_coordinator_recovery_seconds` is the time to read one counter; no
coordinator log ledger exists on v5). Every transaction ends committed or aborted:
a commit answered ok is fully visible, a definite failure is invisible, an unknown
outcome is all or nothing; and commits succeed again after the takeover. A transaction
whose client lost track of it stays OPEN, pinning its segments' read horizons, until the
coordinator's timeout sweep aborts it: the final read waits for that.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from harness.client.admin import AdminClient
from harness.errors import DefiniteError, IndeterminateError, OperationError
from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v5_helpers import (
    admin_of,
    broker_metric,
    broker_names,
    metric_sum,
    new_client,
    read_all,
    scrape,
    start_v5,
    values,
    wait_until,
)

TXN_TIMEOUT_S = 10
TOPICS = ("topic://public/default/failover-a", "topic://public/default/failover-b")


@dataclass
class Outcomes:
    committed: list[str] = field(default_factory=list)     # commit answered ok
    aborted: list[str] = field(default_factory=list)       # definitely not committed
    unknown: list[str] = field(default_factory=list)       # the client cannot tell
    commit_times: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def writer(client: object, name: str, stop: threading.Event, out: Outcomes) -> None:
    """Transactions of one message per topic; a failed send aborts the transaction, as an application would."""
    producers = [client.create_producer(t) for t in TOPICS]   # type: ignore[attr-defined]
    n = 0
    while not stop.is_set() and n < 10_000:
        n += 1
        value = f"{name}-{n}"
        try:
            txn = client.new_transaction(TXN_TIMEOUT_S)   # type: ignore[attr-defined]
        except OperationError:
            time.sleep(0.05)
            continue
        try:
            for producer in producers:
                producer.send(value, key=value, txn=txn, timeout_s=20)
        except OperationError:
            try:
                txn.abort(timeout_s=20)
                verdict = "aborted"
            except OperationError:
                verdict = "unknown"   # it times out and is aborted by the coordinator's sweep
        else:
            try:
                txn.commit(timeout_s=25)
                verdict = "committed"
            except DefiniteError:
                verdict = "aborted"
            except IndeterminateError:
                verdict = "unknown"
        with out.lock:
            getattr(out, verdict).append(value)
            if verdict == "committed":
                out.commit_times.append(time.monotonic())


def no_open_transactions(admin: AdminClient) -> bool:
    """No segment of the topics has a transaction pinning its read horizon."""
    for topic in TOPICS:
        for segment in admin.scalable_topic_stats(topic)["segments"].values():
            if (segment.get("transactionBuffer") or {}).get("ongoingTxnCount", 0):
                return False
    return True


@pytest.mark.parametrize("store", ["", pytest.param("zk", marks=pytest.mark.slow)])   # zk: 15-30 s here
def test_killing_the_coordinator_leader_mid_run(cluster_factory: ClusterFactory, store: str) -> None:
    """`store` zk: v5 over a real ZooKeeper; the victim's elections are ephemeral znodes that go
    when ZooKeeper expires its session."""
    cluster = start_v5(cluster_factory, brokers=2, metadataStoreUrl=store)
    victim, survivor = kill_the_coordinator_leader(cluster, 20)
    metrics = scrape(cluster.records[survivor].metrics_url or "")
    recovery = [v for (n, _), v in metrics.items() if n == "pulsar_txn_coordinator_recovery_seconds"]
    assert recovery and max(recovery) < 1.0, f"coordinator recovery took {recovery}"
    assert metric_sum(metrics, "txnbench_ml_add_entries_total", lambda labels: labels.get("kind") == "txn-log") == 0
    assert broker_metric(cluster, "txnbench_v5_tc_leader", skip=[victim]) == 4   # all 4 partitions here


def kill_the_coordinator_leader(cluster: EmbeddedCluster, commits: int) -> tuple[str, str]:
    """Two writers commit `commits` transactions; the broker leading the most coordinator partitions
    is killed -9, the survivor takes every partition over and `commits` more commit; once every
    transaction ended (the timeout sweep aborts those left open) each one is all or nothing on both
    topics. The victim and the survivor."""
    admin = admin_of(cluster)
    for topic in TOPICS:
        admin.create_scalable_topic(topic, 2)
    out = Outcomes()
    stop = threading.Event()
    with new_client(cluster) as client:
        leaders = client.coordinator_brokers()
        by_url = {cluster.records[n].service_url: n for n in broker_names(cluster)}
        victim = Counter(by_url[url] for url in leaders.values()).most_common(1)[0][0]
        survivor = next(n for n in broker_names(cluster) if n != victim)
        threads = [threading.Thread(target=writer, args=(client, f"w{i}", stop, out), daemon=True)
                   for i in range(2)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(out.committed) >= commits, 60, "committed transactions before the kill")
        cluster.kill(victim)
        killed_at = time.monotonic()
        survivor_url = cluster.records[survivor].service_url
        takeover = wait_until(lambda: set(client.coordinator_brokers().values()) == {survivor_url}, 60,
                              "the survivor leading every coordinator partition", 0.2)
        wait_until(lambda: sum(t > killed_at for t in out.commit_times) >= commits, 90, "commits after the takeover")
        stop.set()
        for thread in threads:
            thread.join(60)
        assert not any(t.is_alive() for t in threads)
        first_commit_after = min(t for t in out.commit_times if t > killed_at) - killed_at
        print(f"\ncoordinator takeover seen by the client after {takeover:.1f}s; first commit after the kill "
              f"{first_commit_after:.1f}s; committed {len(out.committed)}, aborted {len(out.aborted)}, "
              f"unknown {len(out.unknown)}")

        # a transaction left open (its client lost track of it) pins the segments until the
        # coordinator's timeout sweep aborts it: the final read comes after that
        wait_until(lambda: no_open_transactions(admin_of(cluster, skip=[victim])), TXN_TIMEOUT_S + 30,
                   "every transaction to have ended")
        visible = [set(values(read_all(client, t, 60))) for t in TOPICS]
    assert_all_or_nothing(out, visible)
    return victim, survivor


def assert_all_or_nothing(out: Outcomes, visible: list[set[str]]) -> None:
    """Committed: visible on both topics; aborted: on neither; unknown: both or neither."""
    for value in out.committed:
        assert all(value in seen for seen in visible), f"committed {value} is not fully visible"
    for value in out.aborted:
        assert not any(value in seen for seen in visible), f"aborted {value} is visible"
    for value in out.unknown:
        assert len({value in seen for seen in visible}) == 1, f"{value} is partly visible"
    assert visible[0] == visible[1], "the two topics disagree on which transactions committed"


@pytest.mark.slow   # 15-25 s here: a JVM restart and two rounds of 20 commits
def test_zookeeper_killed_mid_run_under_v5(cluster_factory: ClusterFactory) -> None:
    """v5 over ZooKeeper, which is killed with -9 mid-run and restarted from its data after
    longer than the brokers' session timeout (3 s): every session expires, every election and
    ownership znode goes, the brokers take them again, commits resume, and every transaction
    is all or nothing (nothing acknowledged lost)."""
    cluster = start_v5(cluster_factory, brokers=2, metadataStoreUrl="zk")
    assert cluster.records["metadata"].program == "zookeeper"
    admin = admin_of(cluster)
    for topic in TOPICS:
        admin.create_scalable_topic(topic, 2)
    out = Outcomes()
    stop = threading.Event()
    with new_client(cluster) as client:
        threads = [threading.Thread(target=writer, args=(client, f"w{i}", stop, out), daemon=True)
                   for i in range(2)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(out.committed) >= 20, 60, "committed transactions before the kill")
        cluster.kill("metadata")
        killed_at = time.monotonic()
        wait_until(lambda: time.monotonic() - killed_at >= 4.0, 10, "ZooKeeper down past the session timeout", 0.1)
        cluster.start("metadata")   # same zoo.cfg and data folder; waits for `srvr`
        wait_until(lambda: sum(t > killed_at for t in out.commit_times) >= 20, 90, "commits after the restart")
        stop.set()
        for thread in threads:
            thread.join(60)
        assert not any(t.is_alive() for t in threads)
        wait_until(lambda: no_open_transactions(admin_of(cluster)), TXN_TIMEOUT_S + 30,
                   "every transaction to have ended")
        visible = [set(values(read_all(client, t, 60))) for t in TOPICS]
    assert_all_or_nothing(out, visible)
    assert len(out.committed) >= 40
