"""aborted-read, dirty-read and unexpected in SQL (analysis.checks.reads: the rules and their why).

Spark's `first` and `min_by` take the first row they meet; a value's receives come before its
final reads there (the union keeps its inputs' order), so here the receives go first too (`_src`),
then the earlier observation, then the operation: the same row wherever Spark's is defined.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analysis.checks.base import clean, first_of_reads
from analysis.checks.reads import _BY_COORDINATOR, _NEVER_COMMITTED
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import in_list, literal, ref
from analysis.model import ABORTED, COORDINATOR, NO_COMMIT, VISIBILITY
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_OK, _FAIL, _ABORTED = literal(OpType.OK.value), literal(OpType.FAIL.value), literal(ABORTED)
_NO_COMMIT = f"coalesce(decided_by = {literal(NO_COMMIT)}, false)"
# Receives first, then the earlier, then the operation (the module's docstring).
_RECEIVES_FIRST = '_src, observed.time_ns, observed.writer, observed."index"'


def _observed(columns: list[str]) -> str:
    return ref(columns, "o_", f_expr="kind", type=_OK, value="value", txn=None)


def _send(columns: list[str], prefix: str) -> str:
    if prefix:
        return ref(columns, prefix, f=OpF.SEND.value, time=f"{prefix}invoke_ns", value="value", txn="txn",
                   subscription=None)
    return ref(columns, f=OpF.SEND.value, time="invoke_ns", subscription=None)


def _read_placeholder(columns: list[str]) -> str:
    """A final read named by its value and time; `_with_first_reads` fills in the rest."""
    return ref(columns, f=OpF.READ.value, time="read_ns", writer=None, index=None, process=None, type=None,
               txn=None, subscription=None, msg_id=None, segment=None)


def _min_by(value: str, key: str, then: str) -> str:
    """Spark's `min_by`: rows with a null key do not count; ties go to the first row (`then`)."""
    return f"first({value} ORDER BY {key}, {then}) FILTER (WHERE ({key}) IS NOT NULL)"


def first_reads(ctx: DuckContext, values: list[str]) -> dict[str, dict[str, Any]]:
    """analysis.checks.base.first_reads: the first final read of each of a few values."""
    if not values:
        return {}
    return first_of_reads(ctx.rows(f"SELECT * FROM reads WHERE {in_list('value', values)}"))


def _with_first_reads(ctx: DuckContext, key: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        values = [e["value"] for e in examples if e.get(key, {}).get("f") == OpF.READ.value and "value" in e]
        found = first_reads(ctx, values)
        for e in examples:
            if e.get("value") in found and e.get(key, {}).get("f") == OpF.READ.value:
                e[key] = found[e["value"]]
        return examples
    return finish


def plan_aborted_read(ctx: DuckContext) -> Plan:
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.ABORTED_READ)
    obs, sends = ctx.columns("observations"), ctx.columns("sends")
    failed = "send failed definitively"
    why_received = (f"CASE WHEN s_type = {_FAIL} THEN {literal(failed)} "
                    f"WHEN decided_by = {literal(VISIBILITY)} "
                    f"THEN {literal('transaction aborted (nothing of it is visible)')} "
                    f"WHEN decided_by = {literal(COORDINATOR)} THEN {literal(_BY_COORDINATOR)} "
                    f"ELSE {literal('transaction aborted')} END")
    why_read = (f"CASE WHEN \"type\" = {_FAIL} THEN {literal(failed)} "
                f"WHEN {_NO_COMMIT} THEN {literal(_NEVER_COMMITTED)} "
                f"WHEN decided_by = {literal(COORDINATOR)} THEN {literal(_BY_COORDINATOR)} "
                f"ELSE {literal('transaction aborted')} END")
    # The first read, live or cold, names a value the reads showed.
    first_read = "SELECT * REPLACE (least(read_ns, live_read_ns) AS read_ns) FROM sends"
    anomalies = f"""
        WITH hits AS (
            SELECT value, txn, {why_received} AS why, {_send(obs, "s_")} AS send, {_observed(obs)} AS observed,
                   1 AS _n, 0 AS _src
            FROM observations
            WHERE sent AND ((outcome = {_ABORTED} AND NOT {_NO_COMMIT}) OR s_type = {_FAIL})
            UNION ALL
            SELECT value, txn, {why_read}, {_send(sends, "")}, {_read_placeholder(sends)}, 1, 1
            FROM ({first_read})
            WHERE (visible OR live_visible) AND (outcome = {_ABORTED} OR "type" = {_FAIL}))
        SELECT value, first(txn ORDER BY {_RECEIVES_FIRST}) AS txn, first(why ORDER BY {_RECEIVES_FIRST}) AS why,
               first(send ORDER BY {_RECEIVES_FIRST}) AS send,
               {_min_by("observed", "observed.time_ns", _RECEIVES_FIRST)} AS observed,
               sum(_n)::BIGINT AS observations
        FROM hits GROUP BY value"""
    return SqlCheck(AnomalyClass.ABORTED_READ, anomalies, ["observed.time_ns", "value"],
                    max_examples=ctx.max_examples, finish=_with_first_reads(ctx, "observed"))


