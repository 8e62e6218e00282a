"""Reading a run's history into Spark: the explicit schema, validation, the Parquet cache.

This module turns `history/*.jsonl` into a validated ops frame (analysis.model.OPS_COLUMNS)
and says what it read (`HistoryFacts`); what a history means (pairing, transactions,
the drain) is analysis.model, which never sees a file.

Theory of operation.

*Reading.* `history/*.jsonl` is read with an explicit schema (never inferred):
the 20 fields of schema 1 (harness/history/schema.py), `extra` kept as its raw
JSON text plus four typed columns parsed from it. A writer killed mid-write
may leave a torn last line; the only forgiveness is for exactly that line. Each
file's tail is checked in Python first (cheap: it reads the last few KiB), and
Spark then drops the one row whose raw bytes are that torn tail. Every other
line that does not parse, has a wrong type, misses a required field or names
an unknown `type`/`f` raises `HistoryFormatError` (the checker turns that into
an `unknown` verdict), and so does a writer whose indexes are not 0, 1, 2 ...
without repeats or gaps, or whose `time_ns` goes back (one window per writer in
index order). Lines are read as text and parsed with `from_json`, so each keeps
its raw text: Spark's parser would turn a number into a string field's text,
and only the raw line shows the JSON type (the parsed values show the few
candidate lines, Spark's variant type decides on those).

*Caching.* Histories of `PARQUET_MIN_BYTES` (64 MiB) or more are converted to
Parquet once, in the run's analysis folder (`analysis/history.parquet/`), with
a fingerprint of the source files (names, sizes, mtimes) beside it; a later
load with the same fingerprint reads the Parquet and skips JSON parsing and
validation. Arrow's JSON parser converts (analysis.columnar, several times cheaper);
where it cannot be sure to read a file as Spark's reader would, Spark's reader does,
and its validation names the bad line. Arrow's conversion also pairs the operations as
it streams the lines (analysis.columnar_pairs) into `analysis/history.pairs.parquet/`,
so a large check pairs without a shuffle (`LoadedHistory.pairs`); each part holds one
row group per kind of operation, so a read of one kind skips the rest. Where every line
keeps validation's rules and every writer is intact, the conversion's own validation and
overview (analysis.columnar_overview) stand in for Spark's pass over the copy. The fingerprint's
file also keeps the summary the caller asked for (with the text of its aggregates), so a
later load asking for the same needs no pass over the rows. Smaller histories
are read straight from JSONL and cached in memory.

Public API (stable; analysis.check, analysis.perf and tools build on it):

    HISTORY_SCHEMA, PARQUET_MIN_BYTES
    HistoryFacts, LoadedHistory                                (frozen dataclasses)
    NoHistoryError                                             (exit 2, one line)
    HistoryFormatError                                         (re-exported from harness)
    load_run(spark, run_dir, *, parquet_min_bytes=..., progress=None, windows=None, summary=()) -> LoadedHistory
    load_history(spark, history_dir, *, cache_dir=None, parquet_min_bytes=..., progress=None, windows=None,
                 summary=())
    ops_from_records(spark, records) -> DataFrame             (tests and tools)
    validate_ops(ops) -> tuple[int, int | None, int | None]    (lines, first_ns, last_ns)
    validate_and_summarize(ops, *, windows=None, summary=(), together=False) -> (lines, first_ns, last_ns, Row)
    torn_tail(path) -> bytes | None
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.model import (
    FIRST_UNCLAIMED,
    LEAN_PAIR_COLUMNS,
    OPS_COLUMNS,
    REQUIRED_FIELDS,
    SINGLE_FS,
    first_unclaimed,
    overview_aggregates,
)
from analysis.spark import SMALL_INPUT_BYTES
from harness.errors import TxnbenchError
from harness.history.reader import HistoryFormatError, history_files
from harness.history.schema import FIELDS, SCHEMA_VERSION, OpF, OpType
from harness.results import RunDir, read_json, write_json_atomic

if TYPE_CHECKING:   # Arrow's modules load only where a history is converted (see _convert)
    from analysis.columnar_overview import Validated

__all__ = [
    "HISTORY_SCHEMA", "PARQUET_MIN_BYTES", "HistoryFacts", "HistoryFormatError", "LoadedHistory",
    "NoHistoryError", "load_history", "load_run", "ops_from_records", "torn_tail", "validate_and_summarize",
    "validate_ops",
]

Progress = Callable[[str], None]

# Bump when the cached Parquet layout changes, so stale caches are rebuilt.
LOADER_VERSION = 3   # 2: delivered_ns parsed from extra; 3: the operations paired beside the copy
PARQUET_MIN_BYTES = 64 * 1024 * 1024
# Histories up to this size are kept in one partition: Spark then plans joins,
# windows and aggregations without shuffles, which is what makes small checks fast.
SINGLE_PARTITION_MAX_BYTES = SMALL_INPUT_BYTES
# Above this size a one-partition history is still parsed in parallel (one task per file split).
PARALLEL_PARSE_MIN_BYTES = 4 * 1024 * 1024
CACHE_NAME = "history.parquet"
PAIRS_NAME = "history.pairs.parquet"
_CORRUPT = "_corrupt_record"
_RAW = "_raw"
_MISTYPED = "_mistyped"
_TAIL_CHUNK = 64 * 1024
_MAX_TAIL = 64 * 1024 * 1024

# The line schema, in the contract's field order. `extra` is free-form, so it is kept
# as its raw JSON text (Spark's JSON reader copies nested objects into string fields).
HISTORY_SCHEMA = T.StructType([
    T.StructField("schema", T.LongType()),
    T.StructField("run", T.StringType()),
    T.StructField("writer", T.StringType()),
    T.StructField("process", T.StringType()),
    T.StructField("index", T.LongType()),
    T.StructField("time_ns", T.LongType()),
    T.StructField("wall_ms", T.DoubleType()),
    T.StructField("type", T.StringType()),
    T.StructField("f", T.StringType()),
    T.StructField("path", T.StringType()),
    T.StructField("txn", T.StringType()),
    T.StructField("topic", T.StringType()),
    T.StructField("segment", T.StringType()),
    T.StructField("subscription", T.StringType()),
    T.StructField("key", T.StringType()),
    T.StructField("value", T.StringType()),
    T.StructField("inputs", T.ArrayType(T.StringType())),
    T.StructField("msg_id", T.StringType()),
    T.StructField("error", T.StringType()),
    T.StructField("extra", T.StringType()),
])
assert tuple(HISTORY_SCHEMA.fieldNames()) == FIELDS, "HISTORY_SCHEMA must follow harness FIELDS"

# `extra` keys the analysis uses, parsed once at load time into typed columns.
_EXTRA_SCHEMA = T.StructType([
    T.StructField("name", T.StringType()),
    T.StructField("redelivery", T.LongType()),
    T.StructField("cumulative", T.BooleanType()),
    T.StructField("intended_ns", T.LongType()),
    T.StructField("delivered_ns", T.LongType()),
])


class NoHistoryError(TxnbenchError):
    """The run folder is missing or holds no history to check."""

    exit_code = 2


@dataclass(frozen=True)
class HistoryFacts:
    """What was read: for results.json and for judging a verdict."""

    directory: str
    files: tuple[str, ...]
    bytes: int
    lines: int
    torn_tails: tuple[str, ...]
    first_ns: int | None
    last_ns: int | None
    source: str  # "jsonl", "parquet" (converted now) or "parquet-cache" (reused)

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory, "files": list(self.files), "bytes": self.bytes,
            "lines": self.lines, "torn_tails": list(self.torn_tails), "first_ns": self.first_ns,
            "last_ns": self.last_ns, "source": self.source,
        }


@dataclass(frozen=True)
class LoadedHistory:
    """A validated history: `ops` has OPS_COLUMNS, one row per kept line.

    `cached` is the in-memory frame behind `ops` for histories read from JSONL;
    `release()` frees it when the caller is done. `summary` is the row of the
    aggregates the caller asked `load_history` for (None when none were asked).
    `pairs` is `pair_operations(ops, include_orphans=True, lean=True)` as Arrow's
    conversion made it (analysis.columnar_pairs), None where it did not.
    """

    ops: DataFrame
    facts: HistoryFacts
    cached: DataFrame | None = None
    summary: Row | None = None
    pairs: DataFrame | None = None

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()



# ---- reading --------------------------------------------------------------------------------


def torn_tail(path: Path) -> bytes | None:
    """The bytes after the file's last newline when they are not a whole JSON object.

    A complete object missing only its newline is whole (kept, as the harness reader
    does); blank trailing bytes are nothing. Reads only the tail of the file.
    """
    size = path.stat().st_size
    if size == 0:
        return None
    with path.open("rb") as f:
        chunk = _TAIL_CHUNK
        while True:
            start = max(0, size - chunk)
            f.seek(start)
            data = f.read(size - start)
            cut = data.rfind(b"\n")
            if cut >= 0 or start == 0:
                break
            if chunk >= _MAX_TAIL:
                # A last "line" this long is not a torn history line; let Spark reject it.
                return None
            chunk *= 4
    tail = data[cut + 1:]
    if not tail.strip():
        return None
    try:
        obj = json.loads(tail)
    except ValueError:
        return tail
    return None if isinstance(obj, dict) else tail


def _with_derived(df: DataFrame, *, keep_corrupt: bool = False) -> DataFrame:
    """Add the typed columns parsed from `extra`, in OPS_COLUMNS order.

    With `keep_corrupt`, `_corrupt_record` stays as the last column for validation.
    """
    parsed = F.from_json(F.col("extra"), _EXTRA_SCHEMA)
    # Spark's parser coerces a scalar into a string field: only the raw line can tell (JSONL reads).
    mistyped = (F.when(_maybe_mistyped(), _type_problem())
                if _RAW in df.columns else F.lit(None).cast("string"))
    problems: list[Column] = [
        F.coalesce(F.col(_CORRUPT), F.when(mistyped.isNotNull(), F.col(_RAW))).alias(_CORRUPT),
        mistyped.alias(_MISTYPED)] if keep_corrupt else []
    return df.select(
        *FIELDS, "file",
        parsed["name"].alias("phase"),
        parsed["redelivery"].alias("redelivery"),
        parsed["cumulative"].alias("cumulative"),
        parsed["intended_ns"].alias("intended_ns"),
        parsed["delivered_ns"].alias("delivered_ns"),
        *problems,
    )


def _read_jsonl(spark: SparkSession, files: list[Path], torn: Mapping[Path, bytes]) -> DataFrame:
    """JSONL -> rows with `_corrupt_record` and the raw line (`_raw`); torn tails and blank lines dropped.

    Read as text and parsed with `from_json`, so the raw line stays beside its
    fields: Spark's JSON parser turns any scalar into a string field's text (a
    number `5` becomes "5"), and only the raw line can show that (`_type_problem`).
    """
    schema = T.StructType([*HISTORY_SCHEMA.fields, T.StructField(_CORRUPT, T.StringType())])
    lines = (
        spark.read.text([str(p) for p in files])
        .select(F.col("value").alias(_RAW), F.col("_metadata.file_name").alias("file"))
        .filter(F.trim(F.col(_RAW)) != "")
    )
    for path, tail in torn.items():
        is_torn = (F.col("file") == path.name) & (F.col(_RAW).cast("binary") == F.lit(bytearray(tail)))
        lines = lines.filter(~is_torn)
    parsed = F.from_json(F.col(_RAW), schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    return lines.select(parsed.alias("_line"), "file", _RAW).select("_line.*", "file", _RAW)


# Top-level fields whose JSON type must be a string (or null).
_STRING_FIELDS = tuple(f.name for f in HISTORY_SCHEMA.fields
                       if isinstance(f.dataType, T.StringType) and f.name != "extra")
# What Spark's parser makes of a JSON token that is not a string when it fills a string field
# (it writes the token back as JSON): a number ("5", "-1.5", "1.0E-4"), "true" or "false",
# a double out of range or not a number ('"Infinity"', '"-Infinity"', '"NaN"', quotes
# included), an object or an array ("{...}", "[...]"). A real string may look like that too
# ("5"): such a value only makes its line a candidate, which `_type_problem` then decides.
_COERCED = r'(?s)^(?:-?[0-9][0-9.Ee+-]*|"(?:-?Infinity|NaN)"|true|false|[\[{].*)$'
# `extra` must be an object, whose text starts with "{"; a JSON string may start with "{" too,
# which only the raw line shows.
_EXTRA_IS_STRING = r'"extra"\s*:\s*"'


def _maybe_mistyped() -> Column:
    """The lines where a field might hold a JSON type other than its schema's: the candidates.

    Decided on the parsed fields, which is about four times cheaper than a pattern over
    every raw line: a string field or an element of `inputs` whose text is what a
    coerced non-string token looks like (_COERCED), an `extra` that is not an object
    (an object's text starts with "{", and only a JSON string can follow `"extra":` with
    a quote), or a line the parser rejected (the wrong type then makes the message).
    Never misses a coerced field; `_type_problem` decides exactly, on the candidates only.
    """
    candidate = F.col(_CORRUPT).isNotNull()
    for name in _STRING_FIELDS:
        candidate = candidate | F.coalesce(F.col(name).rlike(_COERCED), F.lit(False))
    candidate = candidate | F.coalesce(F.exists("inputs", lambda item: item.rlike(_COERCED)), F.lit(False))
    extra = F.col("extra")
    return candidate | (extra.isNotNull() & (~extra.startswith("{") | F.col(_RAW).rlike(_EXTRA_IS_STRING)))


def _type_problem() -> Column:
    """The first top-level field of the raw line with the wrong JSON type, described; else null.

    Uses Spark's variant type, which keeps JSON types (`schema_of_variant`): string
    fields must be STRING or null, `inputs` an array of strings or null, `extra` an
    object or null. Evaluated only on the few lines `_maybe_mistyped` selects.
    """
    def kind(name: str) -> Column:
        return F.expr(f"schema_of_variant(variant_get(try_parse_json({_RAW}), '$.{name}'))")

    checks: list[tuple[str, str, Column]] = [
        (name, "a string", kind(name).isin("STRING", "VOID")) for name in _STRING_FIELDS]
    checks.append(("inputs", "an array of strings", kind("inputs").isin("ARRAY<STRING>", "ARRAY<VOID>", "VOID")))
    checks.append(("extra", "an object", kind("extra").startswith("OBJECT<") | (kind("extra") == "VOID")))
    problem: Column = F.lit(None).cast("string")
    for name, wanted, ok in reversed(checks):
        problem = F.when(~F.coalesce(ok, F.lit(True)),
                         F.concat(F.lit(f"{name} is a JSON "), F.lower(kind(name)), F.lit(f", not {wanted}"))
                         ).otherwise(problem)
    return problem


def _problem_condition(df: DataFrame) -> tuple[Column, Column]:
    """(any problem, a short description of it) for validation."""
    has_corrupt = _CORRUPT in df.columns
    corrupt = F.col(_CORRUPT).isNotNull() if has_corrupt else F.lit(False)
    missing = F.lit(False)
    for name in REQUIRED_FIELDS:
        missing = missing | F.col(name).isNull()
    bad_schema = F.col("schema").isNull() | (F.col("schema") != SCHEMA_VERSION)
    bad_type = ~F.col("type").isin(*[t.value for t in OpType])
    bad_f = ~F.col("f").isin(*[f.value for f in OpF])
    bad_single = F.col("f").isin(*SINGLE_FS) & (F.col("type") != OpType.OK.value)
    mistyped = F.col(_MISTYPED) if _MISTYPED in df.columns else F.lit(None).cast("string")
    why = (
        F.when(mistyped.isNotNull(), F.concat(F.lit("a field of the wrong type: "), mistyped))
        .when(corrupt, F.lit("not a JSON object of schema 1 (bad JSON or a field of the wrong type)"))
        .when(missing, F.lit(f"a required field ({', '.join(REQUIRED_FIELDS)}) is missing"))
        .when(bad_schema, F.concat(F.lit("schema is "), F.coalesce(F.col("schema").cast("string"), F.lit("missing")),
                                   F.lit(f", not {SCHEMA_VERSION}")))
        .when(bad_type, F.concat(F.lit("unknown type "), F.col("type")))
        .when(bad_f, F.concat(F.lit("unknown f "), F.col("f")))
        .when(bad_single, F.concat(F.col("f"), F.lit(" must be a single ok event, not "), F.col("type")))
    )
    return corrupt | mistyped.isNotNull() | missing | bad_schema | bad_type | bad_f | bad_single, why


def _line_number(directory: Path | None, file: str | None, raw: str | None) -> int | None:
    """Find a bad line's number by scanning its one file in Python (error path only)."""
    if directory is None or not file or raw is None:
        return None
    path = directory / file
    if not path.is_file():
        return None
    wanted = raw.encode("utf-8", errors="surrogateescape").rstrip(b"\r")
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            if line.rstrip(b"\n").rstrip(b"\r") == wanted:
                return number
    return None


