"""End to end on real images: each compose file comes up, takes faults, runs a scenario, goes down.

These need a Docker engine with registry access (`make test-docker`); tests/conftest.py
skips them elsewhere. They have not yet been run: they were written on a machine
without Docker (see compose/README.md). Each cluster start pulls and starts real
Pulsar, so a test takes minutes.
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from harness.config import parse_scenario
from harness.results import RunStatus
from harness.toxiproxy.client import ToxiproxyClient
from harness.txn_paths import TxnPath
from targets.compose import COMPOSE_DIR, ComposeCluster, ComposeSpec
from targets.compose.layout import load_layout
from tests.waiting import wait_until

FILES = ["v4.yaml", "v4-batched.yaml", "v5-oxia.yaml", "v5-zookeeper.yaml"]


def _spec(file: str, tmp_path: Path) -> ComposeSpec:
    layout = load_layout(COMPOSE_DIR / file)
    assert layout.txn_path is not None
    return ComposeSpec(compose_file=COMPOSE_DIR / file, txn_path=layout.txn_path,
                       project=f"txnbench-e2e-{uuid.uuid4().hex[:8]}", work_dir=tmp_path / "compose",
                       brokers=2, ready_timeout_s=600)


@pytest.fixture
def cluster_for(tmp_path: Path) -> Iterator[Callable[[str], ComposeCluster]]:
    started: list[ComposeCluster] = []

    def start(file: str) -> ComposeCluster:
        cluster = ComposeCluster(_spec(file, tmp_path))
        started.append(cluster)
        cluster.up()
        return cluster

    yield start
    for cluster in started:
        cluster.collect_logs(tmp_path / "logs")
        cluster.down()
        left = subprocess.run(["docker", "ps", "-aq", "--filter",
                               f"label=com.docker.compose.project={cluster.spec.project}"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert left.stdout.strip() == "", f"containers left behind: {left.stdout}"


def _runtime_config(admin_url: str) -> dict[str, str]:
    response = requests.get(f"{admin_url}/admin/v2/brokers/configuration/runtime", timeout=30)
    response.raise_for_status()
    data: dict[str, str] = response.json()
    return data


@pytest.mark.parametrize("file", FILES)
def test_the_cluster_comes_up_with_its_paths_settings_and_every_link(
        file: str, cluster_for: Callable[[str], ComposeCluster]) -> None:
    cluster = cluster_for(file)
    info = cluster.info()
    assert {s.state for s in info.services} == {"running"}
    for broker in ("broker-0", "broker-1"):
        admin = info.service(broker).admin_url
        assert admin is not None
        assert requests.get(f"{admin}/admin/v2/brokers/health", timeout=30).text.strip() == "ok"
        config = _runtime_config(admin)
        assert config["transactionCoordinatorEnabled"] == "true"
        assert config["systemTopicEnabled"] == "true"
        batched = "true" if info.txn_path is TxnPath.V4_BATCHED else "false"
        assert config["transactionLogBatchedWriteEnabled"] == batched
        assert config["transactionPendingAckBatchedWriteEnabled"] == batched
        if info.txn_path is TxnPath.V5:
            assert config["transactionCoordinatorScalableTopicsEnabled"] == "true"
            assert config["scalableTopicsEnabled"] == "true"
    assert info.toxiproxy_url is not None
    with ToxiproxyClient(info.toxiproxy_url) as toxiproxy:
        proxies = toxiproxy.proxies()
    assert sorted(proxies) == sorted(link.name for link in info.links)
    metrics = cluster.scrape_metrics()
    assert "pulsar_" in metrics["broker-0"]
    assert "bookie" in metrics["ledger"] or "bookkeeper" in metrics["ledger"]


def test_clients_reach_brokers_through_the_external_listener(cluster_for: Callable[[str], ComposeCluster]) -> None:
    import pulsar

    cluster = cluster_for("v4.yaml")
    info = cluster.info()
    client = pulsar.Client(info.service_url, listener_name="external", operation_timeout_seconds=30)
    try:
        topic = f"persistent://public/default/e2e-{uuid.uuid4().hex[:6]}"
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "e2e")
        producer.send(b"through toxiproxy")
        message = consumer.receive(timeout_millis=30_000)
        assert message.data() == b"through toxiproxy"
        consumer.acknowledge(message)
    finally:
        client.close()


def test_faults_take_effect_and_heal(cluster_for: Callable[[str], ComposeCluster]) -> None:
    cluster = cluster_for("v4.yaml")
    info = cluster.info()
    assert info.toxiproxy_url is not None
    admin1 = info.service("broker-1").admin_url
    assert admin1 is not None

    cluster.pause("broker-1")
    assert not cluster.is_running("broker-1")
    with pytest.raises(requests.RequestException):
        requests.get(f"{admin1}/admin/v2/brokers/health", timeout=3)
    cluster.resume("broker-1")
    wait_until(lambda: requests.get(f"{admin1}/admin/v2/brokers/health", timeout=10).ok, timeout_s=120,
               message="broker-1 healthy after resume")

    cluster.kill("broker-1")
    assert cluster.info().service("broker-1").state == "killed"
    cluster.start("broker-1")
    assert requests.get(f"{admin1}/admin/v2/brokers/health", timeout=30).text.strip() == "ok"

    client_link = next(link for link in info.links if link.name == "client-broker-0")
    host, port = client_link.listen.rsplit(":", 1)
    with ToxiproxyClient(info.toxiproxy_url) as toxiproxy:
        toxiproxy.disable("client-broker-0")

        def refused() -> bool:
            try:
                with socket.create_connection((host, int(port)), timeout=3) as sock:
                    sock.settimeout(3)
                    return sock.recv(1) == b""    # docker-proxy accepts, then the far side is gone
            except OSError:
                return True

        wait_until(refused, timeout_s=30, message="client-broker-0 cut")
    cluster.heal_network()
    with socket.create_connection((host, int(port)), timeout=10):
        pass

    admin = cluster.admin()
    try:
        topic = f"e2e-{uuid.uuid4().hex[:6]}"
        admin.request("PUT", f"/admin/v2/persistent/public/default/{topic}")
        cluster.terminate_topic(f"persistent://public/default/{topic}")
    finally:
        admin.close()


def test_a_short_chaos_scenario_runs_on_the_compose_target(tmp_path: Path) -> None:
    from orchestrator.outcome import RunOptions, Verdict
    from orchestrator.run import Run

    config = parse_scenario("""
name: e2e-compose
path: v4
target: compose
phases: {warmup_s: 2, steady_s: 5, faults_s: 20, recovery_s: 5, drain_timeout_s: 120}
load: {users: 2, spawn_rate: 2}
workload: {kind: atomic-produce, topics: 2, topics_per_txn: 2, messages_per_txn: 2}
faults:
  quiet_s: 2
  schedule:
    - {kind: partition, target: client-broker:random, at_s: 2, for_s: 4}
    - {kind: kill, target: broker:random, at_s: 10, for_s: 4}
""", source="e2e")
    outcome = Run(config, RunOptions(results_root=tmp_path)).execute()
    assert outcome.status is RunStatus.COMPLETE, f"{outcome.error}; see {outcome.run_dir.path}"
    assert outcome.verdict is Verdict.VALID, f"{outcome.summary}; see {outcome.run_dir.path}"
    logs = {p.name for p in outcome.run_dir.logs_dir.iterdir()}
    assert {"broker-0.log", "broker-1.log", "metadata.log", "ledger.log", "proxy.log"} <= logs
    assert any(outcome.run_dir.metrics_dir.glob("steady-broker-0.prom"))
