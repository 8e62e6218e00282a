"""The pipeline end to end: analyze_run (checker + perf + report), the matrix comparison, the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analysis.pipeline import analyze_matrix, analyze_run
from harness.history.schema import Op, OpF, OpType
from harness.results import RunDir, read_json, write_json_atomic
from orchestrator import cli
from tests.unit.report.fakes import fake_results
from tests.unit.report.simrun import SimSpec, simulate_run
from tests.unit.report.test_render import assert_self_contained

PHASES = (("setup", 0.1), ("warmup", 0.2), ("steady", 0.8), ("recovery", 0.1))


@pytest.fixture(scope="module")
def analyzed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, dict[str, Any]]:
    run = simulate_run(tmp_path_factory.mktemp("pipeline") / "20260101-000000-bench-v4",
                       SimSpec(producers=2, phases=PHASES))
    return RunDir(run), analyze_run(run)


def test_analyze_run_checks_measures_and_reports(analyzed: tuple[RunDir, dict[str, Any]]) -> None:
    run, summary = analyzed
    results = read_json(run.results_json)
    perf = read_json(run.perf_json)
    assert summary["errors"] == []
    assert summary["valid"] is True and results["valid"] is True      # a consistent history: valid
    assert summary["anomalies"] == {} == results["anomalies"]
    assert summary["committed_txn_per_s"] == perf["committed_txn_per_s"] > 0
    assert summary["msgs_per_s"] == perf["msgs_per_s"]
    assert summary["latency_ms"]["txn-commit"]["p99"] == perf["latency_ms"]["txn-commit"]["p99"]
    assert summary["io_per_txn"] == perf["io_per_txn"]
    assert summary["report"] == str(run.path / "report.html")
    html = (run.path / "report.html").read_text()
    assert_self_contained(html, images=5)
    assert 'class="verdict-valid"' in html
    md = (run.path / "report.md").read_text()
    assert f"| committed transactions / s | {perf['committed_txn_per_s']:,.1f} |" in md
    assert perf["metadata_store"]["label"] == "Oxia-like store (ours)"
    assert "· metadata store Oxia-like store (ours) ·" in md
    assert sorted(p.name for p in run.plots_dir.glob("*.png")) == [
        "io_per_txn.png", "latency_percentiles.png", "latency_summary.png", "latency_timeline.png",
        "throughput.png"]


def test_a_broken_history_costs_the_numbers_not_the_run(spark: SparkSession, tmp_path: Path) -> None:
    run = simulate_run(tmp_path / "broken", SimSpec(producers=1, phases=PHASES))
    history = run / "history" / "w0.jsonl"
    lines = history.read_text().splitlines()
    lines[3] = "{not json"
    history.write_text("\n".join(lines) + "\n")
    summary = analyze_run(run)
    assert summary["valid"] == "unknown"                     # the checker's verdict on a malformed line
    assert summary["committed_txn_per_s"] is None
    assert any(e.startswith("performance: ") and "w0.jsonl: line 4" in e for e in summary["errors"])
    assert (run / "analysis" / "analysis-errors.txt").is_file()
    assert not (run / "report.html").exists()


def make_matrix(root: Path, source: RunDir) -> Path:
    """A chaos matrix: v4 is the analyzed run (real verdict); v5 a new run with an invalid verdict."""
    matrix = root / "20260101-000000-chaos-chaos"
    (matrix / "runs").mkdir(parents=True)
    write_json_atomic(matrix / "matrix.json", {"schema": 1, "matrix_id": matrix.name, "kind": "chaos",
                                               "scenario": "chaos"})
    shutil.copytree(source.path, matrix / "runs" / "v4")
    v5 = simulate_run(matrix / "runs" / "v5", SimSpec(path="v5", seed=9, producers=2, phases=PHASES,
                                                      latency_scale=0.5, capacity_txn_per_s=None,
                                                      omit_metrics=frozenset({"pulsar_txn_append_log_total"})))
    write_json_atomic(v5 / "analysis" / "results.json", fake_results(False))
    return matrix


def test_report_command_over_a_matrix(analyzed: tuple[RunDir, dict[str, Any]], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    matrix = make_matrix(tmp_path, analyzed[0])
    assert cli.main(["report", str(matrix)]) == 0
    out = capsys.readouterr().out.split()
    assert out == [str(matrix / "runs" / "v4" / "report.html"), str(matrix / "runs" / "v5" / "report.html"),
                   str(matrix / "compare.html")]
    compare = json.loads((matrix / "compare.json").read_text())
    assert compare["kind"] == "chaos" and compare["matrix"] == matrix.name and compare["order"] == ["v4", "v5"]
    for path in ("v4", "v5"):
        perf = read_json(matrix / "runs" / path / "analysis" / "perf.json")
        row = compare["paths"][path]
        assert row["committed_txn_per_s"] == perf["committed_txn_per_s"]
        assert row["msgs_per_s"] == perf["msgs_per_s"]
        assert row["io_per_txn"] == perf["io_per_txn"]
        for op in ("txn-open", "send", "ack", "txn-commit", "txn-abort", "end-to-end"):
            for key in ("p50", "p95", "p99", "max"):
                assert row["latency_ms"][op][key] == perf["latency_ms"][op][key]
    assert compare["paths"]["v4"]["verdict"]["valid"] is True
    assert compare["paths"]["v5"]["verdict"] == {
        "valid": False, "anomalies": {"lost-write": 2, "aborted-read": 1}, "expected": {},
        "only_expected": False, "expectation_notes": {}, "unknown_reasons": []}
    ratios = compare["ratios_vs_baseline"]["v5"]
    assert ratios["committed_txn_per_s"] == round(compare["paths"]["v5"]["committed_txn_per_s"]
                                                  / compare["paths"]["v4"]["committed_txn_per_s"], 4)
    assert ratios["io_per_txn"]["coordinator_log_records"] is None       # absent in v5
    assert compare["paths"]["v5"]["io_per_txn"]["coordinator_log_records"] is None
    html = (matrix / "compare.html").read_text()
    assert_self_contained(html, images=5)
    assert 'class="verdict-invalid"' in html
    md = (matrix / "compare.md").read_text()
    # the simulated manifests record no store: an embedded run from before it was recorded ran on ours
    assert "| v5 | Oxia-like store (ours) | complete | INVALID | lost-write 2, aborted-read 1 |" in md
    assert "Metadata store of each run: v4: Oxia-like store (ours); v5: Oxia-like store (ours)." in md
    assert compare["paths"]["v5"]["metadata_store"]["kind"] == "oxia-like"

    # analyze_matrix (the orchestrator's entry) reads the perf.json files just written.
    again = analyze_matrix(matrix)
    assert again["paths"]["v5"]["committed_txn_per_s"] == compare["paths"]["v5"]["committed_txn_per_s"]


OLD_MANIFEST = Path(__file__).parents[1] / "data" / "old-manifests" / "chaos-v4.json"


def test_report_rebuilds_a_run_whose_manifest_an_older_txnbench_wrote(
        analyzed: tuple[RunDir, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The chaos scenario's expected anomalies, read back from a manifest written before #19."""
    run = RunDir(tmp_path / "20261201-000000-chaos-v4")
    shutil.copytree(analyzed[0].path, run.path)
    shutil.copyfile(OLD_MANIFEST, run.manifest_path)
    terminated = "persistent://public/default/chaos-t2"
    extra = {"kind": "terminate", "effects": ["stays"], "targets": [terminated], "params": {}, "fault_id": "f1",
             "healable": False}
    lines = [Op(run=run.run_id, writer="nemesis", process="nemesis/f1", index=i, time_ns=(100 + i) * 10**6,
                wall_ms=1.7e12 + 100 + i, type=t, f=OpF.FAULT, path="v4", extra=extra).to_json()
             for i, t in enumerate((OpType.INVOKE, OpType.OK))]
    (run.history_dir / "nemesis.jsonl").write_text("".join(line + "\n" for line in lines))
    # the instance's transaction sent to the terminated topic while the terminate was in effect: its cause
    # is in the history (attribution by cause, docs/checks.md)
    txn_ops = [(OpType.OK, OpF.TXN_OPEN, None), (OpType.INVOKE, OpF.SEND, terminated), (OpType.OK, OpF.SEND, terminated),
               (OpType.INVOKE, OpF.TXN_COMMIT, None)]
    ops = [Op(run=run.run_id, writer="w9", process="w9/u0", index=i, time_ns=(150 + 10 * i) * 10**6,
              wall_ms=1.7e12 + 150 + 10 * i, type=t, f=f, path="v4", txn="1:1", topic=topic,
              value="w9.0.0" if topic else None).to_json() for i, (t, f, topic) in enumerate(txn_ops)]
    (run.history_dir / "w9.jsonl").write_text("".join(line + "\n" for line in ops))
    write_json_atomic(run.results_json, {
        "schema": 1, "run_id": run.run_id, "valid": False, "unknown_reasons": [],
        "anomalies": {"partial-txn": {"count": 1, "examples": [{"txn": "1:1", "missing": [{"topic": terminated}]}]}},
        "checks": {"partial-txn": {"status": "ran", "reason": None, "count": 1}}})
    assert cli.main(["report", str(run.path)]) == 0
    assert capsys.readouterr().out.split() == [str(run.path / "report.html")]
    md = (run.path / "report.md").read_text()
    assert "| partial-txn | 1 | 1 | expected |" in md
    assert ("The scenario expects all of them on this path (checks.expected): PIP-31 writes commit markers "
            "into the topic's data stream") in md
