"""The identity check: txn-id-reuse.

A transaction id names one transaction. A coordinator that hands out an id a
second time (for example one that reissues ids after a failover) makes two
transactions share it, and every decision the checker takes per id would merge
them silently. Two successful `txn-open` completions with one `txn` are
reported instead. This needs no drain.

The count of each id's successful opens comes from the transactions' one grouping
(`ctx.txns.opens_ok`, analysis.model.transaction_outcomes), so finding the reused ids
reads one row per transaction, not every operation; only the examples look up the
opens they name, for those few ids.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from analysis.checks.base import PendingCheck, Plan, ref, to_plain
from analysis.checks.context import CheckContext
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_EXAMPLE_OPENS = 5


def plan_txn_id_reuse(ctx: CheckContext) -> Plan:
    """One transaction id returned by two or more successful txn-open operations. Counted per id."""
    reused = ctx.txns.filter(F.col("opens_ok") > 1).select(
        "txn", F.col("opens_ok").alias("opens"), F.col("ok_open_invoke_ns").alias("first_open_ns"))

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Name the first opens (by invocation, then the op) of the example ids."""
        opens = ctx.pairs.filter((F.col("f") == OpF.TXN_OPEN.value) & (F.col("type") == OpType.OK.value)
                                 & F.col("txn").isin(*sorted({e["txn"] for e in examples})))
        per_id = opens.groupBy("txn").agg(F.slice(F.transform(
            F.sort_array(F.collect_list(F.struct(F.col("invoke_ns").alias("_t"),
                                                 ref(opens, f=OpF.TXN_OPEN.value, time="invoke_ns").alias("_op")))),
            lambda x: x["_op"]), 1, _EXAMPLE_OPENS).alias("open"))
        named = {row["txn"]: to_plain(row["open"]) for row in per_id.collect()}
        return [{k: v for k, v in {"txn": e["txn"], "opens": e.get("opens"), "open": named.get(e["txn"]),
                                   "first_open_ns": e.get("first_open_ns")}.items() if v is not None}
                for e in examples]

    return PendingCheck(AnomalyClass.TXN_ID_REUSE, reused, ["first_open_ns", "txn"], max_examples=ctx.max_examples,
                        finish=finish)
