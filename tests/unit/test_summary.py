"""The table a matrix prints last: path, release, verdict, committed txn/s, commit p50 / p99, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.results import RunDir, RunStatus
from orchestrator.outcome import RunOutcome, Verdict
from orchestrator.summary import HEADERS, release_of, summary_lines


def run_folder(root: Path, folder: str, *, manifest: dict[str, Any], perf: dict[str, Any] | None = None,
               status: dict[str, Any] | None = None) -> RunDir:
    path = root / "runs" / folder
    (path / "analysis").mkdir(parents=True)
    (path / "locust").mkdir()
    (path / "manifest.json").write_text(json.dumps(manifest))
    if perf is not None:
        (path / "analysis" / "perf.json").write_text(json.dumps(perf))
    if status is not None:
        (path / "locust" / "status.json").write_text(json.dumps(status))
    return RunDir(path)


def perf(txn_per_s: float, p50: float, p99: float) -> dict[str, Any]:
    return {"committed_txn_per_s": txn_per_s, "latency_ms": {"txn-commit": {"p50": p50, "p99": p99, "max": p99}}}


def test_a_pulsar_bench_lists_each_run_with_its_release_and_the_failed_one_with_dashes(tmp_path: Path) -> None:
    pulsar = {"target": "pulsar", "config": {"cluster": {"pulsar_version": "5.0.1"}}}
    runs = [
        RunOutcome(run_folder(tmp_path, "v4", manifest={**pulsar, "versions": {"pulsar_release": "5.0.1"}},
                              perf=perf(21.04, 102.3, 755.0), status={"errors": 3, "ack_conflicts": 41}),
                   RunStatus.COMPLETE, Verdict.VALID),
        RunOutcome(run_folder(tmp_path, "v5", manifest={**pulsar, "versions": {"pulsar_release": "5.0.1"}},
                              perf=perf(6.2, 1988.0, 2910.0), status={"errors": 0, "ack_conflicts": 0}),
                   RunStatus.COMPLETE, Verdict.INVALID),
        # failed to start (a taken port, before this was fixed): no perf.json, no status.json
        RunOutcome(run_folder(tmp_path, "v4-pulsar-4.0.8",
                              manifest={"target": "pulsar", "config": {"cluster": {"pulsar_version": "4.0.8"}}}),
                   RunStatus.FAILED, error="broker-0 exited during start-up"),
    ]
    lines = summary_lines(runs, "bench")
    assert lines[0].startswith("== bench results") and "ack conflicts" in lines[0]
    header, rule, *rows = lines[1:]
    assert header.split("  ")[0] == "path" and all(h in header for h in HEADERS)
    assert set(rule) <= {"-", " "}
    assert rows[0].split() == ["v4", "5.0.1", "valid", "21.0", "102", "/", "755", "3", "41"]
    assert rows[1].split() == ["v5", "5.0.1", "invalid", "6.2", "1,988", "/", "2,910", "0", "0"]
    assert rows[2].split() == ["v4", "4.0.8", "failed", "-", "-", "-", "-"]
    assert len({len(line) for line in (header, rule)}) == 1


def test_the_release_column_names_the_target_where_there_is_no_release() -> None:
    assert release_of({"target": "embedded"}) == "embedded"
    assert release_of({"target": "compose"}) == "compose"
    assert release_of({"target": "pulsar", "versions": {"pulsar_release": "4.0.8"}}) == "4.0.8"
    assert release_of({}) == "?"


def test_no_runs_no_table() -> None:
    assert summary_lines([], "chaos") == []
