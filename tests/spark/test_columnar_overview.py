"""The validation and overview Arrow's conversion gathers (analysis.columnar_overview) against Spark's.

Where the conversion says every line kept the rules, its overview must be the row Spark's
validating pass computes; where a line breaks one, it must give no answer, so that Spark's
validation runs and names the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import analysis.history_io as history_io
from analysis.columnar import convert
from analysis.history_io import HistoryFormatError, load_history, torn_tail, validate_and_summarize
from analysis.model import FIRST_UNCLAIMED, first_unclaimed, overview_aggregates, overview_from_row
from harness.history.reader import history_files
from tools.synth import SynthConfig, generate


def _files(history: Path) -> tuple[list[Path], dict[Path, bytes]]:
    files = [p for p in history_files(history) if p.stat().st_size > 0]
    return files, {p: tail for p in files if (tail := torn_tail(p)) is not None}


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """The overview's fields (not validation's own, `_lines` and the like), phases in time order:
    Spark collects them in no set order."""
    out = {name: value for name, value in row.items() if not name.startswith("_")}
    out["phases"] = sorted(json.dumps(p, sort_keys=True) for p in out["phases"])
    return out


def _counted_validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time Spark's validating pass runs from here on."""
    validations: list[int] = []
    real = history_io.validate_and_summarize

    def counted(*args: Any, **kwargs: Any) -> Any:
        validations.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(history_io, "validate_and_summarize", counted)
    return validations


@pytest.mark.parametrize("config", [
    SynthConfig(events=8_000, writers=3, plant=("aborted-read", "duplicate", "lost-ack"), seed=5),
    SynthConfig(events=3_000, writers=1, ack_users=4, seed=11, path="v5"),
])
def test_the_conversion_gathers_the_overview_spark_computes(spark: SparkSession, tmp_path: Path,
                                                            config: SynthConfig) -> None:
    run = tmp_path / "run"
    generate(config, run, jobs=1)
    with (run / "history" / "w0.jsonl").open("ab") as f:     # a torn last line, left out by both
        f.write(b'{"schema":1,"run":"synthetic","writer":"w0","ind')
    files, torn = _files(run / "history")
    converted = convert(files, torn, tmp_path / "arrow", chunk_bytes=64 * 1024, pairs_dir=tmp_path / "pairs")
    assert converted.writers_intact and converted.validated is not None

    lines, first_ns, last_ns, row = validate_and_summarize(spark.read.parquet(str(tmp_path / "arrow")),
                                                           summary=overview_aggregates())
    validated = converted.validated
    assert (validated.lines, validated.first_ns, validated.last_ns) == (lines, first_ns, last_ns)
    assert _comparable(validated.row) == _comparable(row.asDict(recursive=True))
    seen = overview_from_row(history_io._as_row(validated.row))
    assert seen == overview_from_row(row)
    assert seen.drain.complete and seen.counts["sends"] and seen.counts["acks"] and seen.counts["txn_states"]


_GOOD = [{"process": "p/1", "f": "send", "type": "invoke", "value": "a"},
         {"process": "p/1", "f": "send", "type": "ok", "value": "a"},
         {"process": "p/2", "f": "receive", "type": "ok", "value": "a"}]


