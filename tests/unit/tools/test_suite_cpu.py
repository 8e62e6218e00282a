"""`make test-cpu`'s plugin and summary (tools/bench/suite_cpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench import suite_cpu

REPO = Path(__file__).resolve().parents[3]


def test_a_childs_cpu_counts_while_it_lives_and_after_it_is_reaped() -> None:
    before = suite_cpu.cpu_seconds()
    busy = subprocess.Popen([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"])
    busy.wait(timeout=60)
    assert suite_cpu.cpu_seconds() - before >= 0.05


def test_the_plugin_writes_one_line_per_test_of_each_worker(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    out = tmp_path / "cpu"
    # a plain run of its own: under `make test` this test's worker name (PYTEST_XDIST_WORKER) is not its
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")} | {suite_cpu.DIR_ENV: str(out)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tools.bench.suite_cpu",
         "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=REPO, env=env,
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows, unreadable = suite_cpu.read_rows(out)
    assert unreadable == 0
    assert [r["id"] for r in rows] == ["test_inner.py::test_one", "test_inner.py::test_two"]
    assert all(r["worker"] == "main" and r["cpu"] >= 0 and r["wall"] >= 0 for r in rows)


def _row(test_id: str, cpu: float, start: float, worker: str) -> dict[str, object]:
    return {"id": test_id, "cpu": cpu, "wall": cpu, "start": start, "worker": worker}


def test_the_summary_adds_up_by_folder_and_file_and_shows_each_sessions_warm_up() -> None:
    rows = [_row(f"tests/spark/test_a.py::test_{i}", 10.0 if i < suite_cpu.WARM_UP_TESTS else 2.0, i, "gw0")
            for i in range(suite_cpu.WARM_UP_TESTS + 3)]
    rows += [_row("tests/unit/faults/test_x.py::test_y", 1.5, 0, "gw1"),
             _row("tests/unit/test_z.py::test_w", 0.5, 1, "gw1")]
    summary = suite_cpu.summarize(rows)
    assert summary["tests"] == len(rows) and summary["cpu"] == 10.0 * suite_cpu.WARM_UP_TESTS + 6.0 + 2.0
    assert summary["by_folder"] == {"tests/spark": 106.0, "tests/unit": 2.0}
    assert summary["by_file"][0] == {"file": "tests/spark/test_a.py", "tests": 13, "cpu": 106.0}
    assert summary["spark_sessions"] == {"gw0": {"spark_tests": 13, "spark_cpu": 106.0, "first_cpu": 100.0,
                                                 "rest_median_cpu": 2.0}}


def test_the_summary_command_says_when_there_is_nothing_to_read(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert suite_cpu.main([str(tmp_path / "none")]) == 2
    assert "make test-cpu" in capsys.readouterr().err
    (tmp_path / "gw0.jsonl").write_text(json.dumps(_row("tests/unit/test_q.py::test_r", 0.3, 0, "x")) + "\n")
    assert suite_cpu.main([str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["by_folder"] == {"tests/unit": 0.3}


def test_a_half_written_last_line_is_left_out_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = json.dumps(_row("tests/unit/test_q.py::test_r", 0.3, 0, "x"))
    (tmp_path / "gw1.jsonl").write_text(whole + "\n" + whole[:17])
    assert suite_cpu.main([str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["tests"] == 1
    assert "1 unreadable line(s)" in captured.err
