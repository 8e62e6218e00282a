"""double-ack: one message acked ok on one subscription by two transactions that both committed."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.checks import AnomalyClass, prepare, run_one
from analysis.checks.context import message_name, message_position
from analysis.history_io import ops_from_records
from analysis.spark import SMALL_INPUT_BYTES, tune_for_input
from harness.history.schema import OpF, OpType
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History


def _produced(h: History, *values: str, topic: str = "t1") -> History:
    h.process("w0/p").open().sends(*values, topic=topic).commit()
    return h


def test_two_committed_transactions_acking_one_message_is_a_double_ack(run_check: RunCheck) -> None:
    h = _produced(History(), "m")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    c1.receive("m")
    c1.open().ack("m").commit()
    c2.receive("m", redelivery=1)                 # delivered again (a lost ack, too) and acked again
    c2.open().ack("m").commit()
    h.drain(reads={"t1": ["m"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 1 and result.unjudged == 0
    example = result.examples[0]
    assert example["value"] == "m" and example["msg_id"] == "100:0:-1"
    assert example["topic"] == "t1" and example["subscription"] == "s"
    assert example["txns"] == ["1:2", "1:3"]
    assert [(a["process"], a["txn"], a["f"]) for a in example["acks"]] == [("w1/c1", "1:2", "ack"),
                                                                           ("w1/c2", "1:3", "ack")]


def test_acks_of_overlapping_transactions_that_both_commit_are_a_double_ack(run_check: RunCheck) -> None:
    """The ack-conflict rule's own case: B acks what A holds pending; both commit. No redelivery
    follows either commit, so only this check sees it."""
    h = _produced(History(), "m")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    c1.receive("m")
    c2.receive("m", redelivery=1)
    a = c1.open().ack("m")
    b = c2.open().ack("m")                         # the broker should have refused this one
    a.commit()
    b.commit()
    h.drain(reads={"t1": ["m"]})
    assert run_check(h, AnomalyClass.DOUBLE_ACK).count == 1
    assert run_check(h, AnomalyClass.LOST_ACK).count == 0


def test_an_aborted_ack_then_a_committed_one_is_fine(run_check: RunCheck) -> None:
    h = _produced(History(), "m")
    c = h.process("w1/c1")
    c.receive("m")
    c.open().ack("m").abort()
    c.receive("m", redelivery=1)
    c.open().ack("m").commit()
    c.receive("m", redelivery=2)                   # a third copy dispatched before the commit
    h.drain(reads={"t1": ["m"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 0 and result.unjudged == 0


def test_one_transaction_acking_a_message_twice_and_a_plain_ack_are_no_double_ack(run_check: RunCheck) -> None:
    h = _produced(History(), "m", "n")
    c = h.process("w1/c1")
    c.receive("m")
    c.open().ack("m").ack("m").commit()            # a retried ack inside one transaction
    c.receive("n")
    c.ack("n")                                     # non-transactional
    c.open().ack("n").commit()
    h.drain(reads={"t1": ["m", "n"]})
    assert run_check(h, AnomalyClass.DOUBLE_ACK).count == 0


def test_acks_are_judged_by_message_id_not_by_value(run_check: RunCheck) -> None:
    """One value written twice (a duplicate) is two messages: each may be acked once."""
    h = History()
    p = h.process("w0/p")
    p.open().send("m", msg_id="100:0:-1").commit()
    c = h.process("w1/c1")
    c.receive("m", msg_id="100:0:-1")
    c.receive("m", msg_id="100:1:-1")
    c.open().ack("m", msg_id="100:0:-1").commit()
    c.open().ack("m", msg_id="100:1:-1").commit()
    h.drain(reads={"t1": ["m"]})
    assert run_check(h, AnomalyClass.DOUBLE_ACK).count == 0
    # ... and the same message on two subscriptions is two claims that do not conflict
    c.open().ack("m", sub="other", msg_id="100:0:-1").commit()
    assert run_check(h, AnomalyClass.DOUBLE_ACK).count == 0


def test_a_transaction_decided_committed_by_visibility_counts_as_committed(run_check: RunCheck) -> None:
    h = _produced(History(), "in")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    c1.receive("in")
    c1.open().ack("in").send("out1", topic="out", inputs=["in"]).commit(type="info")   # visible: committed
    c2.receive("in", redelivery=1)
    c2.open().ack("in").send("out2", topic="out", inputs=["in"]).commit()
    h.drain(reads={"t1": ["in"], "out": ["out1", "out2"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 1 and result.examples[0]["txns"] == ["1:2", "1:3"]


def test_a_second_claim_of_unknown_outcome_is_unjudged(run_check: RunCheck) -> None:
    h = _produced(History(), "m")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    c1.receive("m")
    c1.open().ack("m").commit()
    c2.receive("m", redelivery=1)
    c2.open().ack("m").commit(type="info")          # nothing decides it: the subscription is not drained
    h.drain(reads={"t1": ["m"]}, subscriptions=[])
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 0 and result.unjudged == 1


def test_a_cumulative_ack_claims_the_messages_at_or_before_it(run_check: RunCheck) -> None:
    h = _produced(History(), "m0", "m1", "m2")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    for value in ("m0", "m1", "m2"):
        c1.receive(value)
    a = c1.open().ack("m2", cumulative=True)       # claims m0, m1, m2
    c2.receive("m1", redelivery=1)
    c2.open().ack("m1").commit()                   # while A holds m1: a double-ack of m1
    a.commit()
    h.drain(reads={"t1": ["m0", "m1", "m2"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 1
    example = result.examples[0]
    assert example["msg_id"] == "100:1:-1" and example["txns"] == ["1:2", "1:3"]
    assert {a["msg_id"] for a in example["acks"]} == {"100:1:-1", "100:2:-1"}   # the cumulative ack names its own


def test_an_individual_ack_after_a_committed_cumulative_ack_is_a_double_ack(run_check: RunCheck) -> None:
    h = _produced(History(), "m0", "m1")
    c = h.process("w1/c1")
    c.receive("m0")
    c.receive("m1")
    c.open().ack("m1", cumulative=True).commit()
    c.open().ack("m0").commit()                    # m0 was already acknowledged for good
    h.drain(reads={"t1": ["m0", "m1"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 1 and result.examples[0]["msg_id"] == "100:0:-1"


def test_successive_cumulative_acks_claim_only_what_is_new(run_check: RunCheck) -> None:
    """Each cumulative ack made after the one before committed: nothing is claimed twice, also
    when an individual ack settled a message before a later cumulative ack passes over it."""
    h = _produced(History(), "m0", "m1", "m2", "m3", "m4")
    c = h.process("w1/c1")
    for value in ("m0", "m1", "m2", "m3", "m4"):
        c.receive(value)
    c.open().ack("m1", cumulative=True).commit()
    c.open().ack("m3").commit()
    c.open().ack("m4", cumulative=True).commit()
    h.drain(reads={"t1": ["m0", "m1", "m2", "m3", "m4"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 0 and result.unjudged == 0


def test_a_cumulative_ack_naming_a_settled_message_claims_it_again(run_check: RunCheck) -> None:
    """A second transaction acks m1 cumulatively after the first committed its cumulative ack over
    m0 and m1: it consumed m1 again (a broker must refuse it, as Pulsar does at or before the
    mark-delete position; within a batch it does not); m0, only passed over, is not claimed."""
    h = _produced(History(), "m0", "m1")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    c1.receive("m0")
    c1.receive("m1")
    c1.open().ack("m1", cumulative=True).commit()
    c2.receive("m1", redelivery=1)
    c2.open().ack("m1", cumulative=True).commit()
    h.drain(reads={"t1": ["m0", "m1"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 1 and result.examples[0]["value"] == "m1"


def test_overlapping_cumulative_acks_claim_their_common_messages_twice(run_check: RunCheck) -> None:
    h = _produced(History(), "m0", "m1", "m2", "m3")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    for value in ("m0", "m1", "m2", "m3"):
        c1.receive(value)
    c1.open().ack("m0", cumulative=True).commit()  # m0 settled before either
    a = c1.open().ack("m2", cumulative=True)
    b = c2.open().ack("m3", cumulative=True)       # made while A was pending
    a.commit()
    b.commit()
    h.drain(reads={"t1": ["m0", "m1", "m2", "m3"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 2
    assert sorted(e["msg_id"] for e in result.examples) == ["100:1:-1", "100:2:-1"]


def test_a_cumulative_ack_made_while_the_settling_commit_was_in_flight_is_no_double_ack(
        run_check: RunCheck) -> None:
    """B's cumulative ack comes between A's commit invocation and its answer: the broker may have
    applied A's commit first, and then B's ack claimed nothing of m0 and m1 (Failover consumers
    that swapped places do this). Unjudged, not a double-ack; after A's answer it would be one."""
    h = _produced(History(), "m0", "m1", "m2", "m3")
    c1, c2 = h.process("w1/c1"), h.process("w1/c2")
    for value in ("m0", "m1", "m2", "m3"):
        c1.receive(value)
    a = c1.open().ack("m1", cumulative=True)
    a.commit(type=None)                            # invoked ...
    b = c2.open().ack("m3", cumulative=True)       # ... B's ack meanwhile
    h.emit("w1", "w1/c1", OpType.OK, OpF.TXN_COMMIT, txn=a.id)
    b.commit()
    h.drain(reads={"t1": ["m0", "m1", "m2", "m3"]})
    result = run_check(h, AnomalyClass.DOUBLE_ACK)
    assert result.count == 0 and result.unjudged == 2


