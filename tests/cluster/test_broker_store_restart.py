"""kill -9 and restart the metadata store, then the ledger store, under real client traffic.

Acceptance criterion (issue 4): the cluster recovers (sends are acknowledged again after
each restart) and no message whose send was acknowledged is lost: a Reader from the
earliest position finds every one of them, and the consumer received every one.
`crash` (issue 29) is a power-loss crash instead of a kill: each store also loses or tears
the log write it had in flight (targets/power_loss.py), and must recover from that; then it
crash-loops (a second power loss as it opens its next log file), and a bit of one of its
durable files is flipped (targets/corruption.py): it must refuse to start, and start once the
file is repaired.
"""

from __future__ import annotations

import threading
import time
import uuid

import pulsar
import pytest

from harness.client import PulsarClient
from harness.target import CrashAim, DamagedFile
from harness.toxiproxy.client import ToxiproxyClient
from targets.embedded import METADATA_SNAPSHOT_SETTING
from tests.cluster.conftest import ClusterFactory, Traffic, consume, produce, service_urls
from tests.cluster.test_v4_transactions import TXN_SETTINGS, payload, value_of
from tests.waiting import wait_until


@pytest.mark.parametrize(("metadata_store", "fault"), [
    ("", "kill"), ("zk", "kill"), ("", "crash"), pytest.param("zk", "pause", marks=pytest.mark.slow)])
def test_store_restarts_lose_no_acknowledged_message(cluster_factory: ClusterFactory, metadata_store: str,
                                                     fault: str) -> None:
    """`zk`: the metadata store killed is a real ZooKeeper; it restores its sessions from its
    data on restart, but the brokers declared them lost while it was down (Pulsar's
    ZKSessionWatcher), dropped their topics, and take them again on new sessions.
    `pause`: ZooKeeper is paused (SIGSTOP) past the session timeout instead, and expires the
    sessions itself when it resumes; the ledger store is then killed as in the other cases."""
    settings: dict[str, object] = {"txnbenchTxnExtensions": [], "metadataStoreUrl": metadata_store}
    if fault == "crash":
        settings[METADATA_SNAPSHOT_SETTING] = 10   # a snapshot within the test, for the corruption to damage
    cluster = cluster_factory(brokers=2, settings=settings)
    topic = f"persistent://public/default/restarts-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(service_urls(cluster), operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    traffic = Traffic()
    consumer = threading.Thread(target=consume, args=(client, topic, traffic), daemon=True)
    producer = threading.Thread(target=produce, args=(client, topic, traffic, 1_000_000), daemon=True)
    progress: dict[str, int] = {}
    lost: dict[str, list[str]] = {}
    damaged: dict[str, dict[str, object]] = {}
    try:
        consumer.start()
        producer.start()
        wait_until(lambda: len(traffic.acked_sends) >= 200, 30, message="traffic before the restarts")
        # the metadata store stays down longer than the brokers' session timeout (3 s): they lose
        # their sessions, unload their topics and take them back once it returns
        for store, outage_s in (("metadata", 4.0), ("ledger", 1.0)):
            if store == "metadata" and fault == "pause":
                cluster.pause(store)
                time.sleep(outage_s)
                cluster.resume(store)
            elif fault == "crash":
                # a few crash cycles, each aimed at a write in flight: the traffic keeps both
                # stores writing, so some crash tears a log (asserted below)
                for seed in range(3):
                    lost.setdefault(store, []).append(cluster.crash(store, seed, aim_s=2.0))
                    time.sleep(outage_s)
                    cluster.start(store)
                lost[store].append(cluster.crash(store, 3, aim_s=5.0, aim=CrashAim.CRASH_LOOP))
                cluster.start(store)
                # the ledger store's sealed journal segments, the metadata store's newest snapshot
                which = DamagedFile.LOG if store == "ledger" else DamagedFile.SNAPSHOT
                damaged[store] = cluster.corrupt(store, 4, which)
                time.sleep(outage_s)
                cluster.repair(store)
            else:
                cluster.kill(store)
                time.sleep(outage_s)
                cluster.start(store)   # same ports, same data; waits until healthy
            before = len(traffic.acked_sends)
            def acked_again(b: int = before) -> bool:
                return len(traffic.acked_sends) >= b + 200

            wait_until(acked_again, 60, interval_s=0.1,
                       message=f"sends acknowledged again after the {store} store restarted")
            progress[store] = len(traffic.acked_sends) - before
        traffic.stop_producing.set()
        producer.join(timeout=90)
        assert not producer.is_alive(), "the producer did not finish"
        wait_until(lambda: set(traffic.acked_sends) <= traffic.consumed_values(), 60,
                   message="every acknowledged send was consumed")
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        stored: set[str] = set()
        for _ in range(len(traffic.acked_sends) * 3):   # bounded: duplicates of resent messages may exist
            try:
                stored.add(reader.read_next(timeout_millis=3000).data().decode())
            except pulsar.Timeout:
                break
        reader.close()
    finally:
        traffic.stop.set()
        traffic.stop_producing.set()
        for thread in (producer, consumer):
            thread.join(timeout=30)
        client.close()

    missing = set(traffic.acked_sends) - stored
    assert not missing, f"{len(missing)} acknowledged messages are not in the topic, e.g. {sorted(missing)[:5]}"
    assert all(progress.values()), progress
    if fault == "crash":
        torn = [what for whats in lost.values() for what in whats if "kept" in what]
        assert torn, f"no crash found a write in flight to tear: {lost}"
        assert all("started and crashed again" in whats[-1] for whats in lost.values()), lost
        assert all(d["refused"] for d in damaged.values()), damaged
        assert "JournalCorrupt" in str(damaged["ledger"]["said"]), damaged
        assert "CorruptSnapshot" in str(damaged["metadata"]["said"]), damaged


def test_a_broker_starts_while_the_ledger_store_is_down_and_serves_once_it_is_back(
        cluster_factory: ClusterFactory) -> None:
    """Pulsar's broker starts without its bookies (they are connected when a ledger is opened), so
    a broker restarted during a ledger-store outage comes up and loads its topics and coordinators
    once the store answers. Ours refused to start, and a restart during the outage left the
    broker down (found by chaos.yaml's stacked ledger outage and coordinator move)."""
    cluster = cluster_factory(brokers=1, settings=TXN_SETTINGS)
    topic = f"persistent://public/default/no-bookie-{uuid.uuid4().hex[:8]}"
    with PulsarClient(service_urls(cluster), txn_path="v4", operation_timeout_s=20) as client:
        client.create_producer(topic).send(payload("before"))
    assert cluster.toxiproxy_url
    with ToxiproxyClient(cluster.toxiproxy_url) as proxies:
        proxies.disable("broker-0-ledger")   # the partition fault: connections to the store refused
        cluster.stop("broker-0")
        cluster.start("broker-0")            # raised ServiceExited before: the store refused it
        proxies.enable("broker-0-ledger")
    with PulsarClient(service_urls(cluster), txn_path="v4", operation_timeout_s=30) as client:
        txn = client.new_transaction(timeout_s=60)
        client.create_producer(topic).send(payload("after"), txn=txn)
        txn.commit()
        values = [value_of(m.data) for m in client.create_reader(topic).read_to_end(timeout_s=20)]
    assert values == ["before", "after"]
