"""stalled-commit in SQL (analysis.checks.liveness: the rules and their why).

`least` and `greatest` skip nulls in DuckDB as in Spark, so a commit unfinished at a history
without an end stays unmeasured (null) here too, and is not reported.
"""

from __future__ import annotations

from analysis.checks.liveness import merged_windows
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import in_list, literal, ref
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF


def _bigint(value: int | None) -> str:
    return f"{literal(value)}::BIGINT"


def plan_stalled_commit(ctx: DuckContext) -> Plan:
    end = _bigint(ctx.history_end_ns)
    join = ""
    if ctx.lost_writers:
        # A lost writer's unfinished commits end at its own last line.
        join = f"""LEFT JOIN (SELECT writer AS _lost, max(greatest(invoke_ns, coalesce(complete_ns, invoke_ns)))
                                     AS _writer_end
                              FROM pairs WHERE {in_list("writer", ctx.lost_writers)} GROUP BY writer) l
                   ON l._lost = p.writer"""
        end = f"coalesce(l._writer_end, {end})"
    took = "_until - invoke_ns"
    for start_ns, end_ns in merged_windows(ctx.commit_blocked_windows):
        cut_end = _bigint(end_ns) if end_ns is not None else "_until"
        overlap = f"least(_until, {cut_end}) - greatest(invoke_ns, {_bigint(start_ns)})"
        took = f"({took}) - greatest({overlap}, 0::BIGINT)"
    ends = f"({literal(OpF.TXN_COMMIT.value)}, {literal(OpF.TXN_ABORT.value)})"
    anomalies = f"""
        WITH timed AS (
            SELECT p.*, CASE WHEN p.completed THEN p.complete_ns ELSE {end} END AS _until
            FROM pairs p {join} WHERE p.f IN {ends})
        SELECT txn, {ref(ctx.columns("pairs"), time="invoke_ns")} AS op, completed,
               ({took}) / 1e9 AS seconds, {ctx.stall_after_ns}::DOUBLE / 1e9 AS stall_after_s
        FROM timed WHERE ({took}) > {ctx.stall_after_ns}"""
    return SqlCheck(AnomalyClass.STALLED_COMMIT, anomalies, ["seconds desc", "op.writer", "op.index"],
                    max_examples=ctx.max_examples)


CHECKS: dict[AnomalyClass, PlanCheck] = {AnomalyClass.STALLED_COMMIT: plan_stalled_commit}
