"""`python -m tools.bench.engines_agree RUN_DIR...`: do the Spark and DuckDB checkers agree, and how fast?

Why: the DuckDB checker (analysis.duck) answers runs on one machine only because it gives the
Spark checker's results; that must be shown on every kind of history there is (planted bugs,
real-Pulsar chaos runs, the golden and synthetic ones), not argued. For each run folder this
checks the history with both engines, each into a folder of its own under `--out` (the run's
recorded result is not touched; a large history's Parquet copy is shared, as either checker
reuses the other's), compares the two `results.json` and their `instances/` with
tools.bench.same_results, and prints one line per run: events, each engine's wall time, and
`same` or the differences. Exit 0 when every run agrees, 1 when one differs or cannot be
checked (a folder without a history is named in one line, and the other runs go on).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from analysis.check import check_run
from harness.errors import TxnbenchError
from tools.bench.same_results import compare, load

__all__ = ["main"]


def _timed(run: Path, out: Path, engine: str) -> tuple[float, dict[str, object]]:
    started = time.monotonic()
    result = check_run(run, out_dir=out, engine=engine, progress=False)
    return time.monotonic() - started, result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.engines_agree",
                                     description="Check runs with both checkers and compare the results.")
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=Path, required=True, help="a folder for the two checks' results")
    args = parser.parse_args(argv)
    differing = 0
    print(f"{'run':<60} {'events':>10} {'spark s':>8} {'duckdb s':>8}  result", flush=True)
    for number, run in enumerate(args.runs):
        where = args.out / f"{number:03d}-{run.resolve().parent.name}-{run.name}"
        try:
            spark_s, spark = _timed(run, where / "spark", "spark")
            duck_s, _ = _timed(run, where / "duckdb", "duckdb")
        except TxnbenchError as err:
            print(f"{str(run)[-60:]:<60} not checked: {err}", flush=True)
            differing += 1
            continue
        found = compare(load(where / "spark"), load(where / "duckdb"))
        history = spark.get("history")
        events = history.get("lines") if isinstance(history, dict) else None
        verdict = "same" if not found else f"DIFFERENT ({len(found)})"
        print(f"{str(run)[-60:]:<60} {events!s:>10} {spark_s:8.1f} {duck_s:8.1f}  {verdict}", flush=True)
        for line in found[:20]:
            print(f"    {line}", flush=True)
        differing += bool(found)
    print(f"{len(args.runs) - differing} of {len(args.runs)} run(s) the same", flush=True)
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
