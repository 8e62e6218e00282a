"""Real Apache Pulsar smoke test: one cluster from Maven jars, txnbench runs judged on it.

What it proves, end to end, on real Pulsar 5.0.1 (PIP-473 inside): `txnbench cluster up
--target pulsar` resolves the jars (first time) and starts ZooKeeper, a bookie and two
brokers behind the fault proxy; `txnbench run` drives v4 atomic produce with aborts,
consume-transform-produce and ack-only users (the `mixed` workload) and v5 atomic produce
through it, and the checker judges each history valid; `txnbench cluster down` leaves no
process behind. The runs use the `external` target on the started cluster so one cluster
start (about a minute of JVMs) serves both; `--target pulsar` itself starting a run's own
cluster is in tests/pulsar/test_pulsar_runs.py (slow).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.cluster.test_run_scenarios import run_folder, short_scenario, txnbench

pytestmark = [pytest.mark.pulsar, pytest.mark.timeout(1500)]

UP_TIMEOUT_S = 1200   # the first use resolves the jars with Maven (minutes), later ones take about a minute


@pytest.fixture(scope="module")
def pulsar_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("pulsar-cluster")
    env = {"TXNBENCH_CLUSTER_DIR": str(directory)}
    up = txnbench("cluster", "up", "--target", "pulsar", "--path", "v5", env=env, timeout=UP_TIMEOUT_S)
    status: dict[str, Any] = {}
    try:
        assert up.returncode == 0, f"cluster up failed:\n{up.stderr[-6000:]}"
        status = json.loads(txnbench("cluster", "status", "--json", env=env).stdout)
        yield {"env": env, "status": status, "directory": directory}
    finally:
        down = txnbench("cluster", "down", env=env)
        assert down.returncode == 0, down.stderr[-3000:]
        left = [p for p in psutil.process_iter(["cmdline"])
                if any(str(directory) in part for part in (p.info["cmdline"] or []))]
        assert not left, f"processes left after cluster down: {[p.pid for p in left]}"


def judged(tmp_path: Path, cluster: dict[str, Any], scenario: str, path: str, **workload: Any) -> dict[str, Any]:
    file = short_scenario(tmp_path, scenario, steady_s=8, path=path, workload=workload or None)
    status = cluster["status"]
    done = txnbench("run", str(file), "--target", "external", "--service-url", status["service_url"],
                    "--admin-url", status["admin_url"], "--results", str(tmp_path / "results"))
    folder = run_folder(done)
    results = json.loads((folder / "analysis" / "results.json").read_text())
    assert done.returncode == 0 and results["valid"] is True, \
        f"{scenario} on {path}: exit {done.returncode}, anomalies {results.get('anomalies')}\n{done.stderr[-4000:]}"
    return results


def test_the_cluster_is_real_pulsar_with_every_process_running(pulsar_cluster: dict[str, Any]) -> None:
    status = pulsar_cluster["status"]
    names = {p["name"]: p for p in status["processes"]}
    assert set(names) == {"proxy", "metadata", "ledger", "broker-0", "broker-1"}
    assert all(p["state"] == "running" for p in names.values())
    state = json.loads((pulsar_cluster["directory"] / "state.json").read_text())
    assert state["target"] == "pulsar" and state["pulsar_version"] == "5.0.1"
    assert state["components"]["pulsar"] == "5.0.1"


def test_v4_atomic_produce_aborts_and_consume_transform_produce_are_valid(
        pulsar_cluster: dict[str, Any], tmp_path: Path) -> None:
    results = judged(tmp_path, pulsar_cluster, "mixed", "v4", abort_ratio=0.2)
    assert results["valid"] is True


def test_v5_atomic_produce_is_valid(pulsar_cluster: dict[str, Any], tmp_path: Path) -> None:
    judged(tmp_path, pulsar_cluster, "atomic-produce", "v5")
