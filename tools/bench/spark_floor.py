"""`python -m tools.bench.spark_floor RUN_DIR`: what the passes no Spark checker of a history can skip cost here.

Why: issue #45 asks for 20 million events checked in 60 s from the cache on a 2-core
machine. A check's time is Spark's start, the passes over the history its checks make,
and the JIT compiling the code of each distinct pass. Before a design is built for a
goal, it can be costed: this measures, in a session started as the checker's is
(`analysis.spark.get_spark` with the checker's heap and `tune_for_input`), the few passes
every checker of this history needs (the sends, the transactions grouped, the sends matched
with the final reads and the receives with the sends, both by value), and what keeping the
sends in memory costs, wide as the checker keeps them or narrow. Each pass runs `--repeat`
times: the first round pays for the JIT's warm-up, the later ones show the pass itself,
so the difference is the fixed cost a design with more distinct passes pays more often.

Times are wall seconds and the driver JVM's CPU seconds (read from /proc; None off Linux
or on a standalone cluster, whose executors run the tasks). The history is read as the
checker reads it (`analysis.history_io.load_run`): a large history without its Parquet
cache is converted first, which is reported as `loading`, not as a pass.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import TxnbenchError
from tools.bench.checker import process_cpu_s

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["NARROW_SEND_COLUMNS", "WIDE_SEND_COLUMNS", "PassCost", "floor_passes", "format_table", "main", "measure"]

# The send columns the checker keeps for every send (analysis.checks.context.prepare's
# `sends`, before its outcome columns); the narrow keep is the four its joins need.
WIDE_SEND_COLUMNS = ("value", "writer", "index", "process", "type", "completed", "txn", "topic", "segment",
                     "key", "inputs", "msg_id", "invoke_ns", "complete_ns")
NARROW_SEND_COLUMNS = ("value", "txn", "index", "invoke_ns")


@dataclass(frozen=True)
class PassCost:
    """One pass of one round: what it counted, its wall seconds and the driver JVM's CPU seconds."""

    name: str
    round: int
    rows: int
    wall_s: float
    driver_cpu_s: float | None


def floor_passes(pairs: DataFrame, ops: DataFrame) -> list[tuple[str, Callable[[], int]]]:
    """The passes, in the order they run: a name and a function that runs it and returns its count.

    `pairs` are the paired operations (`LoadedHistory.pairs` or `analysis.model.pair_operations`,
    orphans included), `ops` the history's lines (analysis.model.OPS_COLUMNS)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from analysis.model import final_reads, receives
    from harness.history.schema import OpF

    operations = pairs.filter(~F.col("orphan"))
    sends = operations.filter(F.col("f") == OpF.SEND.value)
    in_txns = operations.filter(F.col("txn").isNotNull() & (F.col("f") != OpF.TXN_STATE.value))
    reads = final_reads(ops).filter(F.col("value").isNotNull()).select("value", "time_ns")
    delivered = receives(ops).select("value", "time_ns")

    def kept(columns: Sequence[str]) -> int:
        frame = sends.select(*columns).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            return frame.count()
        finally:
            frame.unpersist()

    return [
        ("sends scanned", lambda: sends.select(*WIDE_SEND_COLUMNS).count()),
        ("transactions grouped", lambda: in_txns.groupBy("txn").agg(
            F.count(F.lit(1)).alias("_ops"), F.min("invoke_ns").alias("_first_ns"),
            F.max("complete_ns").alias("_last_ns")).count()),
        # Each is one shuffle of both sides by value (neither is small enough to broadcast at scale).
        ("sends never read", lambda: sends.select("value", "txn").join(reads, "value", "left_anti").count()),
        ("receives of a send", lambda: delivered.join(sends.select("value"), "value", "left_semi").count()),
        ("sends kept, wide", lambda: kept(WIDE_SEND_COLUMNS)),
        ("sends kept, narrow", lambda: kept(NARROW_SEND_COLUMNS)),
    ]


def _driver_cpu_s(spark: SparkSession) -> float | None:
    """The driver JVM's CPU seconds so far: None unless its tasks run in it (a local master) on Linux."""
    if not (spark.sparkContext.master or "").startswith("local"):
        return None
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return None
    return process_cpu_s(int(jvm.java.lang.ProcessHandle.current().pid()))


