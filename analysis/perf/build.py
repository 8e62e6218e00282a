"""perf.json: the history's aggregates, the metrics snapshots and the load generator, as one document.

Theory of operation. `HistoryStats` (Spark) holds counts by end time and
latency buckets by start time per window; this module turns them into rates
(count / window length), percentiles (analysis.perf.hdr), I/O per committed
transaction (analysis.perf.io over the same window's snapshots) and the load
generator's headroom, plus the 1-second timeline and the fault windows the
plots draw. It is pure Python over small inputs, so the rules are tested
without Spark. docs/report.md describes every field.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from analysis.perf.depth import critical_path
from analysis.perf.hdr import LatencyBuckets, summarize
from analysis.perf.history_stats import (
    E2E,
    KIND_LATENCY,
    KIND_SERVICE,
    LATENCY_OPS,
    LOAD_FS,
    HistoryStats,
)
from analysis.perf.io import gauge_max, io_for_window, io_keys
from analysis.perf.ledger import build_ledger
from analysis.perf.loadgen import load_generator
from analysis.perf.prom import Snapshot
from analysis.perf.windows import ALL, LOAD_PHASES, Window, predecessor
from harness.history.schema import OpF, OpType
from harness.metadata_stores import store_of_manifest
from harness.results import RunDir, config_of

__all__ = ["PERF_SCHEMA", "build_perf", "races_block", "window_block"]

PERF_SCHEMA = 1
OK, FAIL, INFO = OpType.OK.value, OpType.FAIL.value, OpType.INFO.value
COMMIT, ABORT, OPEN = OpF.TXN_COMMIT.value, OpF.TXN_ABORT.value, OpF.TXN_OPEN.value
SEND, ACK, RECEIVE = OpF.SEND.value, OpF.ACK.value, OpF.RECEIVE.value
RECOVERY_GAUGE = "pulsar_txn_coordinator_recovery_seconds"


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 3) if seconds > 0 else None


def _count(counts: Mapping[str, Mapping[str, int]], f: str, *types: str) -> int:
    by_type = counts.get(f, {})
    return sum(int(by_type.get(t, 0)) for t in types)


def window_block(stats: HistoryStats, window: Window, snapshots: Mapping[str, Mapping[str, Snapshot]], *,
                 headline: bool) -> dict[str, Any]:
    """Rates, outcome counts, latency and I/O of one window."""
    name = window.name
    counts = stats.counts.get(name, {})
    seconds = window.duration_s
    committed = _count(counts, COMMIT, OK)
    latency: dict[str, Any] = {}
    service: dict[str, Any] = {}
    for f in LATENCY_OPS:
        lat = stats.latency.get((KIND_LATENCY, name, f))
        entry = summarize(lat, with_hdr=headline, with_spectrum=headline) if lat else {"count": 0}
        if f != E2E:
            entry["from_intended_start"] = stats.corrected.get((name, f), 0)
        latency[f] = entry
        svc = stats.latency.get((KIND_SERVICE, name, f))
        if svc is not None:
            service[f] = summarize(svc, with_spectrum=False)
    values = stats.committed_msgs.get(name, 0)
    unreceived = stats.unreceived.get(name, 0)
    block: dict[str, Any] = {
        "window": window.to_dict(),
        "committed_txn_per_s": _rate(committed, seconds),
        "msgs_per_s": _rate(_count(counts, SEND, OK), seconds),
        "committed_msgs_per_s": _rate(values, seconds),
        "acks_per_s": _rate(_count(counts, ACK, OK), seconds),
        "receives_per_s": _rate(_count(counts, RECEIVE, OK), seconds),
        "transactions": {
            "committed": committed,
            "aborted": _count(counts, ABORT, OK),
            "failed": _count(counts, COMMIT, FAIL) + _count(counts, ABORT, FAIL),
            "unknown": _count(counts, COMMIT, INFO) + _count(counts, ABORT, INFO),
            "open_failed": _count(counts, OPEN, FAIL, INFO),
        },
        "operations": {f: {t: _count(counts, f, t) for t in (OK, FAIL, INFO)} for f in (*LOAD_FS, RECEIVE)},
        "latency_ms": latency,
        "service_time_ms": service,
        "end_to_end": {"committed_values": values, "received": values - unreceived, "unreceived": unreceived,
                       "received_before_commit_completed": stats.early.get(name, 0)},
    }
    if name == ALL:
        io = {"window": ALL, "absent": io_keys(), "io_per_txn": dict.fromkeys(io_keys()),
              "metrics": {}, "reason": "no steady phase, so no metrics snapshots bound the window"}
    else:
        io = io_for_window(snapshots, name, predecessor(stats.windows, name), committed)
    block["io_per_txn"] = io["io_per_txn"]
    block["io"] = io
    return block


def _timeline(stats: HistoryStats) -> dict[str, Any]:
    if not stats.timeline:
        return {"bucket_s": 1, "t": [], "series": {}, "latency_ms": stats.latency_timeline}
    secs = sorted(stats.timeline)
    first, last = secs[0], secs[-1]
    axis = list(range(first, last + 1))

    def series(f: str, *types: str) -> list[int]:
        return [_count(stats.timeline.get(t, {}), f, *types) for t in axis]

    failed = [a + b for a, b in zip(series(COMMIT, FAIL), series(ABORT, FAIL), strict=True)]
    unknown = [a + b for a, b in zip(series(COMMIT, INFO), series(ABORT, INFO), strict=True)]
    return {
        "bucket_s": 1,
        "t": axis,
        "series": {
            "committed": series(COMMIT, OK), "aborted": series(ABORT, OK), "failed": failed, "unknown": unknown,
            "opened": series(OPEN, OK), "sends": series(SEND, OK), "send_errors": series(SEND, FAIL, INFO),
            "acks": series(ACK, OK), "receives": series(RECEIVE, OK),
        },
        "latency_ms": stats.latency_timeline,
    }


def _workload(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The run's load and workload for the report, from its recorded config (None where it records none)."""
    config = config_of(manifest)
    if config is None:
        return {**dict.fromkeys(("kind", "users", "rate_per_user", "workers", "remote_workers", "messages_per_txn",
                                 "topics_per_txn", "acks_per_txn", "message_size", "abort_ratio", "topics",
                                 "batching", "brokers")), "remote_workers": 0, "phases_s": {}}
    load, workload = config.load, config.workload
    return {
        "kind": workload.kind, "users": load.users, "rate_per_user": load.rate_per_user,
        "workers": load.workers, "remote_workers": load.remote_workers,
        "messages_per_txn": workload.messages_per_txn,
        "topics_per_txn": workload.topics_per_txn, "acks_per_txn": workload.acks_per_txn,
        "message_size": workload.message_size, "abort_ratio": workload.abort_ratio,
        "topics": workload.topics, "batching": workload.batching,
        "brokers": config.cluster.brokers,
        "phases_s": {k: getattr(config.phases, k) for k in ("warmup_s", "steady_s", "faults_s", "recovery_s")},
    }