@pytest.mark.parametrize(("change", "why"), [
    ({"type": None}, "a required field"),
    ({"process": None}, "a required field"),
    ({"schema": 2}, "schema is 2, not 1"),
    ({"schema": None}, "schema is missing"),
    ({"type": "maybe"}, "unknown type maybe"),
    ({"f": "peek"}, "unknown f peek"),
    ({"type": "invoke"}, "receive must be a single ok event, not invoke"),
])
def test_a_line_breaking_a_rule_leaves_the_answer_to_spark(spark: SparkSession, tmp_path: Path,
                                                           change: dict[str, Any], why: str) -> None:
    history = tmp_path / "history"
    history.mkdir()
    records = [{"schema": 1, "run": "r", "writer": "w", "index": i, "time_ns": 10 + i, "path": "v4", **fields}
               for i, fields in enumerate(_GOOD)]
    records[2].update(change)
    (history / "w.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    files, torn = _files(history)
    assert convert(files, torn, tmp_path / "arrow", pairs_dir=tmp_path / "pairs").validated is None
    with pytest.raises(HistoryFormatError, match=rf"w\.jsonl \(index 2\): {why}"):
        load_history(spark, history, cache_dir=tmp_path / "analysis", parquet_min_bytes=0,
                     summary=overview_aggregates())


def test_a_converted_history_is_not_read_again_to_validate(spark: SparkSession, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    generate(SynthConfig(events=4_000, writers=2, seed=3), run, jobs=1)
    expected = load_history(spark, run / "history", summary=overview_aggregates())   # Spark's reading

    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the conversion validated every line: Spark must not read the copy again")

    monkeypatch.setattr(history_io, "validate_and_summarize", refused)
    cache = tmp_path / "analysis"
    loaded = load_history(spark, run / "history", cache_dir=cache, parquet_min_bytes=0,
                          summary=overview_aggregates())
    assert loaded.facts.source == "parquet"
    assert (loaded.facts.lines, loaded.facts.first_ns, loaded.facts.last_ns) == \
        (expected.facts.lines, expected.facts.first_ns, expected.facts.last_ns)
    assert loaded.summary is not None and expected.summary is not None
    assert overview_from_row(loaded.summary) == overview_from_row(expected.summary)
    again = load_history(spark, run / "history", cache_dir=cache, parquet_min_bytes=0,
                         summary=overview_aggregates())     # the cache and the summary it keeps
    assert again.facts.source == "parquet-cache"
    assert again.summary is not None and overview_from_row(again.summary) == overview_from_row(expected.summary)
    expected.release()


def test_a_summary_other_than_the_overview_is_still_computed_by_spark(spark: SparkSession, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    generate(SynthConfig(events=1_000, writers=1, seed=4), run, jobs=1)
    validations = _counted_validations(monkeypatch)
    from pyspark.sql import functions as F
    loaded = load_history(spark, run / "history", cache_dir=tmp_path / "analysis", parquet_min_bytes=0,
                          summary=[*overview_aggregates(), F.max("index").alias("top")])
    assert validations == [1]
    assert loaded.summary is not None and loaded.summary["top"] > 0


def _small_check_summary() -> tuple[dict[str, Any], list[Any]]:
    """What a small check asks of the validating pass: the overview and the first unclaimed completion."""
    unclaimed, first = first_unclaimed()
    return unclaimed, [*overview_aggregates(), first]


@pytest.mark.parametrize("orphans", [(), (4,), (4, 1)])
def test_the_first_unclaimed_completion_is_the_one_spark_finds(spark: SparkSession, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               orphans: tuple[int, ...]) -> None:
    """A small check asks for the first completion no invocation claims; the conversion's pairing
    finds it (its orphans) without Spark's window over the copy."""
    run = tmp_path / "run"
    generate(SynthConfig(events=2_000, writers=2, seed=6), run, jobs=1)
    for writer, line in zip(("w1", "w0"), orphans, strict=False):   # an invocation removed: its completion unclaimed
        path = run / "history" / f"{writer}.jsonl"
        lines = path.read_text().splitlines()
        records = [json.loads(text) for text in lines]
        at = next(i for i in range(line, len(records)) if records[i]["type"] == "invoke"
                  and records[i]["f"] not in ("receive", "read", "phase", "txn-state"))
        del records[at]
        for later in records[at:]:
            later["index"] -= 1
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    windows, summary = _small_check_summary()
    expected = load_history(spark, run / "history", windows=windows, summary=summary)   # Spark's reading
    validations = _counted_validations(monkeypatch)
    windows, summary = _small_check_summary()
    loaded = load_history(spark, run / "history", cache_dir=tmp_path / "analysis", parquet_min_bytes=0,
                          windows=windows, summary=summary)
    assert validations == []
    assert loaded.summary is not None and expected.summary is not None
    found, wanted = loaded.summary[FIRST_UNCLAIMED], expected.summary[FIRST_UNCLAIMED]
    assert (found.asDict() if found is not None else None) == (wanted.asDict() if wanted is not None else None)
    assert (wanted is not None) == bool(orphans)
    assert overview_from_row(loaded.summary) == overview_from_row(expected.summary)
    windows, summary = _small_check_summary()
    again = load_history(spark, run / "history", cache_dir=tmp_path / "analysis", parquet_min_bytes=0,
                         windows=windows, summary=summary)     # from the cache, with the summary it kept
    assert again.facts.source == "parquet-cache" and again.summary is not None
    kept = again.summary[FIRST_UNCLAIMED]
    assert (kept.asDict() if kept is not None else None) == (wanted.asDict() if wanted is not None else None)
    expected.release()
