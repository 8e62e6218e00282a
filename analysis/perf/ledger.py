"""The cost ledger: what each path wrote per committed transaction, next to what its design predicts.

Theory of operation. The prediction is computed from what the transactions of the
measured window actually did (`txn_shapes`: transactions committed and aborted, their
ok sends and acks, their distinct written and acked participants, and the window's
non-transactional sends), by the per-operation costs of each design as the path READMEs
trace them to their sources (`embedded/broker/v4/README.md`, `embedded/broker/v5/README.md`,
"Every durable operation and its source"). The measured side is the metrics delta of the
same window (`io.py`). Both are divided by the window's committed transactions, so
aborted work is charged to the committed ones on both sides.

Rules:

* A row the design fixes exactly has a `predicted` value; one the design only bounds (the
  v5 watermark is written when the read horizon moved, at most once per decision per
  segment and once per non-transactional append) has `bound`: measured up to it is
  design behaviour and counts as predicted.
* `excess` is measured / predicted - 1; above 10% (and above 0.05 operations per
  transaction, so a predicted 0 does not flag noise) the row is flagged and names its
  biggest contributor: the record family (v5 metadata) or entry kind (ledger) whose
  measured count exceeds its own prediction the most.
* Deferred work (v5 GC of decided headers) is counted where it happens; the bench
  scenario sets a 5 s retention so the headers of the window's transactions are
  collected inside it. `deferred` says whether the run's retention fits the window;
  when it does not, the GC rows are predicted but the measured side cannot include them,
  and the ledger says so.
* Reads, fsyncs and bytes are measured; reads have a prediction of this implementation
  (marked `model`), fsyncs and bytes none (group commit and record sizes decide them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analysis.perf.io import Selector, window_delta
from analysis.perf.prom import Snapshot
from harness.model_settings import (
    ACK_READS_HEADER,
    DELETE_CONSUMED_EVENTS,
    MODEL_SETTINGS,
    turned_on,
)

__all__ = ["EXCESS_LIMIT", "FAMILIES", "KINDS", "NO_NATIVE_SEQUENCE_KEYS", "build_ledger", "design_v4", "design_v5",
           "model_settings"]

EXCESS_LIMIT = 0.10
_MIN_EXCESS_PER_TXN = 0.05
KINDS = ("create", "cas", "put", "delete")
FAMILIES = ("txn-header", "txn-op", "txn-event", "txn-watermark", "txn-aborted", "txn-id-counter", "txn-leader",
            "index", "other", "seq-counter")
# Stores without native sequence keys (Pulsar 5.0 on ZooKeeper, and our ZooKeeper adapter, which
# emulates it): every sequence-key append first reads and CAS-increments a sidecar counter
# (Pulsar 5.0.1 `AbstractMetadataStore.putWithSequenceKeysCompat` -> `atomicIncrementSequenceCounter`:
# one get, one put at the counter's version, then the create). Its family is `seq-counter`, a
# prediction only: our own store has native sequence keys and never counts one.
NO_NATIVE_SEQUENCE_KEYS = ("zookeeper",)
REQUESTS = "txnbench_metadata_requests_total"

_HARNESS_GC_RETENTION_S = 120.0   # the embedded target's v5 default (Pulsar's: 900 s)


def model_settings(settings: Mapping[str, Any]) -> list[dict[str, str]]:
    """The model-only (or PIP-instead-of-5.0) settings a run turned on, with what each does."""
    return [{"setting": key, "value": setting.on, "meaning": setting.meaning}
            for key, setting in MODEL_SETTINGS.items() if turned_on(settings, key)]


@dataclass(frozen=True)
class Shape:
    """What the window's transactions did (see history_stats.txn_shapes)."""

    committed: int
    aborted: int
    sends: int
    acks: int
    writes: int          # distinct written participants, summed over transactions
    ack_parts: int       # distinct acked (segment, subscription) pairs, summed
    writes_aborted: int
    plain_sends: int

    @property
    def txns(self) -> int:
        return self.committed + self.aborted

    @classmethod
    def of(cls, s: Mapping[str, int]) -> Shape:
        def g(k: str) -> int:
            return int(s.get(k, 0) or 0)
        return cls(g("committed"), g("aborted"), g("sends_committed") + g("sends_aborted"),
                   g("acks_committed") + g("acks_aborted"),
                   g("write_participants_committed") + g("write_participants_aborted"),
                   g("ack_participants_committed") + g("ack_participants_aborted"),
                   g("write_participants_aborted"), g("plain_sends"))


