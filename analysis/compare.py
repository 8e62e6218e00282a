"""compare.json: several runs' perf.json and results.json side by side, with ratios against v4.

Theory of operation. A comparison never recomputes a number: it copies each
run's headline numbers out of its perf.json (throughput, latency percentiles,
I/O per committed transaction, load-generator headroom, per-phase figures)
and its verdict out of results.json, so every cell traces back to one run's
files, and `runs[label].perf_json` names the file. Ratios divide a path's
value by the baseline's (v4 when present, else the first run); a ratio exists
only when both numbers do and the baseline's is not zero. Runs are labelled by
their path; when runs share a path, by the path and the one or two config values
that set them apart (`v5 txnbenchDispatchHorizonPollMillis=20`), else by run id.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analysis.perf.io import io_keys
from analysis.verdicts import judge_run
from harness.metadata_stores import store_of_manifest
from harness.results import planted_bugs_of

__all__ = ["COMPARE_SCHEMA", "LATENCY_KEYS", "PATH_ORDER", "RunEntry", "build_comparison", "ratio"]

COMPARE_SCHEMA = 1
PATH_ORDER = ("v4", "v4-batched", "v5")
BASELINE_PATH = "v4"
LATENCY_KEYS = ("count", "p50", "p95", "p99", "p99.9", "max", "mean")
THROUGHPUT_KEYS = ("committed_txn_per_s", "msgs_per_s", "committed_msgs_per_s", "acks_per_s")


@dataclass(frozen=True)
class RunEntry:
    """One run's inputs to the comparison."""

    run_dir: Path
    perf: Mapping[str, Any]
    results: Mapping[str, Any] | None
    manifest: Mapping[str, Any]


def ratio(value: Any, base: Any) -> float | None:
    if value is None or base is None or isinstance(value, bool) or isinstance(base, bool):
        return None
    try:
        v, b = float(value), float(base)
    except (TypeError, ValueError):
        return None
    return round(v / b, 4) if b != 0 else None


def _relative(path: Path, root: Path | None) -> str:
    if root is None:
        return str(path)
    try:
        return os.path.relpath(path, root)
    except ValueError:
        return str(path)


_MAX_LABEL_KEYS = 2
_NOT_A_DIFFERENCE = ("name", "description", "seed", "paths")   # `paths` is the matrix's, not one run's


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def _difference_labels(txn_path: str, group: Sequence[RunEntry]) -> list[str] | None:
    """`v5 txnbenchDispatchHorizonPollMillis=20`: runs of one path named by the config that sets them apart.

    A probe compares one path under settings that differ; naming the setting reads
    better than a run id. None when nothing, or too much, differs.
    """
    configs = [_flat(e.manifest.get("config") or {}) for e in group]
    keys = sorted({k for c in configs for k in c})
    differing = [k for k in keys if k.rsplit(".", 1)[-1] not in _NOT_A_DIFFERENCE
                 and len({repr(c.get(k)) for c in configs}) > 1]
    if not differing or len(differing) > _MAX_LABEL_KEYS:
        return None
    labels = [f"{txn_path} " + ", ".join(f"{k.rsplit('.', 1)[-1]}={c.get(k, 'unset')}" for k in differing)
              for c in configs]
    return labels if len(set(labels)) == len(labels) else None


def _labels(entries: Sequence[RunEntry]) -> list[str]:
    """Each run's label: its path, or, when runs share a path, what differs between them (else the run id)."""
    paths = [str(e.perf.get("path") or e.manifest.get("path") or e.run_dir.name) for e in entries]
    labels = [p if paths.count(p) == 1 else str(e.perf.get("run_id") or e.run_dir.name)
              for p, e in zip(paths, entries, strict=True)]
    for txn_path in {p for p in paths if paths.count(p) > 1}:
        members = [i for i, p in enumerate(paths) if p == txn_path]
        named = _difference_labels(txn_path, [entries[i] for i in members])
        if named is not None and not set(named) & set(labels):
            for i, label in zip(members, named, strict=True):
                labels[i] = label
    return labels


