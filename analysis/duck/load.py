"""A run's history into DuckDB: the events and the paired operations, validated, and the overview.

The history is read the way the large Spark check reads it: Arrow converts the JSONL to Parquet,
pairs the operations as it goes and validates every line (analysis.columnar,
analysis.columnar_pairs, analysis.columnar_overview). A history of `PARQUET_MIN_BYTES` or more
keeps its copy where the Spark checker keeps it (analysis/history.parquet and
history.pairs.parquet, with the same metadata), so either checker reuses what the other made;
a smaller one is converted into a temporary folder.

Where Arrow cannot vouch for the history (a line it cannot read as Spark would, a writer whose
lines are out of order, a line that breaks a rule), `NeedsSpark` says why: the Spark checker then
reads it, and names the problem line as it always has. So this module never judges a history
the Spark checker would refuse.

Public API:

    NeedsSpark                                         (why this history goes to the Spark checker)
    Loaded                                             (connection, overview, facts, first orphan)
    connect(*, memory_limit=None, temp_dir=None) -> duckdb connection
    load_run(run_dir, con, *, work_dir, progress) -> Loaded
    load_lines(lines, con, work_dir) -> Loaded         (tests: a history's lines, in order)
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from analysis import columnar
from analysis.history_io import (
    CACHE_NAME,
    PAIRS_NAME,
    PARQUET_MIN_BYTES,
    HistoryFacts,
    NoHistoryError,
    _fingerprint,
    torn_tail,
)
from analysis.model import HistoryOverview, overview_from_row
from harness.history.reader import history_files
from harness.results import read_json, write_json_atomic

__all__ = ["Loaded", "NeedsSpark", "connect", "load_lines", "load_run"]

Progress = Callable[[str], None]


class NeedsSpark(Exception):
    """Arrow could not convert, pair or validate this history: the Spark checker must read it."""


@dataclass(frozen=True)
class Loaded:
    """What `load_run` put into the connection (`ops` and `pairs_src`) and found on the way."""

    facts: HistoryFacts
    overview: HistoryOverview
    first_unclaimed: dict[str, Any] | None
    """The least completion no invocation claims (a broken history), None when every one is claimed."""


def connect(*, memory_limit: str | None = None, temp_dir: Path | None = None,
            threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the checker's settings: every core, rows in any order (the checks
    order what they show), spilling to `temp_dir` beyond `memory_limit`."""
    con = duckdb.connect(":memory:")
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET threads = {threads or os.cpu_count() or 1}")
    if memory_limit is not None:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    if temp_dir is not None:
        con.execute(f"SET temp_directory = '{str(temp_dir).replace(chr(39), chr(39) * 2)}'")
    return con


def _views(con: duckdb.DuckDBPyConnection, events: Path, pairs: Path) -> None:
    def glob(folder: Path) -> str:
        return str(folder / "*.parquet").replace("'", "''")

    con.execute(f"CREATE OR REPLACE VIEW ops AS SELECT * FROM read_parquet('{glob(events)}')")
    con.execute(f"CREATE OR REPLACE VIEW pairs_src AS SELECT * FROM read_parquet('{glob(pairs)}')")


