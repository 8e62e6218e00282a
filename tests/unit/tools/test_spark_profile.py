"""tools.bench.spark_profile: task costs summed per job description, from an event log without Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench.spark_profile import UNNAMED, main, profile, read_events


def _task(stage: int, cpu_ns: int, *, shuffle_write: int = 0, read_local: int = 0) -> dict[str, object]:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage,
            "Task Metrics": {"Executor CPU Time": cpu_ns, "Executor Run Time": cpu_ns // 1_000_000 + 5,
                             "JVM GC Time": 1, "Input Metrics": {"Bytes Read": 2_000_000},
                             "Shuffle Write Metrics": {"Shuffle Bytes Written": shuffle_write},
                             "Shuffle Read Metrics": {"Local Bytes Read": read_local, "Remote Bytes Read": 0}}}


_EVENTS = [
    {"Event": "SparkListenerApplicationStart", "Timestamp": 1},
    {"Event": "SparkListenerJobStart", "Job ID": 0, "Stage IDs": [0], "Properties": {}},
    _task(0, 1_000_000_000),
    {"Event": "SparkListenerJobStart", "Job ID": 1, "Stage IDs": [1, 2],
     "Properties": {"spark.job.description": "check 1/16: aborted-read"}},
    _task(1, 2_000_000_000, shuffle_write=3_000_000),
    _task(2, 500_000_000, read_local=3_000_000),
    {"Event": "SparkListenerJobStart", "Job ID": 2, "Stage IDs": [3],
     "Properties": {"spark.job.description": "check 1/16: aborted-read"}},
    _task(3, 500_000_000),
    _task(9, 7_000_000_000),    # a stage no job named: not counted
]


def test_tasks_are_summed_by_the_job_description_they_ran_under() -> None:
    costs = {c.phase: c for c in profile(_EVENTS)}
    assert list(costs) == [UNNAMED, "check 1/16: aborted-read"]
    check = costs["check 1/16: aborted-read"]
    assert (check.jobs, check.stages, check.tasks) == (2, 3, 3)
    assert check.cpu_s == pytest.approx(3.0)
    assert (check.shuffle_write_mb, check.shuffle_read_mb, check.input_mb) == (3.0, 3.0, 6.0)
    assert costs[UNNAMED].cpu_s == pytest.approx(1.0)


def test_the_command_reads_an_application_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = tmp_path / "eventlog_v2_local-1"
    app.mkdir()
    (app / "events_1_local-1").write_text("\n".join(json.dumps(e) for e in _EVENTS) + "\n")
    assert [e["Event"] for e in read_events(tmp_path)][:2] == ["SparkListenerApplicationStart", "SparkListenerJobStart"]
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "check 1/16: aborted-read" in out and out.splitlines()[-1].startswith("total")


def test_a_missing_log_is_named_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
