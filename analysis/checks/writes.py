"""Checks on the final reads: lost-write, partial-txn, duplicate.

All three need `drain-complete`; without it they are skipped. A value is only
called missing when its topic is covered (read to the end by the drain); sends
to other topics are counted as unjudged.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from analysis.checks.base import (
    NO_DRAIN_REASON,
    AnomalyClass,
    CheckResult,
    clean,
    skipped,
    summarize,
)
from analysis.checks.context import CheckContext
from analysis.load import COMMITTED
from harness.history.schema import OpType

_EXAMPLE_VALUES = 5


def lost_write(ctx: CheckContext) -> CheckResult:
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
    lost = committed.filter(F.col("covered") & ~F.col("visible")).select(
        "value", "txn", F.coalesce(F.col("decided_by"), F.lit("client")).alias("decided_by"), "send")
    unjudged = committed.filter(~F.col("covered"))
    return summarize(AnomalyClass.LOST_WRITE, lost, ["send.time_ns", "value"], max_examples=ctx.max_examples,
                     unjudged=unjudged, note="{n} committed value(s) on topics the drain did not read to the end")


def partial_txn(ctx: CheckContext) -> CheckResult:
    """Some but not all of a transaction's ok-sent values are visible, whatever its outcome.

    "Some" counts any visible value of the transaction (from an ok or info send);
    "not all" counts ok-sent values on covered topics that are not visible.
    """
    if not ctx.drain.complete:
        return skipped(AnomalyClass.PARTIAL_TXN, NO_DRAIN_REASON)
    if ctx.count("sends") == 0:
        return clean(AnomalyClass.PARTIAL_TXN)
    ok = F.col("type") == OpType.OK.value
    seen = F.col("visible") & F.col("type").isin(OpType.OK.value, OpType.INFO.value)
    missing = ok & F.col("covered") & ~F.col("visible")

    def n(cond: F.Column) -> F.Column:
        return F.sum(F.when(cond, 1).otherwise(0))

    def some(cond: F.Column, what: str) -> F.Column:
        return F.slice(F.sort_array(F.collect_list(F.when(cond, F.col(what)))), 1, _EXAMPLE_VALUES)

    per_txn = ctx.sends.filter(F.col("txn").isNotNull()).groupBy("txn").agg(
        F.first("outcome").alias("outcome"), F.first("decided_by").alias("decided_by"),
        n(seen).alias("visible_count"), n(missing).alias("missing_count"),
        n(ok & ~F.col("covered")).alias("uncovered_count"),
        some(seen, "value").alias("visible"), some(missing, "send").alias("missing"),
    )
    partial = per_txn.filter((F.col("visible_count") > 0) & (F.col("missing_count") > 0))
    unjudged = per_txn.filter((F.col("visible_count") > 0) & (F.col("missing_count") == 0)
                              & (F.col("uncovered_count") > 0))
    return summarize(AnomalyClass.PARTIAL_TXN, partial.drop("uncovered_count"), ["txn"],
                     max_examples=ctx.max_examples, unjudged=unjudged,
                     note="{n} transaction(s) with values on topics the drain did not read to the end")


def duplicate(ctx: CheckContext) -> CheckResult:
    """One value appears at two or more positions (topic, segment, message id) in the final reads."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.DUPLICATE, NO_DRAIN_REASON)
    if ctx.count("reads") == 0:
        return clean(AnomalyClass.DUPLICATE)
    dups = ctx.visible.filter(F.col("positions") > 1).select("value", "positions")
    with_reads = dups.join(ctx.reads.select("value", "read"), "value").groupBy("value", "positions").agg(
        F.slice(F.sort_array(F.collect_list("read")), 1, _EXAMPLE_VALUES).alias("reads"))
    return summarize(AnomalyClass.DUPLICATE, with_reads, ["value"], max_examples=ctx.max_examples)
