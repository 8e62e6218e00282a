"""`txnbench peer` for real: pulsar-perf and txnbench on one Pulsar 4.0.8 cluster, one report.

Slow (a cluster start, 75 s of pulsar-perf, a txnbench run and its analysis): it proves the
whole chain the unit tests check in pieces (tests/unit/pulsar/test_peer.py): the jars' own
pulsar-perf runs with the mapped flags, its log and HdrHistogram log are read, the txnbench
run on the same cluster is judged, peer.{json,md,html} are written, and no JVM is left.
"""

from __future__ import annotations

import json

import pytest

from tests.cluster.test_run_scenarios import processes_mentioning, run_folder, txnbench
from tests.prerequisites import or_skip, real_pulsar_ready

pytestmark = [pytest.mark.pulsar, pytest.mark.slow, pytest.mark.timeout(2400)]


def test_peer_v4_on_4_0_writes_both_sides_and_stops_the_cluster(tmp_path) -> None:
    with or_skip():   # mvn, Java 17+, go: one line when one is missing
        real_pulsar_ready("4.0.8")
    done = txnbench("peer", "atomic-produce", "--path", "v4", "--pulsar-version", "4.0.8", "--duration", "20",
                    "--users", "4", "--results", str(tmp_path), timeout=2000)
    assert done.returncode == 0, done.stderr[-6000:]
    folder = run_folder(done)
    doc = json.loads((folder / "peer.json").read_text())
    perf, ours = doc["sides"]["pulsar-perf"], doc["sides"]["txnbench"]
    assert perf["committed_txn_per_s"] > 0 and perf["latency_ms"]["send"]["count"] > 0
    assert perf["cpu_s_per_1000_txn"] and ours["cpu_s_per_1000_txn"]
    assert ours["committed_txn_per_s"] > 0 and ours["verdict"] is True
    assert perf["broker_counts"].get("pulsar_txn_committed_total", 0) > 0
    assert (folder / "peer.md").is_file() and (folder / "peer.html").is_file()
    assert not processes_mentioning("txnbench-peer-"), "a process of the peer's cluster outlived the command"
