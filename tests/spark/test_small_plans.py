"""Small histories plan without shuffles: the checker's speed on them rests on it (docs/checks.md)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.checks.context import single_partition_leaf


def _physical(frame) -> str:
    return str(frame._jdf.queryExecution().executedPlan().toString())


def test_joins_and_aggregations_of_single_partition_leaves_do_not_shuffle(spark: SparkSession) -> None:
    sends = spark.createDataFrame([(f"v{i}", f"t{i % 3}") for i in range(20)], "value string, txn string")
    reads = spark.createDataFrame([(f"v{i}", i) for i in range(0, 20, 2)], "value string, time_ns long")
    # A join of joins: its size estimate is the product of its inputs' estimates, which is what
    # made Spark shuffle joins of checkpointed frames before the row bound.
    wide = sends.join(reads, "value", "left").join(sends.select("txn").distinct(), "txn")
    left = single_partition_leaf(wide)
    right = single_partition_leaf(reads.groupBy("value").agg(F.min("time_ns").alias("read_ns")))
    joined = left.join(right, "value", "left_anti").groupBy("txn").count()
    plan = _physical(joined)
    assert "Exchange" not in plan, plan
    assert {r["txn"]: r["count"] for r in joined.collect()} == {"t0": 3, "t1": 4, "t2": 3}
