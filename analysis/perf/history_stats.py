"""The performance numbers a history holds, computed in Spark, returned small.

Theory of operation. Everything here scales with the history (tens of millions
of events), so it runs as a handful of Spark aggregations over the paired
operations (analysis.model.pair_operations) and only aggregates come back to
the driver:

1. phase and fault/heal events (a few rows) -> the windows;
2. counts per (window, 1-second bucket, operation, type), by *end time*: an
   operation is counted where its completion falls, one never completed where
   it was invoked. Throughput and the timeline come from these.
3. latency bucket counts per (kind, window, operation, HdrHistogram bucket),
   with the exact count, min, max and sum, by *start time*. The start is the
   invoke's `extra.intended_ns` when the load was rate-limited (so a slow
   operation that delayed the next one is charged to the next one as well:
   no coordinated omission), or the actual invoke if that came first. Only
   `ok` operations have a latency. `service` rows measure from the actual
   invoke, for the operations that carry an intended start, to show what the
   correction changed. `end-to-end` latency runs from a transaction's commit
   invoke to the first delivery of each value it sent to the load's own
   consumers (the drainer's reads and receives are not deliveries to a user).
   A delivery is when the broker's frame reached the client (`extra.delivered_ns`
   of the receive; its own time when absent), not when the application took the
   message from the receiver queue: a verifier that falls behind must not show up
   as the cluster's latency.
4. per-second p50/p99/max of commit, send and end-to-end latency for the
   timeline (Spark's percentile_approx: a picture, not a headline number);
5. per fault: commits during it and the time from its heal to the next commit;
6. the racing decisions of the run (issue #43, `races`): messages acked `ok` on
   one subscription in two or more transactions (whatever their outcomes), commits
   invoked at their transaction's timeout (the load marks them,
   `extra.timeout_offset_s`) and how they ended, and a second client's aborts of
   transactions being committed (`extra.foreign`) and how they ended, with the
   transactions where both the commit and that abort were answered `ok`.

Window attribution: every event gets the name of the phase its time falls in;
a history without a `steady` phase also labels every load operation `all`.
A second client's aborts (`extra.foreign`) are the same transactions' decisions
from another process, so they are left out of every count but `races`: a
transaction ends once in the throughput and the outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis.history_io import LoadedHistory
from analysis.model import pair_operations
from analysis.perf.faults import FaultEvent, FaultWindow, fault_windows
from analysis.perf.hdr import HIGHEST_US, SUB_BUCKET_BITS, LatencyBuckets
from analysis.perf.windows import ALL, Window, measurement_window, phase_windows
from harness.history.schema import DRAIN_WRITER, OpF, OpType

__all__ = ["E2E", "LATENCY_OPS", "LOAD_FS", "HistoryStats", "compute_history_stats", "quantize_us_column",
           "races", "window_label"]

LOAD_FS: tuple[str, ...] = (OpF.TXN_OPEN.value, OpF.SEND.value, OpF.ACK.value, OpF.TXN_COMMIT.value,
                            OpF.TXN_ABORT.value)
E2E = "end-to-end"
LATENCY_OPS: tuple[str, ...] = (*LOAD_FS, E2E)
TIMELINE_LATENCY_OPS: tuple[str, ...] = (OpF.TXN_COMMIT.value, OpF.SEND.value, E2E)
DRAIN_PHASE = "drain"
KIND_LATENCY = "latency"
KIND_SERVICE = "service"
# Gaps between commits inside fault windows are computed on the driver up to this many commits.
MAX_GAP_COMMITS = 2_000_000

@dataclass(frozen=True)
class HistoryStats:
    """The aggregates of one history; everything the perf builder needs from Spark."""

    windows: tuple[Window, ...]
    measured: Window | None
    history_end_ns: int
    load_span: tuple[int, int] | None
    counts: dict[str, dict[str, dict[str, int]]]              # window -> f -> type -> n
    timeline: dict[int, dict[str, dict[str, int]]]            # second -> f -> type -> n
    latency: dict[tuple[str, str, str], LatencyBuckets]       # (kind, window, f) -> buckets
    corrected: dict[tuple[str, str], int]                     # (window, f) -> ops timed from intended start
    unreceived: dict[str, int]                                # window -> committed values never received
    early: dict[str, int]                                     # window -> values received before commit completed
    committed_msgs: dict[str, int]                            # window -> values sent in txns committed there
    latency_timeline: dict[str, list[dict[str, float]]]       # f -> [{t, p50, p99, max, count}]
    faults: tuple[FaultWindow, ...]
    fault_stats: tuple[dict[str, Any], ...]
    drain_start_ns: int | None
    paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    shapes: dict[str, dict[str, int]] = field(default_factory=dict)  # window -> what its txns did (txn_shapes)
    races: dict[str, Any] = field(default_factory=dict)              # the racing decisions (races)


def window_label(time_col: Column, windows: Sequence[Window]) -> Column:
    """The name of the window `time_col` falls in (null outside every window)."""
    expr: Column | None = None
    for w in windows:
        cond = (time_col >= F.lit(w.start_ns)) & (time_col < F.lit(w.end_ns))
        expr = F.when(cond, F.lit(w.name)) if expr is None else expr.when(cond, F.lit(w.name))
    return expr if expr is not None else F.lit(None).cast("string")


def quantize_us_column(ns: Column) -> Column:
    """Spark's version of hdr.quantize_us over a nanosecond column (null stays null)."""
    us = F.least(F.greatest(F.floor(ns / F.lit(1000)).cast("long"), F.lit(0).cast("long")),
                 F.lit(HIGHEST_US).cast("long"))
    shift = F.greatest(F.length(F.bin(us)) - F.lit(SUB_BUCKET_BITS), F.lit(0)).cast("int")
    step = F.pow(F.lit(2.0), shift)
    # Division by a power of two is exact in binary floating point for these magnitudes (< 2^37).
    return (F.floor(us / step) * step).cast("long")


