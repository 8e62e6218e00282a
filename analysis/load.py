"""Loading a run's history into Spark, pairing operations, deciding transactions.

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
and only the raw line shows the JSON type (a regex finds the few candidate
lines, Spark's variant type decides on those).

*Caching.* Histories of `PARQUET_MIN_BYTES` (64 MiB) or more are converted to
Parquet once, in the run's analysis folder (`analysis/history.parquet/`), with
a fingerprint of the source files (names, sizes, mtimes) beside it; a later
load with the same fingerprint reads the Parquet and skips JSON parsing and
validation. Smaller histories are read straight from JSONL and cached in memory.

*Pairing.* A process has at most one outstanding operation, so an invocation's
completion is the next event of the same (writer, process) when that event is a
completion of the same `f`. An invocation without one counts as `info`
(`completed` false). Single events (`receive`, `read`, `phase`) are already
complete and appear as operations with `invoke_ns == complete_ns`.

*Transactions.* The client's view decides first: committed if a commit
completed ok; aborted if an abort completed ok or a commit failed
definitively. Otherwise the outcome is unknown to the client. A transaction
whose commit was never invoked can only have been aborted (by the
coordinator): aborted, decided by `no-commit`, whatever is visible. Where the
commit was invoked, visibility decides: any visible value (present in the
drainer's final reads) makes it committed; none makes it aborted, but only when
every value it may have written and that is not visible went to a topic the
drain read to the end. A transaction with nothing that could be visible (e.g.
acks only) stays unknown.

Public API (stable; analysis.perf and analysis.report build on it):

    HISTORY_SCHEMA, OPS_COLUMNS, PAIR_COLUMNS, LEAN_PAIR_COLUMNS, TXN_COLUMNS, PARQUET_MIN_BYTES
    HistoryFacts, LoadedHistory, DrainInfo, PhaseMark, HistoryOverview  (frozen dataclasses)
    NoHistoryError                                             (exit 2, one line)
    HistoryFormatError                                         (re-exported from harness)
    load_run(spark, run_dir, *, parquet_min_bytes=..., progress=None) -> LoadedHistory
    load_history(spark, history_dir, *, cache_dir=None, parquet_min_bytes=..., progress=None)
    ops_from_records(spark, records) -> DataFrame             (tests and tools)
    validate_ops(ops) -> tuple[int, int | None, int | None]    (lines, first_ns, last_ns)
    pair_operations(ops, *, include_orphans=False, lean=False) -> DataFrame
    overview(ops) -> HistoryOverview   (phases, drain, time span, counts: one job)
    drain_info(ops) -> DrainInfo
    phase_marks(ops) -> tuple[PhaseMark, ...]
    final_reads(ops) -> DataFrame;  receives(ops) -> DataFrame
    visible_values(reads) -> DataFrame                        (value, read_ns, reads, positions)
    transaction_outcomes(pairs, visible=None, covered_topics=None, *, visible_sends=None) -> DataFrame
    logical(topic) -> str;  logical_topic(column) -> Column   (drop a `-partition-N` suffix)
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.errors import TxnbenchError
from harness.history.reader import HistoryFormatError
from harness.history.schema import FIELDS, PHASE_DRAIN_COMPLETE, SCHEMA_VERSION, OpF, OpType
from harness.results import RunDir, read_json, write_json_atomic

__all__ = [
    "HISTORY_SCHEMA", "LEAN_PAIR_COLUMNS", "OPS_COLUMNS", "PAIR_COLUMNS", "PARQUET_MIN_BYTES",
    "TXN_COLUMNS", "DrainInfo", "HistoryFacts", "HistoryFormatError", "HistoryOverview",
    "LoadedHistory", "NoHistoryError", "PhaseMark", "drain_info", "final_reads", "load_history",
    "load_run", "logical", "logical_topic", "ops_from_records", "overview", "pair_operations",
    "phase_marks", "receives", "transaction_outcomes", "validate_ops", "visible_values",
]

Progress = Callable[[str], None]

# Bump when the cached Parquet layout changes, so stale caches are rebuilt.
LOADER_VERSION = 2   # 2: delivered_ns parsed from extra (Parquet caches of 1 are rebuilt)
PARQUET_MIN_BYTES = 64 * 1024 * 1024
# Histories below this size are kept in one partition: Spark then plans joins,
# windows and aggregations without shuffles, which is what makes small checks fast.
SINGLE_PARTITION_MAX_BYTES = 16 * 1024 * 1024
CACHE_NAME = "history.parquet"
_CORRUPT = "_corrupt_record"
_RAW = "_raw"
_MISTYPED = "_mistyped"
_TAIL_CHUNK = 64 * 1024
_MAX_TAIL = 64 * 1024 * 1024

SINGLE_FS = (OpF.RECEIVE.value, OpF.READ.value, OpF.PHASE.value)
COMPLETION_TYPES = (OpType.OK.value, OpType.FAIL.value, OpType.INFO.value)

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

# Columns of a loaded ops DataFrame: the line fields, the source file name, and
# `phase` (extra.name), `redelivery`, `cumulative`, `intended_ns`, `delivered_ns` from `extra`.
OPS_COLUMNS: tuple[str, ...] = (*FIELDS, "file", "phase", "redelivery", "cumulative", "intended_ns",
                                "delivered_ns")

# Columns of pair_operations(): one row per operation.
PAIR_COLUMNS: tuple[str, ...] = (
    "writer", "process", "f", "type", "completed", "orphan", "path", "txn", "topic", "segment",
    "subscription", "key", "value", "inputs", "msg_id", "error", "extra", "phase", "redelivery",
    "cumulative", "intended_ns", "index", "complete_index", "invoke_ns", "complete_ns", "wall_ms",
    "complete_wall_ms",
)

# Columns of transaction_outcomes(): one row per transaction id.
TXN_COLUMNS: tuple[str, ...] = (
    "txn", "writer", "process", "open_index", "open_ns", "commit_invoke_ns", "end_invoke_ns",
    "end_ns", "client_outcome", "outcome", "decided_by", "outcome_label", "sends_ok", "sends_info",
    "sends_fail", "sends_visible", "sends_uncovered", "acks", "ctp",
)

# Transaction outcome labels (TXN_COLUMNS.outcome_label).
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"
UNKNOWN_COMMITTED, UNKNOWN_ABORTED = "unknown-committed", "unknown-aborted"
# TXN_COLUMNS.decided_by: the client saw the outcome; visibility decided it; or the client
# never invoked the commit, so the coordinator can only have aborted it.
# ...or, for an ack-only transaction, whether its acked messages came back (checks.context).
CLIENT, VISIBILITY, NO_COMMIT, REDELIVERY = "client", "visibility", "no-commit", "redelivery"


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
    `release()` frees it when the caller is done.
    """

    ops: DataFrame
    facts: HistoryFacts
    cached: DataFrame | None = None

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


