"""A converted history's validation and overview, gathered while Arrow converts it.

Why: after Arrow's conversion (analysis.columnar), Spark read the whole copy once more to
validate it and to gather the overview the check plans with (analysis.model's
`overview_aggregates`): 13.6 s of task CPU; without that pass a 20-million-event check from
JSONL, whose goal is 150 s, takes 5% less (docs/checks.md, "The conversion validates").
Every chunk passes through the converter's main thread anyway, and what that pass computes
is a few counts, a time span, the phase events, and whether any line breaks a rule:
vectorised Arrow work on columns already in memory.

This is not a second judge. It answers only when every line keeps every rule of
analysis.history_io's validation (`_problem_condition`: the required fields present, schema
1, a known `type` and `f`, single events `ok`); one line that does not, and it gives no
answer, so the caller runs Spark's validation, which names the line as before. The rules of
each writer's indexes and clock are the pairing's (analysis.columnar_pairs'
`writers_intact`). Its overview is the row of `overview_aggregates()` as the Parquet cache's
metadata keeps it (`Row.asDict(recursive=True)`): tests/spark/test_columnar_overview.py
compares the two on the same histories.

Public API:

    Overview().add(table); .add_operations(pairs); .result() -> Validated | None   (None: Spark validates)
    Validated                                       (lines, first_ns, last_ns, row, first_unclaimed)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from analysis.model import REQUIRED_FIELDS, SINGLE_FS
from harness.history.schema import SCHEMA_VERSION, OpF, OpType

__all__ = ["Overview", "Validated"]

_TYPES = pa.array([t.value for t in OpType], pa.string())
_KINDS = pa.array([f.value for f in OpF], pa.string())
_SINGLES = pa.array(SINGLE_FS, pa.string())
# The fields of a phase in `overview_aggregates()`'s `phases`, in its order.
_PHASE_FIELDS = ("time_ns", "writer", "index", "phase", "extra", "topic", "subscription")
# The fields of `first_unclaimed()`'s struct, in its order (Spark orders structs field by field, and
# strings by their UTF-8 bytes, which is the order of Python's comparison of the same strings).
_UNCLAIMED_FIELDS = ("writer", "index", "process", "f", "type")
# The counts of `overview_aggregates()`, each the `f` it counts.
_KIND_COUNTS = (("sends", OpF.SEND), ("acks", OpF.ACK), ("receives", OpF.RECEIVE), ("reads", OpF.READ),
                ("txn_states", OpF.TXN_STATE))


@dataclass(frozen=True)
class Validated:
    """Every line kept every rule: `lines` of them from `first_ns` to `last_ns`, and `row`, the
    overview as the cache's metadata keeps `overview_aggregates()`'s row."""

    lines: int
    first_ns: int
    last_ns: int
    row: dict[str, Any]
    first_unclaimed: dict[str, Any] | None = None
    """The least (writer, index, process, f, type) of the completions no invocation claims (the
    pairing's orphans), as analysis.model's `first_unclaimed()` gives it; None when there is none."""


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    """Rows where `mask` is true (null counts as false, as `when(cond, 1).otherwise(0)` does)."""
    return int(pc.sum(pc.fill_null(mask, False).cast(pa.int64())).as_py() or 0)


class Overview:
    """The validation and overview of the tables `add` is given, in any order."""

    def __init__(self) -> None:
        self._valid = True
        self._first_ns: int | None = None
        self._last_ns: int | None = None
        self._counts = {name: 0 for name in ("events", "ctp_sends", "cumulative_acks", "acks_without_topic",
                                             *(name for name, _ in _KIND_COUNTS))}
        self._phases: list[dict[str, Any]] = []
        self._first_unclaimed: tuple[str, int, str, str, str] | None = None

    def add(self, table: pa.Table) -> None:
        """Count `table`'s lines (analysis.columnar's columns); a line breaking a rule ends the answer."""
        if not self._valid or not table.num_rows:
            return
        kind, typ = table.column("f"), table.column("type")
        problem = pc.or_kleene(pc.not_equal(table.column("schema"), SCHEMA_VERSION),
                               pc.invert(pc.is_in(typ, value_set=_TYPES)))
        problem = pc.or_kleene(problem, pc.invert(pc.is_in(kind, value_set=_KINDS)))
        problem = pc.or_kleene(problem, pc.and_kleene(pc.is_in(kind, value_set=_SINGLES),
                                                      pc.not_equal(typ, OpType.OK.value)))
        missing = any(table.column(name).null_count for name in (*REQUIRED_FIELDS, "schema"))
        # With every field present, each test above is true or false, never null.
        if missing or pc.any(problem).as_py():
            self._valid = False
            return
        times = pc.min_max(table.column("time_ns")).as_py()
        self._first_ns = times["min"] if self._first_ns is None else min(self._first_ns, times["min"])
        self._last_ns = times["max"] if self._last_ns is None else max(self._last_ns, times["max"])
        counts = self._counts
        counts["events"] += table.num_rows
        for name, counted in _KIND_COUNTS:
            counts[name] += _count(pc.equal(kind, counted.value))
        sends = pc.equal(kind, OpF.SEND.value)
        counts["ctp_sends"] += _count(pc.and_(sends, pc.greater(pc.list_value_length(table.column("inputs")), 0)))
        acks = pc.equal(kind, OpF.ACK.value)
        counts["cumulative_acks"] += _count(pc.and_kleene(acks, table.column("cumulative")))
        counts["acks_without_topic"] += _count(pc.and_(acks, pc.is_null(table.column("topic"))))
        phases = table.filter(pc.equal(kind, OpF.PHASE.value))
        if phases.num_rows:
            self._phases.extend(phases.select(list(_PHASE_FIELDS)).to_pylist())

    def add_operations(self, pairs: pa.Table) -> None:
        """Note the pairing's orphans among `pairs` (analysis.columnar_pairs' rows): the completions
        no invocation claims, of which the least (writer, index, process, f, type) is kept."""
        orphans = pairs.filter(pc.fill_null(pairs.column("orphan"), False))
        for row in orphans.select(list(_UNCLAIMED_FIELDS)).to_pylist():
            found = tuple(row[name] for name in _UNCLAIMED_FIELDS)
            if self._first_unclaimed is None or found < self._first_unclaimed:
                self._first_unclaimed = found

    def result(self) -> Validated | None:
        """What the lines added say; None when one broke a rule, or there were none: then Spark's
        validation decides (and names the line)."""
        if not self._valid or self._first_ns is None or self._last_ns is None:
            return None
        row = {"first_ns": self._first_ns, "last_ns": self._last_ns, "phases": self._phases, **self._counts}
        first = (dict(zip(_UNCLAIMED_FIELDS, self._first_unclaimed, strict=True))
                 if self._first_unclaimed is not None else None)
        return Validated(self._counts["events"], self._first_ns, self._last_ns, row, first)