# A prediction: (kind, family) -> (count, exact?) for metadata; entry kind -> count for ledger.
Prediction = dict[str, Any]


def design_v5(shape: Shape, settings: Mapping[str, Any], store_kind: str | None = None) -> Prediction:
    """Metadata operations of the window's transactions under PIP-473 as Pulsar 5.0 runs it.

    Per transaction: counter get + CAS, header create (NEW_TXN); header get + CAS and an
    `idx:ops-by-txn` scan, one event per participant (END_TXN); GC: an ops scan and a
    versioned header delete. Per op: one op record (send, ack) and its delete by the
    participant. Per written segment of an aborted transaction: one aborted record.
    Watermark CAS: bounded (see the module docstring). On a store without native sequence
    keys (`store_kind` in NO_NATIVE_SEQUENCE_KEYS) every op record and event also costs a
    counter read and a counter CAS (`seq-counter`).
    """
    n, parts = shape.txns, shape.writes + shape.ack_parts
    delete_events = turned_on(settings, DELETE_CONSUMED_EVENTS)
    ack_reads_header = turned_on(settings, ACK_READS_HEADER)
    exact: dict[tuple[str, str], float] = {
        ("create", "txn-header"): n,
        ("create", "txn-op"): shape.sends + shape.acks,
        ("create", "txn-event"): parts,
        ("cas", "txn-id-counter"): n,
        ("cas", "txn-header"): 2 * n,          # END_TXN CAS + GC's versioned delete
        ("put", "txn-aborted"): shape.writes_aborted,
        ("delete", "txn-op"): shape.sends + shape.acks,
    }
    if delete_events:
        exact[("cas", "txn-event")] = parts
    appends = shape.sends + shape.acks + parts     # sequence-key puts: op records and events
    emulated = store_kind in NO_NATIVE_SEQUENCE_KEYS
    if emulated:
        exact[("cas", "seq-counter")] = appends
    bounds = {("cas", "txn-watermark"): shape.writes + shape.plain_sends}
    reads = {   # this implementation's reads (model): see embedded/broker/v5/README.md
        "txn-id-counter": n, "txn-header": n + shape.writes + (shape.ack_parts if ack_reads_header else 0),
        "index": 2 * n, "txn-event": parts, "txn-op": parts,
    }
    if emulated:
        reads["seq-counter"] = appends
    return {"metadata": exact, "bounds": bounds, "reads": reads,
            "ledger": {"data": shape.sends + shape.plain_sends, "txn-log": 0, "pending-ack": 0}}


def design_v4(shape: Shape, batched: bool) -> Prediction:
    """Ledger entries of the window's transactions under PIP-31 (records; PIP-160 batches them).

    Coordinator log: NEW, one ADD_PARTITION per written partition, one ADD_SUBSCRIPTION per
    acked subscription, COMMITTING/ABORTING, COMMITTED/ABORTED. Data: every send, one marker
    per written partition. Pending-ack log: one ACK record per ack, one COMMIT/ABORT mark per
    acked subscription. No metadata-store writes. With batching the entry counts are upper
    bounds (records share entries).
    """
    n = shape.txns
    ledger = {"data": shape.sends + shape.plain_sends + shape.writes,
              "txn-log": 3 * n + shape.writes + shape.ack_parts,
              "pending-ack": shape.acks + shape.ack_parts}
    return {"metadata": {}, "bounds": {}, "reads": {}, "ledger": ledger, "ledger_is_bound": batched}


def _per(value: float | None, committed: int) -> float | None:
    return None if value is None or committed <= 0 else round(value / committed, 4)