@dataclass(frozen=True)
class PhaseMark:
    """A `phase` event: `name` started at `time_ns` (run clock)."""

    name: str
    time_ns: int
    writer: str
    index: int


@dataclass(frozen=True)
class DrainInfo:
    """What the drain proved: topics read to the end, subscriptions consumed until empty.

    `complete` is False when the history has no `drain-complete` phase event; then
    `topics` and `subscriptions` are empty and no final-read check can give a verdict.
    `lost_entries` are the runs of entries the brokers acknowledged and said their storage
    lost (`extra.lost_entries`: topic, segment, first and last `ledger:entry`, count,
    reason); a topic with such runs is still read to the end, around them.
    """

    complete: bool
    topics: frozenset[str] = frozenset()
    subscriptions: frozenset[tuple[str, str]] = frozenset()
    time_ns: int | None = None
    lost_entries: tuple[Mapping[str, Any], ...] = ()


# ---- reading --------------------------------------------------------------------------------


def _history_files(history_dir: Path) -> list[Path]:
    return sorted(p for p in history_dir.glob("*.jsonl") if p.is_file())


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
    mistyped = (F.when(F.col(_RAW).rlike(_MAYBE_MISTYPED), _type_problem())
                if _RAW in df.columns else F.lit(None).cast("string"))
    return df.select(
        *FIELDS, "file",
        parsed["name"].alias("phase"),
        parsed["redelivery"].alias("redelivery"),
        parsed["cumulative"].alias("cumulative"),
        parsed["intended_ns"].alias("intended_ns"),
        parsed["delivered_ns"].alias("delivered_ns"),
        *(_cols([F.coalesce(F.col(_CORRUPT), F.when(mistyped.isNotNull(), F.col(_RAW))).alias(_CORRUPT),
                 mistyped.alias(_MISTYPED)]) if keep_corrupt else []),
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


# Top-level fields whose JSON type must be a string (or null), and a cheap pattern that finds
# every line where one of them, `inputs` or `extra` might hold another type. The pattern may
# also match inside `extra` or a string; `_type_problem` decides exactly, on those lines only.
_STRING_FIELDS = tuple(f.name for f in HISTORY_SCHEMA.fields
                       if isinstance(f.dataType, T.StringType) and f.name != "extra")
_MAYBE_MISTYPED = (
    r'"(?:' + "|".join(_STRING_FIELDS) + r')"\s*:\s*(?!"|null\b)'
    + r'|"inputs"\s*:\s*\[(?:\s*"(?:[^"\\]|\\.)*"\s*,)*\s*[^"\s\]]'
    + r'|"extra"\s*:\s*(?!\{|null\b)'
)


def _type_problem() -> Column:
    """The first top-level field of the raw line with the wrong JSON type, described; else null.

    Uses Spark's variant type, which keeps JSON types (`schema_of_variant`): string
    fields must be STRING or null, `inputs` an array of strings or null, `extra` an
    object or null. Evaluated only on the few lines `_MAYBE_MISTYPED` matches.
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
    required = ("writer", "process", "index", "time_ns", "type", "f")
    missing = F.lit(False)
    for name in required:
        missing = missing | F.col(name).isNull()
    bad_schema = F.col("schema").isNull() | (F.col("schema") != SCHEMA_VERSION)
    bad_type = ~F.col("type").isin(*[t.value for t in OpType])
    bad_f = ~F.col("f").isin(*[f.value for f in OpF])
    bad_single = F.col("f").isin(*SINGLE_FS) & (F.col("type") != OpType.OK.value)
    mistyped = F.col(_MISTYPED) if _MISTYPED in df.columns else F.lit(None).cast("string")
    why = (
        F.when(mistyped.isNotNull(), F.concat(F.lit("a field of the wrong type: "), mistyped))
        .when(corrupt, F.lit("not a JSON object of schema 1 (bad JSON or a field of the wrong type)"))
        .when(missing, F.lit("a required field (writer, process, index, time_ns, type, f) is missing"))
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


def _check_writers(ops: DataFrame, directory: Path | None) -> None:
    """Each writer numbers its lines 0, 1, 2 ... once each, and its clock never goes back.

    The recorder stamps `index` and `time_ns` under one lock, so a repeated or
    missing index, or a `time_ns` below the previous line's, means the file was
    changed or written by something else: the history cannot support a verdict.
    One window over each writer's lines in index order finds the first culprit;
    its line number is then looked up in the file.
    """
    w = Window.partitionBy("writer").orderBy("index", "time_ns")
    prev = F.lag(F.struct("index", "time_ns")).over(w)
    seq = ops.select("writer", "file", "index", "time_ns", prev.alias("_prev"))
    problem = (F.when(F.col("_prev").isNull(), F.col("index") != 0)
               .otherwise((F.col("index") != F.col("_prev.index") + 1)
                          | (F.col("time_ns") < F.col("_prev.time_ns"))))
    found = seq.filter(problem).orderBy("writer", "index", "time_ns").limit(1).collect()
    if not found:
        return
    row = found[0]
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
    bad, why = _problem_condition(ops)
    summary = ops.agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.when(bad, 1).otherwise(0)).alias("bad"),
        F.min(F.when(~bad, F.col("time_ns"))).alias("first_ns"),
        F.max(F.when(~bad, F.col("time_ns"))).alias("last_ns"),
    ).collect()[0]
    if summary["bad"]:
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
            + f" ({summary['bad']} bad line(s) in all); only a torn last line is skipped, so this "
            "history cannot support a verdict: re-run, or restore the file as the recorder wrote it")
    _check_writers(ops, directory)
    return int(summary["lines"]), summary["first_ns"], summary["last_ns"]


def _fingerprint(files: list[Path]) -> dict[str, Any]:
    return {
        "loader": LOADER_VERSION,
        "files": [{"name": p.name, "bytes": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns}
                  for p in files],
    }


def load_history(spark: SparkSession, history_dir: Path, *, cache_dir: Path | None = None,
                 parquet_min_bytes: int = PARQUET_MIN_BYTES,
                 progress: Progress | None = None) -> LoadedHistory:
    """Read and validate every `*.jsonl` in `history_dir`.

    Args:
        spark: the session (analysis.spark.get_spark()).
        history_dir: a run's `history/` folder.
        cache_dir: where the Parquet copy of a large history lives (a run's
            `analysis/`); None never converts.
        parquet_min_bytes: histories at least this large are converted to Parquet.
        progress: called with one-line progress messages.

    Raises:
        NoHistoryError: the folder is missing or has no non-empty history file.
        HistoryFormatError: a line other than a torn last line is malformed.
    """
    say = progress or (lambda _msg: None)
    if not history_dir.is_dir():
        raise NoHistoryError(f"{history_dir}: no such history folder; pass a run folder that has "
                             "history/*.jsonl (e.g. results/<run_id>)")
    files = [p for p in _history_files(history_dir) if p.stat().st_size > 0]
    if not files:
        raise NoHistoryError(f"{history_dir}: no history lines (no non-empty *.jsonl files); "
                             "the run wrote nothing to check: run it again")
    total_bytes = sum(p.stat().st_size for p in files)
    torn = {p: tail for p in files if (tail := torn_tail(p)) is not None}
    torn_names = tuple(sorted(p.name for p in torn))
    names = tuple(p.name for p in files)

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
                return LoadedHistory(spark.read.parquet(str(cache)).select(*OPS_COLUMNS), facts)
        say(f"converting {len(files)} history file(s), {total_bytes / 1e6:.1f} MB, to Parquet")
        tmp = cache_dir / f".{CACHE_NAME}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        raw = _read_jsonl(spark, files, torn)
        _with_derived(raw, keep_corrupt=True).write.parquet(str(tmp))
        staged = spark.read.parquet(str(tmp))
        say("validating the history")
        try:
            lines, first_ns, last_ns = validate_ops(staged, directory=history_dir)
        except HistoryFormatError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        # The validated copy drops the corrupt-record column: every row is well formed.
        shutil.rmtree(cache, ignore_errors=True)
        meta_path.unlink(missing_ok=True)
        os.replace(tmp, cache)
        write_json_atomic(meta_path, {"fingerprint": fingerprint, "lines": lines,
                                      "first_ns": first_ns, "last_ns": last_ns})
        ops = spark.read.parquet(str(cache)).select(*OPS_COLUMNS)
        facts = HistoryFacts(str(history_dir), names, total_bytes, lines, torn_names, first_ns, last_ns,
                             "parquet")
        return LoadedHistory(ops, facts)

    say(f"reading {len(files)} history file(s), {total_bytes / 1e6:.1f} MB")
    staged = _with_derived(_read_jsonl(spark, files, torn), keep_corrupt=True)
    if total_bytes <= SINGLE_PARTITION_MAX_BYTES:
        staged = staged.coalesce(1)
    staged = staged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        lines, first_ns, last_ns = validate_ops(staged, directory=history_dir)
    except HistoryFormatError:
        staged.unpersist()
        raise
    facts = HistoryFacts(str(history_dir), names, total_bytes, lines, torn_names, first_ns, last_ns, "jsonl")
    return LoadedHistory(staged.select(*OPS_COLUMNS), facts, cached=staged)


def load_run(spark: SparkSession, run_dir: Path, *, parquet_min_bytes: int = PARQUET_MIN_BYTES,
             progress: Progress | None = None) -> LoadedHistory:
    """`load_history` of a run folder, caching Parquet in its `analysis/` folder."""
    if not run_dir.is_dir():
        raise NoHistoryError(f"{run_dir}: no such run folder; pass a folder under results/ "
                             "(e.g. results/<run_id>)")
    run = RunDir(run_dir)
    return load_history(spark, run.history_dir, cache_dir=run.analysis_dir,
                        parquet_min_bytes=parquet_min_bytes, progress=progress)


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


# ---- events ---------------------------------------------------------------------------------


def final_reads(ops: DataFrame) -> DataFrame:
    """The drainer's `read` events (OPS_COLUMNS): the final state of each topic, in log order."""
    return ops.filter(F.col("f") == OpF.READ.value)


def receives(ops: DataFrame) -> DataFrame:
    """Consumer deliveries (`receive` events, OPS_COLUMNS), the drainer's included."""
    return ops.filter(F.col("f") == OpF.RECEIVE.value)


def phase_marks(ops: DataFrame) -> tuple[PhaseMark, ...]:
    """Every `phase` event in time order (a few rows; collected to the driver)."""
    return overview(ops).phases


def drain_info(ops: DataFrame) -> DrainInfo:
    """What the `drain-complete` phase event(s) say; several are merged."""
    return overview(ops).drain


@dataclass(frozen=True)
class HistoryOverview:
    """Facts gathered in one pass over the ops: phases, the drain, time span, counts.

    `counts` has: events, sends, ctp_sends (sends carrying inputs), acks,
    cumulative_acks, acks_without_topic, receives, reads.
    """

    phases: tuple[PhaseMark, ...]
    drain: DrainInfo
    first_ns: int | None
    last_ns: int | None
    counts: Mapping[str, int]


def _drain_from_phases(rows: Iterable[Any]) -> DrainInfo:
    found = [r for r in rows if r["phase"] == PHASE_DRAIN_COMPLETE]
    if not found:
        return DrainInfo(complete=False)
    topics: set[str] = set()
    subs: set[tuple[str, str]] = set()
    lost: list[Mapping[str, Any]] = []
    for row in found:
        try:
            extra = json.loads(row["extra"]) if row["extra"] else {}
        except ValueError:
            extra = {}
        extra = extra if isinstance(extra, dict) else {}
        for topic in extra.get("topics") or []:
            if isinstance(topic, str):
                topics.add(topic)
        for pair in extra.get("subscriptions") or []:
            if isinstance(pair, Mapping) and pair.get("topic") and pair.get("subscription"):
                subs.add((str(pair["topic"]), str(pair["subscription"])))
            elif isinstance(pair, list | tuple) and len(pair) == 2:
                subs.add((str(pair[0]), str(pair[1])))
        for run in extra.get("lost_entries") or []:
            if isinstance(run, Mapping) and _position(run.get("first")) and _position(run.get("last")):
                lost.append(dict(run))
    return DrainInfo(True, frozenset(topics), frozenset(subs), max(int(r["time_ns"]) for r in found), tuple(lost))


def _position(text: Any) -> tuple[int, int] | None:
    """`"ledger:entry[:batch]"` as (ledger, entry); None when it is not one."""
    if not isinstance(text, str):
        return None
    parts = text.split(":")
    try:
        return (int(parts[0]), int(parts[1])) if len(parts) >= 2 else None
    except ValueError:
        return None


def lost_run_of(drain: DrainInfo, topic: str | None, segment: str | None, msg_id: str | None) -> Mapping[str, Any] | None:
    """The drain's lost run that holds the entry `msg_id` of (topic, segment), if any."""
    position = _position(msg_id)
    if position is None:
        return None
    for run in drain.lost_entries:
        where = run.get("segment")
        if where not in (segment, topic) and not (segment is None and where == run.get("topic") == topic):
            continue
        first, last = _position(run.get("first")), _position(run.get("last"))
        if first is not None and last is not None and first <= position <= last:
            return run
    return None


def overview(ops: DataFrame) -> HistoryOverview:
    """Phases, drain, time span and a few counts, in one Spark job."""
    f = F.col("f")

    def n(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    row = ops.agg(
        F.min("time_ns").alias("first_ns"), F.max("time_ns").alias("last_ns"),
        F.collect_list(F.when(f == OpF.PHASE.value, F.struct(
            F.col("time_ns"), F.col("writer"), F.col("index"), F.col("phase"), F.col("extra")))).alias("phases"),
        F.count(F.lit(1)).alias("events"),
        n(f == OpF.SEND.value).alias("sends"),
        n((f == OpF.SEND.value) & (F.size(F.coalesce(F.col("inputs"), F.array())) > 0)).alias("ctp_sends"),
        n(f == OpF.ACK.value).alias("acks"),
        n((f == OpF.ACK.value) & F.coalesce(F.col("cumulative"), F.lit(False))).alias("cumulative_acks"),
        n((f == OpF.ACK.value) & F.col("topic").isNull()).alias("acks_without_topic"),
        n(f == OpF.RECEIVE.value).alias("receives"),
        n(f == OpF.READ.value).alias("reads"),
    ).collect()[0]
    phase_rows = sorted(row["phases"] or [], key=lambda r: (r["time_ns"], r["writer"], r["index"]))
    phases = tuple(PhaseMark(r["phase"] or "", int(r["time_ns"]), r["writer"], int(r["index"]))
                   for r in phase_rows)
    counts = {k: int(row[k] or 0) for k in ("events", "sends", "ctp_sends", "acks", "cumulative_acks",
                                            "acks_without_topic", "receives", "reads")}
    return HistoryOverview(phases, _drain_from_phases(phase_rows), row["first_ns"], row["last_ns"], counts)


def visible_values(reads: DataFrame) -> DataFrame:
    """One row per value present in the final reads.

    Columns: value, read_ns (run-clock time of its first read), read_pos (its
    first read as (time_ns, writer, index): the drainer reads each topic in log
    order and numbers its lines, so read_pos orders a topic's values even where
    a coarse clock gives two reads one time), reads (how
    many read events), positions (distinct (topic, segment, msg_id) it was read
    at). Only numeric aggregates, so Spark can hash-aggregate large histories.
    """
    return (
        reads.filter(F.col("value").isNotNull())
        .groupBy("value")
        .agg(F.min("time_ns").alias("read_ns"),
             F.min(F.struct("time_ns", "writer", "index")).alias("read_pos"),
             F.count(F.lit(1)).alias("reads"),
             F.countDistinct(F.coalesce(F.col("topic"), F.lit("")), F.coalesce(F.col("segment"), F.lit("")),
                             F.coalesce(F.col("msg_id"), F.lit(""))).alias("positions"))
    )


# ---- pairing --------------------------------------------------------------------------------

_CARRIED = ("txn", "topic", "segment", "subscription", "key", "value", "inputs", "msg_id", "extra",
            "phase", "redelivery", "cumulative")
# What a lean pairing takes from the completion (its results); the rest comes from the invocation.
_LEAN_RESULTS = ("txn", "topic", "segment", "msg_id")
_LEAN_INVOKE = ("subscription", "key", "value", "inputs", "cumulative")

# Columns of pair_operations(..., lean=True): what the checks need, nothing wide.
LEAN_PAIR_COLUMNS: tuple[str, ...] = (
    "writer", "process", "f", "type", "completed", "orphan", "txn", "topic", "segment", "subscription",
    "key", "value", "inputs", "msg_id", "cumulative", "index", "complete_index", "invoke_ns", "complete_ns",
)


def _cols(items: list[Any]) -> list[Column | str]:
    """Typing help: a list of column names and expressions."""
    return items


def pair_operations(ops: DataFrame, *, include_orphans: bool = False, lean: bool = False) -> DataFrame:
    """One row per operation (PAIR_COLUMNS): an invocation joined with its completion.

    The completion is the next event of the same (writer, process) if it is a
    completion of the same `f`; otherwise the invocation is incomplete
    (`completed` false, `type` "info"). Completion fields win over the
    invocation's (a `txn-open` learns its `txn` on completion). Single events
    are included as complete operations. With `include_orphans`, completions no
    invocation claims are included too (`orphan` true, `invoke_ns` null): a
    broken contract the checker reports.

    `lean` keeps only LEAN_PAIR_COLUMNS (no `extra`, `error`, wall clock), and
    takes only `txn`, `topic`, `segment` and `msg_id` from the completion (the
    recorder repeats the invocation's other fields): the shape the checker uses
    on large histories, where every byte per row is sorted and shuffled.
    """
    kept: tuple[str, ...]
    extra_fields: tuple[str, ...]
    if lean:
        carried: tuple[str, ...] = _LEAN_RESULTS
        kept = _LEAN_INVOKE
        extra_fields = ()
        ops = ops.select("writer", "process", "index", "time_ns", "type", "f", *_LEAN_RESULTS, *_LEAN_INVOKE)
    else:
        carried, kept, extra_fields = _CARRIED, (), ("wall_ms", "error")
    single = ops.filter(F.col("f").isin(*SINGLE_FS))
    events = ops.filter(~F.col("f").isin(*SINGLE_FS))
    w = Window.partitionBy("writer", "process").orderBy("index")
    nxt = F.lead(F.struct("type", "f", "index", "time_ns", *extra_fields, *carried)).over(w)
    prv = F.lag(F.struct("type", "f")).over(w)
    seq = events.select(*ops.columns, nxt.alias("_n"), prv.alias("_p"))

    done = (F.col("_n").isNotNull() & (F.col("_n.type") != OpType.INVOKE.value)
            & (F.col("_n.f") == F.col("f")))
    done = F.coalesce(done, F.lit(False))
    is_invoke = F.col("type") == OpType.INVOKE.value
    claimed = (F.col("_p").isNotNull() & (F.col("_p.type") == OpType.INVOKE.value)
               & (F.col("_p.f") == F.col("f")))
    is_orphan = ~is_invoke & ~F.coalesce(claimed, F.lit(False))
    # One pass over the window's output: invocations (with their completion) and, when
    # asked, the completions nobody invoked; an orphan keeps its own fields.
    rows = seq.filter(is_invoke | is_orphan) if include_orphans else seq.filter(is_invoke)

    def of_invoke(value: Column, otherwise: Column) -> Column:
        return F.when(is_invoke, value).otherwise(otherwise)

    from_completion = [of_invoke(F.coalesce(F.when(done, F.col(f"_n.{c}")), F.col(c)), F.col(c)).alias(c)
                       for c in carried]
    operations = rows.select(
        "writer", "process", "f",
        of_invoke(F.when(done, F.col("_n.type")).otherwise(F.lit(OpType.INFO.value)), F.col("type")).alias("type"),
        of_invoke(done, F.lit(True)).alias("completed"), (~is_invoke).alias("orphan"),
        *from_completion, *kept,
        "index",
        of_invoke(F.when(done, F.col("_n.index")), F.col("index")).alias("complete_index"),
        F.when(is_invoke, F.col("time_ns")).alias("invoke_ns"),
        of_invoke(F.when(done, F.col("_n.time_ns")), F.col("time_ns")).alias("complete_ns"),
        *(_cols([] if lean else [
            "path", "intended_ns", of_invoke(F.when(done, F.col("_n.error")), F.col("error")).alias("error"),
            F.when(is_invoke, F.col("wall_ms")).alias("wall_ms"),
            of_invoke(F.when(done, F.col("_n.wall_ms")), F.col("wall_ms")).alias("complete_wall_ms")])),
    )
    singles = single.select(
        "writer", "process", "f", "type", F.lit(True).alias("completed"), F.lit(False).alias("orphan"),
        *carried, *kept, "index", F.col("index").alias("complete_index"),
        F.col("time_ns").alias("invoke_ns"), F.col("time_ns").alias("complete_ns"),
        *(_cols([] if lean else ["path", "intended_ns", "error", "wall_ms",
                                 F.col("wall_ms").alias("complete_wall_ms")])),
    )
    out = operations.unionByName(singles)
    return out.select(*(LEAN_PAIR_COLUMNS if lean else PAIR_COLUMNS))


# ---- transactions ---------------------------------------------------------------------------


_PARTITION_SUFFIX = r"-partition-[0-9]+$"


def logical(topic: str) -> str:
    """A topic name without a v4 partition suffix (`t-partition-3` -> `t`)."""
    return re.sub(_PARTITION_SUFFIX, "", topic)


def logical_topic(topic: Column) -> Column:
    """`logical()` as a column: histories record logical topics, and one that records a
    partition's name still matches the drain's list of topics read to the end."""
    return F.regexp_replace(topic, _PARTITION_SUFFIX, "")


def _flag(cond: Column) -> Column:
    return F.max(F.when(cond, 1).otherwise(0)) > 0


def _count(cond: Column) -> Column:
    return F.sum(F.when(cond, 1).otherwise(0)).cast("long")


def transaction_outcomes(pairs: DataFrame, visible: DataFrame | None = None,
                         covered_topics: Iterable[str] | None = None, *,
                         visible_sends: DataFrame | None = None) -> DataFrame:
    """One row per transaction id (TXN_COLUMNS) with its outcome.

    Args:
        pairs: pair_operations() output.
        visible: a DataFrame with a `value` column of values in the final reads
            (visible_values()); None when there are no final reads.
        covered_topics: topics the drain read to the end; None when unknown
            (then no transaction is decided aborted by absence).
        visible_sends: instead of `visible`, the send rows of `pairs` already
            joined with it, with a boolean `visible` column (saves a join).

    `client_outcome` is what the client knows; `outcome` adds the decision for
    unknown ones (`decided_by` "client", "no-commit" (never asked to commit:
    aborted) or "visibility", null while still unknown); `outcome_label` is
    committed, aborted, unknown-committed, unknown-aborted or unknown.
    `sends_uncovered` counts possible values that are not visible and went to a
    topic the drain did not read to the end.
    """
    cols = ("txn", "f", "type", "invoke_ns", "complete_ns", "writer", "index", "process", "topic", "inputs")
    tx = pairs.filter(F.col("txn").isNotNull() & ~F.col("orphan")).select(*cols)
    if visible_sends is not None:
        sends = (visible_sends.filter(F.col("txn").isNotNull()).withColumn("f", F.lit(OpF.SEND.value))
                 .select(*cols, F.col("visible").alias("_visible")))
        others = tx.filter(F.col("f") != OpF.SEND.value).withColumn("_visible", F.lit(None).cast("boolean"))
        tx = sends.unionByName(others)
    elif visible is not None:
        vis = visible.select("value", F.lit(True).alias("_visible"))
        sends = (pairs.filter(F.col("txn").isNotNull() & ~F.col("orphan") & (F.col("f") == OpF.SEND.value))
                 .join(vis, "value", "left").select(*cols, "_visible"))
        others = tx.filter(F.col("f") != OpF.SEND.value).withColumn("_visible", F.lit(None).cast("boolean"))
        tx = sends.unionByName(others)
    else:
        tx = tx.withColumn("_visible", F.lit(None).cast("boolean"))
    covered = sorted({logical(t) for t in covered_topics}) if covered_topics is not None else None

    f, typ = F.col("f"), F.col("type")
    is_commit, is_abort = f == OpF.TXN_COMMIT.value, f == OpF.TXN_ABORT.value
    is_send = f == OpF.SEND.value
    maybe_written = is_send & typ.isin(OpType.OK.value, OpType.INFO.value)
    # A visible value is judged wherever it is; only an invisible one on a topic the drain did
    # not read to the end is out of reach.
    uncovered = (maybe_written & ~F.coalesce(F.col("_visible"), F.lit(False))
                 & (~logical_topic(F.col("topic")).isin(*covered) | F.col("topic").isNull())
                 if covered is not None else F.lit(False))
    commit_ok, abort_ok = is_commit & (typ == OpType.OK.value), is_abort & (typ == OpType.OK.value)
    commit_fail = is_commit & (typ == OpType.FAIL.value)
    first = F.min(F.struct("invoke_ns", "writer", "index", "process"))
    agg = tx.groupBy("txn").agg(
        first.alias("_first"),
        F.min(F.when(f == OpF.TXN_OPEN.value, F.struct("invoke_ns", "index"))).alias("_open"),
        F.min(F.when(is_commit, F.col("invoke_ns"))).alias("commit_invoke_ns"),
        F.min(F.when(is_commit | is_abort, F.col("invoke_ns"))).alias("end_invoke_ns"),
        _flag(commit_ok).alias("_commit_ok"),
        _flag(abort_ok | commit_fail).alias("_aborted"),
        F.min(F.when(commit_ok, F.col("complete_ns"))).alias("_commit_ns"),
        F.min(F.when(abort_ok | commit_fail, F.col("complete_ns"))).alias("_abort_ns"),
        _count(is_send & (typ == OpType.OK.value)).alias("sends_ok"),
        _count(is_send & (typ == OpType.INFO.value)).alias("sends_info"),
        _count(is_send & (typ == OpType.FAIL.value)).alias("sends_fail"),
        _count(maybe_written & F.coalesce(F.col("_visible"), F.lit(False))).alias("sends_visible"),
        _count(uncovered).alias("sends_uncovered"),
        _count(f == OpF.ACK.value).alias("acks"),
        _flag(is_send & (F.size(F.coalesce(F.col("inputs"), F.array())) > 0)).alias("ctp"),
    )
    client = (F.when(F.col("_commit_ok"), F.lit(COMMITTED))
              .when(F.col("_aborted"), F.lit(ABORTED)).otherwise(F.lit(UNKNOWN)))
    seen = F.col("sends_visible") > 0
    if covered is not None:
        none_possible = ((F.col("sends_ok") + F.col("sends_info")) > 0) & (F.col("sends_uncovered") == 0)
    else:
        none_possible = F.lit(False)
    # Only the coordinator ends a transaction whose commit the client never invoked, and
    # only by abort: visibility decides only where a commit was asked for.
    never_committed = F.col("commit_invoke_ns").isNull()
    decided = (F.when(F.col("client_outcome") != UNKNOWN, F.col("client_outcome"))
               .when(never_committed, F.lit(ABORTED))
               .when(seen, F.lit(COMMITTED)).when(none_possible, F.lit(ABORTED)).otherwise(F.lit(UNKNOWN)))
    out = agg.withColumn("client_outcome", client).withColumn("outcome", decided)
    decided_by = (F.when(F.col("client_outcome") != UNKNOWN, F.lit("client"))
                  .when(never_committed, F.lit(NO_COMMIT))
                  .when(F.col("outcome") != UNKNOWN, F.lit("visibility")))
    label = (F.when(F.col("client_outcome") != UNKNOWN, F.col("client_outcome"))
             .when(F.col("outcome") == COMMITTED, F.lit(UNKNOWN_COMMITTED))
             .when(F.col("outcome") == ABORTED, F.lit(UNKNOWN_ABORTED)).otherwise(F.lit(UNKNOWN)))
    end_ns = (F.when(F.col("client_outcome") == COMMITTED, F.col("_commit_ns"))
              .when(F.col("client_outcome") == ABORTED, F.col("_abort_ns")))
    return out.select(
        "txn", F.col("_first.writer").alias("writer"), F.col("_first.process").alias("process"),
        F.col("_open.index").alias("open_index"), F.col("_open.invoke_ns").alias("open_ns"),
        "commit_invoke_ns", "end_invoke_ns", end_ns.alias("end_ns"), "client_outcome", "outcome",
        decided_by.alias("decided_by"), label.alias("outcome_label"), "sends_ok", "sends_info",
        "sends_fail", "sends_visible", "sends_uncovered", "acks", "ctp",
    )
