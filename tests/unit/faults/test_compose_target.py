"""The same nemesis drives the compose target: real Toxiproxy API and Docker API (here their
fakes from tests/unit/compose), through ComposeCluster as ProcessControl."""

from __future__ import annotations

import json
from pathlib import Path

from faults.nemesis import Nemesis
from faults.schedule import plan_run
from harness.config import parse_scenario
from harness.history import HistoryRecorder, RunClock
from harness.txn_paths import TxnPath
from tests.unit.compose.fakes import FakeDockerEngine
from tests.unit.compose.test_cluster import PROJECT, Harness, docker_bin, engine, harness  # noqa: F401 (fixtures)
from tests.waiting import wait_for


def test_the_nemesis_partitions_kills_and_pauses_a_compose_cluster(harness: Harness,  # noqa: F811
                                                                   engine: FakeDockerEngine,  # noqa: F811
                                                                   tmp_path: Path) -> None:
    cluster, runner = harness.make(TxnPath.V4)
    info = cluster.up()
    assert runner.toxiproxy is not None
    proxies = runner.toxiproxy.proxies
    config = parse_scenario("""
name: compose-chaos
path: v4
phases: {faults_s: 30}
faults:
  quiet_s: 0
  schedule:
    - {kind: partition, target: "client-broker:1", at_s: 0, for_s: 0.2}
    - {kind: latency, target: "broker-metadata:0", at_s: 0.3, for_s: 0.2, params: {latency_ms: 100}}
    - {kind: kill, target: "broker:0", at_s: 0.6, for_s: 0.2}
    - {kind: pause, target: ledger, at_s: 1.0, for_s: 0.2}
""", source="test")
    recorder = HistoryRecorder(tmp_path / "history", "run", "nemesis", RunClock.start(), txn_path="v4")
    with Nemesis(config=config, timeline=plan_run(config), cluster=info, control=cluster,
                 recorder=recorder, progress=lambda _m: None) as nemesis:
        nemesis.start()
        assert wait_for(lambda: nemesis.stats.healed == 4, timeout_s=20)
        nemesis.raise_if_failed()
    recorder.close()
    # what the proxy was asked, in order (sampling its state missed 0.2 s windows on a busy machine)
    latency = {"type": "latency", "toxicity": 1.0, "attributes": {"latency": 100, "jitter": 0}}
    assert [r for r in runner.toxiproxy.requests if r[0] != "GET" and r[1].startswith("/proxies/")] == [
        ("POST", "/proxies/client-broker-1", {"enabled": False}),
        ("POST", "/proxies/client-broker-1", {"enabled": True}),
        ("POST", "/proxies/broker-0-metadata/toxics",
         {**latency, "stream": "upstream", "name": "txnbench-f2-latency-upstream"}),
        ("POST", "/proxies/broker-0-metadata/toxics",
         {**latency, "stream": "downstream", "name": "txnbench-f2-latency-downstream"}),
        ("DELETE", "/proxies/broker-0-metadata/toxics/txnbench-f2-latency-upstream", None),
        ("DELETE", "/proxies/broker-0-metadata/toxics/txnbench-f2-latency-downstream", None)]
    assert all(p["enabled"] and not p["toxics"] for p in proxies.values())
    broker0, ledger = f"{PROJECT}-broker-0-1", engine.by_service("bookie").name
    assert [a for a in engine.actions if a[1] in (broker0, ledger)] == [
        ("kill:SIGKILL", broker0), ("start", broker0), ("pause", ledger), ("unpause", ledger)]
    history = [json.loads(line) for line in recorder.file_path.read_text().splitlines()]
    assert [(h["extra"]["kind"], h["f"], h["type"]) for h in history if h["type"] == "ok"] == [
        (kind, f, "ok") for kind in ("partition", "latency", "kill", "pause") for f in ("fault", "heal")]
    cluster.down()
