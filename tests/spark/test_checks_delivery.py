"""undelivered: every committed, visible value published after a durable subscription's
start must be delivered to it, when the drain emptied that subscription."""

from __future__ import annotations

from analysis.checks import AnomalyClass, CheckStatus
from harness.history.schema import PHASE_SUBSCRIPTION_START, OpF, OpType
from tests.spark.conftest import RunCheck
from tests.spark.dsl import History


def _start(h: History, topic: str = "t1", sub: str = "s") -> History:
    h.emit("run", "run", OpType.OK, OpF.PHASE, topic=topic, subscription=sub,
           extra={"name": PHASE_SUBSCRIPTION_START, "initial_position": "earliest"})
    h.note_subscription(topic, sub)
    return h


def test_a_committed_value_never_delivered_to_a_drained_subscription(run_check: RunCheck) -> None:
    h = _start(History())
    h.process("w0/p").open().sends("a", "b").commit()
    h.process("w1/c").receive("a")
    h.drain(reads={"t1": ["a", "b"]})
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.name is AnomalyClass.UNDELIVERED and result.status is CheckStatus.RAN
    assert result.count == 1
    example = result.examples[0]
    assert example["value"] == "b" and example["topic"] == "t1" and example["subscription"] == "s"
    assert example["send"]["f"] == "send" and example["send"]["process"] == "w0/p"


def test_delivered_by_the_load_or_the_drain_or_acked_is_fine(run_check: RunCheck) -> None:
    h = _start(History())
    h.process("w0/p").open().sends("a", "b", "c").commit()
    h.process("w1/c").receive("a")
    h.process("w1/v").ack("c", cumulative=True)     # its consumer held it
    h.drain(reads={"t1": ["a", "b", "c"]})
    h.drain_receive("b")
    assert run_check(h, AnomalyClass.UNDELIVERED).count == 0


def test_each_subscription_is_judged_on_its_own(run_check: RunCheck) -> None:
    h = _start(_start(History(), sub="s"), sub="verify")
    h.process("w0/p").open().sends("a").commit()
    h.process("w1/c").receive("a", sub="s")
    h.drain(reads={"t1": ["a"]})
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.count == 1 and result.examples[0]["subscription"] == "verify"


def test_aborted_and_invisible_values_are_not_owed(run_check: RunCheck) -> None:
    """An aborted value must not be delivered; a committed value missing from the reads is a
    lost-write, not counted twice."""
    h = _start(History())
    h.process("w0/p").open().sends("x").abort()
    h.process("w0/p").open().sends("lost").commit()
    h.drain(reads={"t1": []}, topics=["t1"])
    assert run_check(h, AnomalyClass.UNDELIVERED).count == 0


def test_values_sent_before_the_subscription_started_are_not_owed(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/p").open().sends("early").commit()
    _start(h)
    h.process("w0/p").open().sends("late").commit()
    h.drain(reads={"t1": ["early", "late"]})
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.count == 1 and result.examples[0]["value"] == "late"


def test_a_subscription_the_drain_did_not_empty_is_unjudged(run_check: RunCheck) -> None:
    h = _start(History())
    h.process("w0/p").open().sends("a").commit()
    h.drain(reads={"t1": ["a"]}, subscriptions=[])
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.count == 0 and result.unjudged == 1 and "did not consume" in (result.note or "")


def test_v5_children_of_a_split_owe_what_follows_the_parent(run_check: RunCheck) -> None:
    """The parent segment delivered its values; the child segment (after a split) did not
    deliver the one that followed: undelivered on the logical topic."""
    h = _start(History(path="v5"), topic="topic://t/ns/x")
    p = h.process("w0/p")
    p.open().send("in-parent", topic="topic://t/ns/x", segment="seg-0").commit()
    p.open().send("in-child", topic="topic://t/ns/x", segment="seg-1").commit()
    h.process("w1/c").receive("in-parent")
    h.drain(reads={"topic://t/ns/x": ["in-parent", "in-child"]})
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.count == 1 and result.examples[0]["value"] == "in-child"


def test_partition_names_match_their_logical_topic(run_check: RunCheck) -> None:
    h = _start(History(), topic="persistent://t/ns/p")
    h.process("w0/p").open().send("a", topic="persistent://t/ns/p-partition-1").commit()
    h.drain(reads={"persistent://t/ns/p-partition-1": ["a"]}, topics=["persistent://t/ns/p"],
            subscriptions=[("persistent://t/ns/p", "s")])
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.count == 1 and result.examples[0]["topic"] == "persistent://t/ns/p"


def test_a_history_without_subscription_starts_is_clean(run_check: RunCheck) -> None:
    h = History()
    h.process("w0/p").open().sends("a").commit()
    h.drain(reads={"t1": ["a"]}, subscriptions=[("t1", "s")])
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.status is CheckStatus.RAN and result.count == 0 and result.unjudged == 0


def test_without_a_drain_it_is_skipped(run_check: RunCheck) -> None:
    h = _start(History())
    h.process("w0/p").open().sends("a").commit()
    result = run_check(h, AnomalyClass.UNDELIVERED)
    assert result.status is CheckStatus.SKIPPED
