"""The DuckDB checker over a run folder: load, prepare, the sixteen checks, the tallies.

analysis.check calls `check_history` and writes results.json from what it returns exactly as it
does from the Spark checker's results, so the two differ only in `checker` (which engine) and
`history.source`. Memory: DuckDB holds the frames within `memory_limit()` and spills the rest to
a temporary folder (issue #45: a 20-million-event check within 8 GiB).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from analysis.checks.base import CheckResult
from analysis.duck.checks import run_checks
from analysis.duck.frames import prepare
from analysis.duck.load import connect, load_run
from analysis.history_io import HistoryFacts
from analysis.model import HistoryOverview

__all__ = ["MEMORY_ENV", "DuckChecked", "check_history", "memory_limit", "tallies"]

MEMORY_ENV = "TXNBENCH_DUCKDB_MEMORY"
_MAX_MEMORY_BYTES = 8 * 1024 ** 3


def memory_limit() -> str:
    """`$TXNBENCH_DUCKDB_MEMORY`, else half the machine's memory, at most 8 GiB."""
    chosen = os.environ.get(MEMORY_ENV)
    if chosen:
        return chosen
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 2 * _MAX_MEMORY_BYTES
    return f"{min(_MAX_MEMORY_BYTES, total // 2) // 1024 ** 2}MB"


@dataclass(frozen=True)
class DuckChecked:
    """What one check of a history found; `first_unclaimed` set means the checks did not run."""

    facts: HistoryFacts
    overview: HistoryOverview
    results: list[CheckResult]
    tallied: dict[str, int]
    first_unclaimed: dict[str, Any] | None = None


def tallies(con: duckdb.DuckDBPyConnection, separator: str) -> dict[str, int]:
    """analysis.check's tallies (`what<sep>f<sep>type` -> count): operations by kind and type,
    transactions by outcome label, and why operations ended `info` (the error's class, or
    "(never completed)")."""
    rows = con.execute("""
        SELECT 'op' AS what, f, "type", count(*) FROM pairs GROUP BY f, "type"
        UNION ALL SELECT 'txn', '', outcome_label, count(*) FROM txns GROUP BY outcome_label
        UNION ALL SELECT 'info', f, cause, count(*) FROM (
            SELECT f, coalesce(split_part(error, ':', 1), '(no error recorded)') AS cause FROM ops
            WHERE "type" = 'info') GROUP BY f, cause
        UNION ALL SELECT 'info', f, '(never completed)', count(*) FROM pairs WHERE NOT completed GROUP BY f
    """).fetchall()
    counted: dict[str, int] = {}
    for what, f, kind, count in rows:
        key = separator.join((what, f or "", kind))
        counted[key] = counted.get(key, 0) + int(count)
    return counted


def check_history(run_dir: Path, *, separator: str, progress: Callable[[str], None] | None = None,
                  **settings: Any) -> DuckChecked:
    """Check `run_dir`'s history; `settings` are analysis.duck.frames.prepare's keyword arguments.

    Raises analysis.duck.load.NeedsSpark when Arrow cannot vouch for the history."""
    say = progress or (lambda _message: None)
    with tempfile.TemporaryDirectory(prefix="txnbench-duckdb-") as work:
        con = connect(memory_limit=memory_limit(), temp_dir=Path(work) / "spill")
        try:
            loaded = load_run(run_dir, con, work_dir=Path(work), progress=say)
            if loaded.first_unclaimed is not None:
                return DuckChecked(loaded.facts, loaded.overview, [], {}, loaded.first_unclaimed)
            say(f"{loaded.facts.lines} events; deciding transactions")
            ctx = prepare(con, loaded.overview, **settings)
            results = run_checks(ctx, progress=say)
            say("counting operations and transactions")
            return DuckChecked(loaded.facts, loaded.overview, results, tallies(con, separator))
        finally:
            con.close()
