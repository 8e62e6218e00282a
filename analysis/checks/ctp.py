"""Checks of consume-transform-produce pipelines: ctp-duplicate, ctp-loss.

A consume-transform-produce (CTP) transaction acks its inputs and sends
outputs whose `inputs` name them. Both checks need `drain-complete`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.base import (
    NO_DRAIN_REASON,
    AnomalyClass,
    CheckResult,
    PendingCheck,
    Plan,
    clean,
    evaluate,
    ref,
    skipped,
)
from analysis.checks.context import CheckContext
from analysis.load import COMMITTED
from harness.history.schema import OpF, OpType

_EXAMPLE_VALUES = 5


def _outputs(ctx: CheckContext, *, visible_only: bool) -> DataFrame:
    """(input, value, txn, send) for every CTP output send, one row per input it carries."""
    outs = ctx.sends.filter(F.size(F.coalesce(F.col("inputs"), F.array())) > 0)
    if visible_only:
        outs = outs.filter(F.col("visible") & F.col("type").isin(OpType.OK.value, OpType.INFO.value))
    return outs.select(F.explode("inputs").alias("input"), "value", "txn",
                       ref(outs, f=OpF.SEND.value, time="invoke_ns").alias("send"))


def plan_ctp_duplicate(ctx: CheckContext) -> Plan:
    """An input has two or more visible outputs (it was processed twice, both committed)."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.CTP_DUPLICATE, NO_DRAIN_REASON)
    if ctx.count("ctp_sends") == 0:
        return clean(AnomalyClass.CTP_DUPLICATE)
    per_input = _outputs(ctx, visible_only=True).groupBy("input").agg(
        F.countDistinct("value").alias("visible_outputs"),
        F.slice(F.sort_array(F.collect_list("send")), 1, _EXAMPLE_VALUES).alias("outputs"))
    dups = per_input.filter(F.col("visible_outputs") > 1)
    return PendingCheck(AnomalyClass.CTP_DUPLICATE, dups, ["input"], max_examples=ctx.max_examples)


def plan_ctp_loss(ctx: CheckContext) -> Plan:
    """An input's ack committed (ok, in a committed CTP transaction) but no visible output carries it.

    A CTP transaction is one with at least one send carrying `inputs`. Judged
    only when all of that transaction's sends went to covered topics.
    """
    if not ctx.drain.complete:
        return skipped(AnomalyClass.CTP_LOSS, NO_DRAIN_REASON)
    if ctx.count("ctp_sends") == 0 or ctx.count("acks") == 0:
        return clean(AnomalyClass.CTP_LOSS)
    ctp_txns = ctx.txns.filter(F.col("ctp")).select("txn", "sends_uncovered")
    consumed = (ctx.acks.filter((F.col("type") == OpType.OK.value) & (F.col("outcome") == COMMITTED))
                .join(ctp_txns, "txn"))
    consumed = consumed.withColumn("ack", ref(consumed, f=OpF.ACK.value, time="invoke_ns"))
    carried = _outputs(ctx, visible_only=True).select(F.col("input").alias("value")).distinct()
    judged = consumed.filter(F.col("sends_uncovered") == 0)
    lost = judged.join(carried, "value", "left_anti")
    outputs = _outputs(ctx, visible_only=False).select(
        F.col("input").alias("value"), F.col("txn").alias("_out_txn"), F.col("send").alias("_out"))
    with_outputs = (lost.join(outputs, (lost["value"] == outputs["value"]) & (lost["txn"] == outputs["_out_txn"]),
                              "left")
                    .drop(outputs["value"])
                    .groupBy(F.col("value").alias("input"), "txn", "subscription", "ack")
                    .agg(F.slice(F.sort_array(F.collect_list("_out")), 1, _EXAMPLE_VALUES)
                         .alias("invisible_outputs")))
    unjudged = consumed.filter(F.col("sends_uncovered") > 0)
    return PendingCheck(AnomalyClass.CTP_LOSS, with_outputs, ["ack.time_ns", "input"],
                     max_examples=ctx.max_examples, unjudged=unjudged,
                     note="{n} committed input ack(s) whose transaction wrote to topics the drain "
                          "did not read to the end")


def ctp_duplicate(ctx: CheckContext) -> CheckResult:
    """Run the ctp-duplicate check on its own (`run_checks` evaluates every plan together)."""
    return evaluate([plan_ctp_duplicate(ctx)])[0]


def ctp_loss(ctx: CheckContext) -> CheckResult:
    """Run the ctp-loss check on its own (`run_checks` evaluates every plan together)."""
    return evaluate([plan_ctp_loss(ctx)])[0]
