from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from harness.results import RunDir, RunStatus, new_matrix, new_run, write_json_atomic

NOW = datetime(2026, 11, 21, 12, 30, 5, tzinfo=UTC)


def test_run_folder_layout_and_manifest(tmp_path: Path) -> None:
    run = new_run("bench", "v4", config={"seed": 1}, seed=1, target="embedded", root=tmp_path, now=NOW)
    assert run.run_id == "20261121-123005-bench-v4"
    for sub in ("history", "metrics", "locust", "logs", "analysis", "plots"):
        assert (run.path / sub).is_dir()
    manifest = run.read_manifest()
    assert manifest["status"] == "running" and manifest["seed"] == 1 and manifest["config"] == {"seed": 1}
    assert manifest["versions"]["txnbench"]
    run.set_status(RunStatus.INTERRUPTED, error="KeyboardInterrupt")
    manifest = run.read_manifest()
    assert manifest["status"] == "interrupted" and manifest["error"] == "KeyboardInterrupt" and manifest["ended"]


def test_same_second_never_reuses_a_folder(tmp_path: Path) -> None:
    a = new_run("bench", "v4", config={}, seed=1, target="embedded", root=tmp_path, now=NOW)
    b = new_run("bench", "v4", config={}, seed=1, target="embedded", root=tmp_path, now=NOW)
    assert a.path != b.path and b.run_id.endswith("-2")


def test_matrix_holds_runs_by_path(tmp_path: Path) -> None:
    matrix = new_matrix("bench", "bench", root=tmp_path, now=NOW)
    for path in ("v4", "v5"):
        new_run("bench", path, config={}, seed=1, target="embedded", parent=matrix.runs_dir,
                matrix_id=matrix.matrix_id)
    assert [r.path.name for r in matrix.run_dirs()] == ["v4", "v5"]
    # a matrix run keeps the full run id (the folder is only the path), read from its manifest
    for r in matrix.run_dirs():
        assert re.fullmatch(rf"\d{{8}}-\d{{6}}-bench-{r.path.name}", r.run_id)
        assert r.run_id == r.read_manifest()["run_id"]
    assert json.loads((matrix.path / "matrix.json").read_text())["kind"] == "bench"


def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "x.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_rundir_paths() -> None:
    run = RunDir(Path("results/x"))
    assert run.results_json == Path("results/x/analysis/results.json")
    assert run.perf_json == Path("results/x/analysis/perf.json")