def _labelled(frame: DataFrame, time_col: str, windows: Sequence[Window], add_all: bool) -> DataFrame:
    label = window_label(F.col(time_col), windows)
    if add_all:
        return frame.withColumn("win", F.explode(F.array_compact(F.array(label, F.lit(ALL)))))
    return frame.withColumn("win", label)


def _events(loaded: LoadedHistory) -> tuple[list[tuple[str, int]], list[FaultEvent]]:
    rows = (loaded.ops.filter(F.col("f").isin(OpF.PHASE.value, OpF.FAULT.value, OpF.HEAL.value))
            .select("f", "type", "time_ns", "process", "writer", "index", "phase", "extra", "error").collect())
    marks = [(r["phase"] or "", int(r["time_ns"])) for r in rows if r["f"] == OpF.PHASE.value]
    faults = [FaultEvent.from_row(r.asDict()) for r in rows if r["f"] != OpF.PHASE.value]
    return marks, faults


def compute_history_stats(loaded: LoadedHistory) -> HistoryStats:
    """Run the aggregations above over a validated history."""
    history_end = int(loaded.facts.last_ns or 0)
    marks, fault_events = _events(loaded)
    windows = tuple(phase_windows(marks, history_end))
    drain = next((w for w in windows if w.name == DRAIN_PHASE), None)
    drain_start = drain.start_ns if drain is not None else None
    faults = tuple(fault_windows(fault_events))
    notes: list[str] = []

    paired = pair_operations(loaded.ops).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        race_counts = races(paired)
        pairs = paired.filter(~_foreign())
        load_ops = pairs.filter(F.col("f").isin(*LOAD_FS))
        end_ns = F.coalesce(F.col("complete_ns"), F.col("invoke_ns"))
        span_row = load_ops.agg(F.min("invoke_ns").alias("first"), F.max(end_ns).alias("last"),
                                F.collect_set("path").alias("paths")).collect()[0]
        paths = tuple(sorted(p for p in span_row["paths"] or () if p))
        load_span = ((int(span_row["first"]), int(span_row["last"]))
                     if span_row["first"] is not None else None)
        measured = measurement_window(windows, load_span)
        add_all = measured is not None and measured.name == ALL
        if add_all:
            notes.append("the history has no steady phase event; the measured window is the whole span "
                         "of load operations")

        counts, timeline = _counts(pairs, windows, add_all, drain_start)
        lat_rows = _latency_rows(pairs, windows, add_all, drain_start).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            latency, corrected, unreceived, early, committed_msgs = _latency(lat_rows)
            latency_timeline = _latency_timeline(lat_rows, add_all)
        finally:
            lat_rows.unpersist()
        fault_stats = _fault_stats(pairs, faults, history_end) if faults else ()
        shapes = txn_shapes(pairs, windows, add_all, drain_start)
    finally:
        paired.unpersist()
    return HistoryStats(windows, measured, history_end, load_span, counts, timeline, latency, corrected,
                        unreceived, early, committed_msgs, latency_timeline, faults, tuple(fault_stats),
                        drain_start, paths, tuple(notes), shapes, race_counts)