def _row(title: str, measured: float | None, predicted: float | None, committed: int, *,
         bound: float | None = None, bounded_measured: float | None = None, contributor: str | None = None,
         basis: str = "design") -> dict[str, Any]:
    """One ledger row, per committed transaction.

    `bound` is the part the design only bounds and `bounded_measured` what was measured of
    it: the effective prediction is `predicted` plus that measured part, capped at the bound
    (design behaviour up to the bound; anything above it is excess).
    """
    m, p, b = _per(measured, committed), _per(predicted, committed), _per(bound, committed)
    excess = None
    flagged = False
    effective = p
    if p is not None and b:
        bm = _per(bounded_measured, committed)
        effective = round(p + (min(bm, b) if bm is not None else b), 4)
    if m is not None and effective is not None:
        if effective > 0:
            excess = round(m / effective - 1, 4)
        flagged = (m - effective) > _MIN_EXCESS_PER_TXN and (effective == 0 or excess is None or excess > EXCESS_LIMIT)
    return {"title": title, "measured": m, "predicted": p, "bound": b, "effective_prediction": effective,
            "excess": excess, "flagged": flagged, "contributor": contributor if flagged else None, "basis": basis}


def _delta(snapshots: Mapping[str, Mapping[str, Snapshot]], window: str, baseline: str | None,
           name: str, **only: str) -> float | None:
    return window_delta(snapshots, window, baseline, Selector(name, {k: (v,) for k, v in only.items()}))