_INDEX_RE = re.compile(rb'"index"\s*:\s*(-?\d+)')


def _line_of_index(directory: Path | None, file: str | None, index: int, occurrence: int = 1) -> int | None:
    """The line number of the `occurrence`-th line with `index` in one file (error path only)."""
    if directory is None or not file or not (directory / file).is_file():
        return None
    seen = 0
    with (directory / file).open("rb") as f:
        for number, line in enumerate(f, start=1):
            match = _INDEX_RE.search(line)
            if match is None or int(match.group(1)) != index:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("index") == index:
                seen += 1
                if seen == occurrence:
                    return number
    return None


_WRITER_PROBLEM = "_writer_problem"


def _writer_problem() -> Column:
    """The line's writer-integrity problem as a struct to take the least of; null when fine.

    Each writer numbers its lines 0, 1, 2 ... once each, and its clock never goes back
    (the recorder stamps `index` and `time_ns` under one lock), so a repeated or missing
    index, or a `time_ns` below the previous line's, means the file was changed or written
    by something else. One window over each writer's lines in index order shows it; the
    least struct (writer, index, time_ns) is the first culprit.
    """
    w = Window.partitionBy("writer").orderBy("index", "time_ns")
    prev = F.lag(F.struct("index", "time_ns")).over(w)
    problem = (F.when(prev.isNull(), F.col("index") != 0)
               .otherwise((F.col("index") != prev["index"] + 1) | (F.col("time_ns") < prev["time_ns"])))
    return F.when(problem, F.struct("writer", "index", "time_ns", "file", prev.alias("_prev")))