FOREIGN_MARK = '"foreign":'
"""In an operation's `extra`: a second client's decision on a transaction another process holds
(workloads.foreign writes `extra.foreign.owner` on its `txn-abort`s)."""


def _foreign() -> Column:
    """True for a second client's abort (a plain text test of `extra`: no JSON parse per row)."""
    return F.coalesce((F.col("f") == OpF.TXN_ABORT.value) & F.col("extra").contains(FOREIGN_MARK), F.lit(False))


def races(pairs: DataFrame) -> dict[str, Any]:
    """The racing decisions a history shows (module docstring, 6), over the whole history.

    `acked_in_two_txns`: messages (topic, segment, subscription, message id; the value where
    an ack names no id) acknowledged individually and `ok` in two or more distinct transactions,
    whatever their outcomes: an abort that let the message be delivered again to another
    consumer, or two transactions racing for it (the checker's `double-ack` judges those whose
    transactions both committed). `timeout_commits`: `txn-commit`s the load marked with
    `extra.timeout_offset_s` (invoked within 1 s of the timeout): `count`, `ok`, `fail`, `info`,
    `after` (invoked past the timeout), `after_ok`. `foreign_aborts`: a second client's
    `txn-abort`s: `count`, `ok`, `fail`, `info`, and `both_ok`, transactions whose commit and
    whose second client's abort were both answered `ok` (one of the two answers is false).
    """
    ok, fail = OpType.OK.value, OpType.FAIL.value
    typ, extra = F.col("type"), F.col("extra")
    is_commit = (F.col("f") == OpF.TXN_COMMIT.value) & F.coalesce(extra.contains('"timeout_offset_s":'), F.lit(False))
    offset = F.get_json_object(extra, "$.timeout_offset_s").cast("double")
    foreign = _foreign()

    def n(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0))

    decisions = pairs.filter(is_commit | foreign).select(is_commit.alias("tc"), foreign.alias("fa"), "type",
                                                         F.when(is_commit, offset).alias("offset"))
    tc, fa, after = F.col("tc"), F.col("fa"), F.col("offset") > 0
    row = decisions.agg(
        n(tc).alias("tc"), n(tc & (typ == ok)).alias("tc_ok"), n(tc & (typ == fail)).alias("tc_fail"),
        n(tc & after).alias("tc_after"), n(tc & after & (typ == ok)).alias("tc_after_ok"),
        n(fa).alias("fa"), n(fa & (typ == ok)).alias("fa_ok"), n(fa & (typ == fail)).alias("fa_fail"),
    ).collect()[0]
    both = (pairs.filter(F.col("txn").isNotNull() & (typ == ok)
                         & ((F.col("f") == OpF.TXN_COMMIT.value) | foreign))
            .groupBy("txn").agg(F.max(F.col("f") == OpF.TXN_COMMIT.value).alias("c"), F.max(foreign).alias("a"))
            .filter(F.col("c") & F.col("a")).count()) if int(row["fa_ok"] or 0) else 0
    acks = pairs.filter((F.col("f") == OpF.ACK.value) & (typ == ok) & F.col("txn").isNotNull()
                        & ~F.coalesce(F.col("cumulative"), F.lit(False)))
    twice = (acks.groupBy("topic", F.coalesce(F.col("segment"), F.lit("")).alias("seg"), "subscription",
                          F.coalesce(F.col("msg_id"), F.concat(F.lit("value "), F.col("value"))).alias("msg"))
             .agg(F.countDistinct("txn").alias("txns")).filter(F.col("txns") >= 2).count())

    def counted(prefix: str) -> dict[str, int]:
        total, oks, fails = (int(row[k] or 0) for k in (prefix, f"{prefix}_ok", f"{prefix}_fail"))
        return {"count": total, "ok": oks, "fail": fails, "info": total - oks - fails}

    return {"acked_in_two_txns": int(twice),
            "timeout_commits": {**counted("tc"), "after": int(row["tc_after"] or 0),
                                "after_ok": int(row["tc_after_ok"] or 0)},
            "foreign_aborts": {**counted("fa"), "both_ok": int(both)}}


