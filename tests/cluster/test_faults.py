"""Each fault kind against real embedded processes: it takes effect, and it heals.

The proxy, the metadata store and the ledger store are the real ones; the brokers
are stand-ins that echo their binary port (tests/unit/faults/standin_broker.py), so
network and process faults are shown on real processes and links independent of
the Pulsar protocol. The nemesis runs as a run drives it: real Toxiproxy client,
the cluster as ProcessControl, a history file.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from embedded.rpc import BlockingRpcClient, RpcUnavailable
from faults.nemesis import Nemesis
from harness.config import RunConfig, parse_scenario
from harness.history import HistoryRecorder, RunClock
from harness.target import ServiceRole
from harness.toxiproxy.client import ToxiproxyClient
from harness.txn_paths import TxnPath
from targets import embedded as embedded_target
from targets.embedded import EmbeddedCluster, EmbeddedSpec
from targets.processes import ProcessState, process_state
from tests.cluster.conftest import quiet_nemesis
from tests.unit.faults import standin_broker
from tests.waiting import wait_for

STANDIN_BROKER = standin_broker   # started as `python -m tests.unit.faults.standin_broker`
GC_SETTINGS = {"transactionCoordinatorScalableTopicsGcRetentionSeconds": 0.5,
               "transactionCoordinatorScalableTopicsGcIntervalSeconds": 0.5}


def start_cluster(directory: Path, brokers: int = 2) -> EmbeddedCluster:
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(embedded_target.MODULES, ServiceRole.BROKER, STANDIN_BROKER)
        cluster = EmbeddedCluster(EmbeddedSpec(txn_path=TxnPath.V5, brokers=brokers, settings=GC_SETTINGS,
                                               directory=directory, parent_pid=os.getpid(),
                                               ready_timeout_s=60))
        try:
            cluster.up()
        except BaseException:
            cluster.down()
            raise
    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("faults-cluster"))
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(autouse=True)
def healthy_after(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "cluster" in request.fixturenames:
        assert_clean(request.getfixturevalue("cluster"))


# ---- probes ---------------------------------------------------------------------------------------


def link(cluster: EmbeddedCluster, name: str) -> str:
    return next(each.listen for each in cluster.links if each.name == name)


def direct(cluster: EmbeddedCluster, service: str, port: str) -> str:
    return f"127.0.0.1:{cluster.records[service].ports[port]}"


def echo(address: str, size: int = 16, timeout_s: float = 1.0) -> float:
    """Send `size` bytes through a fresh connection and read them back; seconds taken."""
    host, port = address.rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        payload = os.urandom(size)
        sock.sendall(payload)
        got = b""
        while len(got) < size:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"{address} closed the connection")
            got += chunk
    assert got == payload
    return time.monotonic() - started


def ping(address: str, timeout_s: float = 1.0) -> float:
    """A store `ping` RPC through `address`; seconds taken. RpcUnavailable when no answer."""
    host, port = address.rsplit(":", 1)
    client = BlockingRpcClient(host, int(port), timeout=timeout_s)
    started = time.monotonic()
    try:
        client.call("ping")
    finally:
        client.close()
    return time.monotonic() - started


def unreachable(probe: Callable[[], object]) -> bool:
    try:
        probe()
    except (OSError, RpcUnavailable):
        return True
    return False


def assert_clean(cluster: EmbeddedCluster) -> None:
    """No fault in effect: every proxy enabled without toxics, every process running and answering."""
    assert cluster.toxiproxy_url
    with ToxiproxyClient(cluster.toxiproxy_url) as api:
        proxies = api.proxies()
    assert {n: (p.enabled, p.toxics) for n, p in proxies.items() if not p.enabled or p.toxics} == {}
    assert {n: p.state for n, p in cluster.processes.items() if p.state != ProcessState.RUNNING} == {}
    assert wait_for(lambda: not unreachable(lambda: ping(link(cluster, "broker-0-metadata"))))
    assert wait_for(lambda: not unreachable(lambda: echo(link(cluster, "client-broker-1"))))


# ---- the nemesis as a run drives it ---------------------------------------------------------------


def scenario(fault: str, faults_s: float = 120) -> RunConfig:
    return parse_scenario(f"name: cluster-faults\npath: v5\nphases: {{faults_s: {faults_s}}}\n"
                          f"faults:\n  quiet_s: 0\n  schedule:\n    - {fault}\n", source="test")


class Held:
    """One fault injected by a real nemesis and held until the block ends (then healed)."""

    def __init__(self, cluster: EmbeddedCluster, tmp_path: Path, fault: str) -> None:
        self.recorder = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path="v5")
        self.nemesis = quiet_nemesis(scenario(fault), cluster, self.recorder)

    def __enter__(self) -> Nemesis:
        self.nemesis.__enter__()
        self.nemesis.start()
        assert wait_for(lambda: self.nemesis.stats.injected + self.nemesis.stats.failed
                        + self.nemesis.stats.unknown == 1, 30)
        assert self.nemesis.stats.injected == 1, self.history()
        return self.nemesis

    def __exit__(self, *exc: Any) -> None:
        self.nemesis.__exit__(*exc)
        self.nemesis.raise_if_failed()
        self.recorder.close()
        assert [(h["f"], h["type"]) for h in self.history()] == [
            ("fault", "invoke"), ("fault", "ok"), ("heal", "invoke"), ("heal", "ok")]

    def history(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.recorder.file_path.read_text().splitlines()]


def toxics(cluster: EmbeddedCluster, proxy: str) -> list[tuple[str, str, dict[str, int]]]:
    assert cluster.toxiproxy_url
    with ToxiproxyClient(cluster.toxiproxy_url) as api:
        return [(t.type, t.stream.value, dict(t.attributes)) for t in api.toxics(proxy)]


def test_partition_both_ways_refuses_new_connections_and_cuts_live_ones(cluster: EmbeddedCluster,
                                                                       tmp_path: Path) -> None:
    address = link(cluster, "client-broker-0")
    host, port = address.rsplit(":", 1)
    live = socket.create_connection((host, int(port)), timeout=2)
    live.settimeout(2)
    try:
        with Held(cluster, tmp_path, "{kind: partition, target: client-broker:0, at_s: 0, for_s: 60}"):
            assert unreachable(lambda: echo(address))
            assert live.recv(1) == b""                       # the live connection was cut
            assert echo(link(cluster, "client-broker-1")) < 1.0   # other links are untouched
    finally:
        live.close()
    assert echo(address) < 1.0


@pytest.mark.parametrize(("direction", "stream"), [("outbound", "upstream"), ("inbound", "downstream")])
def test_one_way_partition_drops_one_stream(cluster: EmbeddedCluster, tmp_path: Path,
                                            direction: str, stream: str) -> None:
    address = link(cluster, "broker-0-metadata")
    fault = (f"{{kind: partition, target: broker-metadata:0, at_s: 0, for_s: 60, "
             f"params: {{direction: {direction}}}}}")
    with Held(cluster, tmp_path, fault):
        assert toxics(cluster, "broker-0-metadata") == [("timeout", stream, {"timeout": 0})]
        assert unreachable(lambda: ping(address, timeout_s=1.0))   # connects, but no answer comes back
        assert ping(link(cluster, "broker-1-metadata")) < 1.0
    assert ping(address) < 1.0


def test_partitioning_a_broker_isolates_it(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    with Held(cluster, tmp_path, "{kind: partition, target: broker:1, at_s: 0, for_s: 60}"):
        assert unreachable(lambda: echo(link(cluster, "client-broker-1")))
        assert unreachable(lambda: ping(link(cluster, "broker-1-metadata")))
        assert unreachable(lambda: ping(link(cluster, "broker-1-ledger")))
        assert unreachable(lambda: echo(link(cluster, "broker-0-broker-1")))
        assert unreachable(lambda: echo(link(cluster, "broker-1-broker-0")))
        assert ping(link(cluster, "broker-0-ledger")) < 1.0
        assert echo(link(cluster, "client-broker-0")) < 1.0
        assert echo(direct(cluster, "broker-1", "binary_port")) < 1.0   # the process itself still runs


def test_latency_delays_a_link(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    address = link(cluster, "broker-0-ledger")
    fault = "{kind: latency, target: broker-ledger:0, at_s: 0, for_s: 60, params: {latency_ms: 300}}"
    with Held(cluster, tmp_path, fault):
        assert ping(address, timeout_s=5) >= 0.55                # 300 ms each way
    assert ping(address) < 0.3


def test_bandwidth_limits_a_link(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    address = link(cluster, "client-broker-1")
    fault = ("{kind: bandwidth, target: client-broker:1, at_s: 0, for_s: 60, "
             "params: {rate_kbps: 20, direction: inbound}}")
    with Held(cluster, tmp_path, fault) as nemesis:
        assert nemesis.in_effect()[0].params["rate_kbps"] == 20
        assert echo(address, size=20_000, timeout_s=10) >= 0.7     # 20 KB back at 20 KB/s
    assert echo(address, size=20_000) < 0.5


@pytest.mark.parametrize(("service", "port"), [("metadata", "rpc_port"), ("ledger", "rpc_port"),
                                               ("broker-0", "binary_port")])
def test_kill_stops_the_process_and_heal_starts_it_again(cluster: EmbeddedCluster, tmp_path: Path,
                                                         service: str, port: str) -> None:
    before = cluster.processes[service].pid
    assert before is not None
    probe = (lambda: ping(direct(cluster, service, port))) if port == "rpc_port" else \
        (lambda: echo(direct(cluster, service, port)))
    target = service.replace("broker-", "broker:")
    with Held(cluster, tmp_path, f"{{kind: kill, target: {target}, at_s: 0, for_s: 60}}"):
        assert cluster.processes[service].state == ProcessState.STOPPED
        with pytest.raises(ProcessLookupError):
            os.kill(before, 0)
        assert unreachable(probe)
    after = cluster.processes[service].pid
    assert after is not None and after != before
    assert probe() < 1.0


@pytest.mark.parametrize(("service", "port"), [("ledger", "rpc_port"), ("broker-1", "binary_port")])
def test_pause_freezes_the_process_and_heal_resumes_it(cluster: EmbeddedCluster, tmp_path: Path,
                                                       service: str, port: str) -> None:
    pid = cluster.processes[service].pid
    probe = (lambda: ping(direct(cluster, service, port), timeout_s=1.0)) if port == "rpc_port" else \
        (lambda: echo(direct(cluster, service, port), timeout_s=1.0))
    target = service.replace("broker-", "broker:")
    with Held(cluster, tmp_path, f"{{kind: pause, target: {target}, at_s: 0, for_s: 60}}"):
        assert cluster.processes[service].state == ProcessState.PAUSED
        assert unreachable(probe)          # the kernel accepts the connection; nobody answers
    assert cluster.processes[service].pid == pid
    assert wait_for(lambda: not unreachable(probe))


def test_slow_participant_delays_one_brokers_metadata_link_past_gc_retention(cluster: EmbeddedCluster,
                                                                             tmp_path: Path) -> None:
    # retention 0.5 s + GC interval 0.5 s + 2 s margin (cluster settings) = 3 s towards broker-1
    fault = "{kind: slow-participant, target: broker:1, at_s: 0, for_s: 60}"
    with Held(cluster, tmp_path, fault) as held:
        assert held.in_effect()[0].params["latency_ms"] == 3000
        assert toxics(cluster, "broker-1-metadata") == [("latency", "downstream", {"latency": 3000, "jitter": 0})]
        assert ping(link(cluster, "broker-1-metadata"), timeout_s=6) >= 2.9
        assert ping(link(cluster, "broker-0-metadata")) < 1.0


def test_a_fault_window_heals_on_its_own(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    recorder = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path="v5")
    config = scenario("{kind: partition, target: client-broker:1, at_s: 0, for_s: 0.5}", faults_s=5)
    with quiet_nemesis(config, cluster, recorder) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.injected == 1)
        assert wait_for(lambda: nemesis.stats.healed == 1)
        assert echo(link(cluster, "client-broker-1")) < 1.0
        assert nemesis.in_effect() == []
    recorder.close()


@pytest.mark.slow
def test_after_a_chaos_run_no_fault_is_in_effect_and_no_process_is_left(tmp_path: Path) -> None:
    """Random subsets of every process and network kind, then down(): nothing left."""
    cluster = start_cluster(tmp_path / "cluster", brokers=3)
    pids = {(p.pid, p.start_time) for p in cluster.processes.values()}
    try:
        recorder = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path="v5")
        config = parse_scenario(
            "name: chaos-test\nseed: 11\npath: v5\nphases: {faults_s: 20}\nfaults:\n  quiet_s: 0.5\n"
            "  random: {kinds: [partition, latency, bandwidth, kill, pause], every_s: 2, for_s: 1}\n",
            source="test")
        with quiet_nemesis(config, cluster, recorder) as nemesis:
            nemesis.start()
            assert wait_for(lambda: not nemesis.running, 120)
            nemesis.raise_if_failed()
            stats = nemesis.stats
        recorder.close()
        assert stats.injected >= 8 and stats.heal_failures == 0
        assert {"kill", "pause", "partition"} <= set(stats.kinds)
        assert_clean(cluster)
        pids |= {(p.pid, p.start_time) for p in cluster.processes.values()}   # restarted ones too
    finally:
        cluster.down()
    assert len(pids) > len(cluster.processes)          # kills happened, and restarts
    for pid, start_time in pids:
        assert pid is not None and process_state(pid, start_time) == ProcessState.STOPPED


def test_cluster_heal_removes_every_fault_the_nemesis_can_leave(tmp_path: Path) -> None:
    """`txnbench cluster heal` and the nemesis's heals agree: faults left by a nemesis that
    never healed (its process died) are all removed by the command."""
    import argparse

    from faults.environment import FaultEnvironment
    from faults.kinds import build_actions
    from faults.model import Fault
    from faults.resolution import LinkEnd, ServiceTarget
    from harness.toxiproxy.model import Stream
    from orchestrator.cluster_cli import cluster_heal

    directory = tmp_path / "cluster"
    cluster = start_cluster(directory)
    try:
        assert cluster.toxiproxy_url
        api = ToxiproxyClient(cluster.toxiproxy_url)
        info = cluster.info()
        actions = build_actions(FaultEnvironment(cluster=info, txn_path=info.txn_path, control=cluster, network=api))

        def fault(n: int, kind: str, target: Any, **params: Any) -> Fault:
            return Fault(f"f{n}", kind, "test", (target,), params, 60.0, True, "test")

        left = [
            fault(1, "partition", LinkEnd("client-broker-0", Stream.UPSTREAM), direction="both"),
            fault(2, "partition", LinkEnd("broker-1-ledger", Stream.UPSTREAM), direction="outbound"),
            fault(3, "latency", LinkEnd("broker-0-metadata", Stream.UPSTREAM), direction="both",
                  latency_ms=500, jitter_ms=0),
            fault(4, "kill", ServiceTarget("broker-1")),
            fault(5, "pause", ServiceTarget("ledger")),
        ]
        for f in left:
            actions[f.kind].inject(f)
        api.close()
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(embedded_target.MODULES, ServiceRole.BROKER, STANDIN_BROKER)
            assert cluster_heal(argparse.Namespace(dir=directory)) == 0
        healed = EmbeddedCluster.attach(directory)
        try:
            assert_clean(healed)
        finally:
            healed.down()
    finally:
        cluster.down()
