"""Operations paired as Arrow converts (analysis.columnar_pairs) against Spark's window.

The stream must give exactly `pair_operations(ops, include_orphans=True, lean=True)`'s rows
wherever a chunk, or a file, ends; where a writer's lines are not in index order it must
give up, and leave the check to Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from analysis import columnar, history_io
from analysis.columnar import convert
from analysis.history_io import PAIRS_NAME, HistoryFormatError, load_history, torn_tail
from analysis.model import (
    LEAN_PAIR_COLUMNS,
    overview_aggregates,
    overview_from_row,
    pair_operations,
)
from harness.anomalies import AnomalyClass
from harness.history.reader import history_files
from tools.synth import SynthConfig, generate


def _rows(frame: DataFrame) -> list[tuple[str, ...]]:
    return sorted(tuple(json.dumps(row[name]) for name in LEAN_PAIR_COLUMNS)
                  for row in frame.select(*LEAN_PAIR_COLUMNS).collect())


def _convert(history: Path, out: Path, chunk_bytes: int) -> tuple[Path, Path]:
    files = [p for p in history_files(history) if p.stat().st_size > 0]
    torn = {p: tail for p in files if (tail := torn_tail(p)) is not None}
    convert(files, torn, out / "ops", chunk_bytes=chunk_bytes, pairs_dir=out / "pairs")
    return out / "ops", out / "pairs"


def _same_as_spark(spark: SparkSession, ops_dir: Path, pairs_dir: Path) -> None:
    ops = spark.read.parquet(str(ops_dir))
    by_spark = _rows(pair_operations(ops, include_orphans=True, lean=True))
    by_arrow = _rows(spark.read.parquet(str(pairs_dir)))
    assert len(by_arrow) == len(by_spark)
    assert by_arrow == by_spark


# 64 KiB still ends about forty chunks in the planted history's 2.7 MB (45 files of Parquet); 8 KiB
# made 337 files, which Spark read one task each: 21 s alone, 54 s in `make test`, against 5 s
# (2026-12-01). Every kind of edge at a chunk's end is the next test's, with chunks of one line.
@pytest.mark.parametrize("chunk_bytes", [64 * 1024, 1 << 20])
def test_a_planted_history_pairs_as_spark_pairs_it(spark: SparkSession, tmp_path: Path, chunk_bytes: int) -> None:
    run = tmp_path / "run"
    generate(SynthConfig(events=8_000, writers=3, plant=tuple(c.value for c in AnomalyClass), seed=11), run,
             jobs=1)
    _same_as_spark(spark, *_convert(run / "history", tmp_path / "out", chunk_bytes))


def _line(writer: str, index: int, process: str, f: str, type_: str, **fields: Any) -> str:
    line = {"schema": 1, "run": "r", "writer": writer, "process": process, "index": index,
            "time_ns": 1_000 * (index + 1), "wall_ms": 1.0, "type": type_, "f": f, "path": "v4",
            "txn": None, "topic": None, "segment": None, "subscription": None, "key": None, "value": None,
            "inputs": None, "msg_id": None, "error": None, "extra": None, **fields}
    return json.dumps(line, separators=(",", ":"))


# (process, f, type, fields): every way an event can relate to the one before it in its process.
_EDGES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("p/1", "send", "ok", {"value": "orphan-first"}),            # a completion first: orphan
    ("p/2", "txn-open", "invoke", {}),
    ("p/1", "send", "invoke", {"value": "a", "key": "k", "topic": "t", "inputs": ["x"]}),
    ("d/1", "read", "ok", {"value": "a", "topic": "t", "msg_id": "1:0:-1"}),
    ("p/2", "txn-open", "ok", {"txn": "1:1"}),                    # the completion gives the txn
    ("p/1", "send", "ok", {"value": "a", "msg_id": "1:0:-1", "topic": None}),  # null result: the invocation's
    ("p/1", "send", "ok", {"value": "again"}),                    # a second completion: orphan
    ("p/3", "ack", "invoke", {"value": "a", "subscription": "s", "extra": {"cumulative": True}}),
    ("p/3", "txn-commit", "ok", {"txn": "1:1"}),                  # another f: the ack is info, this an orphan
    ("c/1", "receive", "ok", {"value": "a", "subscription": "s", "extra": {"delivered_ns": 5}}),
    ("p/2", "send", "invoke", {"value": "b", "txn": "1:1"}),
    ("p/4", "txn-commit", "invoke", {"txn": "1:1"}),
    ("p/2", "send", "fail", {"value": "b", "error": "x: y"}),
    ("p/4", "txn-commit", "info", {"txn": "1:1"}),
    ("p/5", "txn-abort", "invoke", {"txn": "1:2"}),               # never completed: info at the end
    ("p/2", "send", "invoke", {"value": "c"}),
    ("n/1", "phase", "ok", {"extra": {"name": "drain"}}),
    ("p/2", "send", "invoke", {"value": "d"}),                    # invoked twice in a row: the first is info
    ("p/2", "send", "ok", {"value": "d", "msg_id": "1:1:-1"}),
]


def test_every_edge_pairs_as_spark_pairs_it_wherever_a_chunk_or_file_ends(
        spark: SparkSession, tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    lines = [_line("w", i, *edge[:3], **edge[3]) for i, edge in enumerate(_EDGES)]
    # One writer in two files, in index order; a second writer interleaved in its own file.
    (history / "w-a.jsonl").write_text("\n".join(lines[:9]) + "\n")
    (history / "w-b.jsonl").write_text("\n".join(lines[9:]) + "\n")
    (history / "x.jsonl").write_text("\n".join(_line("x", i, f"p/{i % 2}", "send", ("invoke", "ok")[i % 3 == 1],
                                                     value=f"x{i}") for i in range(12)) + "\n")
    for chunk_bytes in (1, 700, 1 << 20):     # a line per chunk, a few, and one chunk per file
        out = tmp_path / f"out-{chunk_bytes}"
        _same_as_spark(spark, *_convert(history, out, chunk_bytes))


def test_lines_out_of_index_order_leave_the_pairing_to_spark(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    lines = [_line("w", i, "p/1", "send", ("invoke", "ok")[i % 2], value=f"v{i // 2}") for i in range(6)]
    lines[2], lines[4] = lines[4], lines[2]
    (history / "w.jsonl").write_text("\n".join(lines) + "\n")
    ops, pairs = _convert(history, tmp_path / "out", 1 << 20)
    assert not pairs.exists()
    assert list(ops.glob("*.parquet"))      # the conversion itself goes on


def test_a_converted_history_loads_with_its_pairs_and_so_does_its_cache(spark: SparkSession, tmp_path: Path) -> None:
    run = tmp_path / "run"
    generate(SynthConfig(events=3_000, writers=2, seed=3), run, jobs=1)
    first = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0)
    again = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0)
    assert (first.facts.source, again.facts.source) == ("parquet", "parquet-cache")
    expected = _rows(pair_operations(first.ops, include_orphans=True, lean=True))
    for loaded in (first, again):
        assert loaded.pairs is not None
        assert _rows(loaded.pairs) == expected


def test_a_history_spark_converts_loads_without_pairs(spark: SparkSession, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> int:
        raise columnar.NotConvertible("refused for the test")

    monkeypatch.setattr(columnar, "convert", refuse)
    run = tmp_path / "run"
    generate(SynthConfig(events=1_000, writers=2, seed=3), run, jobs=1)
    loaded = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0)
    assert loaded.facts.source == "parquet" and loaded.pairs is None
    assert not (run / "analysis" / PAIRS_NAME).exists()
    assert load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0).pairs is None


@pytest.mark.parametrize(("change", "problem"), [
    (lambda lines: lines[:3] + lines[4:], "index 3 is missing"),
    (lambda lines: [lines[0], lines[1].replace('"time_ns":2000', '"time_ns":500'), *lines[2:]],
     "time_ns goes backwards"),
])
def test_a_converted_writer_with_a_gap_or_a_clock_going_back_is_still_refused(
        spark: SparkSession, tmp_path: Path, change: Any, problem: str) -> None:
    """The stream notes an intact writer so validation may skip its window; a broken one it leaves to it,
    also where the conversion's overview would stand in for validation's pass (a large check's request)."""
    history = tmp_path / "history"
    history.mkdir()
    lines = [_line("w", i, "p/1", "send", ("invoke", "ok")[i % 2], value=f"v{i // 2}") for i in range(8)]
    (history / "w.jsonl").write_text("\n".join(change(lines)) + "\n")
    with pytest.raises(HistoryFormatError, match=problem):
        load_history(spark, history, cache_dir=tmp_path / "analysis", parquet_min_bytes=0,
                     summary=overview_aggregates())


def test_the_stream_says_whether_every_writer_is_intact(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    lines = [_line("w", i, "p/1", "send", ("invoke", "ok")[i % 2], value=f"v{i // 2}") for i in range(8)]
    (history / "w.jsonl").write_text("\n".join(lines) + "\n")
    files = history_files(history)
    assert convert(files, {}, tmp_path / "a", chunk_bytes=300, pairs_dir=tmp_path / "pa").writers_intact
    (history / "w.jsonl").write_text("\n".join(lines[1:]) + "\n")     # starts at index 1
    assert not convert(files, {}, tmp_path / "b", chunk_bytes=300, pairs_dir=tmp_path / "pb").writers_intact


def test_each_row_group_of_the_copy_and_the_pairs_holds_one_kind(tmp_path: Path) -> None:
    """The checks read one kind at a time; Spark skips the row groups whose statistics exclude it."""
    run = tmp_path / "run"
    generate(SynthConfig(events=4_000, writers=2, seed=5), run, jobs=1)
    for folder in _convert(run / "history", tmp_path / "out", 64 * 1024):
        kinds: list[str] = []
        for part in sorted(folder.glob("*.parquet")):
            meta = pq.ParquetFile(part).metadata
            column = meta.schema.names.index("f")
            for group in range(meta.num_row_groups):
                stats = meta.row_group(group).column(column).statistics
                assert stats.has_min_max and stats.min == stats.max, (part.name, group)
                kinds.append(stats.min)
        assert {"send", "ack", "txn-open"} <= set(kinds), folder
        assert len(kinds) > len(set(kinds)), "several parts, each split by kind"


def test_the_cache_keeps_the_summary_of_the_aggregates_it_was_asked_for(spark: SparkSession, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached history's summary is the one a pass over it gives, without that pass; other aggregates
    than those kept are computed (and kept in their turn)."""
    run = tmp_path / "run"
    generate(SynthConfig(events=3_000, writers=2, seed=3), run, jobs=1)
    asked = overview_aggregates()
    first = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0, summary=asked)
    assert first.summary is not None
    computed = history_io._summarize(first.ops, None, asked)
    assert computed is not None

    def no_pass(*_: Any) -> None:
        raise AssertionError("the kept summary was computed again")

    with monkeypatch.context() as patched:
        patched.setattr(history_io, "_summarize", no_pass)
        again = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0, summary=asked)
    assert again.facts.source == "parquet-cache" and again.summary is not None
    assert overview_from_row(again.summary) == overview_from_row(computed)
    assert again.summary["phases"][0]["phase"] == computed["phases"][0]["phase"]

    fewer = asked[:2]
    other = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0, summary=fewer)
    assert other.summary is not None and other.summary.asDict() == {"first_ns": computed["first_ns"],
                                                                    "last_ns": computed["last_ns"]}
    with monkeypatch.context() as patched:
        patched.setattr(history_io, "_summarize", no_pass)
        kept = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0, summary=fewer)
    assert kept.summary is not None and kept.summary.asDict() == other.summary.asDict()


def test_a_cache_whose_metadata_cannot_be_written_is_still_checked(spark: SparkSession, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeping the summary is a saving, not a need: a run folder on a read-only medium still loads."""
    run = tmp_path / "run"
    generate(SynthConfig(events=2_000, writers=1, seed=4), run, jobs=1)
    asked = overview_aggregates()[:2]
    load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0)

    def read_only(*_: Any) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(history_io, "write_json_atomic", read_only)
    loaded = load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0, summary=asked)
    assert loaded.facts.source == "parquet-cache"
    assert loaded.summary is not None and loaded.summary["first_ns"] is not None
