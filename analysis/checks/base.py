"""What every check returns, and the helpers that turn an anomaly DataFrame into it.

A check is a pure function of a `CheckContext`, written as a plan
(`plan_<check>(ctx) -> Plan`, registered in analysis.checks.REGISTRY under its
anomaly class): either a finished result (skipped with a reason, or clean
because the history has nothing the check looks at) or a `PendingCheck`, a
DataFrame with one row per anomaly (and optionally one of the cases it could
not judge). `evaluate()` counts the rows of many plans in one
Spark job, then takes a few ordered examples from the plans that found
anomalies (ordered, so the same history always gives the same examples). One
job instead of one or two per check is what keeps small histories fast. A check
that ran but could not judge some cases says how many in `unjudged` and why in
`note` (the verdict is then unknown unless an anomaly was found).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from analysis.model import union_all
from harness.anomalies import AnomalyClass

MAX_EXAMPLES = 50   # examples kept in results.json, per anomaly class
# Beyond the examples, a class's instances up to this many are kept in a file of their own
# (analysis/instances/<class>.jsonl): an expectation scoped to a fault attributes every
# instance, not the first fifty (analysis/verdicts.py). More than this stays unattributed.
MAX_INSTANCES = 10_000
# `finish` completes instances this many at a time: each batch is one lookup job of its own.
FINISH_BATCH = 500

# Fields of an op reference, the way examples name operations.
REF_FIELDS = ("writer", "index", "process", "f", "type", "time_ns", "txn", "value", "topic",
              "segment", "subscription", "msg_id")


class CheckStatus(StrEnum):
    RAN = "ran"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: the anomaly class.
        status: ran or skipped.
        reason: why it was skipped (None when it ran).
        count: anomalies found (0 when skipped).
        examples: up to MAX_EXAMPLES anomalies, each naming the ops involved.
        instances: every anomaly, when there are more than the examples and at most
            MAX_INSTANCES of them (else empty: the examples are all, or too many to keep).
        unjudged: cases the check could not decide (e.g. a topic the drain did not read).
        note: what `unjudged` counts.
    """

    name: AnomalyClass
    status: CheckStatus
    reason: str | None = None
    count: int = 0
    examples: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    unjudged: int = 0
    note: str | None = None
    instances: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @property
    def found(self) -> bool:
        return self.status is CheckStatus.RAN and self.count > 0


def skipped(name: AnomalyClass, reason: str) -> CheckResult:
    return CheckResult(name, CheckStatus.SKIPPED, reason=reason)


_LONG_REF_FIELDS = ("index", "time_ns")


def ref(frame: DataFrame, prefix: str = "", *, f: str | Column | None = None, time: str | None = None,
        **overrides: str | Column | None) -> Column:
    """A struct naming one operation (REF_FIELDS) from the columns of `frame`.

    Field `x` comes from column `prefix + x` when `frame` has it, else null.
    `f` gives the operation name (a literal, or an expression), `time` the column
    holding its (invocation) time; keyword overrides give another column name,
    an expression, or None for null. Build refs on anomaly rows only: they are
    wide, and the shared frames stay narrow.
    """
    cols: dict[str, Column] = {}
    for name in REF_FIELDS:
        null = F.lit(None).cast("long" if name in _LONG_REF_FIELDS else "string")
        cols[name] = F.col(prefix + name) if prefix + name in frame.columns else null
    if time is not None:
        cols["time_ns"] = F.col(time)
    if f is not None:
        cols["f"] = F.lit(f) if isinstance(f, str) else f
    for name, value in overrides.items():
        if name not in cols:
            raise ValueError(f"{name} is not an op reference field")
        if value is None:
            cols[name] = F.lit(None).cast("long" if name in _LONG_REF_FIELDS else "string")
        elif isinstance(value, str):
            cols[name] = F.col(value)
        else:
            cols[name] = value
    return F.struct(*[cols[name].alias(name) for name in REF_FIELDS])


def first_reads(reads: DataFrame, values: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The first final read of each of a few values, as op references (for examples)."""
    if not values:
        return {}
    return first_of_reads(reads.filter(F.col("value").isin(*sorted(set(values)))).collect())


def first_of_reads(rows: Sequence[Row | Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The first of `rows` (final reads) of each value, as op references: the checkers' shared rule."""
    first: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["time_ns"], r["writer"], r["index"])):
        if row["value"] not in first:
            first[row["value"]] = {k: v for k, v in {
                "writer": row["writer"], "index": row["index"], "process": row["process"], "f": "read",
                "type": "ok", "time_ns": row["time_ns"], "value": row["value"], "topic": row["topic"],
                "segment": row["segment"], "msg_id": row["msg_id"]}.items() if v is not None}
    return first


