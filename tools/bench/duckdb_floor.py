"""`python -m tools.bench.duckdb_floor RUN_DIR`: the floor passes of tools.bench.spark_floor, in DuckDB.

Why: issue #45 asks for 20 million events checked in 60 s from the cache on two cores, and
docs/checks.md ("What the goals ask, in CPU") found that Spark's floor alone, the passes no
checker of a history can skip, leaves too little of that budget for sixteen checks. Whether
another engine for single-machine histories would change that is a question of measurement,
not of belief: this runs the same passes, over the same Parquet cache the checker reads
(`analysis/history.parquet/` and `analysis/history.pairs.parquet/`, written by a large check or
by `tools.bench.spark_floor`), in one DuckDB process with the cores given (`--threads`), and
counts the same rows (tests/unit/test_duckdb_floor.py holds both to the history's own lines).

What it is not: a checker. It answers how much of the 60 s the unavoidable work would take
in an engine with vectorised, single-process execution, which is the input a decision about
the design needs (docs/checks.md, "Another engine for the floor").

Times are wall seconds and this process's CPU seconds (user and system, from `resource`),
so they compare with spark_floor's driver CPU on the same machine in the same sitting.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from harness.history.schema import LIVE_DRAIN_WRITER
from tools.bench.spark_floor import NARROW_SEND_COLUMNS, WIDE_SEND_COLUMNS, PassCost, format_table

if TYPE_CHECKING:
    import duckdb

__all__ = ["cache_paths", "floor_queries", "main", "measure"]


def cache_paths(run_dir: Path) -> tuple[Path, Path]:
    """The history's Parquet copy and its paired operations, as analysis.history_io writes them."""
    analysis = run_dir / "analysis"
    return analysis / "history.parquet", analysis / "history.pairs.parquet"


def _quoted(columns: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in columns)


def floor_queries() -> list[tuple[str, str]]:
    """The passes of spark_floor.floor_passes, in its order, each as SQL over the views
    `pairs` (operations, orphans included) and `ops` (the history's lines) that `measure` makes."""
    wide, narrow = _quoted(WIDE_SEND_COLUMNS), _quoted(NARROW_SEND_COLUMNS)
    return [
        ("sends scanned", f"SELECT count(*) FROM (SELECT {wide} FROM sends)"),
        ("transactions grouped", "SELECT count(*) FROM (SELECT txn, count(*) AS _ops, min(invoke_ns) AS _first_ns, "
                                 "max(complete_ns) AS _last_ns FROM operations "
                                 "WHERE txn IS NOT NULL AND f <> 'txn-state' GROUP BY txn)"),
        ("sends never read", "SELECT count(*) FROM (SELECT s.value, s.txn FROM sends AS s "
                             "ANTI JOIN final_reads AS r ON s.value = r.value)"),
        ("receives of a send", "SELECT count(*) FROM (SELECT d.value FROM delivered AS d "
                               "SEMI JOIN (SELECT value FROM sends) AS s ON d.value = s.value)"),
        # Kept as a table in the process's memory, as the Spark checker persists the sends.
        ("sends kept, wide", f"CREATE OR REPLACE TEMP TABLE kept AS SELECT {wide} FROM sends"),
        ("sends kept, narrow", f"CREATE OR REPLACE TEMP TABLE kept AS SELECT {narrow} FROM sends"),
    ]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _views(lines_glob: str, pairs_glob: str) -> list[str]:
    """The views the passes read. DuckDB's views take no parameters: the globs go in as literals."""
    live = _literal(LIVE_DRAIN_WRITER + "/")
    return [
        f"CREATE VIEW operations AS SELECT * FROM read_parquet({_literal(pairs_glob)}) WHERE NOT orphan",
        f"CREATE VIEW lines AS SELECT * FROM read_parquet({_literal(lines_glob)})",
        "CREATE VIEW sends AS SELECT * FROM operations WHERE f = 'send'",
        # analysis.model.final_reads: the drainer's reads, not the live ones (processes `drain-live/...`).
        "CREATE VIEW final_reads AS SELECT value, time_ns FROM lines WHERE f = 'read' "
        f"AND NOT coalesce(starts_with(process, {live}), false) AND value IS NOT NULL",
        "CREATE VIEW delivered AS SELECT value, time_ns FROM lines WHERE f = 'receive'",
    ]


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def connect(run_dir: Path, *, threads: int, memory_limit: str) -> duckdb.DuckDBPyConnection:
    """A connection with the views `floor_queries` read, over the run's Parquet cache."""
    import duckdb

    ops, pairs = cache_paths(run_dir)
    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads)}")
    con.execute("SET memory_limit = ?", [memory_limit])
    for view in _views(str(ops / "*.parquet"), str(pairs / "*.parquet")):
        con.execute(view)
    return con