SHAPE_KEYS = ("committed", "aborted", "sends_committed", "sends_aborted", "acks_committed", "acks_aborted",
              "write_participants_committed", "write_participants_aborted", "ack_participants_committed",
              "ack_participants_aborted", "plain_sends")


def txn_shapes(pairs: DataFrame, windows: Sequence[Window], add_all: bool, drain_start: int | None
               ) -> dict[str, dict[str, int]]:
    """Per window, what the transactions that ended there did: the inputs of a cost prediction.

    A transaction belongs to the window its end completed in (commit ok: committed; abort ok or
    a failed commit: aborted; an unknown outcome is left out). For each: its ok transactional
    sends and acks, and its distinct participants: written segments (v4 partitions; the topic
    where the history names no segment) and acked (segment, subscription) pairs. `plain_sends`
    counts ok non-transactional sends (the load's feeders) completed in the window, before the
    drain.
    """
    commit, abort = OpF.TXN_COMMIT.value, OpF.TXN_ABORT.value
    ok, fail = OpType.OK.value, OpType.FAIL.value
    ends = pairs.filter(F.col("txn").isNotNull() & (
        ((F.col("f") == commit) & F.col("type").isin(ok, fail)) | ((F.col("f") == abort) & (F.col("type") == ok))))
    ends = ends.select("txn", F.when((F.col("f") == commit) & (F.col("type") == ok), F.lit("committed"))
                       .otherwise(F.lit("aborted")).alias("outcome"), F.col("complete_ns").alias("end_ns"))
    ends = _labelled(ends, "end_ns", windows, add_all).filter(F.col("win").isNotNull())
    where = F.coalesce(F.col("segment"), F.col("topic"))
    sends = (pairs.filter((F.col("f") == OpF.SEND.value) & (F.col("type") == ok) & F.col("txn").isNotNull())
             .groupBy("txn").agg(F.count(F.lit(1)).alias("sends"), F.countDistinct(where).alias("w")))
    acks = (pairs.filter((F.col("f") == OpF.ACK.value) & (F.col("type") == ok) & F.col("txn").isNotNull())
            .groupBy("txn").agg(F.count(F.lit(1)).alias("acks"),
                                F.countDistinct(where, F.coalesce(F.col("subscription"), F.lit(""))).alias("k")))
    per_txn = ends.join(sends, "txn", "left").join(acks, "txn", "left")
    rows = (per_txn.groupBy("win", "outcome")
            .agg(F.count(F.lit(1)).alias("n"), F.sum(F.coalesce("sends", F.lit(0))).alias("sends"),
                 F.sum(F.coalesce("acks", F.lit(0))).alias("acks"), F.sum(F.coalesce("w", F.lit(0))).alias("w"),
                 F.sum(F.coalesce("k", F.lit(0))).alias("k"))
            .collect())
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        block = out.setdefault(r["win"], dict.fromkeys(SHAPE_KEYS, 0))
        o = r["outcome"]
        block[o] += int(r["n"])
        block[f"sends_{o}"] += int(r["sends"] or 0)
        block[f"acks_{o}"] += int(r["acks"] or 0)
        block[f"write_participants_{o}"] += int(r["w"] or 0)
        block[f"ack_participants_{o}"] += int(r["k"] or 0)
    plain = pairs.filter((F.col("f") == OpF.SEND.value) & (F.col("type") == ok) & F.col("txn").isNull())
    if drain_start is not None:
        plain = plain.filter(F.col("complete_ns") < F.lit(drain_start))
    plain = _labelled(plain.select("complete_ns"), "complete_ns", windows, add_all)
    for r in plain.groupBy("win").count().collect():
        if r["win"] is not None:
            out.setdefault(r["win"], dict.fromkeys(SHAPE_KEYS, 0))["plain_sends"] = int(r["count"])
    return out


