"""Checks on the final reads: lost-write, partial-txn, duplicate.

All three need `drain-complete`; without it they are skipped. A value is only
called missing when its topic is covered (read to the end by the drain); sends
to other topics are counted as unjudged.

When the run read every topic twice, live (before the cold restart) and cold,
lost-write judges both reads: a committed value missing from either read of a
topic that read covered is lost (`missing_from`: `cold`, `live` or both). What
the live system hides, and its restart brings back, is a broker whose memory
disagrees with durable state: a reader of the live system would never see it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.base import NO_DRAIN_REASON, PendingCheck, Plan, clean, ref, skipped
from analysis.checks.context import CheckContext
from analysis.checks.lookups import ExampleRows, RowLike
from analysis.model import COMMITTED, COORDINATOR, UNKNOWN, VISIBILITY, DrainInfo, lost_run_of
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_EXAMPLE_VALUES = 5


def _send_ref(frame: DataFrame) -> F.Column:
    return ref(frame, f=OpF.SEND.value, time="invoke_ns")


def send_ref(row: RowLike) -> dict[str, Any]:
    """An op reference (as in examples) for a row of `sends`."""
    fields = {"writer": row["writer"], "index": row["index"], "process": row["process"], "f": OpF.SEND.value,
              "type": row["type"], "time_ns": row["invoke_ns"], "txn": row["txn"], "value": row["value"],
              "topic": row["topic"], "segment": row["segment"], "msg_id": row["msg_id"]}
    return {k: v for k, v in fields.items() if v is not None}


def read_ref(row: RowLike) -> dict[str, Any]:
    """An op reference (as in examples) for a row of `reads`."""
    fields = {"writer": row["writer"], "index": row["index"], "process": row["process"], "f": OpF.READ.value,
              "type": OpType.OK.value, "time_ns": row["time_ns"], "value": row["value"], "topic": row["topic"],
              "segment": row["segment"], "msg_id": row["msg_id"]}
    return {k: v for k, v in fields.items() if v is not None}


def sends_of(ctx: ExampleRows, txns: list[str]) -> dict[str, list[RowLike]]:
    """The sends of a few example transactions, in send order (bounded: the examples' transactions)."""
    by_txn: dict[str, list[RowLike]] = {}
    for row in ctx.rows_where("sends", "txn", txns):
        by_txn.setdefault(row["txn"], []).append(row)
    return {txn: sorted(rows, key=lambda r: (r["invoke_ns"], r["index"])) for txn, rows in by_txn.items()}


def visibility_evidence(rows: Sequence[RowLike], live_reads: bool) -> dict[str, list[str]]:
    """Which of a transaction's values each final read showed, for an outcome visibility decided.

    The cold read decides, so a transaction the live system showed nothing of can be committed by
    values only the restart brought back (v5 on 5.0.1: aborted values a segment's recovery showed,
    docs/findings/v5-chaos-aborted-read.md); the example says so rather than leaving it to be found.
    """
    shown = [r for r in rows if r["type"] != OpType.FAIL.value]
    evidence = {"cold": [r["value"] for r in shown if r["visible"]][:_EXAMPLE_VALUES]}
    if live_reads:
        evidence["live"] = [r["value"] for r in shown if r["live_visible"]][:_EXAMPLE_VALUES]
    return evidence


def plan_lost_write(ctx: CheckContext) -> Plan:
    """A value sent ok whose transaction committed is missing from the final reads.

    Committed includes a client-known commit and a transaction decided
    committed by visibility; a non-transactional send that completed ok counts
    as committed on its own.
    """
    if not ctx.drain.complete:
        return skipped(AnomalyClass.LOST_WRITE, NO_DRAIN_REASON)
    if ctx.count("sends") == 0:
        return clean(AnomalyClass.LOST_WRITE)
    committed = ctx.sends.filter((F.col("type") == OpType.OK.value) & (F.col("outcome") == COMMITTED))
    cold_missing = F.col("covered") & ~F.col("visible")
    live_missing = F.col("live_covered") & ~F.col("live_visible")
    missing = committed.filter(cold_missing | live_missing)
    missing_from = (F.when(cold_missing & live_missing, F.lit("live and cold"))
                    .when(cold_missing, F.lit("cold")).otherwise(F.lit("live")))
    lost = missing.select("value", "txn", F.coalesce(F.col("decided_by"), F.lit("client")).alias("decided_by"),
                          missing_from.alias("missing_from"), _send_ref(missing).alias("send"))
    # What no check can judge: a committed value that is not visible on a topic the drain did
    # not read to the end, and any possible value of a transaction whose outcome stayed unknown
    # (its commit's outcome is unknown to the client and nothing of it is visible).
    maybe = F.col("type").isin(OpType.OK.value, OpType.INFO.value)
    unjudged = ctx.sends.filter(~F.col("visible") & (
        ((F.col("type") == OpType.OK.value) & (F.col("outcome") == COMMITTED) & ~F.col("covered"))
        | (maybe & (F.col("outcome") == UNKNOWN))))
    drain = ctx.drain
    finish = lost_write_finish(ctx, drain)

    return PendingCheck(AnomalyClass.LOST_WRITE, lost, ["send.time_ns", "value"], max_examples=ctx.max_examples,
                        finish=finish, unjudged=unjudged,
                        note="{n} value(s) not visible on topics the drain did not read to the end, committed "
                             "or of transactions whose outcome stayed unknown")


def plan_partial_txn(ctx: CheckContext) -> Plan:
    """Some but not all of a transaction's ok-sent values are visible, whatever its outcome.

    "Some" counts any visible value of the transaction (from an ok or info send);
    "not all" counts ok-sent values on covered topics that are not visible.
    """
    if not ctx.drain.complete:
        return skipped(AnomalyClass.PARTIAL_TXN, NO_DRAIN_REASON)
    if ctx.count("sends") == 0:
        return clean(AnomalyClass.PARTIAL_TXN)
    # Per transaction: its visible values (ok or info sends), its ok sends that are not visible on
    # covered topics, and on other topics. The transactions' one grouping already counted them
    # (analysis.model.transaction_outcomes), so this reads one row per transaction, not every send.
    counts = ctx.txns.select("txn", F.col("sends_visible").alias("visible_count"),
                             F.col("sends_ok_missing").alias("missing_count"),
                             F.col("sends_ok_uncovered").alias("uncovered_count"))
    partial = counts.filter((F.col("visible_count") > 0) & (F.col("missing_count") > 0)).drop("uncovered_count")
    unjudged = counts.filter((F.col("visible_count") > 0) & (F.col("missing_count") == 0)
                             & (F.col("uncovered_count") > 0))

    finish = partial_txn_finish(ctx, ctx.drain)

    return PendingCheck(AnomalyClass.PARTIAL_TXN, partial, ["txn"], max_examples=ctx.max_examples,
                        unjudged=unjudged, finish=finish,
                        note="{n} transaction(s) with values on topics the drain did not read to the end")


def plan_duplicate(ctx: CheckContext) -> Plan:
    """One value appears at two or more positions (topic, segment, message id) in the final reads."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.DUPLICATE, NO_DRAIN_REASON)
    if ctx.count("reads") == 0:
        return clean(AnomalyClass.DUPLICATE)
    dups = ctx.visible.filter(F.col("positions") > 1).select("value", "positions")

    finish = duplicate_finish(ctx)

    return PendingCheck(AnomalyClass.DUPLICATE, dups, ["value"], max_examples=ctx.max_examples, finish=finish)


Finish = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


class _Records(ExampleRows, Protocol):
    def coordinator_records(self, txns: list[str]) -> dict[str, dict[str, object]]: ...


def lost_write_finish(ctx: _Records, drain: DrainInfo) -> Finish:
    """lost-write's `finish` (either checker's context)."""
    live_reads = bool(drain.live_topics)

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Name the evidence: the entries the brokers said they lost after their ack; for a
        transaction visibility decided, the values of it each read showed; for one its
        coordinator's record decided, that reading."""
        decided = sorted({e["txn"] for e in examples if e.get("decided_by") == VISIBILITY})
        sends = sends_of(ctx, decided) if decided else {}
        records = ctx.coordinator_records(sorted({e["txn"] for e in examples
                                                  if e.get("decided_by") == COORDINATOR}))
        for e in examples:
            send = e.get("send") or {}
            run = lost_run_of(drain, send.get("topic"), send.get("segment"), send.get("msg_id"))
            if run is not None:
                e["lost_entries"] = dict(run)
            if e.get("txn") in sends:
                e["visible_in"] = visibility_evidence(sends[e["txn"]], live_reads)
            if e.get("txn") in records:
                e["coordinator"] = records[e["txn"]]
        return examples

    return finish


