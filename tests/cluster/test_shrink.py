"""`txnbench shrink` for real, on the embedded cluster: a planted bug, a failing run with an irrelevant
fault beside the one that matters, and the shrink's one real run shows the bug without it.

The planted bug (`txnbenchBugV4BufferReplayAbortAsCommit`) makes a v4 transaction buffer replay abort
markers as commits, so the aborted messages since the buffer's last snapshot become visible when
the topic loads again: an unload of a topic shows it (aborted-read), 5 ms of latency on a client link
does not. The failing run's folder is written here as a run writes it (its manifest, its nemesis's
history of the two faults, its verdict: aborted-read unexpected): the shrink reads only those files,
and writing them spares the test a run and its analysis. Then `txnbench shrink --max-runs 1` makes
one real run (delta debugging tries the unload alone first; an unload has no window to halve),
judges it with the checker, and writes the one-fault scenario, its topic pinned to the one the run's `topic:random` drew.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config import parse_scenario
from orchestrator import scenario as scenario_module

# slow: a real shrink, an embedded run and its Spark check: 128 s of `make test`'s 33 min on
# 2026-11-29; nightly's `make test-slow` runs it; tests/unit/test_shrink_*.py cover the search
# without processes
pytestmark = pytest.mark.slow

RUN_ID = "20261129-063700-shrink-planted-v4"
BUG = "txnbenchBugV4BufferReplayAbortAsCommit"
SCENARIO = f"""
name: shrink-planted
seed: 5
path: v4
paths: [v4]
phases: {{warmup_s: 2, steady_s: 2, faults_s: 14, recovery_s: 2, drain_timeout_s: 60, cold_reads: none}}
cluster:
  brokers: 2
  settings: {{metadataStoreUrl: txnbench, {BUG}: true, metadataStoreSessionTimeoutMillis: 3000,
             brokerClientOperationTimeoutSeconds: 5, managedLedgerAddEntryTimeoutSeconds: 5}}
load: {{users: 4, spawn_rate: 100}}
workload: {{kind: atomic-produce, topics: 2, abort_ratio: 0.5, txn_timeout_s: 5, op_timeout_s: 10}}
faults:
  quiet_s: 0
  schedule:
    - {{kind: unload, target: "topic:random", at_s: 0}}
    - {{kind: latency, target: "client-broker:0", at_s: 5, for_s: 1, params: {{latency_ms: 5}}}}
"""
PHASE_NS = 20_000_000_000


def _line(index: int, t_s: float, writer: str, f: str, type_: str, extra: dict[str, Any]) -> str:
    return json.dumps({"schema": 1, "run": RUN_ID, "writer": writer, "process": writer, "index": index,
                       "time_ns": PHASE_NS + int(t_s * 1e9), "wall_ms": 0.0, "type": type_, "f": f, "path": "v4",
                       "txn": None, "extra": extra}) + "\n"


def failing_run(folder: Path) -> Path:
    """The run's folder: an unload of topic 1 (drawn by `topic:random`) at 0 s, latency at 5 s."""
    config = parse_scenario(SCENARIO)
    (folder / "history").mkdir(parents=True)
    (folder / "analysis").mkdir()
    (folder / "manifest.json").write_text(json.dumps({
        "schema": 1, "run_id": RUN_ID, "scenario": "shrink-planted", "path": "v4", "target": "embedded", "seed": 5,
        "status": "complete", "config": config.to_dict(), "planted_bugs": [BUG]}))
    phases = [(-20, "setup"), (-4, "warmup"), (-2, "steady"), (0, "faults"), (14.1, "recovery"), (16.3, "drain")]
    (folder / "history" / "run.jsonl").write_text(
        "".join(_line(i, t, "run", "phase", "ok", {"name": name}) for i, (t, name) in enumerate(phases)))
    unload = {"kind": "unload", "targets": [f"persistent://public/txnbench/{RUN_ID}-ap-1"], "params": {},
              "selector": "topic:random", "fault_id": "f1", "for_s": 0.0, "healable": False,
              "source": "faults.schedule[0]"}
    latency = {"kind": "latency", "targets": ["client-broker-0"], "params": {"latency_ms": 5, "jitter_ms": 0,
               "direction": "both"}, "selector": "client-broker:0", "fault_id": "f2", "for_s": 1.0,
               "healable": True, "source": "faults.schedule[1]"}
    nemesis = [(0.0, "fault", "invoke", unload), (0.2, "fault", "ok", unload),
               (5.0, "fault", "invoke", latency), (5.05, "fault", "ok", latency),
               (6.0, "heal", "invoke", latency), (6.05, "heal", "ok", latency)]
    (folder / "history" / "nemesis.jsonl").write_text(
        "".join(_line(i, t, "nemesis", f, type_, extra) for i, (t, f, type_, extra) in enumerate(nemesis)))
    read = {"writer": "w0", "f": "receive", "type": "ok", "time_ns": PHASE_NS + 4_000_000_000}
    (folder / "analysis" / "results.json").write_text(json.dumps({
        "valid": False, "anomalies": {"aborted-read": {"count": 41, "examples": [{"txn": "1:7", "read": read}]}}}))
    return folder


def test_shrink_drops_the_fault_that_does_not_matter(tmp_path: Path) -> None:
    run = failing_run(tmp_path / "run")
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "shrink", str(run), "--max-runs", "1",
                           "--margin", "4", "--results", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=400)
    detail = f"exit {done.returncode}; stderr tail:\n{done.stderr[-5000:]}"
    assert done.returncode == 0, detail
    scenario = Path(done.stdout.strip().splitlines()[-1])
    out = scenario.parent
    assert out.name == f"{RUN_ID}-shrink" and scenario.name == "shrunk.yaml", detail
    report = json.loads((out / "shrink.json").read_text())
    (candidate,) = report["candidates"]
    assert candidate["step"] == "ddmin" and candidate["faults"] == ["f1"], report
    attempt = candidate["attempts"][0]
    assert (attempt["status"], attempt["fails"]) == ("complete", True), detail + json.dumps(attempt)
    assert "aborted-read" in attempt["unexpected"]
    assert report["stopped"].startswith("done")       # an unload has no window to shorten: nothing left to try
    assert [f["fault"] for f in report["best"]["faults"]] == ["f1"] and report["best"]["shown_by"] == "c01"
    # the shrunk scenario: the unload alone, of the topic the run drew, in a faults phase cut to 0 + 4 s
    config = scenario_module.load(str(scenario))
    (entry,) = config.faults.schedule
    assert (entry.kind, entry.target, entry.at_s, entry.for_s) == ("unload", "topic:1", 0.0, 0.0)
    assert config.phases.faults_s == 4.0 and config.seed == 5 and config.cluster.settings[BUG] is True
    assert report["reproduce"] == f"txnbench run {scenario} --allow-planted-bugs"
    # the candidate's run is a run folder like any other, its verdict and judgement in its manifest
    manifest = json.loads((Path(attempt["run"]) / "manifest.json").read_text())
    assert manifest["verdict"] == "invalid" and "aborted-read" in manifest["judgement"]["unexpected"]
    assert yaml.safe_load(scenario.read_text())["faults"]["quiet_s"] == 0.0
