"""ctp-duplicate and ctp-loss in SQL (analysis.checks.ctp: the rules and their why).

ctp-loss counts the messages committed cumulative acks claimed: the table double-ack makes
(analysis.duck.checks.ack_conflicts.cumulative_claims), read, not made again.
"""

from __future__ import annotations

from analysis.checks.base import NO_DRAIN_REASON, clean, skipped
from analysis.checks.ctp import ctp_duplicate_finish, ctp_loss_finish
from analysis.duck.checks.ack_conflicts import cumulative_claims
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import literal, ref
from analysis.model import COMMITTED
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_EXAMPLE_VALUES = 5
_OK, _INFO = literal(OpType.OK.value), literal(OpType.INFO.value)
_COMMITTED = literal(COMMITTED)

def _carried(ctx: DuckContext) -> str:
    """One row per input a visible output carries: `input`, `visible_outputs` (distinct visible values
    carrying it; a null value counts for none but still carries its input). Read by both checks."""
    return ctx.shared("ctp_carried", lambda: f"""
        SELECT input, count(value) AS visible_outputs FROM (
            SELECT DISTINCT input, value FROM (
                SELECT unnest(inputs) AS input, value FROM sends
                WHERE len(coalesce(inputs, []::VARCHAR[])) > 0 AND visible AND "type" IN ({_OK}, {_INFO})))
        GROUP BY input""")


def plan_ctp_duplicate(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.CTP_DUPLICATE, NO_DRAIN_REASON)
    if ctx.count("ctp_sends") == 0:
        return clean(AnomalyClass.CTP_DUPLICATE)
    dups = f"SELECT input, visible_outputs FROM {_carried(ctx)} WHERE visible_outputs > 1"

    return SqlCheck(AnomalyClass.CTP_DUPLICATE, dups, ["input"], max_examples=ctx.max_examples,
                    finish=ctp_duplicate_finish(ctx))


def plan_ctp_loss(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.CTP_LOSS, NO_DRAIN_REASON)
    if ctx.count("ctp_sends") == 0 or ctx.count("acks") == 0:
        return clean(AnomalyClass.CTP_LOSS)
    ack = ref(ctx.columns("acks"), f=OpF.ACK.value, time="invoke_ns")
    acked = f"""SELECT value, txn, subscription, {ack} AS ack, 0 AS _source FROM acks
                WHERE "type" = {_OK} AND outcome = {_COMMITTED}"""
    if ctx.count("cumulative_acks"):
        # Spark's dropDuplicates keeps one row per (value, txn, subscription) as it meets them: the
        # individual ack first (the union's first part), then the earliest ack.
        acked = f"""SELECT value, txn, subscription, ack FROM (
                        {acked}
                        UNION ALL
                        SELECT value, txn, subscription, ack, 1 AS _source FROM {cumulative_claims(ctx)}
                        WHERE outcome = {_COMMITTED} AND NOT ambiguous)
                    QUALIFY row_number() OVER (
                        PARTITION BY value, txn, subscription
                        ORDER BY _source, ack.time_ns ASC NULLS FIRST, ack.writer ASC NULLS FIRST,
                                 ack."index" ASC NULLS FIRST) = 1"""
    carried = _carried(ctx)
    not_carried = ctx.shared("ctp_loss_not_carried", lambda: f"""
        SELECT a.value, a.txn, a.subscription, a.ack, t.sends_uncovered
        FROM ({acked}) a JOIN (SELECT txn, sends_uncovered FROM txns WHERE ctp) t ON t.txn = a.txn
        WHERE NOT EXISTS (SELECT 1 FROM {carried} c WHERE c.input = a.value)""")
    lost = f"SELECT value AS input, txn, subscription, ack FROM {not_carried} WHERE sends_uncovered = 0"
    unjudged = f"SELECT 1 FROM {not_carried} WHERE sends_uncovered > 0"

    return SqlCheck(AnomalyClass.CTP_LOSS, lost, ["ack.time_ns", "input"], max_examples=ctx.max_examples,
                    unjudged=unjudged, finish=ctp_loss_finish(ctx),
                    note="{n} committed input ack(s) whose transaction wrote to topics the drain "
                         "did not read to the end")


CHECKS: dict[AnomalyClass, PlanCheck] = {
    AnomalyClass.CTP_DUPLICATE: plan_ctp_duplicate,
    AnomalyClass.CTP_LOSS: plan_ctp_loss,
}