def _consumer_receives(pairs: DataFrame, drain_start: int | None) -> DataFrame:
    """Deliveries to the load's consumers: receive events not by the drainer, before the drain."""
    cond = (F.col("f") == OpF.RECEIVE.value) & (F.col("writer") != F.lit(DRAIN_WRITER))
    if drain_start is not None:
        cond = cond & (F.col("complete_ns") < F.lit(drain_start))
    return pairs.filter(cond)


def _counts(pairs: DataFrame, windows: Sequence[Window], add_all: bool, drain_start: int | None
            ) -> tuple[dict[str, dict[str, dict[str, int]]], dict[int, dict[str, dict[str, int]]]]:
    ops = pairs.filter(F.col("f").isin(*LOAD_FS)).unionByName(_consumer_receives(pairs, drain_start))
    frame = ops.select("f", "type", F.coalesce(F.col("complete_ns"), F.col("invoke_ns")).alias("end_ns"))
    frame = _labelled(frame, "end_ns", windows, add_all)
    rows = (frame.groupBy("win", F.floor(F.col("end_ns") / F.lit(1_000_000_000)).alias("sec"), "f", "type")
            .count().collect())
    counts: dict[str, dict[str, dict[str, int]]] = {}
    timeline: dict[int, dict[str, dict[str, int]]] = {}
    for r in rows:
        n = int(r["count"])
        if r["win"] is not None:
            by_f = counts.setdefault(r["win"], {}).setdefault(r["f"], {})
            by_f[r["type"]] = by_f.get(r["type"], 0) + n
        # Without a steady phase every row is also labelled `all`: count each event once.
        if not add_all or r["win"] == ALL:
            sec = timeline.setdefault(int(r["sec"]), {}).setdefault(r["f"], {})
            sec[r["type"]] = sec.get(r["type"], 0) + n
    return counts, timeline