def partial_txn_finish(ctx: ExampleRows, drain: DrainInfo) -> Finish:
    """partial-txn's `finish` (either checker's context)."""
    live_reads = bool(drain.live_topics)

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Name the visible values and the missing sends of the example transactions."""
        by_txn = sends_of(ctx, sorted({e["txn"] for e in examples}))
        for e in examples:
            mine = by_txn.get(e["txn"], [])
            if mine:
                e["outcome"], e["decided_by"] = mine[0]["outcome"], mine[0]["decided_by"]
            evidence = visibility_evidence(mine, live_reads)
            e["visible"] = evidence["cold"]
            if live_reads:
                e["visible_live"] = evidence["live"]
            e["missing"] = [send_ref(r) for r in mine if r["type"] == OpType.OK.value and r["covered"]
                            and not r["visible"]][:_EXAMPLE_VALUES]
        return examples

    return finish


def duplicate_finish(ctx: ExampleRows) -> Finish:
    """duplicate's `finish` (either checker's context)."""

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Name the reads of each duplicated value."""
        values = sorted({e["value"] for e in examples})
        by_value: dict[str, list[RowLike]] = {}
        for row in ctx.rows_where("reads", "value", values):
            by_value.setdefault(row["value"], []).append(row)
        for e in examples:
            mine = sorted(by_value.get(e["value"], []), key=lambda r: (r["time_ns"], r["index"]))
            e["reads"] = [read_ref(r) for r in mine][:_EXAMPLE_VALUES]
        return examples

    return finish
