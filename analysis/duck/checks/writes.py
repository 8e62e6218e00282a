"""lost-write, partial-txn and duplicate in SQL (analysis.checks.writes: the rules and their why)."""

from __future__ import annotations

from analysis.checks.base import NO_DRAIN_REASON, clean, skipped
from analysis.checks.writes import duplicate_finish, lost_write_finish, partial_txn_finish
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import literal, ref
from analysis.model import COMMITTED, UNKNOWN
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_OK, _INFO = literal(OpType.OK.value), literal(OpType.INFO.value)


def plan_lost_write(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.LOST_WRITE, NO_DRAIN_REASON)
    if ctx.count("sends") == 0:
        return clean(AnomalyClass.LOST_WRITE)
    cold_missing, live_missing = "(covered AND NOT visible)", "(live_covered AND NOT live_visible)"
    send = ref(ctx.columns("sends"), f=OpF.SEND.value, time="invoke_ns")
    lost = f"""SELECT value, txn, coalesce(decided_by, 'client') AS decided_by,
                      CASE WHEN {cold_missing} AND {live_missing} THEN 'live and cold'
                           WHEN {cold_missing} THEN 'cold' ELSE 'live' END AS missing_from, {send} AS send
               FROM sends WHERE "type" = {_OK} AND outcome = {literal(COMMITTED)} AND ({cold_missing} OR {live_missing})"""
    unjudged = f"""SELECT 1 FROM sends WHERE NOT visible AND (
                       ("type" = {_OK} AND outcome = {literal(COMMITTED)} AND NOT covered)
                       OR ("type" IN ({_OK}, {_INFO}) AND outcome = {literal(UNKNOWN)}))"""
    finish = lost_write_finish(ctx, ctx.drain)

    return SqlCheck(AnomalyClass.LOST_WRITE, lost, ["send.time_ns", "value"], max_examples=ctx.max_examples,
                    finish=finish, unjudged=unjudged,
                    note="{n} value(s) not visible on topics the drain did not read to the end, committed "
                         "or of transactions whose outcome stayed unknown")


def plan_partial_txn(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.PARTIAL_TXN, NO_DRAIN_REASON)
    if ctx.count("sends") == 0:
        return clean(AnomalyClass.PARTIAL_TXN)
    partial = """SELECT txn, sends_visible AS visible_count, sends_ok_missing AS missing_count FROM txns
                 WHERE sends_visible > 0 AND sends_ok_missing > 0"""
    unjudged = """SELECT 1 FROM txns WHERE sends_visible > 0 AND sends_ok_missing = 0 AND sends_ok_uncovered > 0"""
    finish = partial_txn_finish(ctx, ctx.drain)

    return SqlCheck(AnomalyClass.PARTIAL_TXN, partial, ["txn"], max_examples=ctx.max_examples,
                    unjudged=unjudged, finish=finish,
                    note="{n} transaction(s) with values on topics the drain did not read to the end")


def plan_duplicate(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.DUPLICATE, NO_DRAIN_REASON)
    if ctx.count("reads") == 0:
        return clean(AnomalyClass.DUPLICATE)

    return SqlCheck(AnomalyClass.DUPLICATE, "SELECT value, positions FROM visible WHERE positions > 1", ["value"],
                    max_examples=ctx.max_examples, finish=duplicate_finish(ctx))


CHECKS: dict[AnomalyClass, PlanCheck] = {
    AnomalyClass.LOST_WRITE: plan_lost_write,
    AnomalyClass.PARTIAL_TXN: plan_partial_txn,
    AnomalyClass.DUPLICATE: plan_duplicate,
}
