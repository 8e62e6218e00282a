"""I/O per committed transaction, from the metrics snapshots around a window.

Theory of operation. A window is a phase (`steady`, `faults`, ...). The I/O the
cluster did in it is, per counter, the snapshot taken at the end of that phase
minus the snapshot taken at the end of the phase before it, summed over the
services that expose the counter. Dividing by the transactions the history
says were committed in the same window gives the cost of one committed
transaction, aborted work included (a real cluster pays for it too).

Rules that keep the numbers honest:

* A metric no snapshot of the window exposes is *absent*: reported with the
  reason, never as 0. A metric whose name is exposed but whose selected label
  values never appeared (no CAS conflict series yet) is a real 0.
* A service that has the metric in one snapshot but no snapshot at the other
  end (it was down when scraped) makes the metric absent for the window: half a
  sum would be a wrong number.
* A counter that went down (a restarted service) is a reset: the increase
  counts from zero, as Prometheus's `increase()` does with two points, and the
  metric is flagged `counter_reset` (the value is a lower bound).
* Derived totals (all bytes written, all fsyncs) exist only when every part does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from analysis.perf.prom import Sample, Snapshot

__all__ = [
    "DERIVED_METRICS", "IO_METRICS", "DerivedMetric", "IoMetric", "IoUnit", "Selector", "gauge_max",
    "io_for_window", "io_keys", "window_delta",
]


class IoUnit(StrEnum):
    ENTRIES = "entries"
    BYTES = "bytes"
    OPS = "ops"
    FSYNCS = "fsyncs"
    RECORDS = "records"
    TXNS = "txns"


@dataclass(frozen=True)
class Selector:
    """A metric name and the label values to keep (all series when `only` is empty)."""

    name: str
    only: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    exclude: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def matches(self, sample: Sample) -> bool:
        if sample.name != self.name:
            return False
        for key, allowed in self.only.items():
            if sample.label(key) not in allowed:
                return False
        return all(sample.label(key) not in banned for key, banned in self.exclude.items())

    def describe(self) -> str:
        parts = [f'{k}="{v[0]}"' if len(v) == 1 else f'{k}=~"{"|".join(v)}"' for k, v in self.only.items()]
        parts += [f'{k}!="{v[0]}"' if len(v) == 1 else f'{k}!~"{"|".join(v)}"' for k, v in self.exclude.items()]
        return self.name + ("{" + ",".join(parts) + "}" if parts else "")


@dataclass(frozen=True)
class IoMetric:
    key: str
    title: str
    unit: IoUnit
    selector: Selector


@dataclass(frozen=True)
class DerivedMetric:
    key: str
    title: str
    unit: IoUnit
    parts: tuple[str, ...]


def _kind(kind: str) -> dict[str, tuple[str, ...]]:
    return {"kind": (kind,)}


# Order is the order of the report's I/O table.
IO_METRICS: tuple[IoMetric, ...] = (
    IoMetric("data_entries", "data-stream entries", IoUnit.ENTRIES,
             Selector("txnbench_ledger_entries_total", _kind("data"))),
    IoMetric("coordinator_log_entries", "coordinator-log entries", IoUnit.ENTRIES,
             Selector("txnbench_ledger_entries_total", _kind("txn-log"))),
    IoMetric("pending_ack_entries", "pending-ack log entries", IoUnit.ENTRIES,
             Selector("txnbench_ledger_entries_total", _kind("pending-ack"))),
    IoMetric("cursor_entries", "cursor entries", IoUnit.ENTRIES,
             Selector("txnbench_ledger_entries_total", _kind("cursor"))),
    IoMetric("tb_snapshot_entries", "transaction-buffer snapshot entries", IoUnit.ENTRIES,
             Selector("txnbench_ledger_entries_total", _kind("tb-snapshot"))),
    IoMetric("ledger_entries", "ledger appends (all kinds)", IoUnit.ENTRIES,
             Selector("bookkeeper_server_ADD_ENTRY_count", exclude={"success": ("false",)})),
    IoMetric("ledger_bytes", "ledger bytes appended", IoUnit.BYTES, Selector("bookie_WRITE_BYTES")),
    IoMetric("data_bytes", "data-stream bytes", IoUnit.BYTES,
             Selector("txnbench_ledger_bytes_total", _kind("data"))),
    IoMetric("coordinator_log_bytes", "coordinator-log bytes", IoUnit.BYTES,
             Selector("txnbench_ledger_bytes_total", _kind("txn-log"))),
    IoMetric("pending_ack_bytes", "pending-ack log bytes", IoUnit.BYTES,
             Selector("txnbench_ledger_bytes_total", _kind("pending-ack"))),
    IoMetric("ledger_fsyncs", "ledger journal fsyncs", IoUnit.FSYNCS,
             Selector("bookie_journal_JOURNAL_SYNC_count")),
    IoMetric("metadata_reads", "metadata-store reads (get, list, range_scan)", IoUnit.OPS,
             Selector("txnbench_metadata_ops_total", {"op": ("get", "list", "range_scan")})),
    IoMetric("metadata_writes", "metadata-store writes (put, delete, delete_range)", IoUnit.OPS,
             Selector("txnbench_metadata_ops_total", {"op": ("put", "delete", "delete_range")})),
    IoMetric("metadata_creates", "metadata-store creates (must-not-exist or sequence-key put)", IoUnit.OPS,
             Selector("txnbench_metadata_requests_total", {"kind": ("create",)})),
    IoMetric("metadata_cas", "metadata-store CAS (put or delete at a version; creates not included)", IoUnit.OPS,
             Selector("txnbench_metadata_requests_total", {"kind": ("cas",)})),
    IoMetric("metadata_blind_puts", "metadata-store blind puts", IoUnit.OPS,
             Selector("txnbench_metadata_requests_total", {"kind": ("put",)})),
    IoMetric("metadata_deletes", "metadata-store deletes (unversioned, delete_range)", IoUnit.OPS,
             Selector("txnbench_metadata_requests_total", {"kind": ("delete",)})),
    IoMetric("metadata_cas_conflicts", "metadata-store CAS conflicts", IoUnit.OPS,
             Selector("txnbench_metadata_ops_total", {"cas": ("true",), "result": ("conflict",)})),
    IoMetric("metadata_wal_bytes", "metadata-store WAL bytes", IoUnit.BYTES,
             Selector("txnbench_metadata_wal_bytes_total")),
    IoMetric("metadata_fsyncs", "metadata-store WAL fsyncs", IoUnit.FSYNCS,
             Selector("txnbench_metadata_fsyncs_total")),
    IoMetric("coordinator_log_records", "coordinator-log records (before batching)", IoUnit.RECORDS,
             Selector("pulsar_txn_append_log_total")),
    IoMetric("txn_header_cas", "v5 transaction-header CAS", IoUnit.OPS,
             Selector("pulsar_txn_metadata_store_header_cas_total")),
    IoMetric("txn_op_record_writes", "v5 op-record writes", IoUnit.OPS,
             Selector("pulsar_txn_metadata_store_op_writes_total")),
    IoMetric("coordinator_commits", "commits counted by the coordinators (check: about 1)", IoUnit.TXNS,
             Selector("pulsar_txn_committed_total")),
    # Real brokers' own count of their metadata-store calls (Pulsar's MetadataStoreStats), on any
    # store; the embedded brokers do not export it, so on `embedded` these are absent.
    IoMetric("broker_metadata_gets", "brokers' metadata-store gets (Pulsar's own count)", IoUnit.OPS,
             Selector("pulsar_metadata_store_ops_latency_ms_count", {"type": ("get",), "status": ("success",)})),
    IoMetric("broker_metadata_writes", "brokers' metadata-store puts and deletes (Pulsar's own count)", IoUnit.OPS,
             Selector("pulsar_metadata_store_ops_latency_ms_count", {"type": ("put", "del"), "status": ("success",)})),
)

DERIVED_METRICS: tuple[DerivedMetric, ...] = (
    DerivedMetric("bytes_written", "bytes written (ledger + metadata WAL)", IoUnit.BYTES,
                  ("ledger_bytes", "metadata_wal_bytes")),
    DerivedMetric("fsyncs", "fsyncs (ledger journal + metadata WAL)", IoUnit.FSYNCS,
                  ("ledger_fsyncs", "metadata_fsyncs")),
)


def io_keys() -> list[str]:
    """Every key of `io_per_txn`, in report order."""
    return [m.key for m in IO_METRICS] + [d.key for d in DERIVED_METRICS]


@dataclass(frozen=True)
class _Delta:
    value: float | None
    services: tuple[str, ...] = ()
    counter_reset: bool = False
    reason: str | None = None


def _series(snapshot: Snapshot, selector: Selector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for sample in snapshot.samples:
        if selector.matches(sample):
            key = (sample.name, sample.labels)
            out[key] = out.get(key, 0.0) + sample.value
    return out


def _delta(start: Mapping[str, Snapshot], end: Mapping[str, Snapshot], selector: Selector,
           start_phase: str, end_phase: str) -> _Delta:
    exposing_end = {svc for svc, snap in end.items() if snap.has(selector.name)}
    exposing_start = {svc for svc, snap in start.items() if snap.has(selector.name)}
    exposing = exposing_end | exposing_start
    if not exposing:
        return _Delta(None, reason=f"no service exposes {selector.name} in the {start_phase} or "
                                   f"{end_phase} snapshots")
    for svc in sorted(exposing):
        if svc not in end:
            return _Delta(None, reason=f"{svc} has no snapshot at the end of {end_phase} "
                                       f"(it was not running when scraped), so the sum would be partial")
        if svc not in start:
            return _Delta(None, reason=f"{svc} has no snapshot at the end of {start_phase} "
                                       f"(it was not running when scraped), so the sum would be partial")
    total = 0.0
    reset = False
    for svc in sorted(exposing):
        before = _series(start[svc], selector)
        after = _series(end[svc], selector)
        if svc in exposing_start and svc not in exposing_end:
            reset = True  # the service restarted and has not re-created the metric
        for key, value in after.items():
            prior = before.get(key, 0.0)
            if value < prior:
                reset = True
                total += value
            else:
                total += value - prior
        if any(key not in after for key in before):
            reset = True
    return _Delta(total, tuple(sorted(exposing)), reset)


def _per_txn(value: float | None, committed: int) -> float | None:
    if value is None or committed <= 0:
        return None
    return value / committed


def io_for_window(snapshots: Mapping[str, Mapping[str, Snapshot]], window: str, baseline: str | None,
                  committed_txns: int) -> dict[str, Any]:
    """I/O between the end of `baseline` and the end of `window`, per committed transaction.

    Args:
        snapshots: read_snapshots() of the run.
        window: the phase measured (its end snapshot closes the window).
        baseline: the phase before it (its end snapshot opens the window); None
            when the window has no phase before it.
        committed_txns: transactions committed in the window (from the history).

    Returns a dict with `window`, `baseline`, `committed_txns`, `metrics` (per
    key: title, unit, source, delta, per_txn, services, counter_reset; or
    absent with a reason) and `io_per_txn` (key -> number, or None when absent).
    """
    metrics: dict[str, dict[str, Any]] = {}
    end = snapshots.get(window)
    start = snapshots.get(baseline) if baseline is not None else None
    problem: str | None = None
    if baseline is None:
        problem = f"the {window} phase has no phase before it, so there is no snapshot to start from"
    elif not start:
        problem = f"no metrics snapshot at the end of {baseline} (metrics/{baseline}-*.prom), where {window} starts"
    elif not end:
        problem = f"no metrics snapshot at the end of {window} (metrics/{window}-*.prom)"
    no_txns = (f"no transactions were committed in {window}, so there is nothing to divide by"
               if committed_txns <= 0 else None)
    for metric in IO_METRICS:
        entry: dict[str, Any] = {"title": metric.title, "unit": metric.unit.value,
                                 "source": metric.selector.describe()}
        if problem is not None:
            entry.update(absent=True, reason=problem, delta=None, per_txn=None)
        else:
            assert start is not None and end is not None and baseline is not None
            d = _delta(start, end, metric.selector, baseline, window)
            if d.value is None:
                entry.update(absent=True, reason=d.reason, delta=None, per_txn=None)
            else:
                entry.update(absent=False, delta=d.value, per_txn=_per_txn(d.value, committed_txns),
                             services=list(d.services), counter_reset=d.counter_reset)
                if no_txns:
                    entry["note"] = no_txns
        metrics[metric.key] = entry
    for derived in DERIVED_METRICS:
        parts = [metrics[p] for p in derived.parts]
        entry = {"title": derived.title, "unit": derived.unit.value, "source": " + ".join(derived.parts)}
        missing = [p for p, m in zip(derived.parts, parts, strict=True) if m.get("absent")]
        if missing:
            entry.update(absent=True, delta=None, per_txn=None,
                         reason=f"needs every part; absent: {', '.join(missing)}")
        else:
            value = sum(float(m["delta"]) for m in parts)
            entry.update(absent=False, delta=value, per_txn=_per_txn(value, committed_txns),
                         counter_reset=any(m.get("counter_reset") for m in parts))
        metrics[derived.key] = entry
    return {
        "window": window,
        "baseline": baseline,
        "snapshots": {"from": f"metrics/{baseline}-*.prom" if baseline else None,
                      "to": f"metrics/{window}-*.prom"},
        "committed_txns": committed_txns,
        "metrics": metrics,
        "io_per_txn": {key: metrics[key]["per_txn"] for key in io_keys()},
        "absent": [key for key in io_keys() if metrics[key].get("absent")],
    }


def gauge_max(snapshots: Mapping[str, Mapping[str, Snapshot]], phase: str, name: str) -> float | None:
    """The largest value of gauge `name` over every service's snapshot at the end of `phase`."""
    values = [s.value for snap in snapshots.get(phase, {}).values() for s in snap.samples if s.name == name]
    return max(values) if values else None


def window_delta(snapshots: Mapping[str, Mapping[str, Snapshot]], window: str, baseline: str | None,
                 selector: Selector) -> float | None:
    """The increase of `selector` between the end of `baseline` and the end of `window` (None: absent)."""
    start = snapshots.get(baseline) if baseline is not None else None
    end = snapshots.get(window)
    if not start or not end or baseline is None:
        return None
    return _delta(start, end, selector, baseline, window).value