def _raise_writer_problem(ops: DataFrame, row: Row, directory: Path | None) -> None:
    """Raise the HistoryFormatError for the first writer-integrity problem (`_writer_problem`)."""
    writer, file, index = row["writer"], row["file"], int(row["index"])
    before = row["_prev"]
    line: int | None
    if before is None:
        line = _line_of_index(directory, file, index)
        problem_text = f"the first line has index {index}: indexes 0..{index - 1} are missing"
        fix = "restore the file as the recorder wrote it"
    elif index == before["index"]:
        count = ops.filter((F.col("writer") == writer) & (F.col("index") == index)).count()
        line = _line_of_index(directory, file, index, occurrence=2)
        problem_text = f"index {index} appears again ({count} times in all)"
        fix = "keep one file per writer (two files with one writer name?) and restore it as the recorder wrote it"
    elif index != before["index"] + 1:
        line = _line_of_index(directory, file, index)
        missing = (f"index {before['index'] + 1} is missing" if index == before["index"] + 2 else
                   f"indexes {before['index'] + 1}..{index - 1} are missing")
        problem_text = f"{missing} before this line (index {index})"
        fix = "restore the file as the recorder wrote it"
    else:
        line = _line_of_index(directory, file, index)
        problem_text = (f"time_ns goes backwards: {row['time_ns']} after {before['time_ns']} at index "
                        f"{before['index']} (the recorder stamps each writer's lines in order)")
        fix = "restore the file as the recorder wrote it"
    where = f"{file}" + (f": line {line}" if line else f" (index {index})")
    raise HistoryFormatError(f"{where}: {problem_text} (writer {writer}); {fix}; this history cannot "
                             "support a verdict")


