"""The two checkers on histories nobody wrote by hand: Spark's and DuckDB's results must be equal.

Hypothesis writes adversarial histories with the test language (tests/spark/dsl.py): transactions
opened, failed, reused, left open; sends ok, failed, unknown or never completed, with and without
consumed inputs; receives and acks of values sent or not, individual and cumulative, in
transactions or not; final reads that drop, repeat and invent values at odd message ids; live
reads, coordinator readings, redeliveries to the drain, a drain that is incomplete or missing.
Each history is checked by both engines with all sixteen checks, and every field of every result
(counts, unjudged, notes, examples in order, instances) must be the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from analysis.checks import prepare, run_checks
from analysis.checks.base import CheckResult
from analysis.duck import checks as duck_checks
from analysis.duck.frames import prepare as duck_prepare
from analysis.duck.load import connect, load_lines
from analysis.history_io import ops_from_records
from tests.spark.dsl import History

_TYPES = ["ok", "ok", "ok", "fail", "info", None]
_ENDS = ["commit", "commit", "abort", "open"]
_TOPICS = ["t1", "t2", "t1-partition-1"]
_SUBS = ["s", "audit"]
_ODD_IDS = ["1:2:3", "007:1", "5:1", "99:0:-1", "nope", "1000:0"]


def _history(data: st.DataObject) -> History:
    """One adversarial history, drawn step by step."""
    draw = data.draw
    h = History()
    h.phase("load")          # a history has lines (an empty one is refused before either checker runs)
    values: list[str] = []
    txns: list[str] = []
    for p in range(draw(st.integers(1, 3), label="producers")):
        process = h.process(f"w0/u{p}")
        for _ in range(draw(st.integers(0, 3), label="transactions")):
            reuse = draw(st.booleans()) and bool(txns)
            txn = process.open(type=draw(st.sampled_from(_TYPES)),
                               txn=draw(st.sampled_from(txns)) if reuse else None)
            txns.append(txn.id)
            for _ in range(draw(st.integers(0, 3), label="sends")):
                value = f"v{len(values)}"
                inputs = [draw(st.sampled_from(values))] if values and draw(st.integers(0, 4)) == 0 else None
                txn.send(value, topic=draw(st.sampled_from(_TOPICS)), key=draw(st.sampled_from([None, "k1", "k2"])),
                         type=draw(st.sampled_from(_TYPES)), inputs=inputs)
                values.append(value)
            end = draw(st.sampled_from(_ENDS))
            if draw(st.booleans()):
                h.sleep(draw(st.sampled_from([0.5, 12.0, 40.0])))
            if end == "commit":
                txn.commit(type=draw(st.sampled_from(_TYPES)))
            elif end == "abort":
                txn.abort(type=draw(st.sampled_from(_TYPES)))
        if draw(st.booleans()):
            value = f"v{len(values)}"
            process.send(value, topic=draw(st.sampled_from(_TOPICS)), type=draw(st.sampled_from(_TYPES)))
            values.append(value)
    candidates = [*values, "ghost"]
    for c in range(draw(st.integers(0, 2), label="consumers")):
        consumer = h.process(f"w1/c{c}")
        for _ in range(draw(st.integers(0, 4), label="deliveries")):
            value = draw(st.sampled_from(candidates))
            sub = draw(st.sampled_from(_SUBS))
            consumer.receive(value, sub=sub, redelivery=draw(st.integers(0, 1)))
            how = draw(st.sampled_from(["txn", "txn", "plain", "none"]))
            if how == "txn":
                txn = consumer.open()
                txn.ack(value, sub=sub, type=draw(st.sampled_from(_TYPES)), cumulative=draw(st.booleans()))
                if draw(st.booleans()):
                    out = f"v{len(values)}"
                    txn.send(out, topic="t2", inputs=[value])
                    values.append(out)
                end = draw(st.sampled_from(_ENDS))
                if end == "commit":
                    txn.commit(type=draw(st.sampled_from(_TYPES)))
                elif end == "abort":
                    txn.abort(type=draw(st.sampled_from(_TYPES)))
            elif how == "plain":
                consumer.ack(value, sub=sub, cumulative=draw(st.booleans()))
    if draw(st.booleans(), label="drain"):
        h.phase("drain")
        for topic in _TOPICS:
            shown = draw(st.lists(st.sampled_from(candidates), max_size=6), label=f"reads {topic}")
            ids = [draw(st.sampled_from([None, *_ODD_IDS])) for _ in shown]
            for value, msg_id in zip(shown, ids, strict=True):
                h.read(topic, value, msg_ids=[msg_id] if msg_id is not None else None)
        live = draw(st.booleans(), label="live reads")
        if live:
            h.live_read("t1", *draw(st.lists(st.sampled_from(candidates), max_size=4)))
        for txn_id in draw(st.lists(st.sampled_from(txns or ["1:99"]), max_size=2), label="readings"):
            h.txn_state(txn_id, draw(st.sampled_from(["COMMITTED", "ABORTED", "OPEN", "COMMITTING"])),
                        live=draw(st.booleans()))
        for value in draw(st.lists(st.sampled_from(candidates), max_size=2), label="redelivered"):
            h.drain_receive(value, sub=draw(st.sampled_from(_SUBS)))
        topics = draw(st.lists(st.sampled_from(_TOPICS), unique=True), label="topics read to the end")
        h.drain_complete(topics=topics, live_topics=["t1"] if live else None)
    return h


def _comparable(results: list[CheckResult]) -> list[dict[str, Any]]:
    return [{"name": r.name.value, "status": r.status.value, "reason": r.reason, "count": r.count,
             "unjudged": r.unjudged, "note": r.note, "examples": list(r.examples), "instances": list(r.instances)}
            for r in results]


def _both_agree(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    records = _history(data).records()
    ctx = prepare(ops_from_records(spark, records), persist=True, cut_lineage=True, stall_after_s=10.0)
    try:
        by_spark = _comparable(run_checks(ctx))
    finally:
        ctx.unpersist()
    con = connect(threads=1)
    try:
        work: Path = tmp_path_factory.mktemp("duck")
        loaded = load_lines(records, con, work)
        by_duckdb = _comparable(duck_checks.run_checks(duck_prepare(con, loaded.overview, stall_after_s=10.0)))
    finally:
        con.close()
    for spark_result, duck_result in zip(by_spark, by_duckdb, strict=True):
        assert duck_result == spark_result, spark_result["name"]


# Derandomised: the same histories on every run (CI needs no luck). Not shrunk: each example costs a
# Spark check, and the failing one's draws are printed as drawn.
_SETTINGS = {"deadline": None, "derandomize": True, "database": None, "phases": (Phase.explicit, Phase.generate),
             "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]}


@settings(max_examples=12, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_both_checkers_give_the_same_results(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory,
                                             data: st.DataObject) -> None:
    _both_agree(spark, tmp_path_factory, data)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(max_examples=150, **_SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_both_checkers_give_the_same_results_on_many_more_histories(
        spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    _both_agree(spark, tmp_path_factory, data)


def test_the_comparison_tool_says_same_and_names_a_folder_it_cannot_check(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools.bench.engines_agree import main

    h = History()
    h.process("w0/u1").open().sends("a", "b").commit()
    run = h.drain(reads={"t1": ["a"]}).write(tmp_path / "run")
    assert main([str(run), "--out", str(tmp_path / "out")]) == 0
    assert "  same" in capsys.readouterr().out
    assert main([str(run), str(tmp_path / "missing"), "--out", str(tmp_path / "out2")]) == 1
    out = capsys.readouterr().out
    assert "not checked" in out and "no such run folder" in out and "1 of 2 run(s) the same" in out
