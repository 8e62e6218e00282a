"""Pulsar's own Java client runs transactions against real Apache Pulsar, on every path.

The same program and expectations as `tests/cluster/test_java_txn_check.py` (the embedded
cluster): t1 commits and t2 aborts produces on two topics; t3 commits and t4 aborts an
acknowledgement (plus a produce each); ordinary reads then see committed values exactly
once, aborted ones never; the committed ack's message is not delivered again, the aborted
one's is. Cases: v4 with the 5.0.1 and the 4.0.8 client on its own release, v4-batched and
v5 on 5.0.1. Where the two targets disagree, real Pulsar is right (embedded/README.md).

Each case starts one real cluster (about a minute of JVMs, more on a loaded machine), so the
module is `slow` (out of `make test`): `make test-slow` or
`pytest -m pulsar tests/pulsar/test_java_txn_check_real.py`, under the shared lock.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psutil
import pytest

from harness.client.admin import AdminClient
from harness.txn_paths import TxnPath
from targets.pulsar.cluster import PulsarCluster, PulsarSpec
from targets.pulsar.txn_check import ensure_program, run_check
from targets.pulsar.versions import PULSAR_4_LTS, PULSAR_5, PulsarRelease
from tests.cluster.test_java_txn_check import java_check_topics
from tests.prerequisites import or_skip, real_pulsar_ready

pytestmark = [pytest.mark.pulsar, pytest.mark.slow, pytest.mark.timeout(1500)]

CASES = [(TxnPath.V4, PULSAR_5), (TxnPath.V4, PULSAR_4_LTS), (TxnPath.V4_BATCHED, PULSAR_5), (TxnPath.V5, PULSAR_5)]


@pytest.mark.parametrize(("txn_path", "release"), CASES, ids=[f"{p.value}-pulsar-{r.version}" for p, r in CASES])
def test_the_java_client_transactions_hold_on_real_pulsar(tmp_path: Path, txn_path: TxnPath,
                                                           release: PulsarRelease) -> None:
    with or_skip():   # mvn, a JDK, Java 21+ for 5.0, go: one line when one is missing
        program = ensure_program(release)
        real_pulsar_ready(release.version)
    directory = tmp_path / "cluster"
    cluster = PulsarCluster(PulsarSpec(txn_path=txn_path, version=release.version, directory=directory,
                                       parent_pid=os.getpid(), ready_timeout_s=600.0))
    try:
        info = cluster.up()
        run = uuid.uuid4().hex[:8]
        topics = java_check_topics(AdminClient(info.admin_url), txn_path, run)
        outcome = run_check(program, service_url=info.service_url, txn_path=txn_path, topics=topics, run=run,
                            listener=info.listener_name, log=tmp_path / "java-txn-check.jsonl")
    finally:
        cluster.down()
    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if any(str(directory) in part for part in (p.info["cmdline"] or []))]
    assert not left, f"processes left after down(): {left}"
    assert not outcome.failures(), "\n".join(outcome.failures())
    assert len(outcome.of("check")) == 6 and outcome.returncode == 0
