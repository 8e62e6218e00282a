"""A large history's outcomes joined as a broadcast give the frames the shuffled join gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from analysis.checks import context, prepare, run_checks
from tests.spark.dsl import History


def _history() -> History:
    """Sends in and out of transactions of every outcome, acks, receives of sent and unsent values."""
    h = History()
    p = h.process("w0/p")
    p.open().sends("a", "b").commit()
    p.open().send("never").abort()
    p.open().send("maybe").commit(type="info")
    p.send("lone").send("lone-failed", type="fail")
    c = h.process("w1/c1")
    c.receive("a").receive("never").receive("ghost")
    c.open().ack("a").commit()
    c.receive("b")
    c.open().ack("b").abort()
    h.drain(reads={"t1": ["a", "b", "lone", "never"]}, subscriptions=[("t1", "s")])
    return h


def _rows(frame: DataFrame) -> list[tuple[object, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def _plan(frame: DataFrame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


@pytest.fixture
def no_automatic_broadcast(spark: SparkSession) -> Iterator[None]:
    """Only the hint broadcasts: the frames of these few rows would be broadcast by size anyway."""
    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    assert before is not None
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    yield
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)


@pytest.mark.usefixtures("no_automatic_broadcast")
def test_broadcast_outcomes_give_the_frames_and_results_of_the_shuffled_join(
        spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _history().ops(spark)
    # One after the other: Spark's cache takes the two plans, which differ only by the hint, for one.
    seen = {}
    for bound in (0, context.BROADCAST_TXNS_MAX):
        monkeypatch.setattr(context, "BROADCAST_TXNS_MAX", bound)
        ctx = prepare(ops, persist=True)
        try:
            broadcast = bound > 0
            assert ("BroadcastHashJoin" in _plan(ctx.sends)) is broadcast
            assert ("BroadcastHashJoin" in _plan(ctx.acks)) is broadcast
            results = run_checks(ctx)
            seen[broadcast] = ({name: _rows(getattr(ctx, name)) for name in ("sends", "acks", "observations", "txns")},
                               results)
        finally:
            ctx.unpersist()
    assert seen[True] == seen[False]
    frames, results = seen[True]
    assert len(frames["sends"]) == 6 and len(frames["observations"]) == 4 and len(frames["acks"]) == 2
    assert sum(result.count for result in results) >= 1
