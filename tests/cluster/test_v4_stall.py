"""The v4 end-transaction stall on a terminated (sealed) topic: the failure PIP-473 exists to fix.

A transaction writes to two topics; one of them is then terminated (what sealing a
segment does). COMMIT logs COMMITTING at the coordinator and sends
END_TXN_ON_PARTITION to both owners: the open topic writes its commit marker, the
terminated one refuses the marker. As in Pulsar (TransactionMetadataStoreService
retries a retryable end-transaction failure with the client's request still pending),
the coordinator retries the completion and the client's END_TXN gets no answer: the
commit stalls until the client's own timeout (PIP-473: "The end-txn RPC times out"),
and the transaction stays COMMITTING. Meanwhile its message on the open topic is visible and the one on the
terminated topic never is. This test documents the stall and where it shows: the
client's commit result, the coordinator's view of the transaction, and the metrics.
"""

from __future__ import annotations

import re
import time

import pytest
import requests

from harness.errors import IndeterminateError
from targets.embedded import EmbeddedCluster
from tests.cluster.conftest import ClusterFactory
from tests.cluster.test_v4_transactions import TXN_SETTINGS, payload, read_all, topic_on, v4_client
from tests.waiting import wait_until

STALL_BOUND_S = 10.0


def metric(cluster: EmbeddedCluster, name: str, labels: str = "") -> float:
    """The sum of a metric over the brokers (one label set when `labels` is given)."""
    total = 0.0
    pattern = re.compile(rf"^{re.escape(name)}{re.escape(labels)}(?:\{{[^}}]*\}})? (\S+)$", re.M)
    for service, record in cluster.records.items():
        if service.startswith("broker-") and record.admin_url:
            text = requests.get(f"{record.admin_url}/metrics", timeout=5).text
            total += sum(float(v) for v in pattern.findall(text))
    return total


def txn_status(cluster: EmbeddedCluster, most: int, least: int) -> str | None:
    for service, record in cluster.records.items():
        if service.startswith("broker-") and record.admin_url:
            answer = requests.get(f"{record.admin_url}/admin/v3/transactions/transactionMetadata/{most}/{least}",
                                  timeout=5)
            if answer.status_code == 200:
                return str(answer.json()["status"])
    return None


def test_commit_after_a_participant_was_terminated_stalls(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings=TXN_SETTINGS)
    open_topic, sealed = topic_on(0, "stall-open"), topic_on(1, "stall-sealed")
    with v4_client(cluster, max_end_txn_attempts=1) as client:
        to_open, to_sealed = client.create_producer(open_topic), client.create_producer(sealed)
        txn = client.new_transaction(timeout_s=60)
        to_open.send(payload("open-1"), txn=txn)
        to_sealed.send(payload("sealed-1"), txn=txn)
        local = sealed.rsplit("/", 1)[1]
        admin = cluster.records["broker-0"].admin_url
        terminated = requests.post(f"{admin}/admin/v2/persistent/public/default/{local}/terminate", timeout=10)
        assert terminated.status_code == 200, terminated.text
        committed_before = metric(cluster, "pulsar_txn_committed_total")

        started = time.monotonic()
        with pytest.raises(IndeterminateError):   # never a definite answer: it may still commit
            txn.commit(timeout_s=STALL_BOUND_S)
        assert time.monotonic() - started >= STALL_BOUND_S * 0.95   # no answer until the client gave up
        assert txn_status(cluster, txn.id.most, txn.id.least) == "COMMITTING"

        # the coordinator keeps retrying the marker; the transaction never completes within the bound
        retries = wait_until(lambda: metric(cluster, "txnbench_txn_end_retries_total") >= 3, STALL_BOUND_S,
                             interval_s=0.2, message="END_TXN retries")
        assert retries
        for _ in range(1000):   # polled until the bound: the transaction must stay COMMITTING throughout
            if time.monotonic() - started >= STALL_BOUND_S:
                break
            assert txn_status(cluster, txn.id.most, txn.id.least) == "COMMITTING"
            time.sleep(0.5)
        assert metric(cluster, "pulsar_txn_committed_total") == committed_before
        assert metric(cluster, "pulsar_txn_active_count", f'{{coordinator_id="{txn.id.most}"}}') >= 1
        assert metric(cluster, "pulsar_txn_tb_client_commit_failed_total") >= 3

    # half of the transaction is visible: the open topic got its commit marker, the sealed one never will
    seen = read_all(cluster, [open_topic, sealed])
    assert seen == {open_topic: ["open-1"], sealed: []}