def _natural(label: str) -> tuple[tuple[int, int | str], ...]:
    """`...=20` before `...=100`: numbers in a label compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", label) if part)


def _order(labels: Sequence[str], entries: Sequence[RunEntry]) -> list[int]:
    def key(i: int) -> tuple[int, tuple[tuple[int, int | str], ...]]:
        txn_path = str(entries[i].perf.get("path") or "")
        return (PATH_ORDER.index(txn_path) if txn_path in PATH_ORDER else len(PATH_ORDER), _natural(labels[i]))
    return sorted(range(len(entries)), key=key)


def _verdict(results: Mapping[str, Any] | None, manifest: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    if results is None:
        return {"valid": None, "anomalies": {}, "note": "no analysis/results.json"}
    anomalies = {k: (v or {}).get("count") for k, v in (results.get("anomalies") or {}).items()}
    judgement = judge_run(run_dir, results, manifest)
    return {"valid": results.get("valid"), "anomalies": anomalies,
            "expected": judgement.expected if judgement else {},
            "only_expected": bool(judgement and judgement.only_expected),
            "expectation_notes": judgement.notes if judgement else {},
            "unknown_reasons": list(results.get("unknown_reasons") or [])}


def _latency(perf: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for op, entry in (perf.get("latency_ms") or {}).items():
        out[op] = {k: entry.get(k) for k in LATENCY_KEYS if k in entry}
        if entry.get("spectrum"):
            out[op]["spectrum"] = entry["spectrum"]
    return out


def _loadgen(perf: Mapping[str, Any]) -> dict[str, Any]:
    lg = perf.get("load_generator") or {}
    cap = lg.get("capacity") or {}
    cpu = lg.get("cpu") or {}
    status = lg.get("status") or {}
    return {
        "errors": None if status.get("absent") else status.get("errors"),
        "ack_conflicts": None if status.get("absent") else status.get("ack_conflicts"),
        "capacity_txn_per_s": None if cap.get("absent") else cap.get("committed_txn_per_s"),
        "capacity_msgs_per_s": None if cap.get("absent") else cap.get("msgs_per_s"),
        "utilization": None if cap.get("absent") else cap.get("utilization"),
        "msgs_utilization": None if cap.get("absent") else cap.get("msgs_utilization"),
        "cpu_percent_of_core": None if cpu.get("absent") else cpu.get("percent_of_core"),
        "cpu_per_process_percent": None if cpu.get("absent") else cpu.get("per_process_percent"),
        "saturated": lg.get("saturated"),
        "verdict": lg.get("verdict"),
    }


def _races(perf: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's racing decisions (perf.json `races`, issue #43); None for a run measured before them."""
    races = perf.get("races")
    if not isinstance(races, Mapping):
        return None
    return {k: v for k, v in races.items() if k != "source"}


