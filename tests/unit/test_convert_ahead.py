"""analysis.history_io.convert_ahead: Arrow's conversion without Spark, and the check that starts
Spark beside it (analysis.check).

What must hold: it converts exactly where `load_run` would (a large history without a valid
cache), into the temporary copies `load_history` then takes; told to stop, it stops and leaves
nothing half-written; and a check whose Spark cannot start stops the conversion it began.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from analysis import check, columnar, history_io
from analysis.history_io import CACHE_NAME, PAIRS_NAME, convert_ahead
from harness.errors import EnvironmentProblem
from harness.history.reader import history_files
from harness.results import write_json_atomic
from tools.synth import SynthConfig, generate


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    generate(SynthConfig(events=2_000, writers=2, seed=5), run, jobs=1)
    return run


def _temporary_copies(run: Path) -> list[Path]:
    return sorted((run / "analysis").glob(".*.tmp")) if (run / "analysis").is_dir() else []


def test_nothing_is_converted_where_load_run_would_not_convert(tmp_path: Path) -> None:
    assert convert_ahead(tmp_path / "missing", parquet_min_bytes=0) is None
    run = _run(tmp_path)
    assert convert_ahead(run, parquet_min_bytes=10 ** 12) is None          # too small to convert
    files = [p for p in history_files(run / "history") if p.stat().st_size > 0]
    (run / "analysis" / CACHE_NAME).mkdir(parents=True)
    write_json_atomic(run / "analysis" / f"{CACHE_NAME}.json", {"fingerprint": history_io._fingerprint(files)})
    assert convert_ahead(run, parquet_min_bytes=0) is None                 # already cached
    assert _temporary_copies(run) == []


def test_a_large_history_is_converted_into_the_copies_load_history_takes(tmp_path: Path) -> None:
    run = _run(tmp_path)
    said: list[str] = []
    converted = convert_ahead(run, parquet_min_bytes=0, progress=said.append)
    assert converted is not None and converted.refused is None
    files = [p for p in history_files(run / "history") if p.stat().st_size > 0]
    lines = sum(len(p.read_bytes().splitlines()) for p in files)
    assert converted.validated is not None and converted.validated.lines == lines
    assert converted.fingerprint == history_io._fingerprint(files)
    copy, pairs = history_io._tmp_paths(run / "analysis")
    assert list(copy.glob("*.parquet")) and list(pairs.glob("*.parquet"))
    assert any(line.startswith(f"converting {len(files)} history file(s)") for line in said)


def test_a_history_arrow_refuses_leaves_no_copy_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise columnar.NotConvertible("refused for the test")

    monkeypatch.setattr(columnar, "convert", refuse)
    run = _run(tmp_path)
    converted = convert_ahead(run, parquet_min_bytes=0)
    assert converted is not None and converted.refused == "refused for the test"
    assert _temporary_copies(run) == []


def test_told_to_stop_it_stops_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    run = _run(tmp_path)
    stop = threading.Event()
    stop.set()
    with pytest.raises(columnar.Stopped):
        convert_ahead(run, parquet_min_bytes=0, stop=stop)
    assert _temporary_copies(run) == []
    assert not (run / "analysis" / CACHE_NAME).exists() and not (run / "analysis" / PAIRS_NAME).exists()


def test_a_check_whose_spark_cannot_start_stops_the_conversion_it_began(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path)
    converting = threading.Event()
    seen: dict[str, Any] = {}

    def slow_convert(*_args: Any, stop: threading.Event | None = None, **_kwargs: Any) -> None:
        # A conversion that would take long: it only ends when told to stop (or after 20 s).
        assert stop is not None
        seen["thread"] = threading.current_thread().name
        converting.set()
        seen["stopped"] = stop.wait(20)
        raise columnar.Stopped("stopped for the test")

    def no_spark(*_args: Any, **_kwargs: Any) -> None:
        assert converting.wait(20), "the conversion should run while Spark starts"
        raise EnvironmentProblem("no Java for the test")

    monkeypatch.setattr(columnar, "convert", slow_convert)
    monkeypatch.setattr(check, "get_spark", no_spark)
    monkeypatch.setitem(convert_ahead.__kwdefaults__, "parquet_min_bytes", 0)
    with pytest.raises(EnvironmentProblem, match="no Java"):
        check.check_run(run, progress=False)
    assert seen == {"thread": "history-converter", "stopped": True}
    assert _temporary_copies(run) == []