NO_DRAIN_REASON = ("no drain-complete phase event: the final reads may be incomplete, so "
                   "this check cannot give a verdict")


def to_plain(value: Any) -> Any:
    """Rows and structs to dicts (without null fields), recursively, for JSON."""
    if isinstance(value, Row):
        value = value.asDict(recursive=False)
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    return value


def clean(name: AnomalyClass) -> CheckResult:
    """A check that ran and found nothing (e.g. the history has nothing it looks at)."""
    return CheckResult(name, CheckStatus.RAN)


@dataclass(frozen=True)
class PendingCheck:
    """A check's anomaly rows, not yet counted. `note` may use `{n}` for the unjudged count."""

    name: AnomalyClass
    anomalies: DataFrame
    order_by: Sequence[str | Column]
    max_examples: int = MAX_EXAMPLES
    max_instances: int = MAX_INSTANCES
    unjudged: DataFrame | None = None
    note: str = ""
    finish: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    """Completes the few examples (e.g. looks up the ops they name) after they are taken,
    so the counting plan stays free of joins that only examples need."""


Plan = CheckResult | PendingCheck


def finished(finish: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None,
             rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A check's `finish` over `rows`, a batch at a time, so a lookup names at most FINISH_BATCH keys."""
    if finish is None:
        return rows
    out: list[dict[str, Any]] = []
    for start in range(0, len(rows), FINISH_BATCH):
        out.extend(finish(rows[start:start + FINISH_BATCH]))
    return out


# Prefix of the tally keys in the counting job (check keys are decimal numbers).
_TALLY = "t:"


def evaluate(plans: Sequence[Plan], tallies: DataFrame | None = None) -> list[CheckResult]:
    """Results of `plans`, in order: every count in one Spark job, then examples where found.

    `tallies`, a frame with a string column `_tally`, is counted by value in the same job
    (the caller's own counts, e.g. operations by kind); `evaluate_with_tallies` returns them.
    """
    return evaluate_with_tallies(plans, tallies)[0]


def evaluate_with_tallies(plans: Sequence[Plan], tallies: DataFrame | None = None
                          ) -> tuple[list[CheckResult], dict[str, int]]:
    """`evaluate`, and the counts of the `_tally` values of `tallies` (empty without it)."""
    pending = [(i, p) for i, p in enumerate(plans) if isinstance(p, PendingCheck)]
    counts: dict[int, int] = {}
    tallied: dict[str, int] = {}
    if pending or tallies is not None:
        parts: list[DataFrame] = []
        for i, plan in pending:
            parts.append(plan.anomalies.select(F.lit(f"{2 * i}").alias("_k")))
            if plan.unjudged is not None:
                parts.append(plan.unjudged.select(F.lit(f"{2 * i + 1}").alias("_k")))
        if tallies is not None:
            parts.append(tallies.select(F.concat(F.lit(_TALLY), F.col("_tally")).alias("_k")))
        for row in union_all(parts).groupBy("_k").count().collect():
            key = row["_k"]
            if key is not None and key.startswith(_TALLY):
                tallied[key[len(_TALLY):]] = int(row["count"])
            elif key is not None:
                counts[int(key)] = int(row["count"])
    results: list[CheckResult] = []
    for i, item in enumerate(plans):
        if isinstance(item, CheckResult):
            results.append(item)
            continue
        plan = item
        found, not_judged = counts.get(2 * i, 0), counts.get(2 * i + 1, 0)
        examples: tuple[dict[str, Any], ...] = ()
        instances: tuple[dict[str, Any], ...] = ()
        if found:
            every = plan.max_examples < found <= plan.max_instances
            rows = plan.anomalies.orderBy(*plan.order_by).limit(found if every else plan.max_examples).collect()
            plain = [to_plain(r) for r in rows]
            done = tuple(finished(plan.finish, plain))
            examples = done[:plan.max_examples]
            instances = done if every else ()
        results.append(CheckResult(plan.name, CheckStatus.RAN, count=found, examples=examples,
                                   unjudged=not_judged, note=plan.note.format(n=not_judged) if not_judged else None,
                                   instances=instances))
    return results, tallied
