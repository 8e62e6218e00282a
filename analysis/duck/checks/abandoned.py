"""unresolved-txn in SQL (analysis.checks.abandoned: the rules and their why)."""

from __future__ import annotations

from analysis.checks.abandoned import NOT_JUDGED
from analysis.checks.base import clean
from analysis.duck.checks.acks import stuck_acks
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import in_list, literal, ref
from analysis.model import ABORTED, UNKNOWN
from harness.anomalies import AnomalyClass
from harness.history.schema import LIVE_DRAIN_WRITER, UNFINISHED_TXN_STATES, OpF, OpType

__all__ = ["abandoned_transactions", "plan_unresolved_txn"]

_READ_COLUMNS = ["txn", "writer", "process", "open_ns", "commit_invoke_ns", "outcome", "deadline_ns",
                 "r_time_ns", "r_writer", "r_index", "r_process", "r_status"]


def abandoned_transactions(ctx: DuckContext) -> str:
    """analysis.checks.abandoned.abandoned_transactions: txn, writer, process, open_ns,
    commit_invoke_ns, outcome, deadline_ns."""
    limit = ctx.txn_timeout_ns + ctx.abort_bound_ns
    return f"""SELECT txn, writer, process, ok_open_complete_ns AS open_ns, commit_invoke_ns, outcome,
                      ok_open_complete_ns + {limit}::BIGINT AS deadline_ns
               FROM txns WHERE NOT ended_ok AND opens_ok > 0"""


def _number(expr: str, decimals: int) -> str:
    """Spark's format_number: thousands separated by commas, rounded half to even on the exact
    double (as Java's DecimalFormat rounds)."""
    return f"format('{{:,.{decimals}f}}', ({expr})::DOUBLE)" if decimals else f"format('{{:,}}', {expr})"


def plan_unresolved_txn(ctx: DuckContext) -> Plan:
    if not ctx.has_txn_states:
        return clean(AnomalyClass.UNRESOLVED_TXN)
    status, asked = "r_status", "r_time_ns"
    after_deadline = f"({asked} >= deadline_ns)"
    late = f"({asked} - deadline_ns) / 1e9 + {literal(ctx.abort_bound_ns / 1e9)}::DOUBLE"
    live = f"CASE WHEN r_writer = {literal(LIVE_DRAIN_WRITER)} THEN ' at the live read' ELSE '' END"
    # `||` and not concat(): Spark's concat is null when a part is.
    why = (f"CASE WHEN {after_deadline} AND {in_list(status, UNFINISHED_TXN_STATES)} "
           f"THEN 'the coordinator still had it ' || {status} || {live} || ' ' || {_number(late, 1)} "
           f"|| ' s after its timeout' "
           f"WHEN {status} = 'COMMITTED' AND commit_invoke_ns IS NULL "
           f"THEN 'the coordinator committed it although its client never asked to commit' END")
    reading = ref(_READ_COLUMNS, "r_", f=OpF.TXN_STATE.value, time=asked, type=literal(OpType.OK.value), txn="txn")
    judged = f"({status} IS NOT NULL AND NOT {in_list(status, NOT_JUDGED)} AND {after_deadline})"
    # each drain's latest reading: the live drain's (before a cold restart) and the final one's
    latest = """SELECT txn, max({'time_ns': time_ns, 'writer': writer, 'index': "index", 'process': process,
                                 'status': status, 'error': error}) AS _s
                FROM txn_states GROUP BY txn, writer"""
    ctes = [f"abandoned AS ({abandoned_transactions(ctx)})",
            f"""readings AS (SELECT a.*, l._s.time_ns AS r_time_ns, l._s.writer AS r_writer, l._s."index" AS r_index,
                                l._s.process AS r_process, l._s.status AS r_status
                         FROM abandoned a LEFT JOIN ({latest}) l ON l.txn = a.txn)"""]
    parts = [f"""SELECT 0 AS _part, txn, writer, process, why, status, seconds_open, reading FROM (
                     SELECT txn, writer, process, {why} AS why, {status} AS status,
                            ({asked} - open_ns) / 1e9 AS seconds_open, {reading} AS reading FROM readings)
                 WHERE why IS NOT NULL"""]
    if ctx.count("acks") and ctx.drain.complete:
        stuck, _ = stuck_acks(ctx)
        parts.append(f"""
            SELECT 1, txn, writer, process,
                   {_number('_held', 0)} || ' ack(s) it held were never released (not delivered again after its abort)',
                   {literal(ABORTED)}, NULL::DOUBLE, _first.a
            FROM (SELECT a.txn, a.writer, a.process, count(*) AS _held, min({{'t': s.ack.time_ns, 'a': s.ack}}) AS _first
                  FROM {stuck} s JOIN abandoned a ON a.txn = s.txn
                  WHERE s.client_outcome = {literal(UNKNOWN)} AND a.outcome = {literal(ABORTED)}
                  GROUP BY a.txn, a.writer, a.process)""")
    # Spark's collect_list and first() take the rows as they come: on one partition the union's order,
    # the coordinator's readings, then the held acks. Two readings of one transaction go by reading here.
    found = f"""WITH {', '.join(ctes)}
                SELECT txn, writer, process, string_agg(why, '; ' ORDER BY _part, reading) AS why,
                       first(status ORDER BY _part, reading) AS status, max(seconds_open) AS seconds_open,
                       min(reading) AS observed
                FROM ({' UNION ALL '.join(parts)}) GROUP BY txn, writer, process"""
    unjudged = f"""WITH {', '.join(ctes)}
                   SELECT txn FROM readings GROUP BY txn
                   HAVING coalesce(max(CAST({judged} AS INTEGER)), 0) = 0"""
    return SqlCheck(AnomalyClass.UNRESOLVED_TXN, found, ["observed.time_ns", "txn"],
                    max_examples=ctx.max_examples, unjudged=unjudged,
                    note="{n} abandoned transaction(s) whose coordinator gave no reading after their "
                         "timeout plus checks.abort_bound_s")


CHECKS: dict[AnomalyClass, PlanCheck] = {
    AnomalyClass.UNRESOLVED_TXN: plan_unresolved_txn,
}
