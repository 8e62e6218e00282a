"""sweep.json: throughput, latency and I/O of each path against the load's concurrency.

Theory of operation. A concurrency sweep (experiment 1) runs the same scenario
on every path at several user counts. Each level is an ordinary comparison
(`levels/u<users>/compare.json`, built by `analysis.pipeline.compare_runs`),
so every number of the sweep is copied from one level's compare.json, which in
turn copies it from one run's perf.json: nothing is recomputed here. This
module only regroups those rows as series, one per path, ordered by users,
and names the point where each path stopped scaling (the first level whose
throughput gained less than `SATURATION_GAIN` over the level before).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from analysis.compare import PATH_ORDER

__all__ = ["SATURATION_GAIN", "SWEEP_IO_KEYS", "SWEEP_LATENCY_OPS", "SWEEP_SCHEMA", "build_sweep", "parse_levels"]

SWEEP_SCHEMA = 1
SATURATION_GAIN = 1.10
"""A level that adds users but less than 10 % throughput is where the path saturated."""
SWEEP_LATENCY_OPS = ("txn-commit", "send", "ack", "end-to-end")
SWEEP_IO_KEYS = ("ledger_entries", "coordinator_log_entries", "pending_ack_entries", "metadata_writes",
                 "metadata_cas", "fsyncs", "bytes_written")
_PERCENTILES = ("p50", "p99", "p99.9", "max")
_FAULT_KEYS = ("kind", "selector", "targets", "start_s", "end_s", "open_txns_at_start",
               "coordinator_outage_s", "coordinators_stalled", "longest_commit_gap_s", "first_commit_after_heal_s")


def parse_levels(text: str) -> tuple[int, ...]:
    """`4,16,64` -> (4, 16, 64): distinct positive user counts in increasing order."""
    levels: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a whole number of users (write e.g. --users 4,16,64)") from None
        if value < 1 or value > 10000:
            raise ValueError(f"{value} users is out of range 1..10000")
        levels.add(value)
    if not levels:
        raise ValueError("no user counts given (write e.g. --users 4,16,64)")
    return tuple(sorted(levels))


def _point(users: int, row: Mapping[str, Any], level_dir: str) -> dict[str, Any]:
    latency = row.get("latency_ms") or {}
    io = row.get("io_per_txn") or {}
    load = row.get("load_generator") or {}
    verdict = row.get("verdict") or {}
    return {
        "users": users,
        "run_id": row.get("run_id"),
        "run_dir": _from_sweep(level_dir, row.get("run_dir")),
        "compare": level_dir,
        "status": row.get("status"),
        "valid": verdict.get("valid"),
        "only_expected": bool(verdict.get("only_expected")),
        "anomalies": dict(verdict.get("anomalies") or {}),
        "committed_txn_per_s": row.get("committed_txn_per_s"),
        "msgs_per_s": row.get("msgs_per_s"),
        "transactions": dict(row.get("transactions") or {}),
        "latency_ms": {op: {k: (latency.get(op) or {}).get(k) for k in ("count", *_PERCENTILES)}
                       for op in SWEEP_LATENCY_OPS if op in latency},
        "io_per_txn": {k: io.get(k) for k in SWEEP_IO_KEYS},
        "load_generator": {k: load.get(k) for k in ("utilization", "saturated", "cpu_per_process_percent",
                                                    "capacity_txn_per_s")},
        "faults": [{k: f.get(k) for k in _FAULT_KEYS} for f in row.get("faults") or []],
        "coordinator_recovery_s": _max_recovery(row.get("coordinator_recovery_s")),
    }


def _max_recovery(by_phase: Any) -> float | None:
    """The longest coordinator log replay any phase's metrics showed (the gauge keeps the last one)."""
    if not isinstance(by_phase, Mapping):
        return None
    values = [float(v) for v in by_phase.values() if isinstance(v, int | float) and not isinstance(v, bool)]
    return max(values) if values else None


def _from_sweep(level_dir: str, run_dir: Any) -> str | None:
    """A level's run folder (relative to the level's folder) as seen from the sweep's folder."""
    if not isinstance(run_dir, str):
        return None
    return run_dir if os.path.isabs(run_dir) else os.path.normpath(os.path.join(level_dir, run_dir))


def _saturation(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Where adding users stopped adding throughput, and the best level seen."""
    measured = [p for p in points if p.get("committed_txn_per_s") is not None]
    if not measured:
        return {"peak_users": None, "peak_txn_per_s": None, "saturated_at_users": None}
    peak = max(measured, key=lambda p: float(p["committed_txn_per_s"]))
    saturated_at = None
    for before, after in itertools.pairwise(measured):
        base = float(before["committed_txn_per_s"])
        if base > 0 and float(after["committed_txn_per_s"]) < base * SATURATION_GAIN:
            saturated_at = after["users"]
            break
    return {"peak_users": peak["users"], "peak_txn_per_s": peak["committed_txn_per_s"],
            "saturated_at_users": saturated_at}


def build_sweep(levels: Mapping[int, Mapping[str, Any]], *, scenario: str | None = None,
                matrix_id: str | None = None, level_dirs: Mapping[int, str] | None = None,
                errors: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Regroup per-level comparisons (users -> compare.json) into per-path series."""
    series: dict[str, list[dict[str, Any]]] = {}
    scenarios: set[str] = set()
    for users in sorted(levels):
        compare = levels[users]
        scenarios.update(compare.get("scenarios") or [])
        for label in compare.get("order") or []:
            row = compare["paths"][label]
            txn_path = str(row.get("path") or label)
            where = (level_dirs or {}).get(users, f"levels/u{users}")
            series.setdefault(txn_path, []).append(_point(users, row, where))
    order = sorted(series, key=lambda p: (PATH_ORDER.index(p) if p in PATH_ORDER else len(PATH_ORDER), p))
    all_valid = all(pt["valid"] is True or pt["only_expected"] for pts in series.values() for pt in pts)
    return {
        "schema": SWEEP_SCHEMA,
        "kind": "sweep",
        "matrix": matrix_id,
        "scenario": scenario or (sorted(scenarios)[0] if len(scenarios) == 1 else None),
        "generated": datetime.now(UTC).isoformat(),
        "levels": sorted(levels),
        "order": order,
        "series": {txn_path: series[txn_path] for txn_path in order},
        "saturation": {txn_path: _saturation(series[txn_path]) for txn_path in order},
        "all_valid": bool(series) and all_valid,
        "errors": dict(errors or {}),
    }
