"""tools.bench.duckdb_floor: DuckDB's passes count what spark_floor's count, so the two engines' times
are of the same work (issue #45's comparison in docs/checks.md rests on that)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.columnar import convert
from tests.floor_counts import assert_every_pass_counts_what_it_names
from tests.floor_counts import expected_floor_counts as _expected
from tools.bench import duckdb_floor
from tools.synth import SynthConfig, generate


def _cached_run(tmp_path: Path) -> Path:
    """A synthetic run with the Parquet cache a large check leaves (Arrow's conversion, no Spark)."""
    run = tmp_path / "run"
    # A planted lost write leaves a send no final read has.
    generate(SynthConfig(events=2500, writers=2, seed=3, plant=("lost-write",)), run, jobs=1)
    ops_dir, pairs_dir = duckdb_floor.cache_paths(run)
    convert(sorted((run / "history").glob("*.jsonl")), {}, ops_dir, pairs_dir=pairs_dir)
    return run


def test_every_pass_counts_what_it_names_in_every_round(tmp_path: Path) -> None:
    run = _cached_run(tmp_path)
    con = duckdb_floor.connect(run, threads=2, memory_limit="1GB")
    try:
        costs = duckdb_floor.measure(con, repeat=2)
    finally:
        con.close()
    assert_every_pass_counts_what_it_names(costs, run)
    assert all(cost.driver_cpu_s is not None and cost.driver_cpu_s >= 0 for cost in costs)   # this process's CPU


def test_the_command_prints_every_pass_as_json_with_this_process_cpu(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _cached_run(tmp_path)
    assert duckdb_floor.main([str(run), "--repeat", "1", "--threads", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["threads"] == 1 and report["peak_rss_bytes"] > 0
    assert {p["name"]: p["rows"] for p in report["passes"]} == _expected(run)
    assert all("cpu_s" in p and "driver_cpu_s" not in p for p in report["passes"])


def test_a_run_without_its_parquet_cache_is_one_line_naming_how_to_make_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    generate(SynthConfig(events=300, writers=1, seed=2), run, jobs=1)
    assert duckdb_floor.main([str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "history.parquet" in err and "no Parquet files" in err and "tools.bench.spark_floor" in err
