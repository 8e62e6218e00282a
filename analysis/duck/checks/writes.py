"""lost-write, partial-txn and duplicate in SQL (analysis.checks.writes: the rules and their why)."""

from __future__ import annotations

from typing import Any

from analysis.checks.base import NO_DRAIN_REASON, clean, skipped
from analysis.checks.writes import read_ref, send_ref, visibility_evidence
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import in_list, literal, ref
from analysis.model import COMMITTED, COORDINATOR, UNKNOWN, VISIBILITY, lost_run_of
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_EXAMPLE_VALUES = 5
_OK, _INFO = literal(OpType.OK.value), literal(OpType.INFO.value)


def sends_of(ctx: DuckContext, txns: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The sends of a few example transactions, in send order (bounded: the examples' transactions)."""
    by_txn: dict[str, list[dict[str, Any]]] = {}
    for row in ctx.rows(f"SELECT * FROM sends WHERE {in_list('txn', txns)}"):
        by_txn.setdefault(row["txn"], []).append(row)
    return {txn: sorted(rows, key=lambda r: (r["invoke_ns"], r["index"])) for txn, rows in by_txn.items()}


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
    drain = ctx.drain
    live_reads = bool(drain.live_topics)

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        decided = sorted({e["txn"] for e in examples if e.get("decided_by") == VISIBILITY})
        sends = sends_of(ctx, decided) if decided else {}
        records = ctx.coordinator_records(sorted({e["txn"] for e in examples
                                                  if e.get("decided_by") == COORDINATOR}))
        for e in examples:
            sent = e.get("send") or {}
            run = lost_run_of(drain, sent.get("topic"), sent.get("segment"), sent.get("msg_id"))
            if run is not None:
                e["lost_entries"] = dict(run)
            if e.get("txn") in sends:
                e["visible_in"] = visibility_evidence(sends[e["txn"]], live_reads)
            if e.get("txn") in records:
                e["coordinator"] = records[e["txn"]]
        return examples

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
    live_reads = bool(ctx.drain.live_topics)

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
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

    return SqlCheck(AnomalyClass.PARTIAL_TXN, partial, ["txn"], max_examples=ctx.max_examples,
                    unjudged=unjudged, finish=finish,
                    note="{n} transaction(s) with values on topics the drain did not read to the end")


def plan_duplicate(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.DUPLICATE, NO_DRAIN_REASON)
    if ctx.count("reads") == 0:
        return clean(AnomalyClass.DUPLICATE)

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        values = sorted({e["value"] for e in examples})
        by_value: dict[str, list[dict[str, Any]]] = {}
        for row in ctx.rows(f"SELECT * FROM reads WHERE {in_list('value', values)}"):
            by_value.setdefault(row["value"], []).append(row)
        for e in examples:
            mine = sorted(by_value.get(e["value"], []), key=lambda r: (r["time_ns"], r["index"]))
            e["reads"] = [read_ref(r) for r in mine][:_EXAMPLE_VALUES]
        return examples

    return SqlCheck(AnomalyClass.DUPLICATE, "SELECT value, positions FROM visible WHERE positions > 1", ["value"],
                    max_examples=ctx.max_examples, finish=finish)


CHECKS: dict[AnomalyClass, PlanCheck] = {
    AnomalyClass.LOST_WRITE: plan_lost_write,
    AnomalyClass.PARTIAL_TXN: plan_partial_txn,
    AnomalyClass.DUPLICATE: plan_duplicate,
}
