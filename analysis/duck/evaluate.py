"""What a SQL check gives, and how its anomalies become a CheckResult: analysis.checks.base in SQL.

A check is `plan_<check>(ctx: DuckContext) -> Plan`: a finished CheckResult (skipped or clean),
or a `SqlCheck`, a SELECT with one row per anomaly (and optionally one of the cases it could not
judge). `evaluate` counts each, then takes the ordered examples of those that found anomalies,
in the Spark checker's order (ascending keys with nulls first), so both engines give the same
examples of the same history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from analysis.checks.base import (
    MAX_EXAMPLES,
    MAX_INSTANCES,
    CheckResult,
    CheckStatus,
    finished,
    to_plain,
)
from analysis.duck.frames import DuckContext
from analysis.duck.sql import ordered
from harness.anomalies import AnomalyClass

__all__ = ["Plan", "SqlCheck", "evaluate"]


@dataclass(frozen=True)
class SqlCheck:
    """A check's anomaly rows, not yet counted (analysis.checks.base.PendingCheck in SQL).

    `anomalies` and `unjudged` are SELECT statements over the context's frames; `order_by` SQL
    expressions over the anomalies' columns (`send.time_ns` names a struct's field)."""

    name: AnomalyClass
    anomalies: str
    order_by: Sequence[str]
    max_examples: int = MAX_EXAMPLES
    max_instances: int = MAX_INSTANCES
    unjudged: str | None = None
    note: str = ""
    finish: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None


Plan = CheckResult | SqlCheck


def _count(cursor: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = cursor.execute(sql).fetchone()
    return int(row[0]) if row is not None else 0


def evaluate_one(ctx: DuckContext, item: Plan) -> CheckResult:
    """The result of one plan: its count, its unjudged count, and its examples where it found any."""
    if isinstance(item, CheckResult):
        return item
    plan = item
    cursor = ctx.con.cursor()
    table = f"_anomalies_{plan.name.name.lower()}"
    cursor.execute(f"CREATE OR REPLACE TABLE {table} AS {plan.anomalies}")
    try:
        found = _count(cursor, f"SELECT count(*) FROM {table}")
        not_judged = 0
        if plan.unjudged is not None:
            not_judged = _count(cursor, f"SELECT count(*) FROM ({plan.unjudged})")
        examples: tuple[dict[str, Any], ...] = ()
        instances: tuple[dict[str, Any], ...] = ()
        if found:
            every = plan.max_examples < found <= plan.max_instances
            limit = found if every else plan.max_examples
            rows = ctx.rows(f"SELECT * FROM {table} ORDER BY {ordered(plan.order_by)} LIMIT {limit}")
            done = tuple(finished(plan.finish, [to_plain(r) for r in rows]))
            examples = done[:plan.max_examples]
            instances = done if every else ()
    finally:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
    return CheckResult(plan.name, CheckStatus.RAN, count=found, examples=examples, unjudged=not_judged,
                       note=plan.note.format(n=not_judged) if not_judged else None, instances=instances)


def evaluate(ctx: DuckContext, plans: Sequence[Plan]) -> list[CheckResult]:
    """Results of `plans`, in order."""
    return [evaluate_one(ctx, plan) for plan in plans]
