"""The session analysis.spark starts, as the checks rely on it."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.spark import SHUFFLE_BYPASS_MERGE_THRESHOLD, SMALL_INPUT_BYTES, tune_for_input


def test_no_shuffle_writes_a_file_per_reduce_partition(spark: SparkSession) -> None:
    # Spark writes one file per reduce partition where a shuffle has at most this many; a large
    # check's small shuffles spent most of their time on those files (docs/checks.md).
    setting = spark.sparkContext.getConf().get("spark.shuffle.sort.bypassMergeThreshold")
    assert setting == str(SHUFFLE_BYPASS_MERGE_THRESHOLD) == "0"


def _shuffles(plan: Any) -> int:
    """Shuffles a physical plan makes itself: a persisted frame's scan is a leaf, so the shuffles
    that built the frame (its cached plan) are not counted."""
    name = plan.getClass().getSimpleName()
    own = 1 if name in ("ShuffleExchangeExec", "ShuffleQueryStageExec") else 0
    if name.endswith("QueryStageExec"):
        return own + (_shuffles(plan.plan()) if name != "ShuffleQueryStageExec" else 0)
    if name == "AdaptiveSparkPlanExec":
        return _shuffles(plan.executedPlan())
    children = plan.children()
    return own + sum(_shuffles(children.apply(i)) for i in range(children.size()))


def test_a_large_check_joins_frames_persisted_by_the_same_key_without_a_shuffle(spark: SparkSession) -> None:
    """A large check keeps each persisted frame in the partitions of the shuffle that made it, so
    the checks that meet two frames kept by value (sends and receives, reads) shuffle neither
    again. Coalescing them to their size instead lost that partitioning, and every such join
    shuffled both sides anew: about a sixth more task CPU at 20 million events (docs/checks.md)."""
    partitions = tune_for_input(spark, SMALL_INPUT_BYTES + 1)
    broadcast = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")     # tiny frames would be broadcast
    left = spark.range(10_000).groupBy((F.col("id") % 100).alias("k")).count().persist()
    right = spark.range(5_000).groupBy((F.col("id") % 50).alias("k")).agg(F.max("id").alias("m")).persist()
    try:
        assert left.count() == 100 and right.count() == 50
        assert partitions > 1
        assert left.rdd.getNumPartitions() == partitions
        rows = left.join(right, "k").select("k")
        assert len(rows.collect()) == 50
        assert _shuffles(rows._jdf.queryExecution().executedPlan()) == 0
    finally:
        left.unpersist()
        right.unpersist()
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(broadcast))
        tune_for_input(spark, 0)        # the tests' session is in small-input mode (conftest)


def test_the_driver_collects_garbage_with_the_parallel_collector(spark: SparkSession) -> None:
    # The tests' session is started as a large check's is (not small_input): G1 cost a 20M-event
    # check 8% more of the driver's CPU than the parallel collector (docs/checks.md).
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert {bean.getName() for bean in beans} == {"PS Scavenge", "PS MarkSweep"}


def test_the_tests_session_writes_no_class_archive(spark: SparkSession) -> None:
    # `make test`'s pytest-xdist workers end without exit handlers: a session that writes the class
    # archive as its JVM exits left each worker's JVM writing one, orphaned, after `make test`
    # returned, and a 170 MB copy no process published (measured: two of them after `pytest -n 2`).
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    arguments = [str(a) for a in jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()]
    assert not [a for a in arguments if a.startswith("-XX:ArchiveClassesAtExit")], arguments


# Its own process: the tests' session is started once, without the option.
_WHOLE_HEAP_SESSION = """
import json
from analysis.spark import get_spark, stop_spark
spark = get_spark(memory="1g", whole_heap=True)
jvm = spark.sparkContext._jvm
arguments = [str(a) for a in jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()]
committed = int(jvm.java.lang.Runtime.getRuntime().totalMemory())
stop_spark()
print(json.dumps({"arguments": arguments, "committed": committed}))
"""


def test_a_session_asked_for_its_whole_heap_starts_with_it_committed() -> None:
    # A 20M-event check grown from a small heap paid a dozen full collections on the way; the
    # JVM refuses to start when the initial heap exceeds the maximum, so the two must agree.
    done = subprocess.run([sys.executable, "-c", _WHOLE_HEAP_SESSION], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "-Xms1024m" in report["arguments"] and "-Xmx1g" in report["arguments"]
    # Committed from the start (without the option the JVM starts at a 64th of the machine's memory).
    assert report["committed"] > 900 * 1024 ** 2
