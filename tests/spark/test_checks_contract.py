"""The checker's contract on hostile histories: one test per rule of issue 14.

Each test is a history the checker once judged wrongly: valid where an anomaly
or a doubt was due, or an anomaly hidden by a coarse clock or a merged id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analysis.check import check_run
from analysis.checks import AnomalyClass
from analysis.checks.context import prepare
from analysis.history_io import HistoryFormatError, load_run, ops_from_records
from analysis.model import TXN_COLUMNS
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History

# ---- rule 1: visible without a commit is not committed -----------------------------------------

def test_a_visible_value_of_a_transaction_never_committed_is_an_aborted_read(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").send("b")          # the client never invoked txn-commit
    h.drain(reads={"t1": ["a", "b"]})
    result = run_check(h, AnomalyClass.ABORTED_READ)
    assert result.count == 2
    assert {e["value"] for e in result.examples} == {"a", "b"}
    assert all("never invoked" in e["why"] for e in result.examples)
    assert run_check(h, AnomalyClass.LOST_WRITE).count == 0 and run_check(h, AnomalyClass.PARTIAL_TXN).count == 0


def test_a_receive_of_a_transaction_never_committed_is_a_dirty_read(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").abort(type="info")   # abort outcome unknown, no commit invoked
    h.process("c1").receive("a")
    h.drain(reads={"t1": []})
    assert run_check(h, AnomalyClass.DIRTY_READ).count == 1
    assert run_check(h, AnomalyClass.ABORTED_READ).count == 0            # not visible: the receive is the dirty read


def test_a_transaction_never_committed_is_aborted_even_on_a_topic_not_drained(spark: SparkSession,
                                                                               tmp_path: Path) -> None:
    h = History()
    h.process("w0/u1").open().send("a", topic="elsewhere")  # never committed, topic not read to the end
    h.process("w0/u2").open().send("b").commit()
    run = h.drain(reads={"t1": ["b"]}, topics=["t1"]).write(tmp_path / "run")
    out = check_run(run)
    assert out["valid"] is True
    assert out["transactions"]["unknown-aborted"] == 1 and out["transactions"]["unknown"] == 0


# ---- rule 2: what could not be judged is never valid -------------------------------------------

def test_an_unknown_transaction_on_a_topic_not_drained_makes_the_verdict_unknown(
        spark: SparkSession, tmp_path: Path) -> None:
    h = History()
    h.process("w0/u1").open().send("a", topic="elsewhere").commit(type="info")
    h.process("w0/u2").open().send("b").commit()
    run = h.drain(reads={"t1": ["b"]}, topics=["t1"]).write(tmp_path / "run")
    out = check_run(run)
    assert out["valid"] == "unknown"
    assert out["checks"]["lost-write"]["unjudged"] == 1
    assert any("outcome" in r and "not read to the end" in r for r in out["unknown_reasons"])


def test_an_ack_in_a_transaction_of_unknown_outcome_is_unjudged(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").send("a")
    c = h.process("c1")
    c.receive("a")
    c.open().ack("a").commit(type="info")                     # ack-only: nothing visible decides it
    h.drain(reads={"t1": ["a"]}, subscriptions=[])            # ... nor its subscription, not drained
    result = run_check(h, AnomalyClass.LOST_ACK)
    assert result.count == 0 and result.unjudged == 1 and "unknown outcome" in (result.note or "")


def _ack_only_unknown(*, back: tuple[str, ...], acks_type: str = "ok") -> History:
    """Two messages acked in one transaction whose commit ended `info`; `back` come again."""
    h = History()
    h.process("w0/u1").send("a").send("b")
    c = h.process("c1")
    c.receive("a").receive("b")
    c.open().ack("a").ack("b", type=acks_type).commit(type="info")
    h.phase("drain").read("t1", "a", "b")
    for value in back:
        h.drain_receive(value)
    return h.drain_complete()


def test_an_ack_only_transaction_of_unknown_outcome_is_decided_by_its_drained_subscription(
        spark: SparkSession, tmp_path: Path) -> None:
    kept = check_run(_ack_only_unknown(back=()).write(tmp_path / "kept"))
    assert kept["valid"] is True and kept["transactions"]["unknown-committed"] == 1
    given_back = check_run(_ack_only_unknown(back=("a", "b")).write(tmp_path / "back"))
    assert given_back["valid"] is True and given_back["transactions"]["unknown-aborted"] == 1


def test_an_ack_only_transaction_that_kept_one_ack_and_gave_back_another_is_an_anomaly(
        run_check: RunCheck) -> None:
    result = run_check(_ack_only_unknown(back=("a",)), AnomalyClass.STUCK_ACK)     # decided aborted: b never came back
    assert result.count == 1 and result.examples[0]["value"] == "b"


def test_an_ack_only_transaction_with_an_ack_of_unknown_outcome_stays_unjudged(run_check: RunCheck) -> None:
    result = run_check(_ack_only_unknown(back=("a",), acks_type="info"), AnomalyClass.LOST_ACK)
    assert result.count == 0 and result.unjudged == 2


@pytest.mark.parametrize("back", [(), ("a", "b")])
def test_a_large_check_decides_ack_only_transactions_as_a_small_one_and_keeps_one_copy_of_them(
        spark: SparkSession, back: tuple[str, ...]) -> None:
    # A large check once kept every transaction twice: before the redelivery decided some, and again after.
    ops = ops_from_records(spark, _ack_only_unknown(back=back).records())
    plain = prepare(ops, persist=False)
    kept = prepare(ops, persist=True)
    try:
        rows = kept.txns.collect()
        assert sorted(rows) == sorted(plain.txns.collect())
        assert [r["outcome_label"] for r in rows] == ["unknown-aborted" if back else "unknown-committed"]
        whole = [f for f in kept.persisted if set(TXN_COLUMNS) <= set(f.columns)]
        assert len(whole) == 1
    finally:
        kept.unpersist()


def test_a_visible_value_on_a_topic_not_drained_is_judged(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a", topic="elsewhere").send("b").commit()
    h.phase("drain").read("elsewhere", "a").read("t1", "b").drain_complete(topics=["t1"])
    assert run_check(h, AnomalyClass.LOST_WRITE).unjudged == 0
    assert run_check(h, AnomalyClass.PARTIAL_TXN).unjudged == 0


def test_a_ctp_input_carried_by_a_visible_output_on_a_topic_not_drained_is_judged(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").send("in")
    c = h.process("w1/c1")
    c.receive("in")
    c.open().send("out", topic="elsewhere", inputs=["in"]).ack("in").commit()
    h.phase("drain").read("t1", "in").read("elsewhere", "out").drain_complete(topics=["t1"])
    result = run_check(h, AnomalyClass.CTP_LOSS)
    assert result.count == 0 and result.unjudged == 0


# ---- rule 3: writer integrity ------------------------------------------------------------------

def _run(tmp_path: Path) -> Path:
    h = History()
    h.process("w0/u1").open().send("a").commit()
    h.process("w0/u2").open().send("b").commit()
    return h.drain(reads={"t1": ["a", "b"]}).write(tmp_path / "run")


def _rewrite(path: Path, edit: Any) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    edit(lines)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_repeated_and_a_missing_index_with_the_same_count_min_and_max_fail(spark: SparkSession,
                                                                              tmp_path: Path) -> None:
    run = _run(tmp_path)

    def repeat(lines: list[dict[str, Any]]) -> None:
        lines[4]["index"] = 3                                 # index 4 missing, 3 twice

    _rewrite(run / "history" / "w0.jsonl", repeat)
    with pytest.raises(HistoryFormatError, match=r"w0\.jsonl: line 5: index 3 appears again"):
        load_run(spark, run)
    out = check_run(run)
    assert out["valid"] == "unknown" and "w0.jsonl: line 5" in out["error"]


def test_time_going_backwards_within_a_writer_fails(spark: SparkSession, tmp_path: Path) -> None:
    run = _run(tmp_path)

    def backwards(lines: list[dict[str, Any]]) -> None:
        lines[6]["time_ns"] = lines[5]["time_ns"] - 1

    _rewrite(run / "history" / "w0.jsonl", backwards)
    with pytest.raises(HistoryFormatError, match=r"w0\.jsonl: line 7: time_ns goes backwards"):
        load_run(spark, run)


# ---- rule 4: types are not coerced -------------------------------------------------------------

@pytest.mark.parametrize(("field", "value"), [
    ("value", 5), ("topic", True), ("txn", 1.5), ("inputs", ["x", 7]), ("extra", "text"), ("key", {"k": 1}),
])
def test_a_field_of_the_wrong_json_type_fails(spark: SparkSession, tmp_path: Path, field: str,
                                              value: Any) -> None:
    run = _run(tmp_path)

    def wrong(lines: list[dict[str, Any]]) -> None:
        lines[2][field] = value

    _rewrite(run / "history" / "w0.jsonl", wrong)
    with pytest.raises(HistoryFormatError, match=rf"w0\.jsonl: line 3: .*{field}"):
        load_run(spark, run)


def test_a_number_inside_extra_named_like_a_field_is_fine(spark: SparkSession, tmp_path: Path) -> None:
    run = _run(tmp_path)

    def nested(lines: list[dict[str, Any]]) -> None:
        lines[2]["extra"] = {"value": 5, "topic": [1], "inputs": [2]}

    _rewrite(run / "history" / "w0.jsonl", nested)
    lines = sum(len(p.read_text().splitlines()) for p in (run / "history").glob("*.jsonl"))
    assert load_run(spark, run).facts.lines == lines


# ---- rule 5: a dirty read is judged by the earliest evidence -----------------------------------

def test_a_frame_delivered_before_the_commit_is_a_dirty_read(run_check: RunCheck) -> None:
    h = History()
    t = h.process("w0/u1").open().send("a")
    early = h.now_ns + 1
    t.commit()
    h.process("c1").receive("a", delivered_ns=early)         # taken from the queue after the commit
    h.drain(reads={"t1": ["a"]})
    result = run_check(h, AnomalyClass.DIRTY_READ)
    assert result.count == 1


# ---- rule 6: ties are not order ----------------------------------------------------------------

def test_final_reads_with_equal_times_are_ordered_by_index(run_check: RunCheck) -> None:
    h = History()
    p = h.process("w0/u1")
    p.open().send("a", key="k").commit()
    p.open().send("b", key="k").commit()
    h.phase("drain")
    h.read("t1", "b", "a")
    for op in h._lines[-2:]:
        object.__setattr__(op, "time_ns", h.now_ns)           # a coarse clock: both reads at one tick
    h.drain_complete()
    result = run_check(h, AnomalyClass.NONMONOTONIC)
    assert result.count == 1 and result.examples[0]["value"] == "b"


# ---- rule 7: an id is one transaction ----------------------------------------------------------

def test_one_transaction_id_opened_twice_is_txn_id_reuse(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open(txn="7:7").send("a").commit()
    h.process("w0/u2").open(txn="7:7").send("b").abort()
    h.drain(reads={"t1": ["a"]})
    result = run_check(h, AnomalyClass.TXN_ID_REUSE)
    assert result.name is AnomalyClass.TXN_ID_REUSE and result.count == 1
    example = result.examples[0]
    assert example["txn"] == "7:7" and example["opens"] == 2
    assert [o["process"] for o in example["open"]] == ["w0/u1", "w0/u2"]


def test_distinct_ids_are_no_reuse(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").open().send("a").commit()
    h.process("w0/u1").open().send("b").commit()
    h.drain(reads={"t1": ["a", "b"]})
    assert run_check(h, AnomalyClass.TXN_ID_REUSE).count == 0


# ---- rule 8: cumulative acks everywhere --------------------------------------------------------

def test_an_aborted_cumulative_ack_must_give_back_every_message_it_covered(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").send("a").send("b").send("c")
    c = h.process("c1")
    for v in ("a", "b", "c"):
        c.receive(v)
    c.open().ack("c", cumulative=True).abort()
    h.drain_receive("c")                                       # only c comes back; a and b are stuck
    h.drain(reads={"t1": ["a", "b", "c"]})
    result = run_check(h, AnomalyClass.STUCK_ACK)
    assert result.count == 2
    assert sorted(e["value"] for e in result.examples) == ["a", "b"]


def test_messages_an_aborted_cumulative_ack_covered_and_that_came_back_are_fine(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/u1").send("a").send("b").send("c")
    c = h.process("c1")
    for v in ("a", "b", "c"):
        c.receive(v)
    c.open().ack("c", cumulative=True).abort()
    for v in ("a", "b", "c"):
        h.drain_receive(v)
    h.drain(reads={"t1": ["a", "b", "c"]})
    assert run_check(h, AnomalyClass.STUCK_ACK).count == 0


# ---- rule 9: one message, one committing transaction (the ack-conflict rule) --------------------

def test_a_redelivered_message_acked_by_aborted_transactions_and_one_committed_one_is_fine(
        run_check: RunCheck) -> None:
    """Redeliveries are one message: many receives and aborted acks of it, one committed ack."""
    h = History()
    h.process("w0/u1").send("m")
    c1, c2 = h.process("c1"), h.process("c2")
    for attempt in range(3):
        consumer = c1 if attempt % 2 == 0 else c2
        consumer.receive("m", redelivery=attempt)
        consumer.open().ack("m").abort()
    c2.receive("m", redelivery=3)
    c2.open().ack("m").commit()
    h.drain(reads={"t1": ["m"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 0 and result.unjudged == 0


def test_a_transaction_decided_committed_by_its_subscription_is_held_to_one_claim(run_check: RunCheck) -> None:
    """A's commit ended info; m never came back after A's ack, so the model decides A committed.
    B acked the copy it already held and committed: two committed claims on m."""
    h = History()
    h.process("w0/u1").send("m")
    c1, c2 = h.process("c1"), h.process("c2")
    c1.receive("m")
    c2.receive("m", redelivery=1)                  # a copy both consumers hold before either acks
    c1.open().ack("m").commit(type="info")
    c2.open().ack("m").commit()
    h.drain(reads={"t1": ["m"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 1 and result.examples[0]["txns"] == ["1:1", "1:2"]


def test_a_double_ack_hidden_behind_a_cumulative_ack_is_found(run_check: RunCheck) -> None:
    """No message is acked individually twice: B's cumulative ack passes over b while A holds it."""
    h = History()
    h.process("w0/u1").send("a").send("b").send("c")
    c1, c2 = h.process("c1"), h.process("c2")
    for v in ("a", "b", "c"):
        c2.receive(v)
    c1.receive("b", redelivery=1)
    a = c1.open().ack("b")
    c2.open().ack("c", cumulative=True).commit()
    a.commit()
    h.drain(reads={"t1": ["a", "b", "c"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 1 and result.examples[0]["value"] == "b"