def _latency_rows(pairs: DataFrame, windows: Sequence[Window], add_all: bool,
                  drain_start: int | None) -> DataFrame:
    """(kind, win, f, t_ns, lat_ns, corrected, early, received) rows: ops, service times, end-to-end."""
    ok = pairs.filter(F.col("f").isin(*LOAD_FS) & (F.col("type") == OpType.OK.value) & F.col("completed"))
    intended = F.col("intended_ns")
    start = F.least(F.coalesce(intended, F.col("invoke_ns")), F.col("invoke_ns"))
    corrected = intended.isNotNull() & (intended < F.col("invoke_ns"))
    ops = ok.select(
        F.lit(KIND_LATENCY).alias("kind"), "f", start.alias("t_ns"),
        (F.col("complete_ns") - start).alias("lat_ns"), corrected.alias("corrected"),
        F.lit(False).alias("early"), F.lit(True).alias("received"))
    service = ok.filter(intended.isNotNull()).select(
        F.lit(KIND_SERVICE).alias("kind"), "f", start.alias("t_ns"),
        (F.col("complete_ns") - F.col("invoke_ns")).alias("lat_ns"), F.lit(False).alias("corrected"),
        F.lit(False).alias("early"), F.lit(True).alias("received"))

    commits = (pairs.filter((F.col("f") == OpF.TXN_COMMIT.value) & (F.col("type") == OpType.OK.value)
                            & F.col("txn").isNotNull())
               .groupBy("txn").agg(F.min("complete_ns").alias("commit_ns"),
                                   F.min("invoke_ns").alias("commit_invoke_ns")))
    sends = (pairs.filter((F.col("f") == OpF.SEND.value) & (F.col("type") == OpType.OK.value)
                          & F.col("txn").isNotNull() & F.col("value").isNotNull())
             .select("txn", "value"))
    delivered = F.coalesce(F.get_json_object(F.col("extra"), "$.delivered_ns").cast("long"), F.col("complete_ns"))
    first_receive = (_consumer_receives(pairs, drain_start).filter(F.col("value").isNotNull())
                     .groupBy("value").agg(F.min(delivered).alias("recv_ns")))
    joined = sends.join(commits, "txn").join(first_receive, "value", "left")
    # From the commit's invoke, not its completion: v4 makes a value visible as its partition's
    # marker lands, before the end-txn fan-out answers the client, and v5 after its decision is
    # answered, so a latency from completion would clamp most of v4's to 0 and none of v5's.
    gap = F.col("recv_ns") - F.col("commit_invoke_ns")
    early = F.col("recv_ns") < F.col("commit_ns")
    e2e = joined.select(
        F.lit(KIND_LATENCY).alias("kind"), F.lit(E2E).alias("f"), F.col("commit_ns").alias("t_ns"),
        F.when(F.col("recv_ns").isNotNull(), F.greatest(gap, F.lit(0))).alias("lat_ns"),
        F.lit(False).alias("corrected"), F.coalesce(early, F.lit(False)).alias("early"),
        F.col("recv_ns").isNotNull().alias("received"))
    rows = ops.unionByName(service).unionByName(e2e)
    return _labelled(rows, "t_ns", windows, add_all)


def _latency(rows: DataFrame) -> tuple[dict[tuple[str, str, str], LatencyBuckets], dict[tuple[str, str], int],
                                       dict[str, int], dict[str, int], dict[str, int]]:
    grouped = (
        rows.filter(F.col("win").isNotNull())
        .withColumn("q", F.when(F.col("received"), quantize_us_column(F.col("lat_ns"))))
        .groupBy("kind", "win", "f", "q")
        .agg(F.count(F.lit(1)).alias("n"), F.min("lat_ns").alias("min_ns"), F.max("lat_ns").alias("max_ns"),
             F.sum("lat_ns").alias("sum_ns"), F.sum(F.col("corrected").cast("long")).alias("corrected"),
             F.sum(F.col("early").cast("long")).alias("early"))
        .collect()
    )
    parts: dict[tuple[str, str, str], dict[str, Any]] = {}
    corrected: dict[tuple[str, str], int] = {}
    unreceived: dict[str, int] = {}
    early: dict[str, int] = {}
    committed_msgs: dict[str, int] = {}
    for r in grouped:
        kind, win, f = r["kind"], r["win"], r["f"]
        n = int(r["n"])
        if f == E2E and kind == KIND_LATENCY:
            committed_msgs[win] = committed_msgs.get(win, 0) + n
            early[win] = early.get(win, 0) + int(r["early"] or 0)
            if r["q"] is None:
                unreceived[win] = unreceived.get(win, 0) + n
                continue
        if kind == KIND_LATENCY:
            corrected[(win, f)] = corrected.get((win, f), 0) + int(r["corrected"] or 0)
        acc = parts.setdefault((kind, win, f), {"buckets": [], "min": None, "max": None, "sum": 0})
        acc["buckets"].append((int(r["q"]), n))
        acc["min"] = int(r["min_ns"]) if acc["min"] is None else min(acc["min"], int(r["min_ns"]))
        acc["max"] = int(r["max_ns"]) if acc["max"] is None else max(acc["max"], int(r["max_ns"]))
        acc["sum"] += int(r["sum_ns"])
    latency = {key: LatencyBuckets.of(acc["buckets"], acc["min"], acc["max"], acc["sum"])
               for key, acc in parts.items()}
    return latency, corrected, unreceived, early, committed_msgs


