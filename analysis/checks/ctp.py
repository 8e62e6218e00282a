"""Checks of consume-transform-produce pipelines: ctp-duplicate, ctp-loss.

A consume-transform-produce (CTP) transaction acks its inputs and sends
outputs whose `inputs` name them. Both checks need `drain-complete`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.ack_conflicts import cumulative_claims
from analysis.checks.base import NO_DRAIN_REASON, PendingCheck, Plan, clean, ref, skipped
from analysis.checks.context import CheckContext
from analysis.checks.lookups import ExampleRows, RowLike
from analysis.checks.writes import send_ref
from analysis.model import COMMITTED, union_all
from analysis.spark import single_partition_mode
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_EXAMPLE_VALUES = 5


def _outputs(ctx: CheckContext, *, visible_only: bool) -> DataFrame:
    """(input, value, txn) for every CTP output send, one row per input it carries."""
    outs = ctx.sends.filter(F.size(F.coalesce(F.col("inputs"), F.array())) > 0)
    if visible_only:
        outs = outs.filter(F.col("visible") & F.col("type").isin(OpType.OK.value, OpType.INFO.value))
    return outs.select(F.explode("inputs").alias("input"), "value", "txn")


def _carried(ctx: CheckContext) -> DataFrame:
    """One row per input some visible output carries: `input`, `visible_outputs` (how many distinct
    visible values carry it). ctp-duplicate reads the inputs carried twice, ctp-loss every carried
    input: built once for both (`CheckContext.shared`), in one shuffle of the outputs by input."""
    def build() -> DataFrame:
        outputs = _outputs(ctx, visible_only=True)
        if not single_partition_mode():
            # Both groupings below keep this partitioning: one shuffle, not one each.
            outputs = outputs.repartition("input")
        # A null value is no output to count (as a distinct count skips it), but still carries its input.
        return (outputs.select("input", "value").distinct().groupBy("input")
                .agg(F.count("value").alias("visible_outputs")))
    return ctx.shared("ctp-carried", build)


def _output_rows(ctx: ExampleRows, inputs: list[str]) -> dict[str, list[RowLike]]:
    """Input -> the sends carrying it, for a few inputs (for examples)."""
    wanted = set(inputs)
    by_input: dict[str, list[RowLike]] = {}
    for row in ctx.rows_carrying("sends", "inputs", sorted(wanted)):
        for carried in set(row["inputs"] or []) & wanted:
            by_input.setdefault(carried, []).append(row)
    return by_input


def ctp_duplicate_finish(ctx: ExampleRows) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """ctp-duplicate's `finish` (either checker's context): the visible outputs of each input."""

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = _output_rows(ctx, [e["input"] for e in examples])
        for e in examples:
            mine = sorted((r for r in rows.get(e["input"], []) if r["visible"] and r["type"] != OpType.FAIL.value),
                          key=lambda r: (r["invoke_ns"], r["index"]))
            e["outputs"] = [send_ref(r) for r in mine][:_EXAMPLE_VALUES]
        return examples

    return finish


def ctp_loss_finish(ctx: ExampleRows) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """ctp-loss's `finish` (either checker's context): the outputs of the input's transaction."""

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = _output_rows(ctx, [e["input"] for e in examples])
        for e in examples:
            mine = sorted((r for r in rows.get(e["input"], []) if r["txn"] == e["txn"]),
                          key=lambda r: (r["invoke_ns"], r["index"]))
            e["invisible_outputs"] = [send_ref(r) for r in mine][:_EXAMPLE_VALUES]
        return examples

    return finish


def plan_ctp_duplicate(ctx: CheckContext) -> Plan:
    """An input has two or more visible outputs (it was processed twice, both committed)."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.CTP_DUPLICATE, NO_DRAIN_REASON)
    if ctx.count("ctp_sends") == 0:
        return clean(AnomalyClass.CTP_DUPLICATE)
    dups = _carried(ctx).filter(F.col("visible_outputs") > 1)

    return PendingCheck(AnomalyClass.CTP_DUPLICATE, dups, ["input"], max_examples=ctx.max_examples,
                        finish=ctp_duplicate_finish(ctx))


def plan_ctp_loss(ctx: CheckContext) -> Plan:
    """An input's ack committed (ok, in a committed CTP transaction) but no visible output carries it;
    a committed cumulative ack counts for every message it claimed (analysis.checks.ack_conflicts).

    A CTP transaction is one with at least one send carrying `inputs`. Judged
    only when all of that transaction's sends went to covered topics.
    """
    if not ctx.drain.complete:
        return skipped(AnomalyClass.CTP_LOSS, NO_DRAIN_REASON)
    if ctx.count("ctp_sends") == 0 or ctx.count("acks") == 0:
        return clean(AnomalyClass.CTP_LOSS)
    ctp_txns = ctx.txns.filter(F.col("ctp")).select("txn", "sends_uncovered")
    acked = ctx.acks.filter((F.col("type") == OpType.OK.value) & (F.col("outcome") == COMMITTED))
    acked = acked.select("value", "txn", "subscription", ref(acked, f=OpF.ACK.value, time="invoke_ns").alias("ack"))
    if ctx.count("cumulative_acks"):
        # A committed cumulative ack consumed every message at or before it that it claimed, not only
        # the one it names: an input it covered that no visible output carries is lost as well (a
        # Failover consumer that never processed it, a message delivered to a consumer that lost the
        # partition); claimed twice, it stays for double-ack.
        covered = (cumulative_claims(ctx).filter((F.col("outcome") == COMMITTED) & ~F.col("ambiguous"))
                   .select("value", "txn", "subscription", "ack"))
        acked = union_all([acked, covered]).dropDuplicates(["value", "txn", "subscription"])
    consumed = acked.join(ctp_txns, "txn")
    carried = _carried(ctx).select(F.col("input").alias("value"))
    # An input a visible output carries is judged wherever that output is; one no visible
    # output carries is lost only when its transaction wrote nothing to a topic the drain
    # did not read to the end (sends_uncovered counts only values that are not visible).
    # Kept: the lost and the unjudged ones are both read from it, not joined twice.
    not_carried = ctx.shared("ctp-loss-not-carried", lambda: consumed.join(carried, "value", "left_anti"))
    lost = not_carried.filter(F.col("sends_uncovered") == 0)
    lost = lost.select(F.col("value").alias("input"), "txn", "subscription", "ack")
    unjudged = not_carried.filter(F.col("sends_uncovered") > 0)

    return PendingCheck(AnomalyClass.CTP_LOSS, lost, ["ack.time_ns", "input"], max_examples=ctx.max_examples,
                        unjudged=unjudged, finish=ctp_loss_finish(ctx),
                        note="{n} committed input ack(s) whose transaction wrote to topics the drain "
                             "did not read to the end")
