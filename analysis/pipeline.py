"""The analysis a run and a matrix get when they finish: verdict, performance, reports, comparison.

Theory of operation. `analyze_run` runs three stages on one run folder: the
checker (`analysis.check.check_run` -> analysis/results.json), the performance
analysis (`analysis.perf.write_perf` -> analysis/perf.json) and the report
(report.html, report.md, plots/). The orchestrator calls it after the cluster
is down, and a failure in one stage must not cost the others or the run: each
stage's error is recorded in the summary (and its traceback in
analysis/analysis-errors.txt) and the verdict becomes "unknown" when the
checker could not give one. The checker runs on DuckDB in this process (Spark only with a
cluster master, or for a history Arrow cannot vouch for: analysis.check.checker_engine); the
performance analysis shares the process's one SparkSession (analysis.spark.get_spark), so a
matrix starts Spark once.

`analyze_matrix` compares the runs of a matrix folder (`runs/<path>/`): it
reads each run's perf.json and results.json (computing what is missing) and
writes compare.json, compare.md and compare.html into the matrix folder.
`compare_runs` does the same for any list of run folders into a chosen folder.
`analyze_sweep` does it for a concurrency sweep (`runs/<path>-u<users>/`): one
comparison per user count under `levels/u<users>/`, then sweep.json, sweep.md
and sweep.html, which regroup those comparisons as lines against users.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import TxnbenchError
from harness.results import MatrixDir, RunDir, config_of, read_json

__all__ = ["analyze_matrix", "analyze_run", "analyze_sweep", "compare_runs", "rebuild_run", "run_summary",
           "run_users"]


def _say(message: str) -> None:
    print(f"txnbench: {message}", file=sys.stderr, flush=True)


def _read(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _record_error(run: RunDir, stage: str, err: BaseException) -> str:
    message = str(err) if isinstance(err, TxnbenchError) else f"{type(err).__name__}: {err}"
    try:
        run.analysis_dir.mkdir(parents=True, exist_ok=True)
        with (run.analysis_dir / "analysis-errors.txt").open("a", encoding="utf-8") as out:
            out.write(f"--- {datetime.now(UTC).isoformat()} {stage}\n")
            out.write("".join(traceback.format_exception(err)))
    except OSError:
        pass
    return f"{stage}: {message}"


def run_summary(run: RunDir, results: dict[str, Any] | None, perf: dict[str, Any] | None,
                errors: Sequence[str], report: Path | None) -> dict[str, Any]:
    """The dict analyze_run returns: verdict, anomalies and headline numbers."""
    latency = (perf or {}).get("latency_ms") or {}
    return {
        "run_id": run.run_id,
        "valid": results.get("valid") if results else "unknown",
        "anomalies": (results or {}).get("anomalies") or {},
        "unknown_reasons": (results or {}).get("unknown_reasons") or [],
        "lost_workers": (results or {}).get("lost_workers") or [],
        "committed_txn_per_s": (perf or {}).get("committed_txn_per_s"),
        "msgs_per_s": (perf or {}).get("msgs_per_s"),
        "latency_ms": {op: {k: entry.get(k) for k in ("p50", "p99", "max")}
                       for op, entry in latency.items() if entry.get("count")},
        "io_per_txn": (perf or {}).get("io_per_txn") or {},
        "window": ((perf or {}).get("window") or {}).get("name"),
        "results_json": str(run.results_json) if results else None,
        "perf_json": str(run.perf_json) if perf else None,
        "report": str(report) if report else None,
        "errors": list(errors),
    }


def _report(run: RunDir, perf: dict[str, Any], results: dict[str, Any] | None) -> Path:
    from analysis.report.run_report import RUN_REPORT, RunInputs
    from analysis.report.writer import write_report

    manifest = _read(run.manifest_path) or {}
    return write_report(RUN_REPORT, RunInputs(run, perf, results, manifest), run.path).html


def analyze_run(run_dir: Path, *, master: str | None = None) -> dict[str, Any]:
    """Check, measure and report one run; never raises for a stage's failure (see the module doc)."""
    run = RunDir(Path(run_dir))
    errors: list[str] = []
    results: dict[str, Any] | None = None
    perf: dict[str, Any] | None = None
    report: Path | None = None
    try:
        from analysis.check import check_run

        results = check_run(run.path, master)
    except Exception as err:
        errors.append(_record_error(run, "check", err))
    try:
        from analysis.perf import write_perf

        perf = write_perf(run.path, master=master)
    except Exception as err:
        errors.append(_record_error(run, "performance", err))
    if perf is not None:
        try:
            report = _report(run, perf, results)
        except Exception as err:
            errors.append(_record_error(run, "report", err))
    for error in errors:
        _say(f"{run.run_id}: analysis {error}")
    return run_summary(run, results, perf, errors, report)