def _phases(perf: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, block in (perf.get("phases") or {}).items():
        commit = (block.get("latency_ms") or {}).get("txn-commit") or {}
        txns = block.get("transactions") or {}
        out[name] = {
            "duration_s": (block.get("window") or {}).get("duration_s"),
            "committed_txn_per_s": block.get("committed_txn_per_s"), "msgs_per_s": block.get("msgs_per_s"),
            "commit_p99_ms": commit.get("p99"), "failed": txns.get("failed"), "unknown": txns.get("unknown"),
            "seconds_without_commit": block.get("seconds_without_commit"), "seconds": block.get("seconds"),
        }
    return out


def _timeline(perf: Mapping[str, Any]) -> dict[str, Any]:
    timeline = perf.get("timeline") or {}
    series = timeline.get("series") or {}
    steady = next((w for w in perf.get("phase_windows") or [] if w.get("name") == "steady"), None)
    return {"t": timeline.get("t") or [], "committed": series.get("committed") or [],
            "failed": series.get("failed") or [], "unknown": series.get("unknown") or [],
            "steady_start_s": steady.get("start_s") if steady else None,
            "phase_windows": perf.get("phase_windows") or []}


def _entry(e: RunEntry, out_dir: Path | None) -> dict[str, Any]:
    perf = e.perf
    return {
        "path": perf.get("path"),
        "run_id": perf.get("run_id") or e.run_dir.name,
        "run_dir": _relative(e.run_dir, out_dir),
        "perf_json": _relative(e.run_dir / "analysis" / "perf.json", out_dir),
        "results_json": _relative(e.run_dir / "analysis" / "results.json", out_dir) if e.results else None,
        "status": perf.get("status") or e.manifest.get("status"),
        "scenario": perf.get("scenario"),
        "target": perf.get("target"),
        "metadata_store": perf.get("metadata_store") or store_of_manifest(e.manifest),
        "workload": perf.get("workload") or {},
        "window": {k: (perf.get("window") or {}).get(k) for k in ("name", "start_s", "end_s", "duration_s")},
        **{k: perf.get(k) for k in THROUGHPUT_KEYS},
        "transactions": perf.get("transactions") or {},
        "latency_ms": _latency(perf),
        "io_per_txn": {k: (perf.get("io_per_txn") or {}).get(k) for k in io_keys()},
        "io_absent": list((perf.get("io") or {}).get("absent") or []),
        "verdict": _verdict(e.results, e.manifest, e.run_dir),
        "planted_bugs": planted_bugs_of(dict(e.manifest)),
        "load_generator": _loadgen(perf),
        "races": _races(perf),
        "phases": _phases(perf),
        "faults": [{k: f.get(k) for k in ("kind", "selector", "targets", "start_s", "end_s", "healed", "healable",
                                          "injected", "commits_during", "commits_per_s_during",
                                          "longest_commit_gap_s", "first_commit_after_heal_s", "open_txns_at_start",
                                          "coordinator_outage_s", "coordinators_stalled")}
                   for f in perf.get("faults") or []],
        "coordinator_recovery_s": perf.get("coordinator_recovery_s"),
        "timeline": _timeline(perf),
        "participants": participants_shape(e.manifest),
        "cost_ledger": perf.get("cost_ledger") or {"absent": True, "reason": "perf.json has no cost ledger"},
        "critical_path": perf.get("critical_path") or {"absent": True, "reason": "perf.json has no critical path"},
    }


def participants_shape(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's participants shape: from the manifest, else derived from its config (older runs)."""
    recorded = manifest.get("participants")
    if isinstance(recorded, Mapping):
        return dict(recorded)
    workload = (manifest.get("config") or {}).get("workload")
    if not isinstance(workload, Mapping):
        return None
    scalable = manifest.get("path") == "v5"
    participants = int(workload.get("participants") or 1)
    if scalable:
        per_topic = int(workload.get("segments") or participants)
    else:
        partitions = workload.get("partitions")
        per_topic = max(1, int(partitions)) if partitions is not None else participants
    return {"per_topic": per_topic, "topics": workload.get("topics"), "topics_per_txn": workload.get("topics_per_txn"),
            "messages_per_txn": workload.get("messages_per_txn"), "acks_per_txn": workload.get("acks_per_txn")}


def shape_mismatch(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What differs between the runs' participants shapes (empty: the comparison is fair on topology)."""
    shapes = {label: r.get("participants") for label, r in runs.items()}
    known = {label: s for label, s in shapes.items() if s}
    problems = [f"{label}: no participants shape recorded" for label, s in shapes.items() if not s]
    keys = sorted({k for s in known.values() for k in s})
    for key in keys:
        values = {label: s.get(key) for label, s in known.items()}
        if len({repr(v) for v in values.values()}) > 1:
            problems.append(f"{key} differs: " + ", ".join(f"{label} {v}" for label, v in values.items()))
    return problems


def _ratios(entry: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: ratio(entry.get(k), base.get(k)) for k in THROUGHPUT_KEYS}
    for key in ("p50", "p99", "max"):
        out[f"latency_{key}_ms"] = {op: ratio((entry["latency_ms"].get(op) or {}).get(key),
                                              (base["latency_ms"].get(op) or {}).get(key))
                                    for op in entry["latency_ms"]}
    out["io_per_txn"] = {k: ratio(entry["io_per_txn"].get(k), base["io_per_txn"].get(k)) for k in io_keys()}
    return out


def build_comparison(entries: Sequence[RunEntry], *, out_dir: Path | None = None, kind: str | None = None,
                     matrix_id: str | None = None, errors: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The compare.json document over `entries` (run folders relative to `out_dir` when given)."""
    labels = _labels(entries)
    order = _order(labels, entries)
    runs = {labels[i]: _entry(entries[i], out_dir) for i in order}
    ordered = [labels[i] for i in order]
    # The baseline is the matrix's own v4 run (folder `runs/v4`), so an extra v4 run (the pulsar
    # target's LTS release, folder `runs/v4-pulsar-4.0.8`) is compared with it, not the other way round.
    own = [label for i, label in zip(order, ordered, strict=True)
           if runs[label]["path"] == BASELINE_PATH and entries[i].run_dir.name == BASELINE_PATH]
    baseline = next(iter(own), None) or next((label for label in ordered if runs[label]["path"] == BASELINE_PATH),
                                             ordered[0] if ordered else None)
    ratios = {label: _ratios(runs[label], runs[baseline]) for label in ordered} if baseline else {}
    scenarios = sorted({str(r["scenario"]) for r in runs.values() if r.get("scenario")})
    return {
        "schema": COMPARE_SCHEMA,
        "kind": kind,
        "matrix": matrix_id,
        "scenarios": scenarios,
        "generated": datetime.now(UTC).isoformat(),
        "order": ordered,
        "baseline": baseline,
        "paths": runs,
        "ratios_vs_baseline": ratios,
        "shape_mismatch": shape_mismatch(runs),
        "errors": dict(errors or {}),
    }
