"""`python -m tools.bench.bare_session [--master URL]`: start a Spark session the checker's way, count, exit.

Why: the benchmarks divide a check's wall time by this process's, started in the same
sitting (`tools.bench.checker.time_bare_session`), so that figures taken at different
loads and on different machines compare. It is the checker's session without the
checker: `analysis.spark.get_spark` (the default driver heap), the large-input settings
(`tune_for_input` above the small-input bound), and one `count` over a range, which on a
standalone cluster also waits for an executor to run a task. It prints its own seconds
from the first import of Spark to the count's answer, as JSON.
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.bare_session",
                                     description="Start a Spark session as the checker does, count a range, exit.")
    parser.add_argument("--master", help="Spark master (default: $TXNBENCH_SPARK_MASTER or local[*])")
    args = parser.parse_args(argv)
    started = time.monotonic()
    from analysis.spark import SMALL_INPUT_BYTES, get_spark, stop_spark, tune_for_input

    spark = get_spark(args.master)
    tune_for_input(spark, SMALL_INPUT_BYTES + 1)
    rows = spark.range(1_000_000).count()
    elapsed = time.monotonic() - started
    stop_spark()
    print(json.dumps({"rows": rows, "session_s": round(elapsed, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
