"""`txnbench report` refuses folders that are not runs, in one line, before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.report.cli import FolderKind, ReportInputError, classify
from orchestrator import cli


def test_classify(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    assert classify(run).kind is FolderKind.RUN
    matrix = tmp_path / "matrix"
    (matrix / "runs" / "v4").mkdir(parents=True)
    (matrix / "runs" / "v4" / "manifest.json").write_text(json.dumps({"run_id": "v4"}))
    assert classify(matrix).kind is FolderKind.MATRIX
    empty = tmp_path / "empty-matrix"
    (empty / "runs").mkdir(parents=True)
    with pytest.raises(ReportInputError, match="a matrix folder with no runs"):
        classify(empty)
    with pytest.raises(ReportInputError, match=r"not a run folder .* nor a matrix folder"):
        classify(tmp_path)
    with pytest.raises(ReportInputError, match="no such folder"):
        classify(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ReportInputError, match="is a file"):
        classify(tmp_path / "file.txt")


def test_command_line_says_what_is_wrong_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plain").mkdir()
    code = cli.main(["report", str(tmp_path / "plain")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith(f"txnbench: {tmp_path / 'plain'}: not a run folder")


def test_several_runs_from_different_places_need_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b"):
        (tmp_path / name / "history").mkdir(parents=True)
    code = cli.main(["report", str(tmp_path / "a"), str(tmp_path / "b")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "pass --out DIR" in err and len(err.splitlines()) == 1
