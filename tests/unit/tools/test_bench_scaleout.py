"""The scale-out benchmark's pure parts: its arguments, its table and the fit behind its projection."""

from __future__ import annotations

import pytest

from tools.bench.scaleout import (
    Row,
    analyse,
    fit_line,
    format_table,
    parse_args,
    project,
    split_per_event,
)


def test_the_defaults_are_two_sizes_on_one_and_two_workers() -> None:
    args = parse_args([])
    assert args.events == [500_000, 2_000_000] and args.workers == [1, 2] and args.repeat == 1
    assert args.worker_memory == "2g" and args.executor_memory == "2g"


def test_comma_lists_are_read_and_bad_ones_refused(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["--events", "1000, 5000", "--workers", "1,2,4", "--repeat", "2"])
    assert args.events == [1000, 5000] and args.workers == [1, 2, 4] and args.repeat == 2
    for bad in (["--workers", "0"], ["--workers", "a"], ["--events", "x"], ["--events", "0"], ["--repeat", "0"]):
        with pytest.raises(SystemExit) as exited:
            parse_args(bad)
        assert exited.value.code == 2
    capsys.readouterr()


def test_a_row_is_per_million_events_and_over_the_bare_session() -> None:
    row = Row(events=2_000_000, workers=2, wall_s=100.0, bare_s=20.0, verdict=True)
    assert row.s_per_million == pytest.approx(50.0) and row.ratio == pytest.approx(5.0)
    bare = Row(events=0, workers=0, wall_s=20.0, bare_s=20.0, verdict=None)
    assert bare.s_per_million is None and bare.ratio == pytest.approx(1.0)
    table = format_table([bare, row])
    assert "| bare session | local | 1 | 20.0 | - | 1.00 | - |" in table
    assert "| 2,000,000 | 2 | 1 | 100.0 | 50.0 | 5.00 | True |" in table


def test_a_line_through_two_sizes_is_the_fixed_and_the_per_event_part() -> None:
    fitted = fit_line([(500_000, 40.0), (2_000_000, 100.0)])
    assert fitted is not None
    fixed, per_event = fitted
    assert fixed == pytest.approx(20.0) and per_event * 1e6 == pytest.approx(40.0)
    assert fit_line([(1, 2.0), (1, 3.0)]) is None


def test_the_per_event_part_splits_into_what_the_workers_share_and_what_they_do_not() -> None:
    # 30 s per million on 1 worker, 20 s on 2: 10 s stays, 20 s is shared
    split = split_per_event({1: 30e-6, 2: 20e-6})
    assert split is not None
    serial, parallel = split
    assert serial * 1e6 == pytest.approx(10.0) and parallel * 1e6 == pytest.approx(20.0)
    assert project(15.0, serial, parallel, 1_000_000, 4) == pytest.approx(15.0 + 10.0 + 5.0)
    assert split_per_event({2: 1e-6}) is None


def test_the_analysis_fits_each_configuration_and_projects_from_the_cluster_ones() -> None:
    rows = [Row(0, 0, 20.0, 20.0, None),
            Row(500_000, 0, 30.0, 20.0, True), Row(2_000_000, 0, 60.0, 20.0, True),
            Row(500_000, 1, 40.0, 20.0, True), Row(2_000_000, 1, 85.0, 20.0, True),
            Row(500_000, 2, 35.0, 20.0, True), Row(2_000_000, 2, 65.0, 20.0, True),
            Row(2_000_000, 2, 75.0, 20.0, True, round=2), Row(2_000_000, 2, 65.0, 20.0, True, round=3)]
    found = analyse(rows, events=(1_000_000,), workers=(4,))
    assert found["fits"]["local"]["per_million_s"] == pytest.approx(20.0)
    assert found["fits"]["1 workers"] == pytest.approx({"fixed_s": 25.0, "per_million_s": 30.0})
    assert found["fits"]["2 workers"] == pytest.approx({"fixed_s": 25.0, "per_million_s": 20.0})   # the median of 3
    (one,) = found["projection"]
    assert one["wall_s"] == pytest.approx(25.0 + 10.0 + 20.0 / 4)
