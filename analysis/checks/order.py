"""The ordering check: nonmonotonic.

For one process and key on one topic, the final reads must show the process's
visible values in the order it sent them. Only sends that completed ok are
ordered (at most one operation per process is outstanding, so each ok send
finished before the next was invoked). Values without a key are ordered only
within one segment (partition), as Pulsar routes them round-robin. The read
order is the drainer's event order, which follows each topic's log order and
reads v5 parent segments before their children, so each value's first read
orders the values of one topic: by time, and by the drainer's line index where
a coarse clock gives two reads one time (ties are not order).
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analysis.checks.base import NO_DRAIN_REASON, PendingCheck, Plan, clean, ref, skipped
from analysis.checks.context import CheckContext
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType


def plan_nonmonotonic(ctx: CheckContext) -> Plan:
    """A value read before a value the same process sent earlier with the same key and topic."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.NONMONOTONIC, NO_DRAIN_REASON)
    if ctx.count("sends") == 0 or ctx.count("reads") == 0:
        return clean(AnomalyClass.NONMONOTONIC)
    ordered = ctx.sends.filter((F.col("type") == OpType.OK.value) & F.col("visible")).withColumn(
        "_order_key",
        F.when(F.col("key").isNotNull(), F.concat(F.lit("k:"), F.col("key")))
        .otherwise(F.concat(F.lit("s:"), F.coalesce(F.col("segment"), F.lit("")))))
    w = (Window.partitionBy("writer", "process", "topic", "_order_key").orderBy("index")
         .rowsBetween(Window.unboundedPreceding, -1))
    latest_earlier = F.max(F.struct("read_pos", "read_ns", "value", "index", "invoke_ns", "txn", "msg_id")).over(w)
    hits = (ordered.withColumn("_earlier", latest_earlier)
            .filter(F.col("_earlier.read_pos") > F.col("read_pos")))
    earlier = ref(hits, f=OpF.SEND.value, time="_earlier.invoke_ns", index="_earlier.index",
                  value="_earlier.value", txn="_earlier.txn", msg_id="_earlier.msg_id")
    out = hits.select(
        "process", "topic", "key", "value", ref(hits, f=OpF.SEND.value, time="invoke_ns").alias("send"),
        F.col("read_ns").alias("first_read_ns"),
        F.struct(F.col("_earlier.value").alias("value"), earlier.alias("send"),
                 F.col("_earlier.read_ns").alias("first_read_ns")).alias("sent_earlier_read_later"))
    return PendingCheck(AnomalyClass.NONMONOTONIC, out, ["send.time_ns", "value"], max_examples=ctx.max_examples)
