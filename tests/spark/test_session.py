"""The session analysis.spark starts, as the checks rely on it."""

from __future__ import annotations

from pyspark.sql import SparkSession

from analysis.spark import SHUFFLE_BYPASS_MERGE_THRESHOLD


def test_no_shuffle_writes_a_file_per_reduce_partition(spark: SparkSession) -> None:
    # Spark writes one file per reduce partition where a shuffle has at most this many; a large
    # check's small shuffles spent most of their time on those files (docs/checks.md).
    setting = spark.sparkContext.getConf().get("spark.shuffle.sort.bypassMergeThreshold")
    assert setting == str(SHUFFLE_BYPASS_MERGE_THRESHOLD) == "0"