def plan_dirty_read(ctx: DuckContext) -> Plan:
    if ctx.count("receives") == 0:
        return clean(AnomalyClass.DIRTY_READ)
    obs = ctx.columns("observations")
    earliest = 'o_delivered_ns, o_time_ns, o_writer, o_index'
    anomalies = f"""
        WITH per_value AS (
            SELECT value, first(txn ORDER BY {earliest}) AS txn, first({_send(obs, "s_")} ORDER BY {earliest}) AS send,
                   {_min_by(_observed(obs), "o_delivered_ns", "o_time_ns, o_writer, o_index")} AS receive,
                   min(o_delivered_ns) AS delivered_ns,
                   first(commit_invoke_ns ORDER BY {earliest}) AS commit_invoke_ns, count(*) AS early_receives
            FROM observations
            WHERE sent AND txn IS NOT NULL AND (outcome <> {_ABORTED} OR {_NO_COMMIT}) AND s_type <> {_FAIL}
                  AND (commit_invoke_ns IS NULL OR {ctx.later("commit_invoke_ns", "o_delivered_ns")})
            GROUP BY value)
        SELECT value, txn, send, receive, delivered_ns, commit_invoke_ns,
               (commit_invoke_ns - delivered_ns)::DOUBLE / 1e6 AS ms_before_commit, early_receives
        FROM per_value"""
    return SqlCheck(AnomalyClass.DIRTY_READ, anomalies, ["receive.time_ns", "value"], max_examples=ctx.max_examples)


def plan_unexpected(ctx: DuckContext) -> Plan:
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.UNEXPECTED)
    obs, visible, reads = ctx.columns("observations"), ctx.columns("visible"), ctx.columns("reads")
    # A value is one case; a message without one is a case of its own, named by its operation
    # (Spark's key: the value, else "\0writer:index").
    no_value = ref(reads, f=OpF.READ.value, type=_OK, txn=None, subscription=None)
    anomalies = f"""
        WITH hits AS (
            SELECT value, CASE WHEN value IS NULL THEN o_writer END AS _kw,
                   CASE WHEN value IS NULL THEN o_index END AS _ki, {_observed(obs)} AS observed, 1 AS _n, 0 AS _src
            FROM observations WHERE NOT sent
            UNION ALL
            SELECT value, NULL, NULL, {_read_placeholder(visible)}, reads, 1
            FROM visible v WHERE NOT EXISTS (SELECT 1 FROM sends s WHERE s.value = v.value)
            UNION ALL
            SELECT value, writer, "index", {no_value}, 1, 2
            FROM reads WHERE value IS NULL)
        SELECT first(value ORDER BY {_RECEIVES_FIRST}) AS value,
               {_min_by("observed", "observed.time_ns", _RECEIVES_FIRST)} AS observed,
               sum(_n)::BIGINT AS observations
        FROM hits GROUP BY value, _kw, _ki"""
    return SqlCheck(AnomalyClass.UNEXPECTED, anomalies, ["observed.time_ns", "value"],
                    max_examples=ctx.max_examples, finish=_with_first_reads(ctx, "observed"))


CHECKS: dict[AnomalyClass, PlanCheck] = {
    AnomalyClass.ABORTED_READ: plan_aborted_read,
    AnomalyClass.DIRTY_READ: plan_dirty_read,
    AnomalyClass.UNEXPECTED: plan_unexpected,
}