def measure(spark: SparkSession, pairs: DataFrame, ops: DataFrame, *, repeat: int = 2) -> list[PassCost]:
    """Every pass of `floor_passes`, `repeat` rounds of them in order."""
    costs = []
    for round_no in range(1, repeat + 1):
        for name, run in floor_passes(pairs, ops):
            cpu_before, started = _driver_cpu_s(spark), time.monotonic()
            rows = run()
            wall = time.monotonic() - started
            cpu_after = _driver_cpu_s(spark)
            cpu = round(cpu_after - cpu_before, 2) if cpu_before is not None and cpu_after is not None else None
            costs.append(PassCost(name, round_no, rows, round(wall, 2), cpu))
    return costs


def format_table(lines: Sequence[tuple[str, str, float, float | None]], *, cpu_heading: str = "driver CPU s") -> str:
    """The passes as a fixed-width table: what, rows, wall seconds, CPU seconds ('-' when unknown)."""
    rows = [f"{'what':<34} {'rows':>12} {'wall s':>8} {cpu_heading:>13}"]
    for what, rows_text, wall, cpu in lines:
        rows.append(f"{what:<34} {rows_text:>12} {wall:8.1f} {'-' if cpu is None else f'{cpu:.1f}':>13}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.spark_floor",
                                     description="Time the passes every Spark checker of a run's history needs.")
    parser.add_argument("run_dir", type=Path, help="a run folder (results/<run_id>) with a history/ folder")
    parser.add_argument("--master", help="Spark master (default: $TXNBENCH_SPARK_MASTER or local[*])")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of the passes (default 2; the first warms up)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if not args.run_dir.is_dir():
        # Before Spark starts: a wrong path should cost nothing to find out.
        print(f"spark_floor: {args.run_dir}: no such run folder; pass a folder under results/ "
              "(e.g. results/<run_id>)", file=sys.stderr)
        return 2
    started = time.monotonic()
    from analysis.history_io import load_run
    from analysis.model import pair_operations
    from analysis.spark import (
        driver_memory,
        fills_large_heap,
        get_spark,
        stop_spark,
        tune_for_input,
    )
    from harness.history.reader import history_bytes
    from harness.results import RunDir

    history = RunDir(args.run_dir).history_dir
    size = history_bytes(history)
    if size == 0:
        # As the missing folder: a run without history lines is told before Spark starts, not after.
        print(f"spark_floor: {history}: no history lines to measure; pass a run folder whose "
              "history/ holds the load's *.jsonl files", file=sys.stderr)
        return 2
    try:
        spark = get_spark(args.master, memory=driver_memory(size), whole_heap=fills_large_heap(size))
        tune_for_input(spark, size)
        session_s, session_cpu = time.monotonic() - started, _driver_cpu_s(spark)
        loading_started = time.monotonic()
        loaded = load_run(spark, args.run_dir, progress=lambda line: print(f"  {line}", file=sys.stderr))
        pairs = loaded.pairs if loaded.pairs is not None else pair_operations(
            loaded.ops, include_orphans=True, lean=True)
        loading_s = time.monotonic() - loading_started
        loading_cpu = _driver_cpu_s(spark)
        costs = measure(spark, pairs, loaded.ops, repeat=args.repeat)
        loaded.release()
    except TxnbenchError as err:
        print(f"spark_floor: {err}", file=sys.stderr)
        return err.exit_code
    finally:
        stop_spark()
    load_cpu = (round(loading_cpu - session_cpu, 2) if loading_cpu is not None and session_cpu is not None
                else None)
    report = {"run": str(args.run_dir), "events": loaded.facts.lines, "bytes": loaded.facts.bytes,
              "source": loaded.facts.source, "session_s": round(session_s, 2), "session_cpu_s": session_cpu,
              "loading_s": round(loading_s, 2), "loading_cpu_s": load_cpu,
              "passes": [asdict(cost) for cost in costs]}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{loaded.facts.lines:,} events ({loaded.facts.bytes / 1e9:.2f} GB, read from {loaded.facts.source})")
    lines: list[tuple[str, str, float, float | None]] = [
        ("Spark session", "", session_s, session_cpu), ("loading", "", loading_s, load_cpu)]
    lines += [(f"{cost.name} ({cost.round})", f"{cost.rows:,}", cost.wall_s, cost.driver_cpu_s) for cost in costs]
    print(format_table(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
