"""Reading history folders: the explicit schema, torn tails, malformed lines, the Parquet cache, pairing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from analysis.history_io import (
    HistoryFormatError,
    NoHistoryError,
    load_history,
    load_run,
    torn_tail,
)
from analysis.model import OPS_COLUMNS, PAIR_COLUMNS, pair_operations
from tests.spark.dsl import History


def _small_run(tmp_path: Path) -> Path:
    h = History()
    h.process("w0/u1").open().send("a", key="k").commit()
    h.process("w0/u2").open().send("b").commit(type=None)
    h.process("c1").receive("a")
    h.drain(reads={"t1": ["a"]})
    return h.write(tmp_path / "run")


def test_reads_every_file_with_the_contract_columns(spark: SparkSession, tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    loaded = load_run(spark, run)
    assert tuple(loaded.ops.columns) == OPS_COLUMNS
    facts = loaded.facts
    assert facts.files == ("c1.jsonl", "drain.jsonl", "run.jsonl", "w0.jsonl")
    assert facts.lines == 15 and facts.torn_tails == () and facts.source == "jsonl"
    phases = {r["phase"] for r in loaded.ops.filter("f = 'phase'").collect()}
    assert phases == {"drain", "drain-complete"}
    (recv,) = loaded.ops.filter("f = 'receive'").collect()
    assert recv["redelivery"] == 0 and json.loads(recv["extra"]) == {"redelivery": 0}
    loaded.release()


def test_a_torn_last_line_is_skipped_and_reported(spark: SparkSession, tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    w0 = run / "history" / "w0.jsonl"
    with w0.open("ab") as f:
        f.write(b'{"schema":1,"run":"test-run","writer":"w0","process":"w0/u3","index":9,"time_\xc3')
    assert torn_tail(w0) is not None
    loaded = load_run(spark, run)
    assert loaded.facts.torn_tails == ("w0.jsonl",) and loaded.facts.lines == 15
    assert loaded.ops.filter("process = 'w0/u3'").count() == 0


def test_a_complete_last_line_without_newline_is_kept(spark: SparkSession, tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    w0 = run / "history" / "w0.jsonl"
    w0.write_bytes(w0.read_bytes().rstrip(b"\n"))
    assert torn_tail(w0) is None
    loaded = load_run(spark, run)
    assert loaded.facts.lines == 15 and loaded.facts.torn_tails == ()


@pytest.mark.parametrize(("bad", "why"), [
    (b'{"schema":1,"writer":"w0"\n', "not a JSON object"),
    (b'{"schema":1,"run":"r","writer":"w0","process":"p","index":"seven","time_ns":1,"type":"ok","f":"read"}\n',
     "wrong type"),
    (b'{"schema":1,"run":"r","writer":"w0","process":"p","index":70,"time_ns":1,"type":"maybe","f":"read"}\n',
     "unknown type maybe"),
    (b'{"schema":2,"run":"r","writer":"w0","process":"p","index":70,"time_ns":1,"type":"ok","f":"read"}\n',
     "schema is 2"),
    (b'{"schema":1,"run":"r","writer":"w0","process":"p","time_ns":1,"type":"ok","f":"read"}\n',
     "required field"),
])
def test_a_malformed_line_before_the_end_fails_naming_file_and_line(
        spark: SparkSession, tmp_path: Path, bad: bytes, why: str) -> None:
    run = _small_run(tmp_path)
    w0 = run / "history" / "w0.jsonl"
    lines = w0.read_bytes().splitlines(keepends=True)
    w0.write_bytes(b"".join(lines[:3]) + bad + b"".join(lines[3:]))
    with pytest.raises(HistoryFormatError) as info:
        load_run(spark, run)
    message = str(info.value)
    assert "w0.jsonl" in message and why in message and "cannot support a verdict" in message
    if why in ("not a JSON object", "wrong type"):
        assert "line 4" in message


def test_a_repeated_index_fails(spark: SparkSession, tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    w0 = run / "history" / "w0.jsonl"
    first = w0.read_bytes().splitlines(keepends=True)[0]
    with w0.open("ab") as f:
        f.write(first)
    with pytest.raises(HistoryFormatError, match=r"w0\.jsonl: line 12: index 0 appears again \(2 times in all\)"):
        load_run(spark, run)


def test_a_missing_line_in_the_middle_fails(spark: SparkSession, tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    w0 = run / "history" / "w0.jsonl"
    lines = w0.read_bytes().splitlines(keepends=True)
    w0.write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(HistoryFormatError, match=r"w0\.jsonl: line 3: index 2 is missing before this line"):
        load_run(spark, run)


def test_missing_or_empty_history_is_a_clear_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(NoHistoryError, match="no such run folder"):
        load_run(spark, tmp_path / "nope")
    (tmp_path / "empty" / "history").mkdir(parents=True)
    (tmp_path / "empty" / "history" / "w0.jsonl").write_bytes(b"")
    with pytest.raises(NoHistoryError, match="no history lines"):
        load_run(spark, tmp_path / "empty")


def test_large_histories_are_converted_to_parquet_once(spark: SparkSession, tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    analysis = run / "analysis"
    first = load_history(spark, run / "history", cache_dir=analysis, parquet_min_bytes=0)
    assert first.facts.source == "parquet" and (analysis / "history.parquet").is_dir()
    assert tuple(first.ops.columns) == OPS_COLUMNS and first.ops.count() == 15
    again = load_history(spark, run / "history", cache_dir=analysis, parquet_min_bytes=0)
    assert again.facts.source == "parquet-cache" and again.facts.lines == 15
    # A changed history is converted again.
    w0 = run / "history" / "w0.jsonl"
    os.utime(w0, ns=(w0.stat().st_atime_ns, w0.stat().st_mtime_ns + 10_000_000))
    changed = load_history(spark, run / "history", cache_dir=analysis, parquet_min_bytes=0)
    assert changed.facts.source == "parquet"


def test_a_malformed_history_leaves_no_parquet_cache(spark: SparkSession, tmp_path: Path) -> None:
    run = _small_run(tmp_path)
    w0 = run / "history" / "w0.jsonl"
    lines = w0.read_bytes().splitlines(keepends=True)
    w0.write_bytes(lines[0] + b"not json\n" + b"".join(lines[1:]))
    with pytest.raises(HistoryFormatError):
        load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0)
    assert not (run / "analysis" / "history.parquet").exists()


def test_pairing_joins_completions_and_treats_missing_ones_as_info(spark: SparkSession) -> None:
    h = History()
    p = h.process("w0/u1")
    t = p.open()                       # txn id learned on completion
    t.send("a", type="fail")
    t.send("b", type=None)             # no completion: info
    h.emit("w0", "w0/u1", "ok", "txn-commit", txn=t.id)   # a completion no invocation claims
    pairs = pair_operations(h.ops(spark), include_orphans=True)
    assert tuple(pairs.columns) == PAIR_COLUMNS
    rows = {(r["f"], r["value"], r["orphan"]): r for r in pairs.collect()}
    opened = rows[("txn-open", None, False)]
    assert opened["txn"] == t.id and opened["type"] == "ok" and opened["complete_index"] == 1
    assert rows[("send", "a", False)]["type"] == "fail" and rows[("send", "a", False)]["error"]
    unfinished = rows[("send", "b", False)]
    assert unfinished["type"] == "info" and unfinished["completed"] is False
    assert unfinished["complete_ns"] is None and unfinished["invoke_ns"] is not None
    orphan = rows[("txn-commit", None, True)]
    assert orphan["invoke_ns"] is None and orphan["type"] == "ok"
    lean = {(r["f"], r["value"]): r for r in pair_operations(h.ops(spark), lean=True).collect()}
    assert set(lean) == {("txn-open", None), ("send", "a"), ("send", "b")}
    assert lean[("txn-open", None)]["txn"] == t.id and lean[("send", "b")]["type"] == "info"
