"""`phases.quiet_tail_s`: the load stops before the faults phase's planned end while the nemesis
plays on, so the last faults heal on a cluster nobody writes to (a real run, embedded cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.config import parse_scenario
from harness.history.schema import NOT_THE_LOAD
from harness.results import RunStatus
from orchestrator.outcome import RunOptions
from orchestrator.run import Run

pytestmark = pytest.mark.timeout(300)

FAULTS_S, TAIL_S = 10.0, 5.0

SCENARIO = f"""
name: quiet-tail
path: v4
phases: {{warmup_s: 1, steady_s: 2, faults_s: {FAULTS_S}, quiet_tail_s: {TAIL_S}, faults_overrun_s: 20,
          recovery_s: 0, drain_timeout_s: 60}}
load: {{users: 2, spawn_rate: 100}}
workload: {{kind: atomic-produce, topics: 2, txn_timeout_s: 10, op_timeout_s: 10}}
faults:
  quiet_s: 0
  schedule:
    - {{kind: partition, target: "broker-metadata:0", at_s: 1, for_s: 1}}
    # in the tail: it must still be injected and healed with the load stopped
    - {{kind: partition, target: "broker-metadata:1", at_s: 7, for_s: 1}}
"""


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for file in sorted((run_dir / "history").glob("*.jsonl"))
            for line in file.read_text().splitlines() if line.strip()]


def test_the_load_stops_before_the_faults_end_and_the_tail_faults_still_run(tmp_path: Path) -> None:
    config = parse_scenario(SCENARIO, source="quiet-tail.yaml")
    said: list[str] = []
    outcome = Run(config, RunOptions(results_root=tmp_path / "results", analyze=False,
                                     progress=said.append)).execute()
    assert outcome.status is RunStatus.COMPLETE, outcome.error
    lines = _lines(outcome.run_dir.path)
    faults_start = min(e["time_ns"] for e in lines
                       if e["f"] == "phase" and (e.get("extra") or {}).get("name") == "faults")
    load_invokes = [e["time_ns"] for e in lines if e["writer"] not in NOT_THE_LOAD and e["type"] == "invoke"]
    assert load_invokes, "the load ran"
    quiet_from = faults_start + (FAULTS_S - TAIL_S) * 1e9
    # The load is told to stop at the tail's start; an operation already under way may still be
    # invoked by a user finishing its transaction within the stop's grace, not seconds later.
    assert max(load_invokes) < quiet_from + 2e9, "the load went on into the quiet tail"
    tail_fault = [e for e in lines if e["writer"] == "nemesis" and e["f"] == "fault" and e["type"] == "ok"
                  and "broker-1-metadata" in (e.get("extra") or {}).get("targets", [])]
    assert tail_fault and tail_fault[0]["time_ns"] > max(load_invokes), "the tail's fault came after the load"
    healed = [e for e in lines if e["writer"] == "nemesis" and e["f"] == "heal" and e["type"] == "ok"]
    assert len(healed) == 2
    assert any("quiet tail: the load stops" in line for line in said)
    progress = [line for line in said if "] faults " in line and "/" in line]
    assert progress and all(line.split()[2].endswith(f"/{FAULTS_S:g}s") for line in progress), progress
    assert any("load stopped" in line for line in progress), "the tail's progress shows no old rates"
