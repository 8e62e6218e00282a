"""A history into DuckDB (analysis.duck.load): what it vouches for, what it hands to Spark, the copy it keeps."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import analysis.duck.load as load
from analysis.duck.load import NeedsSpark, connect, load_run
from tests.spark.dsl import History


def _history() -> History:
    h = History()
    h.process("w0/u1").open().sends("a", "b").commit()
    h.process("w0/u2").open().send("c").abort()
    h.process("w1/c1").receive("a")
    return h.drain(reads={"t1": ["a", "b"]})


def _rewrite(run: Path, name: str, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    path = run / "history" / name
    lines = edit([json.loads(line) for line in path.read_text().splitlines()])
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_run_is_loaded_with_its_overview_and_operations(tmp_path: Path) -> None:
    run = _history().write(tmp_path / "run")
    con = connect(threads=1)
    loaded = load_run(run, con, work_dir=tmp_path / "work")
    counts = loaded.overview.counts
    assert counts["sends"] == 6 and counts["receives"] == 1 and counts["reads"] == 2   # events: invoke and ok
    assert loaded.overview.drain.complete and loaded.first_unclaimed is None
    assert loaded.facts.source == "jsonl" and loaded.facts.lines == counts["events"]
    row = con.execute("SELECT count(*) FROM pairs_src WHERE f = 'send' AND \"type\" = 'ok'").fetchone()
    assert row is not None and row[0] == 3


def test_a_writer_whose_lines_are_out_of_order_goes_to_spark(tmp_path: Path) -> None:
    run = _history().write(tmp_path / "run")
    _rewrite(run, "w0.jsonl", lambda lines: [lines[1], lines[0], *lines[2:]])
    with pytest.raises(NeedsSpark, match="out of order"):
        load_run(run, connect(threads=1), work_dir=tmp_path / "work")


def test_a_line_that_breaks_a_rule_goes_to_spark(tmp_path: Path) -> None:
    run = _history().write(tmp_path / "run")
    _rewrite(run, "w0.jsonl", lambda lines: [{**lines[0], "type": "maybe"}, *lines[1:]])
    with pytest.raises(NeedsSpark, match="breaks a rule"):
        load_run(run, connect(threads=1), work_dir=tmp_path / "work")


def test_a_large_history_keeps_its_copy_where_spark_keeps_it_and_reads_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "PARQUET_MIN_BYTES", 1)
    run = _history().write(tmp_path / "run")
    first = load_run(run, connect(threads=1), work_dir=tmp_path / "work1")
    meta = json.loads((run / "analysis" / "history.parquet.json").read_text())
    assert first.facts.source == "parquet" and meta["pairs"] is True and meta["lines"] == first.facts.lines
    again = load_run(run, connect(threads=1), work_dir=tmp_path / "work2")
    assert again.facts.source == "parquet-cache"
    assert again.overview == first.overview and again.first_unclaimed is None
