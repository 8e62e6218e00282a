"""What a check's `finish` may ask of a checker's context: a few rows of a frame, by key.

Why: a check's examples are completed after they are taken (the ops they name, the evidence
beside them), a few rows at a time. Both checkers (Spark's CheckContext, DuckDB's DuckContext)
answer these lookups, so each `finish` is written once, in analysis.checks, and both engines
run the same one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from harness.history.schema import OpF

__all__ = ["ExampleRows", "RowLike", "latest_readings"]


class RowLike(Protocol):
    """A row read by field name: a Spark `Row` or a dict."""

    def __getitem__(self, key: str, /) -> Any: ...


class ExampleRows(Protocol):
    """A few rows of a named frame (`sends`, `reads`, `txn_states`, ...), as mappings."""

    def rows_where(self, frame: str, column: str, values: Sequence[str]) -> Sequence[RowLike]:
        """The rows of `frame` whose `column` is one of `values`."""
        ...

    def rows_carrying(self, frame: str, column: str, values: Sequence[str]) -> Sequence[RowLike]:
        """The rows of `frame` whose list column `column` holds one of `values`."""
        ...


def latest_readings(rows: Iterable[RowLike]) -> dict[str, dict[str, object]]:
    """The latest `txn-state` reading of each transaction among `rows`, as an op reference with its
    status (CheckContext.coordinator_records: the evidence an outcome the coordinator decided rests on)."""
    latest: dict[str, RowLike] = {}
    for row in rows:
        if row["txn"] not in latest or row["time_ns"] >= latest[row["txn"]]["time_ns"]:
            latest[row["txn"]] = row
    return {txn: {"writer": row["writer"], "index": row["index"], "process": row["process"],
                  "f": OpF.TXN_STATE.value, "time_ns": row["time_ns"], "txn": txn, "status": row["status"]}
            for txn, row in latest.items()}
