"""Running the checks one by one, in threads, gives what counting them in one job gives."""

from __future__ import annotations

import threading

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.checks import REGISTRY, prepare, run_checks_with_tallies
from tests.spark.dsl import History


def _history() -> History:
    """Several anomalies of classes that share frames (stuck acks, the CTP outputs)."""
    h = History()
    p = h.process("w0/p")
    p.open().sends("a", "b").commit()
    p.open().send("never").abort()
    p.open().send("lost").commit()
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    c1.receive("a").receive("never")
    c1.open().ack("a").commit()
    c2.receive("a", redelivery=1)
    c2.open().ack("a").commit()
    c1.receive("b")
    c1.open().ack("b").abort()
    h.drain(reads={"t1": ["a", "b", "never"]}, subscriptions=[("t1", "s")])
    return h


def test_checks_in_threads_give_the_results_of_one_counting_job(spark: SparkSession) -> None:
    ctx = prepare(_history().ops(spark), persist=True)
    tallies = ctx.pairs.select(F.col("f").alias("_tally"))
    messages: list[tuple[str, str]] = []

    def progress(message: str) -> None:
        messages.append((threading.current_thread().name, message))

    try:
        together = run_checks_with_tallies(ctx, together=True, tallies=tallies)
        threaded = run_checks_with_tallies(ctx, progress, together=False, tallies=tallies, threads=2)
    finally:
        ctx.unpersist()
    assert threaded == together
    assert sum(result.count for result in together[0]) >= 4       # the history has anomalies to agree on
    said = {message for _, message in messages}
    assert said == {*(f"check {n}/{len(REGISTRY)}: {name}" for n, name in enumerate(REGISTRY, start=1)),
                    "counting operations and transactions"}
    # The first check runs alone, in the caller's thread; the rest in the pool's.
    assert messages[0] == (threading.current_thread().name, f"check 1/{len(REGISTRY)}: {next(iter(REGISTRY))}")
    assert {thread for thread, _ in messages[1:]} <= {"check_0", "check_1"}