RACE_STATUS_KEYS = ("ack_conflicts", "ack_steals", "end_txn_resends", "race_losses")
"""What `races` takes from the load's status file: what only the client knows."""


def races_block(stats: HistoryStats, status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's racing decisions (issue #43): from the history where it holds them (messages acked in
    two transactions, commits at the timeout, a second client's aborts), from the load's status file
    for what only the client knows (ack conflicts, steals, END_TXN resends, lost races; null when the
    status file is absent). `ack_races` = ack conflicts + messages acked in two transactions."""
    history = dict(stats.races)
    known = status is not None and not status.get("absent")
    from_status = {k: (status.get(k) if known and status is not None else None) for k in RACE_STATUS_KEYS}
    twice = history.get("acked_in_two_txns")
    conflicts = from_status["ack_conflicts"]
    ack_races = (int(conflicts) + int(twice)) if conflicts is not None and twice is not None else None
    return {"ack_races": ack_races, **from_status, **history,
            "source": {"history": sorted(history), "status": list(RACE_STATUS_KEYS)}}


def build_perf(run: RunDir, stats: HistoryStats, snapshots: Mapping[str, Mapping[str, Snapshot]],
               manifest: Mapping[str, Any], history_facts: Mapping[str, Any], *,
               started: float | None = None, spark_master: str | None = None) -> dict[str, Any]:
    """The perf.json document of one run."""
    measured = stats.measured
    txn_path = manifest.get("path") or (stats.paths[0] if len(stats.paths) == 1 else None)
    head: dict[str, Any] = {
        "schema": PERF_SCHEMA,
        "run_id": manifest.get("run_id") or run.run_id,
        "path": txn_path,
        "scenario": manifest.get("scenario"),
        "target": manifest.get("target"),
        "metadata_store": store_of_manifest(manifest),
        "status": manifest.get("status"),
        "matrix": manifest.get("matrix"),
        "workload": _workload(manifest),
    }
    notes = list(stats.notes)
    if measured is None:
        notes.append("the history has no load operations, so there is nothing to measure")
        block: dict[str, Any] = {"window": None, "committed_txn_per_s": None, "msgs_per_s": None,
                                 "committed_msgs_per_s": None, "acks_per_s": None, "receives_per_s": None,
                                 "transactions": {}, "operations": {}, "latency_ms": {}, "service_time_ms": {},
                                 "end_to_end": {}, "io_per_txn": dict.fromkeys(io_keys()),
                                 "io": {"absent": io_keys(), "reason": "no measured window", "metrics": {}}}
    else:
        block = window_block(stats, measured, snapshots, headline=True)
    config = config_of(manifest)
    settings = config.cluster.settings if config else {}
    io_block = block.get("io") or {}
    block["critical_path"] = critical_path(snapshots, io_block.get("window"), io_block.get("baseline"))
    block["cost_ledger"] = build_ledger(txn_path, stats.shapes.get(measured.name) if measured else None,
                                        block["io"], snapshots, settings,
                                        (block.get("window") or {}).get("duration_s"),
                                        store_kind=(head["metadata_store"] or {}).get("kind"))
    processes = (config.load.workers + config.load.remote_workers if config else 0) or 1
    loadgen = load_generator(run.locust_dir, block["window"], block["committed_txn_per_s"], block["msgs_per_s"],
                             processes)
    phases = {w.name: window_block(stats, w, snapshots, headline=False)
              for w in stats.windows if w.name in LOAD_PHASES}
    for phase_block in phases.values():
        # Whole seconds inside the phase only: a partial edge second is not an outage.
        secs = range(math.ceil(phase_block["window"]["start_s"]), math.floor(phase_block["window"]["end_s"]))
        phase_block["seconds_without_commit"] = sum(
            1 for t in secs if _count(stats.timeline.get(t, {}), COMMIT, OK) == 0)
        phase_block["seconds"] = len(secs)
        del phase_block["operations"]
    faults = []
    for i, fw in enumerate(stats.faults):
        entry = fw.to_dict()
        if i < len(stats.fault_stats):
            entry.update(stats.fault_stats[i])
        faults.append(entry)
    recovery = {phase: gauge_max(snapshots, phase, RECOVERY_GAUGE) for phase in snapshots}
    recovery = {k: v for k, v in recovery.items() if v is not None}
    snapshot_files = sorted(str(s.path.relative_to(run.path)) for by_svc in snapshots.values()
                            for s in by_svc.values())
    locust_files = sorted(f"locust/{p.name}" for p in run.locust_dir.glob("*")) if run.locust_dir.is_dir() else []
    perf: dict[str, Any] = {
        **head,
        **block,
        "load_generator": loadgen,
        "races": races_block(stats, loadgen.get("status")),
        "phases": phases,
        "phase_windows": [w.to_dict() for w in stats.windows],
        "timeline": _timeline(stats),
        "faults": faults,
        "coordinator_recovery_s": recovery or {"absent": True,
                                               "reason": f"no snapshot exposes {RECOVERY_GAUGE}"},
        "inputs": {
            "history": dict(history_facts),
            "metrics_snapshots": snapshot_files,
            "locust": locust_files,
            "manifest": "manifest.json" if run.manifest_path.is_file() else None,
        },
        "notes": notes,
        "generated": {
            "at": datetime.now(UTC).isoformat(),
            "elapsed_s": round(time.monotonic() - started, 3) if started is not None else None,
            "spark_master": spark_master,
        },
    }
    return perf


def latency_bucket_files(stats: HistoryStats) -> dict[str, LatencyBuckets]:
    """The measured window's latency buckets per operation (for `.hgrm` files)."""
    if stats.measured is None:
        return {}
    return {f: lat for (kind, win, f), lat in stats.latency.items()
            if kind == KIND_LATENCY and win == stats.measured.name}
