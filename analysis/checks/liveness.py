"""The liveness check: stalled-commit.

A commit or abort is stalled when it took longer than `stall_after_s`
(docs/checks.md; the run's `config.checks.stall_after_s`, 10 s by default), or
when it never completed although the history went on for longer than that
after it was invoked. This needs no drain. A writer lost mid-run (a remote load
worker that died, `CheckContext.lost_writers`) cannot complete what it invoked:
its unfinished commits are measured to its own last line, not to the history's end.
Time when a commit may have waited on a fault (`CheckContext.commit_blocked_windows`: every
client cut off from every broker, the store every commit of the path needs out of every
broker's reach, or one broker stopped or cut off) is not counted, once where windows overlap:
a commit caught by such a fault is slow by the fault's length, not by the system's.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from analysis.checks.base import PendingCheck, Plan, ref
from analysis.checks.context import CheckContext
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF


def merged_windows(windows: tuple[tuple[int, int | None], ...]) -> list[tuple[int, int | None]]:
    """The union of (start, end or None: never healed) windows as disjoint windows, in order."""
    merged: list[tuple[int, int | None]] = []
    for start, end in sorted(windows):
        if merged and (merged[-1][1] is None or start <= merged[-1][1]):
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, None if last_end is None or end is None else max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def plan_stalled_commit(ctx: CheckContext) -> Plan:
    """A txn-commit or txn-abort slower than stall_after_s, or unfinished for longer than that."""
    end = F.lit(ctx.history_end_ns).cast("long")
    ends = ctx.pairs.filter(F.col("f").isin(OpF.TXN_COMMIT.value, OpF.TXN_ABORT.value))
    if ctx.lost_writers:
        last = (ctx.pairs.filter(F.col("writer").isin(*ctx.lost_writers)).groupBy("writer")
                .agg(F.max(F.greatest(F.col("invoke_ns"), F.coalesce(F.col("complete_ns"), F.col("invoke_ns"))))
                     .alias("_writer_end")))
        ends = ends.join(last, "writer", "left")
        end = F.coalesce(F.col("_writer_end"), end)
    until = F.when(F.col("completed"), F.col("complete_ns")).otherwise(end)
    took = until - F.col("invoke_ns")
    for start_ns, end_ns in merged_windows(ctx.commit_blocked_windows):
        cut_end = F.lit(end_ns).cast("long") if end_ns is not None else until
        overlap = F.least(until, cut_end) - F.greatest(F.col("invoke_ns"), F.lit(start_ns).cast("long"))
        took = took - F.greatest(overlap, F.lit(0).cast("long"))
    stalled = ends.withColumn("_took", took).filter(F.col("_took") > F.lit(ctx.stall_after_ns)).select(
        "txn", ref(ends, time="invoke_ns").alias("op"), "completed",
        (F.col("_took") / 1e9).alias("seconds"),
        F.lit(ctx.stall_after_ns / 1e9).alias("stall_after_s"))
    return PendingCheck(AnomalyClass.STALLED_COMMIT, stalled, [F.col("seconds").desc(), "op.writer", "op.index"],
                     max_examples=ctx.max_examples)