def validate_ops(ops: DataFrame, *, directory: Path | None = None) -> tuple[int, int | None, int | None]:
    """Check every row against the contract; return (lines, first time_ns, last time_ns).

    `ops` may carry a `_corrupt_record` column (raw JSONL reads). Raises
    `HistoryFormatError` naming the file (and line, when `directory` is given),
    the problem and the fix.
    """
    lines, first_ns, last_ns, _ = validate_and_summarize(ops, directory=directory)
    return lines, first_ns, last_ns


def validate_and_summarize(ops: DataFrame, *, directory: Path | None = None,
                           windows: Mapping[str, Column] | None = None, summary: Sequence[Column] = (),
                           together: bool = False, writers_intact: bool = False
                           ) -> tuple[int, int | None, int | None, Row]:
    """`validate_ops`, and the caller's `summary` aggregates over the same rows.

    `windows` are columns (window functions) added to every row before aggregating,
    which `summary` may use. With `together` (for a frame of one partition, where a
    window costs no shuffle) the validation, the writer-integrity window and the
    summary are one Spark job; otherwise the integrity window is a second one.
    The summary is only meaningful when validation passes (it raises otherwise).
    `writers_intact` says the caller has seen every writer's lines to be its indexes
    0, 1, 2 ... in order with a clock that never goes back (analysis.columnar's stream):
    then the integrity window, which can only pass, is not run.
    Returns (lines, first time_ns, last time_ns, the row of summary aggregates).
    """
    bad, why = _problem_condition(ops)
    extra_columns: dict[str, Column] = dict(windows or {})
    if together and not writers_intact:
        extra_columns[_WRITER_PROBLEM] = _writer_problem()
    rows = ops.select("*", *[column.alias(name) for name, column in extra_columns.items()]) if extra_columns else ops
    checks = [F.min(_WRITER_PROBLEM).alias(_WRITER_PROBLEM)] if together and not writers_intact else []
    summary_row = rows.agg(
        F.count(F.lit(1)).alias("_lines"),
        F.sum(F.when(bad, 1).otherwise(0)).alias("_bad"),
        F.min(F.when(~bad, F.col("time_ns"))).alias("_first_ns"),
        F.max(F.when(~bad, F.col("time_ns"))).alias("_last_ns"),
        *checks, *summary,
    ).collect()[0]
    if summary_row["_bad"]:
        raw = F.col(_CORRUPT) if _CORRUPT in ops.columns else F.lit(None).cast("string")
        first = (
            ops.filter(bad)
            .select("file", raw.alias("raw"), why.alias("why"), "writer", "index")
            .orderBy("file", "writer", "index")
            .limit(1).collect()[0]
        )
        number = _line_number(directory, first["file"], first["raw"])
        where = f"{first['file']}" + (f": line {number}" if number else "")
        if first["raw"] is None and first["index"] is not None:
            where += f" (index {first['index']})"
        excerpt = (first["raw"] or "")[:120]
        raise HistoryFormatError(
            f"{where}: {first['why']}"
            + (f": {excerpt!r}" if excerpt else "")
            + f" ({summary_row['_bad']} bad line(s) in all); only a torn last line is skipped, so this "
            "history cannot support a verdict: re-run, or restore the file as the recorder wrote it")
    if writers_intact:
        problem = None
    elif together:
        problem = summary_row[_WRITER_PROBLEM]
    else:
        found = (ops.select(_writer_problem().alias(_WRITER_PROBLEM))
                 .filter(F.col(_WRITER_PROBLEM).isNotNull())
                 .agg(F.min(_WRITER_PROBLEM).alias(_WRITER_PROBLEM)).collect())
        problem = found[0][_WRITER_PROBLEM] if found else None
    if problem is not None:
        _raise_writer_problem(ops, problem, directory)
    return int(summary_row["_lines"]), summary_row["_first_ns"], summary_row["_last_ns"], summary_row