def measure(con: duckdb.DuckDBPyConnection, *, repeat: int = 2) -> list[PassCost]:
    """Every pass of `floor_queries`, `repeat` rounds of them in order; a kept table counts its rows."""
    costs = []
    for round_no in range(1, repeat + 1):
        for name, sql in floor_queries():
            cpu_before, started = _cpu_s(), time.monotonic()
            found = con.execute(sql).fetchone()
            wall, cpu = time.monotonic() - started, _cpu_s() - cpu_before
            rows = int(found[0]) if found is not None else 0
            if sql.startswith("CREATE"):
                counted = con.execute("SELECT count(*) FROM kept").fetchone()
                rows = int(counted[0]) if counted is not None else 0
            costs.append(PassCost(name, round_no, rows, round(wall, 3), round(cpu, 3)))
    return costs


def _as_json(cost: PassCost) -> dict[str, object]:
    """A pass as JSON; its CPU is this process's (all of DuckDB's threads), not a Spark driver's."""
    fields = asdict(cost)
    fields["cpu_s"] = fields.pop("driver_cpu_s")
    return fields


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.duckdb_floor",
                                     description="Time spark_floor's passes in DuckDB over a run's Parquet cache.")
    parser.add_argument("run_dir", type=Path, help="a run folder whose analysis/ holds the history's Parquet cache")
    parser.add_argument("--threads", type=int, default=2, help="DuckDB's threads (default 2: this machine's cores)")
    parser.add_argument("--memory-limit", default="8GB", help="DuckDB's memory limit (default 8GB, issue #45's bound)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of the passes (default 2)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.threads < 1:
        parser.error("--repeat and --threads must be at least 1")
    ops, pairs = cache_paths(args.run_dir)
    missing = [path for path in (ops, pairs) if not any(path.glob("*.parquet"))]
    if missing:
        print(f"duckdb_floor: {missing[0]}: no Parquet files; a large history gets its cache at its first check: "
              f"run `python -m tools.bench.spark_floor {args.run_dir}` (or `txnbench check`) first",
              file=sys.stderr)
        return 2
    try:
        import duckdb  # noqa: F401  (named in the error below when missing)
    except ImportError:
        print("duckdb_floor: the duckdb package is missing; run `make setup` (it installs the test extras)",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    con = connect(args.run_dir, threads=args.threads, memory_limit=args.memory_limit)
    try:
        costs = measure(con, repeat=args.repeat)
    finally:
        con.close()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # KiB on Linux
    report = {"run": str(args.run_dir), "threads": args.threads, "total_s": round(time.monotonic() - started, 2),
              "peak_rss_bytes": peak_rss, "passes": [_as_json(cost) for cost in costs]}
    if args.json:
        print(json.dumps(report))
        return 0
    lines = [(f"{cost.name} ({cost.round})", f"{cost.rows:,}", cost.wall_s, cost.driver_cpu_s) for cost in costs]
    print(format_table(lines, cpu_heading="process CPU s"))
    print(f"total {report['total_s']} s, peak resident memory {peak_rss / 2**30:.2f} GiB, {args.threads} threads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
