"""One local Spark session for the whole tests/spark folder, and a helper to run one check."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import SparkSession

from analysis.checks import AnomalyClass, CheckResult, prepare, run_one
from analysis.spark import get_spark, stop_spark, tune_for_input
from tests.spark.dsl import History


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_spark("local[2]")
    tune_for_input(session, 0)      # small-input mode: what check_run uses for small histories
    yield session
    stop_spark()


RunCheck = Callable[..., CheckResult]


@pytest.fixture
def run_check(spark: SparkSession) -> RunCheck:
    """`run_check(history, AnomalyClass.X, stall_after_s=10)`: one check (`run_one`) on an in-memory history."""

    def run(history: History, name: AnomalyClass, **kwargs: object) -> CheckResult:
        ctx = prepare(history.ops(spark), persist=True, cut_lineage=True, **kwargs)  # type: ignore[arg-type]
        try:
            return run_one(name, ctx)
        finally:
            ctx.unpersist()

    return run
