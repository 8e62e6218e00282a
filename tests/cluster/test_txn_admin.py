"""The coordinators' view of a transaction on the admin REST (`transactionMetadata`), which the
drain reads for abandoned transactions (unresolved-txn): an open transaction reads OPEN from
any broker (v4 redirects to the coordinator's owner), and one its client abandoned is aborted
by the coordinator's timeout: v4 then forgets it (404), v5 keeps its header ABORTED."""

from __future__ import annotations

from harness.client import PulsarClient
from harness.client.admin import AdminClient
from tests.cluster.conftest import ClusterFactory, service_urls
from tests.cluster.test_v5_helpers import admin_of, new_client, start_v5
from tests.waiting import wait_until


def _status(admins: list[AdminClient], most: int, least: int) -> list[str]:
    return [str((a.transaction_metadata(most, least) or {}).get("status", "NOT_FOUND")) for a in admins]


def test_v4_an_abandoned_transaction_is_timed_out_and_forgotten(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(brokers=2, settings={})
    admins = [AdminClient(r.admin_url, timeout_s=10) for n, r in sorted(cluster.records.items())
              if n.startswith("broker-") and r.admin_url]
    with PulsarClient(service_urls(cluster), txn_path="v4", operation_timeout_s=20) as client:
        producer = client.create_producer("persistent://public/default/abandoned-v4")
        txn = client.new_transaction(timeout_s=3)
        producer.send(b'{"v": "x", "i": [], "p": ""}', txn=txn)
        assert _status(admins, txn.id.most, txn.id.least) == ["OPEN", "OPEN"]     # any broker answers
        found = admins[0].transaction_metadata(txn.id.most, txn.id.least)
        assert found is not None and found["txnId"] == f"({txn.id.most},{txn.id.least})"
        assert list(found["producedPartitions"]) == ["persistent://public/default/abandoned-v4"]
        # the client never ends it: the coordinator's timeout must
        wait_until(lambda: _status(admins, txn.id.most, txn.id.least) == ["NOT_FOUND", "NOT_FOUND"],
                   timeout_s=15, message="the coordinator to abort and forget the abandoned transaction")


def test_v5_an_abandoned_transaction_is_aborted_by_the_sweep(cluster_factory: ClusterFactory) -> None:
    cluster = start_v5(cluster_factory)
    admin = admin_of(cluster)
    topic = "topic://public/default/abandoned-v5"
    admin.create_scalable_topic(topic, 1)
    with new_client(cluster) as client:
        producer = client.create_producer(topic)
        txn = client.new_transaction(3)
        producer.send("x", txn=txn)
        found = admin.transaction_metadata(txn.id.most, txn.id.least)
        assert found is not None and found["status"] == "OPEN" and found["producedPartitions"]
        wait_until(lambda: (admin.transaction_metadata(txn.id.most, txn.id.least) or {}).get("status") == "ABORTED",
                   timeout_s=15, message="the v5 timeout sweep to abort the abandoned transaction")
