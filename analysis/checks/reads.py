"""Checks on what consumers and the drainer saw: aborted-read, dirty-read, unexpected.

These need no `drain-complete`: a consumer's `receive` is evidence on its own.
Final `read`s count as observations too when present. Values of transactions
whose outcome is still unknown (no drain to decide them) are not judged.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.base import AnomalyClass, CheckResult, clean, summarize
from analysis.checks.context import CheckContext, union_all
from analysis.load import ABORTED
from harness.history.schema import OpType


def _observations(ctx: CheckContext) -> DataFrame:
    """Every delivery of a value: consumer receives and final reads (`observed` op ref)."""
    return union_all([
        ctx.receives.select("value", F.col("receive").alias("observed")),
        ctx.reads.select("value", F.col("read").alias("observed")),
    ])


def aborted_read(ctx: CheckContext) -> CheckResult:
    """A value was received or read although its send cannot have taken effect.

    That is: its transaction's outcome is aborted (the client saw the abort or a
    definite commit failure, or nothing of it is visible in the final reads), or
    the send itself failed definitively (`fail`), as Jepsen's G1a.
    """
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.ABORTED_READ)
    why = (F.when(F.col("type") == OpType.FAIL.value, F.lit("send failed definitively"))
           .when(F.col("decided_by") == "visibility", F.lit("transaction aborted (nothing of it is visible)"))
           .otherwise(F.lit("transaction aborted")))
    bad = ctx.sends.filter((F.col("outcome") == ABORTED) | (F.col("type") == OpType.FAIL.value)).select(
        "value", "txn", why.alias("why"), "send")
    hits = _observations(ctx).join(bad, "value")
    per_value = hits.groupBy("value", "txn", "why", "send").agg(
        F.min_by("observed", F.col("observed.time_ns")).alias("observed"),
        F.count(F.lit(1)).alias("observations"))
    return summarize(AnomalyClass.ABORTED_READ, per_value, ["observed.time_ns", "value"],
                     max_examples=ctx.max_examples)


def dirty_read(ctx: CheckContext) -> CheckResult:
    """A value of a not-aborted transaction was received before its commit was invoked.

    Values of aborted transactions are aborted reads instead. A transaction
    whose commit was never invoked has every delivery of its values counted.
    """
    if ctx.count("receives") == 0:
        return clean(AnomalyClass.DIRTY_READ)
    candidates = ctx.sends.filter(
        F.col("txn").isNotNull() & (F.col("outcome") != ABORTED) & (F.col("type") != OpType.FAIL.value)
    ).select("value", "txn", "commit_invoke_ns", "send")
    hits = ctx.receives.join(candidates, "value").filter(
        F.col("commit_invoke_ns").isNull() | (F.col("time_ns") < F.col("commit_invoke_ns")))
    per_value = hits.groupBy("value", "txn", "commit_invoke_ns", "send").agg(
        F.min_by("receive", F.col("time_ns")).alias("receive"),
        F.count(F.lit(1)).alias("early_receives"))
    early_ms = (F.col("commit_invoke_ns") - F.col("receive.time_ns")) / 1e6
    out = per_value.select("value", "txn", "send", "receive", "commit_invoke_ns",
                           early_ms.alias("ms_before_commit"), "early_receives")
    return summarize(AnomalyClass.DIRTY_READ, out, ["receive.time_ns", "value"],
                     max_examples=ctx.max_examples)


def unexpected(ctx: CheckContext) -> CheckResult:
    """A value was received or read that no send invoked (or a message carrying no value)."""
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.UNEXPECTED)
    sent = ctx.sends.select("value").filter(F.col("value").isNotNull())
    hits = _observations(ctx).join(sent, "value", "left_anti")
    key = F.coalesce(F.col("value"), F.concat(F.lit("\u0000"), F.col("observed.writer"), F.lit(":"),
                                              F.col("observed.index").cast("string")))
    per_value = hits.groupBy(key.alias("_key"), "value").agg(
        F.min_by("observed", F.col("observed.time_ns")).alias("observed"),
        F.count(F.lit(1)).alias("observations"))
    return summarize(AnomalyClass.UNEXPECTED, per_value.drop("_key"), ["observed.time_ns", "value"],
                     max_examples=ctx.max_examples)
