"""Pulsar's own Java client runs transactions against the embedded cluster, on every path.

Why: the Python `pulsar-client` has no transaction API, so before this only our own client
had run a transaction against the embedded brokers. The program (`targets/pulsar/txncheck/`,
run by `targets/pulsar/txn_check.py`) opens transactions, produces to two topics, acknowledges
in transactions, commits and aborts, and checks with ordinary reads: committed values visible
exactly once, aborted ones never, a committed ack never redelivered, an aborted one redelivered.
`tests/pulsar/test_java_txn_check_real.py` holds real Pulsar to the same expectations.

One embedded cluster per path (v4 runs the 5.0.1 and the 4.0.8 client on it); the client's jars are resolved with Maven and
the program compiled on first use, then cached (`.txnbench/pulsar/<version>/`).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from harness.client.admin import AdminClient
from harness.txn_paths import TxnPath
from targets.pulsar.txn_check import ensure_program, run_check
from targets.pulsar.versions import PULSAR_4_LTS, PULSAR_5
from tests.cluster.conftest import ClusterFactory
from tests.prerequisites import or_skip

pytestmark = pytest.mark.timeout(600)

#: One embedded cluster per path; on v4 both clients run against it (5.0.1's, then 4.0.8's).
CLIENTS = {TxnPath.V4: (PULSAR_5, PULSAR_4_LTS), TxnPath.V4_BATCHED: (PULSAR_5,), TxnPath.V5: (PULSAR_5,)}


def java_check_topics(admin: AdminClient, txn_path: TxnPath, run: str) -> tuple[str, str]:
    """Two fresh topics of the path's kind (v5: scalable, two segments each), created by the admin API."""
    if txn_path is TxnPath.V5:
        topics = (f"topic://public/default/java-{run}-a", f"topic://public/default/java-{run}-b")
        for topic in topics:
            admin.create_scalable_topic(topic, 2)
    else:
        topics = (f"persistent://public/default/java-{run}-a", f"persistent://public/default/java-{run}-b")
        for topic in topics:
            admin.create_topic(topic)
    return topics


@pytest.mark.parametrize("txn_path", list(CLIENTS), ids=[p.value for p in CLIENTS])
def test_the_java_client_transactions_hold_on_the_embedded_cluster(
        cluster_factory: ClusterFactory, tmp_path: Path, txn_path: TxnPath) -> None:
    with or_skip():   # mvn (first use) and a JDK 17+: one line when one is missing
        programs = [ensure_program(release) for release in CLIENTS[txn_path]]
    cluster = cluster_factory(path=txn_path)
    info = cluster.info()
    for program in programs:
        run = uuid.uuid4().hex[:8]
        topics = java_check_topics(AdminClient(info.admin_url), txn_path, run)
        outcome = run_check(program, service_url=info.service_url, txn_path=txn_path, topics=topics, run=run,
                            listener=info.listener_name, log=tmp_path / f"java-txn-check-{program.release.version}.jsonl")
        failures = outcome.failures()
        assert not failures, f"Java client {program.release.version}:\n" + "\n".join(failures)
        assert len(outcome.of("check")) == 6 and outcome.returncode == 0