def _overview_sql(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The overview row (analysis.model.overview_aggregates) and the first unclaimed completion,
    computed from the copy: for a copy the Spark checker made, whose metadata may not keep them."""
    cursor = con.execute("""
        SELECT min(time_ns), max(time_ns), count(*),
               count(*) FILTER (WHERE f = 'send'),
               count(*) FILTER (WHERE f = 'send' AND len(coalesce(inputs, []::VARCHAR[])) > 0),
               count(*) FILTER (WHERE f = 'ack'),
               count(*) FILTER (WHERE f = 'ack' AND coalesce(cumulative, false)),
               count(*) FILTER (WHERE f = 'ack' AND topic IS NULL),
               count(*) FILTER (WHERE f = 'receive'), count(*) FILTER (WHERE f = 'read'),
               count(*) FILTER (WHERE f = 'txn-state')
        FROM ops""")
    values = cursor.fetchone()
    assert values is not None
    names = ("first_ns", "last_ns", "events", "sends", "ctp_sends", "acks", "cumulative_acks",
             "acks_without_topic", "receives", "reads", "txn_states")
    row: dict[str, Any] = dict(zip(names, values, strict=True))
    phases = con.execute("""SELECT time_ns, writer, "index", phase, extra, topic, subscription FROM ops
                            WHERE f = 'phase'""")
    columns = [d[0] for d in phases.description or []]
    row["phases"] = [dict(zip(columns, r, strict=True)) for r in phases.fetchall()]
    orphan = con.execute("""SELECT writer, "index", process, f, "type" FROM pairs_src WHERE orphan
                            ORDER BY writer, "index", process, f, "type" LIMIT 1""").fetchone()
    first = dict(zip(("writer", "index", "process", "f", "type"), orphan, strict=True)) if orphan else None
    return row, first


def _convert(files: Sequence[Path], torn: dict[Path, bytes], events: Path, pairs: Path,
             say: Progress) -> columnar.Converted:
    for stale in (events, pairs):
        shutil.rmtree(stale, ignore_errors=True)
    try:
        converted = columnar.convert(files, torn, events, pairs_dir=pairs, progress=say)
    except columnar.NotConvertible as why:
        raise NeedsSpark(f"Arrow cannot read the history as Spark would ({why})") from why
    if converted.validated is None or not any(pairs.glob("*.parquet")):
        raise NeedsSpark("a writer's lines are out of order, or a line breaks a rule of the history")
    return converted


def load_run(run_dir: Path, con: duckdb.DuckDBPyConnection, *, work_dir: Path,
             progress: Progress | None = None) -> Loaded:
    """Read `run_dir`'s history into `con` (`ops`, `pairs_src`): the Parquet copy in `analysis/`
    when it is current, else a conversion (kept there for a large history, else in `work_dir`,
    which the caller removes)."""
    say = progress or (lambda _message: None)
    history_dir = run_dir / "history"
    files = [p for p in history_files(history_dir) if p.stat().st_size > 0] if history_dir.is_dir() else []
    if not files:
        raise NoHistoryError(f"{history_dir}: no history lines (no non-empty *.jsonl files); "
                             "the run wrote nothing to check: run it again")
    total = sum(p.stat().st_size for p in files)
    torn = {p: tail for p in files if (tail := torn_tail(p)) is not None}
    names = tuple(p.name for p in files)
    torn_names = tuple(sorted(p.name for p in torn))
    cache_dir = run_dir / "analysis"
    cache, pairs_cache, meta_path = cache_dir / CACHE_NAME, cache_dir / PAIRS_NAME, cache_dir / f"{CACHE_NAME}.json"
    fingerprint = _fingerprint(files)
    if total >= PARQUET_MIN_BYTES and cache.is_dir() and pairs_cache.is_dir() and meta_path.is_file():
        try:
            meta = read_json(meta_path)
        except (OSError, ValueError):
            meta = {}
        if meta.get("fingerprint") == fingerprint and meta.get("pairs"):
            say(f"reading the Parquet copy of the history ({cache})")
            _views(con, cache, pairs_cache)
            row, first = _overview_sql(con)
            facts = HistoryFacts(str(history_dir), names, total, int(meta["lines"]), torn_names,
                                 meta.get("first_ns"), meta.get("last_ns"), "parquet-cache")
            return Loaded(facts, overview_from_row(row), first)
    say(f"converting {len(files)} history file(s), {total / 1e6:.1f} MB, to Parquet")
    if total >= PARQUET_MIN_BYTES:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp, tmp_pairs = cache_dir / f".{CACHE_NAME}.{os.getpid()}.tmp", cache_dir / f".{PAIRS_NAME}.{os.getpid()}.tmp"
        try:
            converted = _convert(files, torn, tmp, tmp_pairs, say)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(tmp_pairs, ignore_errors=True)
            raise
        assert converted.validated is not None
        for old in (cache, pairs_cache):
            shutil.rmtree(old, ignore_errors=True)
        meta_path.unlink(missing_ok=True)
        os.replace(tmp, cache)
        os.replace(tmp_pairs, pairs_cache)
        v = converted.validated
        write_json_atomic(meta_path, {"fingerprint": fingerprint, "lines": v.lines, "first_ns": v.first_ns,
                                      "last_ns": v.last_ns, "pairs": True})
        events, pairs, source = cache, pairs_cache, "parquet"
    else:
        events, pairs, source = work_dir / "history.parquet", work_dir / "history.pairs.parquet", "jsonl"
        converted = _convert(files, torn, events, pairs, say)
    validated = converted.validated
    assert validated is not None
    _views(con, events, pairs)
    facts = HistoryFacts(str(history_dir), names, total, validated.lines, torn_names, validated.first_ns,
                         validated.last_ns, source)
    return Loaded(facts, overview_from_row(validated.row), validated.first_unclaimed)


def load_lines(lines: Sequence[dict[str, Any]], con: duckdb.DuckDBPyConnection, work_dir: Path) -> Loaded:
    """`lines` (history lines as the recorder writes them, in order) into `con`, as `load_run`
    reads a run: for tests that write histories in memory (tests/spark/dsl.py)."""
    history = work_dir / "run" / "history"
    history.mkdir(parents=True, exist_ok=True)
    (history / "lines.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return load_run(work_dir / "run", con, work_dir=work_dir)