def _latency_timeline(rows: DataFrame, add_all: bool) -> dict[str, list[dict[str, float]]]:
    frame = rows.filter((F.col("kind") == KIND_LATENCY) & F.col("received")
                        & F.col("f").isin(*TIMELINE_LATENCY_OPS))
    if add_all:  # every row also carries the label `all`; keep one copy of each
        frame = frame.filter(F.col("win") == F.lit(ALL))
    ms = F.col("lat_ns") / F.lit(1e6)
    grouped = (frame.select("f", F.floor(F.col("t_ns") / F.lit(1_000_000_000)).alias("sec"), ms.alias("ms"))
               .groupBy("f", "sec")
               .agg(F.percentile_approx("ms", [0.5, 0.99], 1000).alias("pct"), F.max("ms").alias("max"),
                    F.count(F.lit(1)).alias("n"))
               .collect())
    out: dict[str, list[dict[str, float]]] = {}
    for r in sorted(grouped, key=lambda r: (r["f"], r["sec"])):
        out.setdefault(r["f"], []).append({"t": int(r["sec"]), "p50": round(float(r["pct"][0]), 3),
                                           "p99": round(float(r["pct"][1]), 3), "max": round(float(r["max"]), 3),
                                           "count": int(r["n"])})
    return out


def _fault_stats(pairs: DataFrame, faults: Sequence[FaultWindow], history_end: int) -> list[dict[str, Any]]:
    commits = pairs.filter((F.col("f") == OpF.TXN_COMMIT.value) & (F.col("type") == OpType.OK.value)
                           & F.col("completed")).select("complete_ns")
    t = F.col("complete_ns")
    aggs = []
    for i, fw in enumerate(faults):
        end = fw.end_or(history_end)
        aggs.append(F.sum(F.when((t >= F.lit(fw.start_ns)) & (t < F.lit(end)), 1).otherwise(0)).alias(f"during_{i}"))
        aggs.append(F.min(F.when(t >= F.lit(end), t)).alias(f"after_{i}"))
        aggs.append(F.max(F.when(t < F.lit(fw.start_ns), t)).alias(f"before_{i}"))
    row = commits.agg(*aggs).collect()[0]
    open_at = _open_txns_at([fw.start_ns for fw in faults], pairs)
    outages = _coordinator_outages(faults, pairs, history_end)
    stats: list[dict[str, Any]] = []
    for i, fw in enumerate(faults):
        end = fw.end_or(history_end)
        during = int(row[f"during_{i}"] or 0)
        after = row[f"after_{i}"]
        before = row[f"before_{i}"]
        entry: dict[str, Any] = {
            "commits_during": during,
            "commits_per_s_during": round(during / ((end - fw.start_ns) / 1e9), 3) if end > fw.start_ns else None,
            "first_commit_after_heal_s": (round((int(after) - fw.end_ns) / 1e9, 6)
                                          if after is not None and fw.end_ns is not None else None),
            "last_commit_before_start_s": round((fw.start_ns - int(before)) / 1e9, 6) if before is not None else None,
            "open_txns_at_start": open_at[i],
            **outages[i],
        }
        if during <= MAX_GAP_COMMITS:
            times = sorted(int(r["complete_ns"]) for r in commits.filter(
                (t >= F.lit(fw.start_ns)) & (t < F.lit(end))).collect())
            edges = [fw.start_ns, *times, end]
            entry["longest_commit_gap_s"] = round(max(b - a for a, b in pairwise(edges)) / 1e9, 6)
        stats.append(entry)
    return stats