def _fingerprint(files: list[Path]) -> dict[str, Any]:
    return {
        "loader": LOADER_VERSION,
        "files": [{"name": p.name, "bytes": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns}
                  for p in files],
    }


def load_history(spark: SparkSession, history_dir: Path, *, cache_dir: Path | None = None,
                 parquet_min_bytes: int = PARQUET_MIN_BYTES, progress: Progress | None = None,
                 windows: Mapping[str, Column] | None = None,
                 summary: Sequence[Column] = ()) -> LoadedHistory:
    """Read and validate every `*.jsonl` in `history_dir`.

    Args:
        spark: the session (analysis.spark.get_spark()).
        history_dir: a run's `history/` folder.
        cache_dir: where the Parquet copy of a large history lives (a run's
            `analysis/`); None never converts.
        parquet_min_bytes: histories at least this large are converted to Parquet.
        progress: called with one-line progress messages.
        windows, summary: aggregates (`summary`, over the rows with the `windows`
            columns added) the caller wants of the same pass that validates; they
            come back as `LoadedHistory.summary`. On a small history that pass is
            one Spark job for validation, writer integrity and the summary.

    Raises:
        NoHistoryError: the folder is missing or has no non-empty history file.
        HistoryFormatError: a line other than a torn last line is malformed.
    """
    say = progress or (lambda _msg: None)
    if not history_dir.is_dir():
        raise NoHistoryError(f"{history_dir}: no such history folder; pass a run folder that has "
                             "history/*.jsonl (e.g. results/<run_id>)")
    files = [p for p in history_files(history_dir) if p.stat().st_size > 0]
    if not files:
        raise NoHistoryError(f"{history_dir}: no history lines (no non-empty *.jsonl files); "
                             "the run wrote nothing to check: run it again")
    total_bytes = sum(p.stat().st_size for p in files)
    torn = {p: tail for p in files if (tail := torn_tail(p)) is not None}
    torn_names = tuple(sorted(p.name for p in torn))
    names = tuple(p.name for p in files)

    # One partition: validation, writer integrity and the summary are one pass (see validate_and_summarize).
    single = total_bytes <= SINGLE_PARTITION_MAX_BYTES
    use_parquet = cache_dir is not None and total_bytes >= parquet_min_bytes
    if use_parquet:
        assert cache_dir is not None
        cache = cache_dir / CACHE_NAME
        meta_path = cache_dir / f"{CACHE_NAME}.json"
        fingerprint = _fingerprint(files)
        if cache.is_dir() and meta_path.is_file():
            try:
                meta = read_json(meta_path)
            except (OSError, ValueError):
                meta = {}
            if meta.get("fingerprint") == fingerprint:
                say(f"reading the Parquet copy of the history ({cache})")
                facts = HistoryFacts(str(history_dir), names, total_bytes, int(meta["lines"]), torn_names,
                                     meta.get("first_ns"), meta.get("last_ns"), "parquet-cache")
                ops = spark.read.parquet(str(cache)).select(*OPS_COLUMNS)
                pairs = _read_pairs(spark, cache_dir / PAIRS_NAME) if meta.get("pairs") else None
                found = _summary_kept(meta, windows, summary)
                if found is None:
                    found = _summarize(ops, windows, summary)
                    if found is not None:
                        _keep_summary(meta_path, meta, _kept_summary(found, windows, summary))
                return LoadedHistory(ops, facts, summary=found, pairs=pairs)
        say(f"converting {len(files)} history file(s), {total_bytes / 1e6:.1f} MB, to Parquet")
        tmp = cache_dir / f".{CACHE_NAME}.{os.getpid()}.tmp"
        tmp_pairs = cache_dir / f".{PAIRS_NAME}.{os.getpid()}.tmp"
        for stale in (tmp, tmp_pairs):
            shutil.rmtree(stale, ignore_errors=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        writers_intact, validated = _convert(spark, files, torn, tmp, say, pairs_dir=tmp_pairs)
        first_ns: int | None
        last_ns: int | None
        gathered = _gathered_summary(validated, windows, summary) if validated is not None else None
        if validated is not None and (gathered is not None or not summary):
            # Every line kept validation's rules as it was converted, and the summary asked for is one
            # the conversion gathered: no pass over the copy (analysis.columnar_overview).
            lines, row = validated.lines, gathered
            first_ns, last_ns = validated.first_ns, validated.last_ns
        else:
            say("validating the history")
            try:
                lines, first_ns, last_ns, row = validate_and_summarize(
                    spark.read.parquet(str(tmp)), directory=history_dir, windows=windows, summary=summary, together=single,
                    writers_intact=writers_intact)
            except HistoryFormatError:
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.rmtree(tmp_pairs, ignore_errors=True)
                raise
        # The validated copy drops the corrupt-record column: every row is well formed.
        pairs_cache = cache_dir / PAIRS_NAME
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(pairs_cache, ignore_errors=True)
        meta_path.unlink(missing_ok=True)
        os.replace(tmp, cache)
        paired = any(tmp_pairs.glob("*.parquet"))
        if paired:
            os.replace(tmp_pairs, pairs_cache)
        shutil.rmtree(tmp_pairs, ignore_errors=True)
        write_json_atomic(meta_path, {"fingerprint": fingerprint, "lines": lines,
                                      "first_ns": first_ns, "last_ns": last_ns, "pairs": paired,
                                      **({"summary": _kept_summary(row, windows, summary)}
                                         if summary and row is not None else {})})
        ops = spark.read.parquet(str(cache)).select(*OPS_COLUMNS)
        facts = HistoryFacts(str(history_dir), names, total_bytes, lines, torn_names, first_ns, last_ns,
                             "parquet")
        return LoadedHistory(ops, facts, summary=row if summary else None,
                             pairs=_read_pairs(spark, pairs_cache) if paired else None)

    say(f"reading {len(files)} history file(s), {total_bytes / 1e6:.1f} MB")
    parsed = _with_derived(_read_jsonl(spark, files, torn), keep_corrupt=True)
    if single and total_bytes > PARALLEL_PARSE_MIN_BYTES:
        # Parse in as many tasks as the files split into (every core), keep the rows, and only
        # then see them as one partition: coalescing first would parse in one task.
        cached = parsed.persist(StorageLevel.MEMORY_AND_DISK)
        cached.count()
        staged = cached.coalesce(1)
    else:
        cached = staged = (parsed.coalesce(1) if single else parsed).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        lines, first_ns, last_ns, row = validate_and_summarize(staged, directory=history_dir, windows=windows,
                                                               summary=summary, together=single)
    except HistoryFormatError:
        cached.unpersist()
        raise
    facts = HistoryFacts(str(history_dir), names, total_bytes, lines, torn_names, first_ns, last_ns, "jsonl")
    return LoadedHistory(staged.select(*OPS_COLUMNS), facts, cached=cached, summary=row if summary else None)


def _read_pairs(spark: SparkSession, path: Path) -> DataFrame | None:
    """The operations Arrow's conversion paired, or None when the folder is gone (the check pairs them)."""
    if not any(path.glob("*.parquet")):
        return None
    return spark.read.parquet(str(path)).select(*LEAN_PAIR_COLUMNS)


def _convert(spark: SparkSession, files: list[Path], torn: Mapping[Path, bytes], out: Path, say: Progress, *,
             pairs_dir: Path) -> tuple[bool, Validated | None]:
    """JSONL to Parquet at `out`: with Arrow's parser (analysis.columnar), or Spark's where it cannot.

    Arrow's conversion pairs the operations into `pairs_dir` as it goes (where it can);
    Spark's does not, and leaves no `pairs_dir`. Returns whether the conversion saw every
    writer's lines intact (analysis.columnar.Converted.writers_intact), and, where Arrow also
    saw every line keep validation's rules, the validation and overview it gathered.

    Imported here: Arrow's modules take a quarter of a second to load, which a small check,
    never converted, should not pay.
    """
    from analysis import columnar

    try:
        converted = columnar.convert(files, torn, out, pairs_dir=pairs_dir)
        return converted.writers_intact, converted.validated
    except columnar.NotConvertible as why:
        say(f"converting with Spark's JSON reader instead ({why})")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(pairs_dir, ignore_errors=True)
    _with_derived(_read_jsonl(spark, files, torn), keep_corrupt=True).write.parquet(str(out))
    return False, None


def _gathered_summary(validated: Validated, windows: Mapping[str, Column] | None,
                      summary: Sequence[Column]) -> Row | None:
    """The summary asked for, as Arrow's conversion gathered it (analysis.columnar_overview), when it
    is one the conversion gathers: the overview alone (a large check's), or with the first completion
    no invocation claims (a small check's); else None, and Spark's pass computes it."""
    key = _summary_key(windows, summary)
    if key == _summary_key(None, overview_aggregates()):
        return _as_row(validated.row)
    unclaimed, first = first_unclaimed()
    if key == _summary_key(unclaimed, [*overview_aggregates(), first]):
        return _as_row({**validated.row, FIRST_UNCLAIMED: validated.first_unclaimed})
    return None


def _summary_key(windows: Mapping[str, Column] | None, summary: Sequence[Column]) -> str:
    """What a kept summary was computed from: the aggregates' and windows' expressions, as text."""
    return "\n".join([*(f"{name}={column}" for name, column in sorted((windows or {}).items())),
                      *(str(column) for column in summary)])


def _kept_summary(row: Row, windows: Mapping[str, Column] | None, summary: Sequence[Column]) -> dict[str, Any]:
    """The summary row as the cache's metadata keeps it, beside what it was computed from."""
    return {"key": _summary_key(windows, summary), "row": row.asDict(recursive=True)}


def _keep_summary(meta_path: Path, meta: Mapping[str, Any], kept: dict[str, Any]) -> None:
    """Add the summary to the cache's metadata where the folder can be written; a copy of a run on
    a read-only medium is still checked, only without the summary kept."""
    with contextlib.suppress(OSError):
        write_json_atomic(meta_path, {**meta, "summary": kept})


def _summary_kept(meta: Mapping[str, Any], windows: Mapping[str, Column] | None,
                  summary: Sequence[Column]) -> Row | None:
    """The summary the cache's metadata keeps for these aggregates, as a Row; None when it keeps none.

    Why: the summary is a pass over every row of the history (8.5 s of task CPU at 20 million
    events) whose answer a cache, made from one history, never changes; the first check that
    computes it (the conversion's validation, or a first check of an older cache) keeps it."""
    kept = meta.get("summary")
    if not summary or not isinstance(kept, dict) or kept.get("key") != _summary_key(windows, summary):
        return None
    row = kept.get("row")
    return _as_row(row) if isinstance(row, dict) else None


def _as_row(value: Any) -> Any:
    """JSON of `Row.asDict(recursive=True)` back to Rows (and lists of them)."""
    if isinstance(value, dict):
        return Row(**{name: _as_row(field) for name, field in value.items()})
    if isinstance(value, list):
        return [_as_row(item) for item in value]
    return value


def _summarize(ops: DataFrame, windows: Mapping[str, Column] | None, summary: Sequence[Column]) -> Row | None:
    """The `summary` aggregates over `ops` (with `windows` added to each row); None when none asked."""
    if not summary:
        return None
    rows = ops.select("*", *[column.alias(name) for name, column in (windows or {}).items()]) if windows else ops
    return rows.agg(*summary).collect()[0]


def load_run(spark: SparkSession, run_dir: Path, *, parquet_min_bytes: int = PARQUET_MIN_BYTES,
             progress: Progress | None = None, windows: Mapping[str, Column] | None = None,
             summary: Sequence[Column] = ()) -> LoadedHistory:
    """`load_history` of a run folder, caching Parquet in its `analysis/` folder."""
    if not run_dir.is_dir():
        raise NoHistoryError(f"{run_dir}: no such run folder; pass a folder under results/ "
                             "(e.g. results/<run_id>)")
    run = RunDir(run_dir)
    return load_history(spark, run.history_dir, cache_dir=run.analysis_dir,
                        parquet_min_bytes=parquet_min_bytes, progress=progress, windows=windows,
                        summary=summary)


def ops_from_records(spark: SparkSession, records: Iterable[Mapping[str, Any]]) -> DataFrame:
    """An ops DataFrame (OPS_COLUMNS) from in-memory history lines, e.g. `Op.to_json()` dicts.

    `extra` may be a dict (it is stored as JSON text) and `file` defaults to
    `<writer>.jsonl`. Not validated: call `validate_ops` to check it. The frame
    has one partition (the records fit in memory).
    """
    rows = []
    for rec in records:
        row: list[Any] = [rec.get(name) for name in FIELDS]
        extra_at = FIELDS.index("extra")
        if row[extra_at] is not None and not isinstance(row[extra_at], str):
            row[extra_at] = json.dumps(row[extra_at], separators=(",", ":"))
        inputs_at = FIELDS.index("inputs")
        if row[inputs_at] is not None:
            row[inputs_at] = list(row[inputs_at])
        wall_at = FIELDS.index("wall_ms")
        if row[wall_at] is not None:
            row[wall_at] = float(row[wall_at])
        row.append(rec.get("file") or f"{rec.get('writer')}.jsonl")
        rows.append(tuple(row))
    schema = T.StructType([*HISTORY_SCHEMA.fields, T.StructField("file", T.StringType())])
    # In-memory histories are small: one partition lets Spark plan without shuffles.
    return _with_derived(spark.createDataFrame(rows, schema).coalesce(1))

