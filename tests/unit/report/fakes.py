"""perf.json documents without Spark: hand-made HistoryStats through the real builder.

`fake_perf(run_dir, path=..., scale=...)` writes a small run folder (manifest,
metrics snapshots, locust status) and returns `build_perf` over stats made by
hand, so rendering and comparison tests run in milliseconds and know every
number they should see.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis.perf.build import build_perf
from analysis.perf.faults import FaultWindow
from analysis.perf.hdr import LatencyBuckets, quantize_us
from analysis.perf.history_stats import E2E, KIND_LATENCY, HistoryStats
from analysis.perf.prom import read_snapshots
from analysis.perf.windows import Window
from harness.results import RunDir, write_json_atomic

S = 1_000_000_000
PHASES = (("setup", 0), ("warmup", 1 * S), ("steady", 3 * S), ("faults", 13 * S), ("recovery", 18 * S),
          ("drain", 20 * S))


def _buckets(values_ms: list[float]) -> LatencyBuckets:
    ns = [int(v * 1e6) for v in values_ms]
    counts: dict[int, int] = {}
    for v in ns:
        q = quantize_us(v // 1000)
        counts[q] = counts.get(q, 0) + 1
    return LatencyBuckets.of(counts.items(), min(ns), max(ns), sum(ns))


def _prom(commits: int, extra: dict[str, float] | None = None) -> str:
    lines = [
        f'txnbench_ledger_entries_total{{kind="data"}} {5 * commits}',
        f'txnbench_ledger_entries_total{{kind="txn-log"}} {3 * commits}',
        f"bookie_WRITE_BYTES {1000 * commits}",
        f"bookie_journal_JOURNAL_SYNC_count {2 * commits}",
    ]
    for name, value in (extra or {}).items():
        lines.append(f"{name} {value}")
    return "\n".join(lines) + "\n"


def fake_perf(run_dir: Path, *, path: str = "v4", scale: float = 1.0, faults: bool = True,
              capacity: float | None = 5000.0, metadata: bool = True,
              races: dict[str, Any] | None = None) -> dict[str, Any]:
    """A complete perf.json for `run_dir` (the folder is created with its inputs); `races` has the
    history's racing decisions (HistoryStats.races) and the status file's race counters, flat."""
    run = RunDir(run_dir)
    run.make_folders()
    write_json_atomic(run.manifest_path, {"schema": 1, "run_id": run_dir.name, "scenario": "bench", "path": path,
                                          "target": "embedded", "seed": 7, "status": "complete",
                                          "config": {"load": {"users": 8, "workers": 0},
                                                     "workload": {"kind": "mixed", "messages_per_txn": 4}}})
    commits_per_s = int(100 * scale)
    windows = []
    for i, (name, start) in enumerate(PHASES):
        end = PHASES[i + 1][1] if i + 1 < len(PHASES) else 21 * S
        windows.append(Window(name, start, end, open_end=i + 1 == len(PHASES)))
        cumulative = commits_per_s * end // S
        (run.metrics_dir / f"{name}-ledger.prom").write_text(_prom(cumulative), encoding="utf-8")
        if metadata:
            (run.metrics_dir / f"{name}-metadata.prom").write_text(
                f"txnbench_metadata_fsyncs_total {cumulative}\ntxnbench_metadata_wal_bytes_total {100 * cumulative}\n",
                encoding="utf-8")
    steady = 10
    counts = {
        "txn-commit": {"ok": commits_per_s * steady, "fail": 2, "info": 1},
        "txn-abort": {"ok": commits_per_s, "fail": 0, "info": 0},
        "txn-open": {"ok": commits_per_s * steady + commits_per_s + 3, "fail": 0, "info": 0},
        "send": {"ok": 4 * commits_per_s * steady, "fail": 1, "info": 0},
        "ack": {"ok": commits_per_s * steady, "fail": 0, "info": 0},
        "receive": {"ok": 2 * commits_per_s * steady, "fail": 0, "info": 0},
    }
    timeline = {t: {"txn-commit": {"ok": commits_per_s if not (14 <= t < 16) else 0,
                                   "fail": 3 if 14 <= t < 16 else 0},
                    "send": {"ok": 4 * commits_per_s}} for t in range(1, 20)}
    commit_ms = [2.0 / scale + (i % 50) * 0.1 / scale for i in range(200)]
    latency = {
        (KIND_LATENCY, "steady", "txn-commit"): _buckets(commit_ms),
        (KIND_LATENCY, "steady", "send"): _buckets([v / 2 for v in commit_ms]),
        (KIND_LATENCY, "steady", E2E): _buckets([v * 1.5 for v in commit_ms]),
        (KIND_LATENCY, "faults", "txn-commit"): _buckets([v * 10 for v in commit_ms]),
    }
    fault_windows = (FaultWindow("partition", "client-broker-0", 14 * S, 14 * S + 1000, 16 * S, True, "f1"),) \
        if faults else ()
    stats = HistoryStats(
        windows=tuple(windows), measured=windows[2], history_end_ns=21 * S, load_span=(1 * S, 20 * S),
        counts={"steady": counts, "faults": {"txn-commit": {"ok": 3 * commits_per_s, "fail": 6}}},
        timeline=timeline, latency=latency, corrected={("steady", "txn-commit"): 5},
        unreceived={"steady": 10}, early={"steady": 1}, committed_msgs={"steady": 4 * commits_per_s * steady},
        latency_timeline={"txn-commit": [{"t": t, "p50": 2.0, "p99": 4.0, "max": 5.0, "count": 100}
                                         for t in range(1, 20)]},
        faults=fault_windows,
        fault_stats=({"commits_during": 0, "commits_per_s_during": 0.0, "first_commit_after_heal_s": 0.2,
                      "last_commit_before_start_s": 0.01, "longest_commit_gap_s": 2.2},) if faults else (),
        drain_start_ns=20 * S, paths=(path,),
        races={k: v for k, v in (races or {}).items()
               if k in ("acked_in_two_txns", "timeout_commits", "foreign_aborts")})
    status: dict[str, Any] = {"committed_txn_per_s": 99.0, "cpu_samples": [[0, 0.0], [21 * S, 4.2]], "processes": 1}
    status.update({k: v for k, v in (races or {}).items()
                   if k in ("ack_conflicts", "ack_steals", "end_txn_resends", "race_losses")})
    if capacity is not None:
        status["capacity"] = {"committed_txn_per_s": capacity, "msgs_per_s": 4 * capacity, "against": "null-broker"}
    (run.locust_dir / "status.json").write_text(json.dumps(status), encoding="utf-8")
    facts = {"directory": str(run.history_dir), "files": ["w0.jsonl"], "bytes": 1000, "lines": 10,
             "torn_tails": [], "first_ns": 0, "last_ns": 21 * S, "source": "jsonl"}
    manifest = json.loads(run.manifest_path.read_text())
    return build_perf(run, stats, read_snapshots(run.metrics_dir), manifest, facts)


def fake_results(valid: Any = True) -> dict[str, Any]:
    """A results.json as the checker writes it (docs/checks.md), valid or with anomalies."""
    anomalies = {} if valid is not False else {
        "lost-write": {"count": 2, "examples": [{"value": "v1-3-t1", "send": "w0#17", "txn": "1:3"},
                                                {"value": "v1-9-t2", "send": "w0#40", "txn": "1:9"}]},
        "aborted-read": {"count": 1, "examples": ["<script>alert(1)</script> w0#3"]},
    }
    return {"schema": 1, "run_id": "x", "valid": valid, "anomalies": anomalies,
            "unknown_reasons": ["no drain-complete phase event"] if valid == "unknown" else [],
            "checks": {"lost-write": {"status": "ran", "reason": None, "count": 2 if valid is False else 0}},
            "transactions": {"committed": 1000, "aborted": 100, "unknown-committed": 0, "unknown-aborted": 0,
                             "unknown": 0}}
