"""tools.bench.spark_floor: each pass counts what it says, so its times are of real work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from analysis.history_io import load_run
from analysis.model import pair_operations
from harness.history import read_history_dir
from tests.floor_counts import assert_every_pass_counts_what_it_names
from tests.floor_counts import expected_floor_counts as _expected
from tools.bench import spark_floor
from tools.synth import SynthConfig, generate


def test_every_pass_counts_what_it_names_and_is_timed(spark: SparkSession, tmp_path: Path) -> None:
    run = tmp_path / "run"
    # A planted lost write leaves a send no final read has.
    generate(SynthConfig(events=2500, writers=2, seed=3, plant=("lost-write",)), run, jobs=1)
    loaded = load_run(spark, run)
    try:
        pairs = pair_operations(loaded.ops, include_orphans=True, lean=True)
        costs = spark_floor.measure(spark, pairs, loaded.ops, repeat=2)
    finally:
        loaded.release()
    assert_every_pass_counts_what_it_names(costs, run)
    assert all(cost.driver_cpu_s is not None and cost.driver_cpu_s >= 0 for cost in costs)   # a local master on Linux


def test_a_missing_run_folder_is_one_line_and_exit_2_without_spark(
        spark: SparkSession, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert spark_floor.main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "nowhere" in err and "no such run folder" in err
    # Found before Spark starts, and the session the process already had is left running (the
    # tool's own session is stopped when it is done: this one was stopped too, once).
    assert spark.sparkContext._jsc is not None and spark.range(3).count() == 3


@pytest.mark.parametrize("files", [(), ("w0.jsonl",)])
def test_a_run_folder_without_history_lines_is_one_line_and_exit_2_without_spark(
        spark: SparkSession, capsys: pytest.CaptureFixture[str], tmp_path: Path, files: tuple[str, ...]) -> None:
    # It started Spark first (seconds, and a JVM) and only then said the history was missing.
    (tmp_path / "history").mkdir()
    for name in files:
        (tmp_path / "history" / name).write_text("")
    assert spark_floor.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no history lines" in err and "history" in err
    assert spark.sparkContext._jsc is not None and spark.range(3).count() == 3


@pytest.mark.slow   # its own Spark session: 19 s alone, 62 s of `make test`; the passes: the first test
def test_the_command_prints_every_pass_of_every_round_as_json(tmp_path: Path) -> None:
    # Its own process, as a user runs it: main() starts and stops the process's Spark session.
    run = tmp_path / "run"
    generate(SynthConfig(events=1500, writers=1, seed=6), run, jobs=1)
    done = subprocess.run([sys.executable, "-m", "tools.bench.spark_floor", str(run), "--repeat", "1", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    lines, _ = read_history_dir(run / "history")
    assert report["events"] == len(lines)
    assert [p["name"] for p in report["passes"]] == list(_expected(run))
    assert {p["name"]: p["rows"] for p in report["passes"]} == _expected(run)
