"""Which checker answers a check (analysis.check.checker_engine)."""

from __future__ import annotations

import pytest

from analysis.check import CHECKER_ENV, checker_engine
from analysis.spark import MASTER_ENV
from harness.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_choice_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECKER_ENV, raising=False)
    monkeypatch.delenv(MASTER_ENV, raising=False)


def test_duckdb_answers_on_this_machine_and_spark_on_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    assert checker_engine() == "duckdb"
    assert checker_engine(master="local[2]") == "duckdb"
    assert checker_engine(master="spark://127.0.0.1:7077") == "spark"
    monkeypatch.setenv(MASTER_ENV, "spark://127.0.0.1:7077")
    assert checker_engine() == "spark"


def test_the_choice_wins_over_the_master(monkeypatch: pytest.MonkeyPatch) -> None:
    assert checker_engine("spark") == "spark"
    monkeypatch.setenv(CHECKER_ENV, "spark")
    assert checker_engine() == "spark"
    assert checker_engine("duckdb", master="spark://127.0.0.1:7077") == "duckdb"


def test_an_unknown_checker_names_the_setting_and_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHECKER_ENV, "polars")
    with pytest.raises(ConfigError) as caught:
        checker_engine()
    assert CHECKER_ENV in str(caught.value) and "duckdb, spark" in str(caught.value)
