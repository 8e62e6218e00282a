"""Performance of one run: throughput, latency and I/O per committed transaction -> perf.json.

`compute_perf(run_dir)` loads the history with the checker's loader
(analysis.history_io: explicit schema, torn tails, Parquet cache), aggregates it in
Spark (analysis.perf.history_stats), reads the metrics snapshots
(analysis.perf.prom, analysis.perf.io) and the load generator's status
(analysis.perf.loadgen), and assembles the document (analysis.perf.build).
`write_perf(run_dir)` also writes it to `analysis/perf.json`, with the measured
window's latency distributions as HdrHistogram `.hgrm` files beside it
(`analysis/hgrm/<operation>.hgrm`). docs/report.md explains every number.

Public API:

    compute_perf(run_dir, *, master=None, spark=None) -> dict
    write_perf(run_dir, *, master=None, spark=None) -> dict
    read_perf(run_dir) -> dict | None
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.results import RunDir, read_json, write_json_atomic, write_text_atomic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["HGRM_DIR", "compute_perf", "read_perf", "write_perf"]

HGRM_DIR = "hgrm"


def _manifest(run: RunDir) -> dict[str, Any]:
    if not run.manifest_path.is_file():
        return {"run_id": run.run_id}
    try:
        data = read_json(run.manifest_path)
    except (OSError, ValueError):
        return {"run_id": run.run_id}
    return data if isinstance(data, dict) else {"run_id": run.run_id}


def _compute(run: RunDir, master: str | None, spark: SparkSession | None) -> tuple[dict[str, Any], Any]:
    from analysis.history_io import load_run
    from analysis.perf.build import build_perf, latency_bucket_files
    from analysis.perf.history_stats import compute_history_stats
    from analysis.perf.prom import read_snapshots
    from analysis.spark import get_spark, size_shuffle_partitions
    from harness.history.reader import history_bytes

    started = time.monotonic()
    session = spark or get_spark(master)
    size_shuffle_partitions(session, history_bytes(run.history_dir))
    loaded = load_run(session, run.path)
    try:
        stats = compute_history_stats(loaded)
    finally:
        loaded.release()
    snapshots = read_snapshots(run.metrics_dir)
    perf = build_perf(run, stats, snapshots, _manifest(run), loaded.facts.to_dict(), started=started,
                      spark_master=session.sparkContext.master)
    return perf, latency_bucket_files(stats)


def compute_perf(run_dir: Path, *, master: str | None = None, spark: SparkSession | None = None) -> dict[str, Any]:
    """The perf.json document of `run_dir` (nothing written).

    Raises:
        NoHistoryError: no history to measure.
        HistoryFormatError: a malformed history line (not a torn tail).
        EnvironmentProblem: Spark could not start.
    """
    perf, _ = _compute(RunDir(Path(run_dir)), master, spark)
    return perf


def write_perf(run_dir: Path, *, master: str | None = None, spark: SparkSession | None = None) -> dict[str, Any]:
    """compute_perf, then write `analysis/perf.json` and `analysis/hgrm/*.hgrm`; returns the document."""
    from analysis.perf.hdr import hgrm_text

    run = RunDir(Path(run_dir))
    perf, buckets = _compute(run, master, spark)
    hgrm_dir = run.analysis_dir / HGRM_DIR
    written = []
    for f, lat in sorted(buckets.items()):
        path = hgrm_dir / f"{f}.hgrm"
        write_text_atomic(path, hgrm_text(lat))
        written.append(str(path.relative_to(run.path)))
    perf["hgrm_files"] = written
    write_json_atomic(run.perf_json, perf)
    return perf


def read_perf(run_dir: Path) -> dict[str, Any] | None:
    """A run's perf.json, or None when it has none (or it is unreadable)."""
    path = RunDir(Path(run_dir)).perf_json
    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