def test_a_cumulative_ack_covers_only_its_own_topic_and_segment(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/p").open().send("a", topic="t1", segment="t1-s0").send("b", topic="t1", segment="t1-s1").commit()
    c = h.process("w1/c1")
    c.receive("a")
    c.receive("b")
    c.open().ack("a").commit()
    c.open().ack("b", cumulative=True).commit()    # another segment's ledger: does not cover "a"
    h.drain(reads={"t1": ["a", "b"]})
    assert run_check(h, AnomalyClass.DOUBLE_ACK).count == 0


def test_aborted_cumulative_acks_claim_nothing(run_check: RunCheck) -> None:
    h = _produced(History(), "m0", "m1")
    c = h.process("w1/c1")
    c.receive("m0")
    c.receive("m1")
    c.open().ack("m1", cumulative=True).abort()
    c.receive("m0", redelivery=1)
    c.receive("m1", redelivery=1)
    c.open().ack("m0").commit()
    c.open().ack("m1", cumulative=True).commit()
    h.drain(reads={"t1": ["m0", "m1"]})
    assert run_check(h, AnomalyClass.DOUBLE_ACK).count == 0


@pytest.mark.parametrize("large", [False, True])
def test_two_committed_claims_of_a_message_of_no_known_topic_are_a_double_ack(spark: SparkSession,
                                                                              large: bool) -> None:
    """The claims are grouped with a null topic; on a large history the count that first finds the
    messages claimed twice matches that null as the grouping does (a plain join would drop it)."""
    if large:
        tune_for_input(spark, SMALL_INPUT_BYTES + 1)
    try:
        _assert_ghost_double_ack(spark)
    finally:
        tune_for_input(spark, 0)        # the tests' session is in small-input mode (conftest)


def _assert_ghost_double_ack(spark: SparkSession) -> None:
    h = History()
    for name in ("w1/c1", "w1/c2"):
        h.process(name).open().ack("ghost", msg_id="100:0:-1").commit()
    records = h.records()
    for record in records:
        if record["f"] == "ack":
            record["topic"] = None
    ctx = prepare(ops_from_records(spark, records), persist=False)
    result = run_one(AnomalyClass.DOUBLE_ACK, ctx)
    assert result.count == 1 and result.examples[0]["txns"] == ["1:1", "1:2"]
    assert "topic" not in result.examples[0]


@pytest.mark.parametrize("msg_id", ["1000:0:-1", "1000:0", "0:0:0", "-1:-1:-1", "007:1:2", "-0:1:2", "1:2:3:4", "a:b",
                                    "", "1:2:", "123456789012345678:1:1", "1234567890123456789:1:1", "1:٣:2", None])
def test_a_message_is_named_as_its_position_in_every_form(spark: SparkSession, msg_id: str | None) -> None:
    """The short way (an id printed as Pulsar prints it names itself) gives the position's own text."""
    pos = message_position(F.col("msg_id"))
    long_way = F.when(pos.isNotNull(), F.concat_ws(":", pos["ledger"], pos["entry"], pos["batch"]))
    (row,) = spark.createDataFrame([(msg_id,)], "msg_id string").select(
        message_name(F.col("msg_id")).alias("short"), long_way.alias("long")).collect()
    assert row["short"] == row["long"]
