"""The concurrency sweep: levels, regrouping comparisons, the report, the orchestration order."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from analysis.pipeline import analyze_sweep
from analysis.report.cli import main_report
from analysis.sweep import build_sweep, parse_levels
from harness.results import RunStatus, new_matrix, new_run, write_json_atomic
from orchestrator import matrix as matrix_module
from orchestrator.cli import build_parser, scenario_from_args
from orchestrator.outcome import Verdict


def test_levels_are_distinct_and_increasing() -> None:
    assert parse_levels("16, 4,64,16") == (4, 16, 64)


@pytest.mark.parametrize("text, message", [("4,x", "'x' is not a whole number"), ("0", "out of range"),
                                           (",", "no user counts")])
def test_bad_levels_say_what_to_write(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_levels(text)


def _row(path: str, txn_per_s: float, commit_p99: float, *, valid: bool = True) -> dict[str, Any]:
    return {"path": path, "run_id": f"r-{path}", "run_dir": f"../../runs/{path}", "status": "complete",
            "committed_txn_per_s": txn_per_s, "msgs_per_s": 4 * txn_per_s,
            "transactions": {"committed": 100},
            "latency_ms": {"txn-commit": {"count": 100, "p50": commit_p99 / 2, "p99": commit_p99, "p99.9": commit_p99,
                                          "max": commit_p99}},
            "io_per_txn": {"ledger_entries": 10.0, "fsyncs": 4.0},
            "verdict": {"valid": valid, "anomalies": {} if valid else {"lost-write": 1}, "only_expected": False},
            "load_generator": {"utilization": 0.1, "saturated": False}}


def _compare(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"order": [r["path"] for r in rows], "paths": {r["path"]: r for r in rows}, "scenarios": ["bench"]}


def test_sweep_regroups_levels_into_series_and_finds_saturation() -> None:
    levels = {4: _compare(_row("v5", 50, 10), _row("v4", 100, 8)),
              16: _compare(_row("v4", 300, 12), _row("v5", 150, 20)),
              64: _compare(_row("v4", 310, 40), _row("v5", 250, 30))}
    sweep = build_sweep(levels, matrix_id="m")
    assert sweep["levels"] == [4, 16, 64]
    assert sweep["order"] == ["v4", "v5"]
    assert [p["users"] for p in sweep["series"]["v4"]] == [4, 16, 64]
    assert [p["committed_txn_per_s"] for p in sweep["series"]["v5"]] == [50, 150, 250]
    assert sweep["series"]["v4"][1]["latency_ms"]["txn-commit"]["p99"] == 12
    assert sweep["series"]["v4"][0]["run_dir"] == "runs/v4"
    # v4 gained 3 % from 16 to 64 users: saturated at 64; v5 was still scaling
    assert sweep["saturation"]["v4"] == {"peak_users": 64, "peak_txn_per_s": 310, "saturated_at_users": 64}
    assert sweep["saturation"]["v5"]["saturated_at_users"] is None
    assert sweep["all_valid"] is True
    assert sweep["scenario"] == "bench"


def test_one_invalid_point_makes_the_sweep_not_all_valid() -> None:
    sweep = build_sweep({4: _compare(_row("v4", 100, 8, valid=False))})
    assert sweep["all_valid"] is False
    assert sweep["series"]["v4"][0]["anomalies"] == {"lost-write": 1}


def _fake_run(root: Path, matrix: Any, path: str, users: int, txn_per_s: float) -> Path:
    run = new_run("bench", path, config={"load": {"users": users}}, seed=1, target="embedded",
                  parent=matrix.runs_dir, matrix_id=matrix.matrix_id, folder=f"{path}-u{users}")
    run.update_manifest(status=RunStatus.COMPLETE.value)
    perf = {"path": path, "run_id": run.run_id, "scenario": "bench", "status": "complete",
            "committed_txn_per_s": txn_per_s, "msgs_per_s": 4 * txn_per_s,
            "latency_ms": {"txn-commit": {"count": 10, "p50": 1.0, "p95": 2.0, "p99": 3.0, "p99.9": 3.0,
                                          "max": 3.0, "mean": 1.2}},
            "io_per_txn": {"ledger_entries": 12.5}}
    write_json_atomic(run.perf_json, perf)
    write_json_atomic(run.results_json, {"valid": True, "anomalies": {}})
    return run.path


def test_analyze_sweep_writes_a_comparison_per_level_and_the_sweep_report(tmp_path: Path) -> None:
    matrix = new_matrix("sweep", "bench", root=tmp_path, info={"levels": [2, 8]})
    for users, rates in ((2, {"v4": 40.0, "v5": 20.0}), (8, {"v4": 120.0, "v5": 70.0})):
        for path, rate in rates.items():
            _fake_run(tmp_path, matrix, path, users, rate)
    sweep = analyze_sweep(matrix.path, compute_missing=False)
    for users in (2, 8):
        compare = json.loads((matrix.path / f"levels/u{users}/compare.json").read_text())
        assert compare["order"] == ["v4", "v5"]
    written = json.loads((matrix.path / "sweep.json").read_text())
    assert written["series"]["v5"][1]["committed_txn_per_s"] == 70.0
    assert written["series"]["v4"][0]["io_per_txn"]["ledger_entries"] == 12.5
    assert written["series"]["v4"][0]["run_dir"] == "runs/v4-u2"
    html = (matrix.path / "sweep.html").read_text()
    assert "120.0" in html and "levels/u8/compare.html" in html
    md = (matrix.path / "sweep.md").read_text()
    assert "v4: peak 120.0 committed txn/s at 8 users; still scaling at the highest level" in md
    for chart in ("sweep_throughput", "sweep_latency", "sweep_io"):
        assert (matrix.path / "plots" / f"{chart}.png").stat().st_size > 1000
    assert sweep["report"].endswith("sweep.html")


def test_report_on_a_sweep_rebuilds_the_sweep_not_one_big_comparison(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    matrix = new_matrix("sweep", "bench", root=tmp_path, info={"levels": [2]})
    _fake_run(tmp_path, matrix, "v4", 2, 40.0)
    rebuilt: list[Path] = []

    def rebuild(run: Path, master: str | None = None) -> dict[str, Any]:
        rebuilt.append(run)
        return {"report": str(run / "report.html")}

    monkeypatch.setattr("analysis.pipeline.rebuild_run", rebuild)
    assert main_report(argparse.Namespace(run_dirs=[matrix.path], out=None, master=None)) == 0
    assert [p.name for p in rebuilt] == ["v4-u2"]
    assert capsys.readouterr().out.split()[-1] == str(matrix.path / "sweep.html")
    assert not (matrix.path / "compare.json").exists()


class _FakeOutcome:
    def __init__(self, run_dir: Any, status: RunStatus) -> None:
        self.run_dir = run_dir
        self.status = status
        self.verdict = Verdict.VALID
        self.exit_code = 130 if status is RunStatus.INTERRUPTED else 0
        self.judgement = None
        self.error = None
        self.summary: dict[str, Any] = {}


def test_sweep_runs_every_path_per_level_lowest_first_and_stops_when_interrupted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int, str | None]] = []
    interrupt_at = ("v4-batched", 16)

    class FakeRun:
        def __init__(self, config: Any, options: Any) -> None:
            self.config, self.options = config, options

        def execute(self) -> _FakeOutcome:
            path, users = self.config.path.value, self.config.load.users
            seen.append((path, users, self.options.folder))
            run = new_run(self.config.name, path, config=self.config.to_dict(), seed=1, target="embedded",
                          parent=self.options.matrix.runs_dir, folder=self.options.folder)
            stop = (path, users) == interrupt_at
            return _FakeOutcome(run, RunStatus.INTERRUPTED if stop else RunStatus.COMPLETE)

    compared: list[Path] = []
    monkeypatch.setattr(matrix_module, "Run", FakeRun)
    monkeypatch.setattr(matrix_module, "_compare_sweep", lambda matrix, outcomes: compared.append(matrix.path))
    args = build_parser().parse_args(["sweep", "--users", "16,4,64", "--no-capacity", "--results", str(tmp_path)])
    config = scenario_from_args(args)
    assert matrix_module.main_sweep(config, args, levels=args.users) == 130
    paths = [p.value for p in config.paths]
    assert seen == [(p, 4, f"{p}-u4") for p in paths] + [("v4", 16, "v4-u16"), ("v4-batched", 16, "v4-batched-u16")]
    matrix = compared[0]
    assert sorted(p.name for p in (matrix / "runs").iterdir()) == sorted(f"{p}-u{u}" for p, u, _ in seen)
    status = json.loads((matrix / "matrix-status.json").read_text())
    assert status["interrupted"] is True and len(status["runs"]) == len(seen)
    assert json.loads((matrix / "matrix.json").read_text())["levels"] == [4, 16, 64]


def test_faults_give_the_failover_section_with_outage_against_open_transactions(tmp_path: Path) -> None:
    from analysis.report.sweep_report import SWEEP_REPORT
    from analysis.report.writer import write_report

    def with_kill(row: dict[str, Any], open_txns: int, outage: float, stalled: list[str]) -> dict[str, Any]:
        row["faults"] = [{"kind": "kill", "targets": "broker-1", "start_s": 10.0, "end_s": 14.0,
                          "open_txns_at_start": open_txns, "coordinator_outage_s": outage,
                          "coordinators_stalled": stalled, "longest_commit_gap_s": 0.5,
                          "first_commit_after_heal_s": 0.1, "commits_during": 3}]
        row["coordinator_recovery_s"] = {"steady": 0.002, "faults": 0.25}
        return row

    levels = {8: _compare(with_kill(_row("v4", 100, 8), 8, 3.5, []), with_kill(_row("v5", 80, 9), 8, 2.25, [])),
              64: _compare(with_kill(_row("v4", 200, 9), 61, 4.75, ["2"]), with_kill(_row("v5", 150, 9), 60, 2.5, []))}
    sweep = build_sweep(levels)
    point = sweep["series"]["v4"][1]
    assert point["coordinator_recovery_s"] == 0.25
    assert point["faults"][0]["open_txns_at_start"] == 61 and "commits_during" not in point["faults"][0]
    written = write_report(SWEEP_REPORT, sweep, tmp_path)
    assert [c.name for c in written.charts][-1] == "sweep_failover"
    md = written.markdown.read_text()
    assert "## Faults and coordinator failover" in md
    assert "| v4 | 64 | kill | broker-1 | 61 | 4.750 (never served again: 2) |" in md
    assert "| v5 | 8 | kill | broker-1 | 8 | 2.250 |" in md


def test_faults_of_one_kind_aimed_at_different_targets_are_told_apart(tmp_path: Path) -> None:
    """A kill of the coordinator's broker and a kill of broker 0 are two lines and two names, not one."""
    from analysis.compare import RunEntry, build_comparison
    from analysis.report.sweep_report import SWEEP_REPORT, fault_label
    from analysis.report.writer import write_report
    from tests.unit.report.fakes import fake_perf, fake_results

    def fault(selector: str | None, outage: float) -> dict[str, Any]:
        return {"kind": "kill", "selector": selector, "targets": "broker-1", "start_s": 10.0, "end_s": 14.0,
                "open_txns_at_start": 8, "coordinator_outage_s": outage, "coordinators_stalled": []}

    perf = fake_perf(tmp_path / "runs" / "v4", path="v4")
    perf["faults"] = [fault("coordinator", 3.5), fault("broker:0", 9.0)]
    compared = build_comparison([RunEntry(tmp_path / "runs" / "v4", perf, fake_results(True), {})])
    assert [f["selector"] for f in compared["paths"]["v4"]["faults"]] == ["coordinator", "broker:0"]
    row = _row("v4", 100, 8)
    row["faults"] = compared["paths"]["v4"]["faults"]
    sweep = build_sweep({8: _compare(row)})
    assert [f["selector"] for f in sweep["series"]["v4"][0]["faults"]] == ["coordinator", "broker:0"]
    assert [fault_label(f) for f in sweep["series"]["v4"][0]["faults"]] == ["kill coordinator", "kill broker:0"]
    assert fault_label({"kind": "kill"}) == "kill"                 # a sweep written before selectors
    md = write_report(SWEEP_REPORT, sweep, tmp_path).markdown.read_text()
    assert "| v4 | 8 | kill coordinator | broker-1 | 8 | 3.500 |" in md
    assert "| v4 | 8 | kill broker:0 | broker-1 | 8 | 9.000 |" in md


def test_no_faults_no_failover_section(tmp_path: Path) -> None:
    from analysis.report.sweep_report import SWEEP_REPORT
    from analysis.report.writer import write_report

    written = write_report(SWEEP_REPORT, build_sweep({4: _compare(_row("v4", 100, 8))}), tmp_path)
    assert "Faults and coordinator failover" not in written.markdown.read_text()
    assert not (tmp_path / "plots" / "sweep_failover.png").exists()
