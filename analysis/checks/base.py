"""What every check returns, and the helpers that turn an anomaly DataFrame into it.

A check is a pure function `CheckContext -> CheckResult`: it builds a DataFrame
with one row per anomaly, and `summarize()` turns that into a count and a few
examples (ordered, so the same history always gives the same examples). A check
that cannot give an answer returns `skipped(...)` with the reason; a check that
ran but could not judge some cases says how many in `unjudged` and why in
`note` (the verdict is then unknown unless an anomaly was found).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

MAX_EXAMPLES = 8

# Fields of an op reference, the way examples name operations.
REF_FIELDS = ("writer", "index", "process", "f", "type", "time_ns", "txn", "value", "topic",
              "segment", "subscription", "msg_id")


class AnomalyClass(StrEnum):
    """The fixed class names of docs/checks.md, in the order results list them."""

    ABORTED_READ = "aborted-read"
    DIRTY_READ = "dirty-read"
    LOST_WRITE = "lost-write"
    PARTIAL_TXN = "partial-txn"
    DUPLICATE = "duplicate"
    UNEXPECTED = "unexpected"
    LOST_ACK = "lost-ack"
    STUCK_ACK = "stuck-ack"
    CTP_DUPLICATE = "ctp-duplicate"
    CTP_LOSS = "ctp-loss"
    NONMONOTONIC = "nonmonotonic"
    STALLED_COMMIT = "stalled-commit"


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

    @property
    def found(self) -> bool:
        return self.status is CheckStatus.RAN and self.count > 0


def skipped(name: AnomalyClass, reason: str) -> CheckResult:
    return CheckResult(name, CheckStatus.SKIPPED, reason=reason)


def ref(*, f: str | None = None, time: str = "time_ns", **overrides: str | Column | None) -> Column:
    """A struct naming one operation (REF_FIELDS) from the current row's columns.

    Args:
        f: the operation name as a literal (default: the row's `f` column).
        time: the column holding the operation's (invocation) time.
        overrides: per field, another column name, an expression, or None for null.
    """
    cols: dict[str, Column] = {name: F.col(name) for name in REF_FIELDS}
    cols["time_ns"] = F.col(time)
    if f is not None:
        cols["f"] = F.lit(f)
    for name, value in overrides.items():
        if name not in cols:
            raise ValueError(f"{name} is not an op reference field")
        if value is None:
            cols[name] = F.lit(None).cast("string")
        elif isinstance(value, str):
            cols[name] = F.col(value)
        else:
            cols[name] = value
    return F.struct(*[cols[name].alias(name) for name in REF_FIELDS])


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


def summarize(name: AnomalyClass, anomalies: DataFrame, order_by: Sequence[str | Column], *,
              max_examples: int = MAX_EXAMPLES, unjudged: DataFrame | None = None,
              note: str = "") -> CheckResult:
    """Count the anomaly rows (and the `unjudged` rows) and keep the first few anomalies as examples.

    Both counts come from one Spark job; examples (in `order_by` order) from a
    second one, only when there are anomalies. `note` may use `{n}` for the
    number of unjudged cases.
    """
    if unjudged is None:
        count, not_judged = anomalies.count(), 0
    else:
        tagged = anomalies.select(F.lit(0).alias("_kind")).unionByName(unjudged.select(F.lit(1).alias("_kind")))
        counts = {row["_kind"]: int(row["count"]) for row in tagged.groupBy("_kind").count().collect()}
        count, not_judged = counts.get(0, 0), counts.get(1, 0)
    examples: tuple[dict[str, Any], ...] = ()
    if count:
        rows = anomalies.orderBy(*order_by).limit(max_examples).collect()
        examples = tuple(to_plain(r) for r in rows)
    return CheckResult(name, CheckStatus.RAN, count=count, examples=examples, unjudged=not_judged,
                       note=note.format(n=not_judged) if not_judged else None)
