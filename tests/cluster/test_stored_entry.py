"""Pulsar's getMessageById on the embedded broker: what the drain asks about a stuck read.

A position the topic never had is "not found"; a position the broker acknowledged whose
ledger the store no longer has is "not found, non-recoverable" (the data is gone), which
the drain reports as lost entries instead of leaving the verdict unknown.
"""

from __future__ import annotations

import uuid

import pulsar

from embedded.ledger.client import BlockingLedgerClient
from harness.client.admin import AdminClient
from tests.cluster.conftest import ClusterFactory, service_urls


def test_stored_entry_tells_a_lost_entry_from_one_that_never_was(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=1, settings={"txnbenchTxnExtensions": []})
    topic = f"persistent://public/default/stored-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(cluster.records["broker-0"].admin_url or "", timeout_s=10)
    client = pulsar.Client(service_urls(cluster), operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        producer = client.create_producer(topic)
        ids = [producer.send(f"m{i}".encode()) for i in range(3)]
        producer.close()
    finally:
        client.close()
    ledger, entry = ids[0].ledger_id(), ids[0].entry_id()
    assert admin.stored_entry(topic, ledger, entry).found
    never = admin.stored_entry(topic, ledger, 999)
    assert (never.found, never.non_recoverable, never.status) == (False, False, 404)

    admin.unload_topic(topic)          # its ledger is closed; the next load reads it from the store
    ledger_store = cluster.records["ledger"]
    with BlockingLedgerClient(f"127.0.0.1:{ledger_store.ports['rpc_port']}") as store:
        store.connect()
        store.delete_ledger(ledger)    # what a store that acknowledged too early loses in a crash
    lost = admin.stored_entry(topic, ledger, entry)
    assert (lost.found, lost.non_recoverable, lost.status) == (False, True, 404)
    assert "NoSuchLedger" in lost.reason and f"{ledger}:{entry}" in lost.reason
