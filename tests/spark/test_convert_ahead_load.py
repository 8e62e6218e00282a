"""A history converted before Spark started (analysis.history_io.convert_ahead) is the history
`load_history` would have converted itself, and a check built on it gives the same results.

The conversion is taken only when it was made of the files there are now; a check converts in a
thread of its own while its Spark starts (analysis.check).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analysis import columnar, history_io
from analysis.check import check_run
from analysis.history_io import convert_ahead, load_history, load_run
from analysis.model import OPS_COLUMNS, overview_aggregates
from harness.anomalies import AnomalyClass
from tools.synth import SynthConfig, generate


def _sorted_rows(loaded: history_io.LoadedHistory) -> list[str]:
    return sorted(json.dumps(row.asDict(recursive=True), sort_keys=True, default=str)
                  for row in loaded.ops.select(*OPS_COLUMNS).collect())


def _planted(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    generate(SynthConfig(events=4_000, writers=3, plant=tuple(c.value for c in AnomalyClass), seed=13), run, jobs=1)
    return run


def test_a_conversion_made_ahead_is_loaded_as_the_one_load_history_makes(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ahead, itself = _planted(tmp_path, "ahead"), _planted(tmp_path, "itself")
    converted = convert_ahead(ahead, parquet_min_bytes=0)
    assert converted is not None

    def not_again(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("converted a second time")

    with monkeypatch.context() as patched:
        patched.setattr(columnar, "convert", not_again)
        by_ahead = load_run(spark, ahead, parquet_min_bytes=0, summary=overview_aggregates(), converted=converted)
    by_itself = load_run(spark, itself, parquet_min_bytes=0, summary=overview_aggregates())
    assert by_ahead.facts.source == by_itself.facts.source == "parquet"
    assert (by_ahead.facts.lines, by_ahead.facts.first_ns, by_ahead.facts.last_ns) == (
        by_itself.facts.lines, by_itself.facts.first_ns, by_itself.facts.last_ns)
    assert by_ahead.summary == by_itself.summary
    assert _sorted_rows(by_ahead) == _sorted_rows(by_itself)
    assert by_ahead.pairs is not None and by_ahead.pairs.count() == by_itself.pairs.count()  # type: ignore[union-attr]
    assert not list((ahead / "analysis").glob(".*.tmp"))       # the copies became the cache


def test_a_conversion_of_files_changed_since_is_not_taken(spark: SparkSession, tmp_path: Path) -> None:
    run = _planted(tmp_path, "run")
    converted = convert_ahead(run, parquet_min_bytes=0)
    assert converted is not None
    history = run / "history"
    last = max(history.glob("*.jsonl"), key=lambda p: p.name)
    kept = last.read_bytes().splitlines(keepends=True)
    last.write_bytes(b"".join(kept[:-1]))         # a line fewer than the conversion saw
    loaded = load_history(spark, history, cache_dir=run / "analysis", parquet_min_bytes=0, converted=converted)
    assert loaded.facts.lines == converted.validated.lines - 1  # type: ignore[union-attr]


def _verdict(results: dict[str, Any]) -> dict[str, Any]:
    return {"valid": results["valid"], "anomalies": {name: entry["count"] for name, entry in results["anomalies"].items()},
            "checks": results["checks"], "operations": results["operations"],
            "transactions": results["transactions"], "lines": results["history"]["lines"]}


def test_a_check_converts_beside_spark_and_finds_what_a_check_from_jsonl_finds(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from_jsonl = check_run(_planted(tmp_path, "jsonl"), progress=False)
    converted_in: list[str] = []
    convert = columnar.convert

    def recorded(*args: Any, **kwargs: Any) -> columnar.Converted:
        converted_in.append(threading.current_thread().name)
        return convert(*args, **kwargs)

    monkeypatch.setattr(columnar, "convert", recorded)
    monkeypatch.setitem(convert_ahead.__kwdefaults__, "parquet_min_bytes", 0)
    monkeypatch.setitem(load_run.__kwdefaults__, "parquet_min_bytes", 0)
    from_parquet = check_run(_planted(tmp_path, "parquet"), progress=False)
    assert converted_in == ["history-converter"]
    assert from_parquet["history"]["source"] == "parquet" and from_jsonl["history"]["source"] == "jsonl"
    assert from_parquet["anomalies"]                        # every class was planted
    assert _verdict(from_parquet) == _verdict(from_jsonl)