def rebuild_run(run_dir: Path, *, master: str | None = None, check_missing: bool = True) -> dict[str, Any]:
    """`txnbench report RUN_DIR`: recompute perf.json and the report; check only when no verdict exists.

    Raises the stage's error (the command line prints it as one line).
    """
    from analysis.perf import write_perf

    run = RunDir(Path(run_dir))
    results = _read(run.results_json)
    if results is None and check_missing:
        from analysis.check import check_run

        _say(f"{run.run_id}: no analysis/results.json; running the checker first")
        results = check_run(run.path, master)
    perf = write_perf(run.path, master=master)
    report = _report(run, perf, results)
    return run_summary(run, results, perf, [], report)


def _entries(run_dirs: Sequence[RunDir], *, master: str | None, compute_missing: bool
             ) -> tuple[list[Any], dict[str, str]]:
    from analysis.compare import RunEntry
    from analysis.perf import read_perf, write_perf

    entries: list[RunEntry] = []
    errors: dict[str, str] = {}
    for run in run_dirs:
        perf = read_perf(run.path)
        results = _read(run.results_json)
        if perf is None and compute_missing:
            try:
                perf = write_perf(run.path, master=master)
                _report(run, perf, results)
            except Exception as err:
                errors[run.path.name] = _record_error(run, "performance", err)
                _say(f"{run.run_id}: left out of the comparison: {errors[run.path.name]}")
                continue
        if perf is None:
            errors[run.path.name] = "no analysis/perf.json"
            continue
        entries.append(RunEntry(run.path, perf, results, _read(run.manifest_path) or {}))
    return entries, errors


def compare_runs(run_dirs: Sequence[Path], out_dir: Path, *, master: str | None = None, kind: str | None = None,
                 matrix_id: str | None = None, compute_missing: bool = True) -> dict[str, Any]:
    """Compare runs into `out_dir` (compare.json/.md/.html, plots/compare_*.png); returns compare.json."""
    from analysis.compare import build_comparison
    from analysis.report.compare_report import COMPARE_REPORT
    from analysis.report.writer import write_report

    entries, errors = _entries([RunDir(Path(p)) for p in run_dirs], master=master, compute_missing=compute_missing)
    compare = build_comparison(entries, out_dir=out_dir, kind=kind, matrix_id=matrix_id, errors=errors)
    written = write_report(COMPARE_REPORT, compare, out_dir)
    compare["report"] = str(written.html)
    return compare


def analyze_matrix(matrix_dir: Path, *, master: str | None = None, out_dir: Path | None = None) -> dict[str, Any]:
    """The comparison of a matrix folder's runs, written into the matrix folder (or `out_dir`)."""
    matrix = MatrixDir(Path(matrix_dir))
    info = _read(matrix.path / "matrix.json") or {}
    runs = [r.path for r in matrix.run_dirs()]
    return compare_runs(runs, out_dir or matrix.path, master=master, kind=info.get("kind"),
                        matrix_id=info.get("matrix_id") or matrix.matrix_id)


def run_users(run: RunDir) -> int | None:
    """The run's number of Locust users, from its manifest's resolved config."""
    config = config_of(_read(run.manifest_path))
    return config.load.users if config else None


def analyze_sweep(matrix_dir: Path, *, master: str | None = None, compute_missing: bool = True) -> dict[str, Any]:
    """A concurrency sweep's comparisons per user count and its sweep report; returns sweep.json."""
    from analysis.report.sweep_report import SWEEP_REPORT
    from analysis.report.writer import write_report
    from analysis.sweep import build_sweep

    matrix = MatrixDir(Path(matrix_dir))
    info = _read(matrix.path / "matrix.json") or {}
    by_users: dict[int, list[Path]] = {}
    errors: dict[str, str] = {}
    for run in matrix.run_dirs():
        users = run_users(run)
        if users is None:
            errors[run.path.name] = "manifest.json names no load.users"
            continue
        by_users.setdefault(users, []).append(run.path)
    levels: dict[int, dict[str, Any]] = {}
    level_dirs: dict[int, str] = {}
    for users in sorted(by_users):
        where = f"levels/u{users}"
        compare = compare_runs(by_users[users], matrix.path / where, master=master, kind="sweep",
                               matrix_id=f"{info.get('matrix_id') or matrix.matrix_id} at {users} users",
                               compute_missing=compute_missing)
        errors.update({f"{where}/{k}": v for k, v in (compare.get("errors") or {}).items()})
        levels[users] = compare
        level_dirs[users] = where
    sweep = build_sweep(levels, scenario=info.get("scenario"), matrix_id=info.get("matrix_id") or matrix.matrix_id,
                        level_dirs=level_dirs, errors=errors)
    written = write_report(SWEEP_REPORT, sweep, matrix.path)
    sweep["report"] = str(written.html)
    return sweep
