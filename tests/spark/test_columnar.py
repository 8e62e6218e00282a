"""Arrow's conversion of a large history (analysis.columnar) against Spark's reader.

The Parquet copy must hold what Spark's reader makes of the same lines; what Arrow cannot
read as Spark would must go to Spark (`NotConvertible`), whose validation names the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from analysis import columnar
from analysis.columnar import NotConvertible, convert
from analysis.history_io import (
    HistoryFormatError,
    _read_jsonl,
    _with_derived,
    load_history,
    torn_tail,
)
from analysis.model import OPS_COLUMNS
from harness.history.reader import history_files
from tools.synth import SynthConfig, generate

_ODD_LINES: list[dict[str, Any]] = [   # valid lines a recorder could write, in a writer of their own ("odd")
    {"process": "odd/1", "f": "phase", "type": "ok", "value": "é ☃ \"extra\":{ \\ /",
     "extra": {"name": "drain", "nested": {"a": [1, 2.5, None, "x}"]}, "ratio": 1e-05}},
    {"process": "odd/1", "f": "send", "type": "invoke", "inputs": ["a", "b"], "key": "k",
     "extra": {"intended_ns": 12, "text": "{\"extra\":1}"}},
    {"process": "odd/1", "f": "send", "type": "ok", "inputs": [], "error": None, "extra": {}},
    {"process": "odd/2", "f": "receive", "type": "ok", "value": "v",
     "extra": {"redelivery": 2, "cumulative": True, "delivered_ns": 99}},
]


def _odd_file(history: Path) -> None:
    """A writer whose lines use what the synthetic ones do not; blank lines and no final newline."""
    lines = []
    for index, fields in enumerate(_ODD_LINES):
        line = {"schema": 1, "run": "synthetic", "writer": "odd", "index": index, "time_ns": 1_000 + index,
                "wall_ms": 1.5 + index, "path": "v4", **fields}
        lines.append(json.dumps(line, separators=(",", ":"), ensure_ascii=False))
    text = lines[0] + "\n\n   \n" + "\n".join(lines[1:])   # blank lines; the last without newline
    (history / "odd.jsonl").write_text(text, encoding="utf-8")


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    rows = []
    for row in frame.select(*OPS_COLUMNS).collect():
        values = row.asDict()
        values["extra"] = json.loads(values["extra"]) if values["extra"] is not None else None
        rows.append(tuple(json.dumps(values[name], sort_keys=True) for name in OPS_COLUMNS))
    return sorted(rows)


def test_arrow_and_spark_make_the_same_rows(spark: SparkSession, tmp_path: Path) -> None:
    run = tmp_path / "run"
    generate(SynthConfig(events=6_000, writers=2, plant=("aborted-read", "duplicate"), seed=5), run,
             jobs=1)
    history = run / "history"
    _odd_file(history)
    with (history / "w0.jsonl").open("ab") as f:     # a torn last line
        f.write(b'{"schema":1,"run":"synthetic","writer":"w0","ind')
    files = [p for p in history_files(history) if p.stat().st_size > 0]
    torn = {p: tail for p in files if (tail := torn_tail(p)) is not None}
    assert set(torn) == {history / "w0.jsonl"}

    rows = convert(files, torn, tmp_path / "arrow", chunk_bytes=64 * 1024).rows   # many chunks per file
    arrow = spark.read.parquet(str(tmp_path / "arrow"))
    by_spark = _with_derived(_read_jsonl(spark, files, torn))
    assert rows == arrow.count() == by_spark.count()
    assert _rows(arrow) == _rows(by_spark)
    assert {f.name: f.dataType for f in arrow.select(*OPS_COLUMNS).schema.fields} == \
        {f.name: f.dataType for f in by_spark.select(*OPS_COLUMNS).schema.fields}


@pytest.mark.parametrize(("line", "why"), [
    ('{"schema":1,"value":5}', "changed from string to number"),
    ('{"schema":1,"inputs":["x",7]}', "changed from string to number"),
    ('{"schema":1,"extra":"text"}', "changed from object to string"),
    ('{"schema":1.5}', "int64"),
    ('not json', "JSON"),
    ('[1,2]', "JSON"),
    ('{"schema":1,"run":"a","run":"b"}', "specified twice"),
    ('\t', "objects in"),
    ('{"schema":1}\r', "carriage returns"),
    ('{"schema":1,"extra":{"a":1},"error":null}', "not its last field"),
    ('{"schema":1,"extra":{"a":1},"q":{"b":2}}', "not one object"),
])
def test_what_arrow_cannot_read_as_spark_does_goes_to_spark(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text('{"schema":1,"index":0}\n' + line + '\n{"schema":1,"index":2}\n', encoding="utf-8")
    with pytest.raises(NotConvertible, match=why):
        convert([path], {}, tmp_path / "out")


def test_a_bad_line_in_a_chunk_parsed_ahead_still_stops_the_conversion(tmp_path: Path) -> None:
    # The next chunk is parsed while this one is paired: its error surfaces when its turn comes.
    path = tmp_path / "w.jsonl"
    good = "".join(f'{{"schema":1,"index":{i}}}\n' for i in range(200))
    path.write_text(good + '{"schema":1,"value":5}\n' + good, encoding="utf-8")
    with pytest.raises(NotConvertible, match="changed from string to number"):
        convert([path], {}, tmp_path / "out", chunk_bytes=512, pairs_dir=tmp_path / "pairs")


def test_a_torn_tail_that_is_also_a_whole_line_goes_to_spark(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_bytes(b'{"schema":1,"ind\n{"schema":1}\n{"schema":1,"ind')
    with pytest.raises(NotConvertible, match="JSON parse error"):
        convert([path], {path: b'{"schema":1,"ind'}, tmp_path / "out")


@pytest.mark.parametrize(("field", "value"), [("value", 5), ("extra", "text"), ("inputs", ["x", 7])])
def test_a_large_history_of_the_wrong_type_fails_as_a_small_one(spark: SparkSession, tmp_path: Path,
                                                                 field: str, value: Any) -> None:
    run = tmp_path / "run"
    generate(SynthConfig(events=500, writers=1, seed=2), run, jobs=1)
    w0 = run / "history" / "w0.jsonl"
    lines = w0.read_text().splitlines()
    wrong = json.loads(lines[2])
    wrong[field] = value
    lines[2] = json.dumps(wrong)
    w0.write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryFormatError, match=rf"w0\.jsonl: line 3: .*{field}"):
        load_history(spark, run / "history", cache_dir=run / "analysis", parquet_min_bytes=0)
    assert not (run / "analysis" / "history.parquet").exists()


def test_a_line_too_long_for_one_string_array_goes_to_spark(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "MAX_CHUNK_BYTES", 100)
    path = tmp_path / "w.jsonl"
    path.write_text('{"schema":1,"index":0}\n{"schema":1,"value":"' + "x" * 200 + '"}\n', encoding="utf-8")
    with pytest.raises(NotConvertible, match="without a newline"):
        convert([path], {}, tmp_path / "out", chunk_bytes=64)


def test_repeating_columns_are_dictionary_encoded_and_the_rest_plain(tmp_path: Path) -> None:
    # Arrow tries a dictionary for every column unless told which: for values, message ids and
    # times it built one per page and gave it up, the conversion's costliest work (docs/checks.md).
    run = tmp_path / "run"
    generate(SynthConfig(events=3_000, writers=1, seed=4), run, jobs=1)
    convert(history_files(run / "history"), {}, tmp_path / "copy", pairs_dir=tmp_path / "pairs")
    for folder in ("copy", "pairs"):
        part = sorted((tmp_path / folder).glob("*.parquet"))[0]
        group = pq.ParquetFile(part).metadata.row_group(0)
        encodings = {group.column(i).path_in_schema: set(group.column(i).encodings)
                     for i in range(group.num_columns)}
        assert "RLE_DICTIONARY" in encodings["writer"] and "RLE_DICTIONARY" in encodings["f"]
        for plain in ("value", "msg_id", "index"):
            assert not encodings[plain] & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}, (folder, plain)


def test_rows_are_written_kind_by_kind_as_a_stable_sort_by_kind_orders_them(tmp_path: Path) -> None:
    # write_by_kind filters kind by kind instead of sorting (cheaper at 20 million events): the
    # file must hold the rows a stable sort by `f` gives, nulls last, one kind per row group.
    kinds = ["send", "ack", None, "send", "txn-open", "ack", None, "read", "send"]
    table = pa.table({"f": pa.array(kinds, pa.string()), "index": pa.array(range(len(kinds)), pa.int64())})
    columnar.write_by_kind(table, tmp_path / "part.parquet")
    written = pq.read_table(tmp_path / "part.parquet")
    expected = table.take(pc.array_sort_indices(table.column("f"), null_placement="at_end"))
    assert written.to_pylist() == expected.to_pylist()
    meta = pq.ParquetFile(tmp_path / "part.parquet").metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [2, 1, 3, 1, 2]


@pytest.mark.parametrize("text", [
    '{"a":1}\n   \n\n  {"b":2}\n\t\n{"c":3}',     # blank lines among others, the last without newline
    '{"a":1}\n{"b":2}\n',                          # none blank: the lines as they are
    '\n',
    '  ',
])
def test_blank_lines_are_the_lines_of_spaces_only(text: str) -> None:
    """Spark keeps a line unless it is spaces only; the converter drops exactly those before
    counting the lines against Arrow's rows (only lines not starting with `{` are looked at)."""
    chunk = bytearray(text.encode())
    kept = columnar._without_blank_lines(columnar._lines(chunk), chunk).to_pylist()
    lines = columnar._lines(chunk).to_pylist()
    assert kept == [line for line in lines if line.strip(" \n")]


@pytest.mark.parametrize("chunk_bytes", [7, 64, 1000])
def test_the_pieces_of_a_file_are_its_lines_cut_at_newlines(tmp_path: Path, chunk_bytes: int) -> None:
    """Pieces come from buffers reused in turn and grown by replacement: taken as they come, they
    are the file's bytes in order, each ending at a newline, lines longer than a piece kept whole."""
    lines = [f'{{"i":{i},"pad":"{"x" * (i * 37 % 150)}"}}\n' for i in range(60)]
    path = tmp_path / "w.jsonl"
    tail = b'{"i":60,"pa'
    path.write_bytes("".join(lines).encode() + tail)
    pieces = [bytes(piece) for piece in columnar._chunks(path, tail, chunk_bytes)]
    assert b"".join(pieces) == "".join(lines).encode()
    assert all(piece.endswith(b"\n") for piece in pieces)


def test_a_carriage_return_in_any_piece_stops_the_conversion(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_bytes(b'{"i":0}\n' * 50 + b'{"i":1}\r\n' + b'{"i":2}\n' * 50)
    with pytest.raises(NotConvertible, match=r"w\.jsonl: carriage returns"):
        for _ in columnar._chunks(path, None, 64):
            pass