def build_ledger(txn_path: str | None, shape_counts: Mapping[str, int] | None, io: Mapping[str, Any],
                 snapshots: Mapping[str, Mapping[str, Snapshot]], settings: Mapping[str, Any],
                 steady_s: float | None, store_kind: str | None = None) -> dict[str, Any]:
    """The `cost_ledger` block of perf.json for the measured window (see the module docstring);
    `store_kind` (perf.json's `metadata_store.kind`) decides whether sequence keys are emulated."""
    window, baseline = io.get("window"), io.get("baseline")
    committed = int(io.get("committed_txns") or 0)
    if not txn_path or shape_counts is None or not window or committed <= 0:
        return {"absent": True, "reason": "no measured window with committed transactions and a history shape"}
    shape = Shape.of(shape_counts)
    v5 = txn_path == "v5"
    design = design_v5(shape, settings, store_kind) if v5 else design_v4(shape, txn_path == "v4-batched")
    metrics = io.get("metrics") or {}

    def measured(key: str) -> float | None:
        entry = metrics.get(key) or {}
        return None if entry.get("absent") else entry.get("delta")

    rows: dict[str, dict[str, Any]] = {}
    # ---- ledger appends, by entry kind ---------------------------------------------------------
    led = design["ledger"]
    kinds = {"data": "data_entries", "txn-log": "coordinator_log_entries", "pending-ack": "pending_ack_entries"}
    by_kind = {k: measured(v) for k, v in kinds.items()}
    total_pred = float(sum(led.values()))
    is_bound = bool(design.get("ledger_is_bound"))
    diffs = {k: (by_kind[k] or 0.0) - led[k] for k in kinds}
    worst = max(diffs, key=lambda k: diffs[k])
    total_meas = sum(v for v in by_kind.values() if v is not None) if all(
        v is not None for v in by_kind.values()) else None
    bounded_entries = sum(v or 0.0 for k, v in by_kind.items() if k != "data") if is_bound else None
    rows["ledger_appends"] = _row(
        "ledger appends (data + coordinator log + pending-ack log)", total_meas,
        float(led["data"]) if is_bound else total_pred, committed,
        bound=total_pred - led["data"] if is_bound else None, bounded_measured=bounded_entries,
        contributor=f"{worst} entries (+{_per(diffs[worst], committed)} per txn)")
    for k in kinds:
        rows[f"ledger_{k}"] = _row(f"  {k} entries", by_kind[k], 0.0 if is_bound and k != "data" else led[k],
                                   committed, bound=led[k] if is_bound and k != "data" else None,
                                   bounded_measured=by_kind[k] if is_bound and k != "data" else None)
    if measured("cursor_entries") is not None:
        rows["ledger_cursor"] = _row("  cursor entries (not a transaction record; not predicted)",
                                     measured("cursor_entries"), None, committed, basis="measured only")
    # ---- metadata writes, by kind and family -------------------------------------------------------
    exact: Mapping[tuple[str, str], float] = design["metadata"]
    bounds: Mapping[tuple[str, str], float] = design["bounds"]
    cells: dict[tuple[str, str], float | None] = {
        (k, f): _delta(snapshots, window, baseline, REQUESTS, kind=k, family=f) for k in KINDS for f in FAMILIES}
    have = any(v is not None for v in cells.values())
    contrib: dict[str, float] = {}
    for (k, f), value in cells.items():
        over = (value or 0.0) - exact.get((k, f), 0.0) - bounds.get((k, f), 0.0)
        contrib[f"{k} {f}"] = over
    top = max(contrib, key=lambda c: contrib[c]) if contrib else None
    total_writes = sum(v or 0.0 for v in cells.values()) if have else None
    bounded = {kf: cells.get(kf) for kf in bounds}
    rows["metadata_writes"] = _row(
        "metadata writes", total_writes, float(sum(exact.values())), committed,
        bound=float(sum(bounds.values())) or None, bounded_measured=sum(v or 0.0 for v in bounded.values()),
        contributor=f"{top} (+{_per(contrib[top], committed)} per txn over its prediction)" if top else None)
    for k in KINDS:
        value = sum(cells[(k, f)] or 0.0 for f in FAMILIES) if have else None
        pred = sum(v for (kk, _), v in exact.items() if kk == k)
        bound = sum(v for (kk, _), v in bounds.items() if kk == k)
        by_family = {f: (cells[(k, f)] or 0.0) - exact.get((k, f), 0.0) - bounds.get((k, f), 0.0)
                     for f in FAMILIES}
        worst_f = max(by_family, key=lambda f: by_family[f])
        rows[f"metadata_{k}"] = _row(f"  {k}", value, float(pred), committed, bound=float(bound) or None,
                                     bounded_measured=sum(v or 0.0 for kf, v in bounded.items() if kf[0] == k),
                                     contributor=f"{k} {worst_f} (+{_per(by_family[worst_f], committed)} per txn)")
    families = {f"{k} {f}": {"measured": _per(cells[(k, f)], committed),
                             "predicted": _per(exact.get((k, f)), committed),
                             "bound": _per(bounds.get((k, f)), committed)}
                for k in KINDS for f in FAMILIES
                if (cells[(k, f)] or 0) > 0 or (k, f) in exact or (k, f) in bounds}
    # ---- reads, fsyncs, bytes --------------------------------------------------------------------
    read_cells = {f: _delta(snapshots, window, baseline, REQUESTS, kind="read", family=f) for f in FAMILIES}
    reads_pred = design["reads"]
    reads_total = sum(v or 0.0 for v in read_cells.values()) if any(v is not None for v in read_cells.values()) \
        else measured("metadata_reads")
    read_over = {f: (read_cells[f] or 0.0) - reads_pred.get(f, 0) for f in FAMILIES}
    worst_r = max(read_over, key=lambda f: read_over[f])
    rows["metadata_reads"] = _row("metadata reads", reads_total, float(sum(reads_pred.values())) if v5 else None,
                                  committed, contributor=f"read {worst_r} (+{_per(read_over[worst_r], committed)} "
                                                         "per txn)", basis="model" if v5 else "measured only")
    rows["fsyncs"] = _row("fsyncs (ledger journal + metadata WAL)", measured("fsyncs"), None, committed,
                          basis="measured only")
    rows["bytes_written"] = _row("bytes written (ledger + metadata WAL)", measured("bytes_written"), None,
                                 committed, basis="measured only")
    retention = _retention_s(settings)
    deferred: dict[str, Any] = {"gc_retention_s": retention if v5 else None,
                "inside_window": (retention is not None and steady_s is not None and retention < steady_s)
                if v5 else True}
    if v5 and not deferred["inside_window"]:
        deferred["note"] = (f"GC retention {retention:g} s is not shorter than the {steady_s} s window: the header "
                            "deletes of this window's transactions happen after it (predicted, not measured)")
    return {"window": window, "committed_txns": committed, "shape": dict(shape_counts), "rows": rows,
            "store_kind": store_kind, "sequence_keys_emulated": bool(v5 and store_kind in NO_NATIVE_SEQUENCE_KEYS),
            "families": families, "deferred": deferred, "model_settings": model_settings(settings),
            "flagged": [k for k, r in rows.items() if r["flagged"]],
            "source": "embedded/broker/{v4,v5}/README.md: every durable operation and its source"}


def _retention_s(settings: Mapping[str, Any]) -> float | None:
    ms = settings.get("txnbenchV5GcRetentionMillis")
    if ms is not None:
        return float(ms) / 1000.0
    s = settings.get("transactionCoordinatorScalableTopicsGcRetentionSeconds")
    return float(s) if s is not None else _HARNESS_GC_RETENTION_S
