"""The identity check: txn-id-reuse.

A transaction id names one transaction. A coordinator that hands out an id a
second time (for example one that reissues ids after a failover) makes two
transactions share it, and every decision the checker takes per id would merge
them silently. Two successful `txn-open` completions with one `txn` are
reported instead. This needs no drain.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from analysis.checks.base import PendingCheck, Plan, ref
from analysis.checks.context import CheckContext
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType


def plan_txn_id_reuse(ctx: CheckContext) -> Plan:
    """One transaction id returned by two or more successful txn-open operations. Counted per id."""
    opens = ctx.pairs.filter((F.col("f") == OpF.TXN_OPEN.value) & (F.col("type") == OpType.OK.value)
                             & F.col("txn").isNotNull())
    per_id = opens.groupBy("txn").agg(
        F.count(F.lit(1)).alias("opens"),
        F.sort_array(F.collect_list(F.struct(F.col("invoke_ns").alias("_t"),
                                             ref(opens, f=OpF.TXN_OPEN.value, time="invoke_ns").alias("_op"))))
        .alias("_opens"))
    reused = per_id.filter(F.col("opens") > 1).select(
        "txn", "opens", F.slice(F.transform("_opens", lambda x: x["_op"]), 1, 5).alias("open"),
        F.col("_opens")[0]["_t"].alias("first_open_ns"))
    return PendingCheck(AnomalyClass.TXN_ID_REUSE, reused, ["first_open_ns", "txn"], max_examples=ctx.max_examples)
