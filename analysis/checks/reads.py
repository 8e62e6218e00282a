"""Checks on what consumers and the drainer saw: aborted-read, dirty-read, unexpected.

These need no `drain-complete`: a consumer's `receive` is evidence on its own.
Final `read`s count as observations too when present. Values of transactions
whose outcome is still unknown (no drain to decide them) are not judged.
All three read `observations`: each receive and read joined with its value's send.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.base import AnomalyClass, CheckResult, PendingCheck, Plan, clean, evaluate, ref
from analysis.checks.context import CheckContext
from analysis.load import ABORTED
from harness.history.schema import OpF, OpType


def _observed(frame: DataFrame) -> F.Column:
    return ref(frame, "o_", f=F.col("kind"), value="value", txn=None)


def _send(frame: DataFrame) -> F.Column:
    return ref(frame, "s_", f=OpF.SEND.value, time="s_invoke_ns", value="value", txn="txn",
               subscription=None)


def plan_aborted_read(ctx: CheckContext) -> Plan:
    """A value was received or read although its send cannot have taken effect.

    That is: its transaction's outcome is aborted (the client saw the abort or a
    definite commit failure, or nothing of it is visible in the final reads), or
    the send itself failed definitively (`fail`), as Jepsen's G1a.
    """
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.ABORTED_READ)
    obs = ctx.observations
    hits = obs.filter(F.col("sent") & ((F.col("outcome") == ABORTED) | (F.col("s_type") == OpType.FAIL.value)))
    why = (F.when(F.col("s_type") == OpType.FAIL.value, F.lit("send failed definitively"))
           .when(F.col("decided_by") == "visibility", F.lit("transaction aborted (nothing of it is visible)"))
           .otherwise(F.lit("transaction aborted")))
    per_value = hits.groupBy("value").agg(
        F.first("txn").alias("txn"), F.first(why).alias("why"), F.first(_send(obs)).alias("send"),
        F.min_by(_observed(obs), F.col("o_time_ns")).alias("observed"),
        F.count(F.lit(1)).alias("observations"))
    return PendingCheck(AnomalyClass.ABORTED_READ, per_value, ["observed.time_ns", "value"],
                     max_examples=ctx.max_examples)


def plan_dirty_read(ctx: CheckContext) -> Plan:
    """A value of a not-aborted transaction was received before its commit was invoked.

    Values of aborted transactions are aborted reads instead. A transaction
    whose commit was never invoked has every delivery of its values counted.
    """
    if ctx.count("receives") == 0:
        return clean(AnomalyClass.DIRTY_READ)
    obs = ctx.observations
    hits = obs.filter(
        (F.col("kind") == OpF.RECEIVE.value) & F.col("sent") & F.col("txn").isNotNull()
        & (F.col("outcome") != ABORTED) & (F.col("s_type") != OpType.FAIL.value)
        & (F.col("commit_invoke_ns").isNull() | (F.col("o_time_ns") < F.col("commit_invoke_ns"))))
    per_value = hits.groupBy("value").agg(
        F.first("txn").alias("txn"), F.first(_send(obs)).alias("send"),
        F.min_by(_observed(obs), F.col("o_time_ns")).alias("receive"),
        F.first("commit_invoke_ns").alias("commit_invoke_ns"),
        F.count(F.lit(1)).alias("early_receives"))
    early_ms = (F.col("commit_invoke_ns") - F.col("receive.time_ns")) / 1e6
    out = per_value.select("value", "txn", "send", "receive", "commit_invoke_ns",
                           early_ms.alias("ms_before_commit"), "early_receives")
    return PendingCheck(AnomalyClass.DIRTY_READ, out, ["receive.time_ns", "value"], max_examples=ctx.max_examples)


def plan_unexpected(ctx: CheckContext) -> Plan:
    """A value was received or read that no send invoked (or a message carrying no value)."""
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.UNEXPECTED)
    obs = ctx.observations
    hits = obs.filter(~F.col("sent"))
    key = F.coalesce(F.col("value"), F.concat(F.lit("\u0000"), F.col("o_writer"), F.lit(":"),
                                              F.col("o_index").cast("string")))
    per_value = hits.groupBy(key.alias("_key")).agg(
        F.first("value").alias("value"),
        F.min_by(_observed(obs), F.col("o_time_ns")).alias("observed"),
        F.count(F.lit(1)).alias("observations"))
    return PendingCheck(AnomalyClass.UNEXPECTED, per_value.drop("_key"), ["observed.time_ns", "value"],
                     max_examples=ctx.max_examples)


def aborted_read(ctx: CheckContext) -> CheckResult:
    """Run the aborted-read check on its own (`run_checks` evaluates every plan together)."""
    return evaluate([plan_aborted_read(ctx)])[0]


def dirty_read(ctx: CheckContext) -> CheckResult:
    """Run the dirty-read check on its own (`run_checks` evaluates every plan together)."""
    return evaluate([plan_dirty_read(ctx)])[0]


def unexpected(ctx: CheckContext) -> CheckResult:
    """Run the unexpected check on its own (`run_checks` evaluates every plan together)."""
    return evaluate([plan_unexpected(ctx)])[0]
