"""The session analysis.spark starts, as the checks rely on it."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.spark import SHUFFLE_BYPASS_MERGE_THRESHOLD, SMALL_INPUT_BYTES, tune_for_input


def test_no_shuffle_writes_a_file_per_reduce_partition(spark: SparkSession) -> None:
    # Spark writes one file per reduce partition where a shuffle has at most this many; a large
    # check's small shuffles spent most of their time on those files (docs/checks.md).
    setting = spark.sparkContext.getConf().get("spark.shuffle.sort.bypassMergeThreshold")
    assert setting == str(SHUFFLE_BYPASS_MERGE_THRESHOLD) == "0"


def test_a_large_check_keeps_a_frame_in_as_few_partitions_as_its_size_needs(spark: SparkSession) -> None:
    """A persisted frame is scanned by every check that reads it, a task per partition: a large
    history's frames are coalesced to their size, not kept in the partitions of their shuffle."""
    tune_for_input(spark, SMALL_INPUT_BYTES + 1)
    frame = spark.range(10_000).groupBy((F.col("id") % 100).alias("k")).count().persist()
    try:
        assert frame.count() == 100
        shuffle_partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
        assert shuffle_partitions > 2
        assert frame.rdd.getNumPartitions() < shuffle_partitions
    finally:
        frame.unpersist()
        tune_for_input(spark, 0)        # the tests' session is in small-input mode (conftest)


def test_the_driver_collects_garbage_with_the_parallel_collector(spark: SparkSession) -> None:
    # The tests' session is started as a large check's is (not small_input): G1 cost a 20M-event
    # check 8% more of the driver's CPU than the parallel collector (docs/checks.md).
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert {bean.getName() for bean in beans} == {"PS Scavenge", "PS MarkSweep"}
