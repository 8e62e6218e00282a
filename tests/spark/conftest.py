"""One local Spark session for the whole tests/spark folder, and a helper to run one check."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import SparkSession

from analysis.checks import AnomalyClass, CheckContext, CheckResult, prepare, run_one
from analysis.history_io import ops_from_records
from analysis.spark import get_spark, stop_spark, tune_for_input
from tests.spark.dsl import History


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # A pytest-xdist worker ends without running exit handlers: a session of its that wrote a
    # class archive left its JVM writing it, orphaned, after `make test` returned, and the copy
    # unpublished in the temporary folder (170 MB per worker). It maps an archive that exists.
    session = get_spark("local[2]", write_class_archive=False)
    tune_for_input(session, 0)      # small-input mode: what check_run uses for small histories
    yield session
    stop_spark()


RunCheck = Callable[..., CheckResult]


@pytest.fixture(params=["spark", "duckdb"])
def run_check(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunCheck]:
    """`run_check(history, AnomalyClass.X, stall_after_s=10)`: one check (`run_one`) on an in-memory history.

    Each test runs twice, once per checker: Spark's (analysis.checks) and DuckDB's
    (analysis.duck), which must agree on every history a test writes.

    A test often asks several checks of one history (the class it plants, and that the others stay
    at zero): the prepared frames are kept for the test and reused while the history and the
    settings are the same, as `check_run` prepares once for all its checks. Preparing is most of a
    small check's time (`make test`'s Spark tests spent it three times over in the contract tests)."""
    if request.param == "duckdb":
        yield from _duck_run_check(tmp_path_factory)
        return
    spark: SparkSession = request.getfixturevalue("spark")
    prepared: dict[str, CheckContext] = {}

    def run(history: History, name: AnomalyClass, **kwargs: object) -> CheckResult:
        records = history.records()
        key = json.dumps([records, sorted(kwargs.items())], sort_keys=True, default=repr)
        if key not in prepared:
            prepared[key] = prepare(ops_from_records(spark, records), persist=True, cut_lineage=True,
                                    **kwargs)  # type: ignore[arg-type]
        return run_one(name, prepared[key])

    yield run
    for ctx in prepared.values():
        ctx.unpersist()


def _duck_run_check(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunCheck]:
    """`run_check` on the DuckDB checker: the history converted and loaded as a run's would be."""
    from analysis.duck import checks as duck_checks
    from analysis.duck.frames import DuckContext
    from analysis.duck.frames import prepare as duck_prepare
    from analysis.duck.load import connect, load_lines

    prepared: dict[str, DuckContext] = {}

    def run(history: History, name: AnomalyClass, **kwargs: object) -> CheckResult:
        records = history.records()
        key = json.dumps([records, sorted(kwargs.items())], sort_keys=True, default=repr)
        if key not in prepared:
            con = connect(threads=1)
            loaded = load_lines(records, con, tmp_path_factory.mktemp("duck"))
            prepared[key] = duck_prepare(con, loaded.overview, **kwargs)  # type: ignore[arg-type]
        return duck_checks.run_one(name, prepared[key])

    yield run
    for ctx in prepared.values():
        ctx.con.close()