def _open_txns_at(instants: Sequence[int], pairs: DataFrame) -> list[int]:
    """How many transactions were open at each instant: opened (`txn-open` ok) before it,
    and not yet asked to end (no `txn-commit`/`txn-abort` invoked before it).

    Experiment 3 plots coordinator recovery against this number at the kill.
    """
    if not instants:
        return []
    opens = (pairs.filter((F.col("f") == OpF.TXN_OPEN.value) & (F.col("type") == OpType.OK.value)
                          & F.col("completed") & F.col("txn").isNotNull())
             .select("txn", F.col("complete_ns").alias("opened_ns")))
    ends = (pairs.filter(F.col("f").isin(OpF.TXN_COMMIT.value, OpF.TXN_ABORT.value) & F.col("txn").isNotNull())
            .groupBy("txn").agg(F.min("invoke_ns").alias("ending_ns")))
    spans = opens.join(ends, "txn", "left")
    opened, ending = F.col("opened_ns"), F.col("ending_ns")
    row = spans.agg(*(F.sum(F.when((opened < F.lit(t)) & (ending.isNull() | (ending >= F.lit(t))), 1)
                            .otherwise(0)).alias(f"open_{i}") for i, t in enumerate(instants))).collect()[0]
    return [int(row[f"open_{i}"] or 0) for i in range(len(instants))]


OUTAGE_ACTIVE_BEFORE_NS = 10_000_000_000
"""A coordinator counts as serving before a fault when it ended a transaction in the 10 s before it."""


def _coordinator_outages(faults: Sequence[FaultWindow], pairs: DataFrame, history_end: int) -> list[dict[str, Any]]:
    """Per fault, how long the slowest coordinator took to end a transaction again.

    A transaction id is `<coordinator>:<sequence>` on both paths, so every `ok`
    commit or abort says which coordinator served it. For each coordinator that
    served in the 10 s before the fault, the outage is the time from the fault's
    start to its next `ok` end; `coordinator_outage_s` is the largest (the
    coordinator the fault hit, wherever it lived), `coordinators_stalled` names the
    ones that never served again before the history ended. Unaffected
    coordinators answer within milliseconds, so this isolates failover time
    without knowing which broker hosted what.
    """
    if not faults:
        return []
    ends = (pairs.filter(F.col("f").isin(OpF.TXN_COMMIT.value, OpF.TXN_ABORT.value)
                         & (F.col("type") == OpType.OK.value) & F.col("completed") & F.col("txn").isNotNull())
            .select(F.split(F.col("txn"), ":").getItem(0).alias("tc"), F.col("complete_ns").alias("t")))
    t = F.col("t")
    aggs = []
    for i, fw in enumerate(faults):
        aggs.append(F.max(F.when((t < F.lit(fw.start_ns)) & (t >= F.lit(fw.start_ns - OUTAGE_ACTIVE_BEFORE_NS)), t))
                    .alias(f"before_{i}"))
        aggs.append(F.min(F.when(t >= F.lit(fw.start_ns), t)).alias(f"after_{i}"))
    rows = ends.groupBy("tc").agg(*aggs).collect()
    out: list[dict[str, Any]] = []
    for i, fw in enumerate(faults):
        waits: dict[str, float | None] = {}
        for row in rows:
            if row[f"before_{i}"] is None:
                continue
            after = row[f"after_{i}"]
            waits[str(row["tc"])] = None if after is None else (int(after) - fw.start_ns) / 1e9
        stalled = sorted(tc for tc, wait in waits.items() if wait is None)
        served = [wait for wait in waits.values() if wait is not None]
        if stalled:
            outage: float | None = round((history_end - fw.start_ns) / 1e9, 6)
        else:
            outage = round(max(served), 6) if served else None
        slowest = max(waits, key=lambda tc: float("inf") if waits[tc] is None else float(waits[tc] or 0.0),
                      default=None)
        out.append({"coordinator_outage_s": outage, "slowest_coordinator": slowest,
                    "coordinators_stalled": stalled, "coordinators_serving_before": len(waits)})
    return out
