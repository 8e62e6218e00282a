"""consume-transform-produce, ack-only, feeders and the verifier over the fake client."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from harness.client.errors import ConnectionLostError, Op, TopicTerminatedError
from harness.config import ConfigError
from harness.wire import ServerError
from tests.unit.workloads.conftest import Harness
from tests.unit.workloads.history_checks import (
    assert_unique_values,
    assert_well_formed,
    transactions,
)
from workloads.ackonly import AckOnly
from workloads.atomic import AtomicProduce
from workloads.ctp import ConsumeTransformProduce
from workloads.ctp_cumulative import CumulativeConsumeTransformProduce
from workloads.feeder import Feeder
from workloads.shared import FeedCredit
from workloads.topology import SubscriptionRole, SubType, TopicRole, helper_users_per_process
from workloads.verifier import Verifier

CTP = """
workload:
  kind: consume-transform-produce
  topics: 1
  topics_per_txn: 1
  acks_per_txn: 3
  messages_per_txn: 2
  abort_ratio: {abort}
  verifiers: 0
"""

ACK = """
workload:
  kind: ack-only
  topics: 1
  topics_per_txn: 1
  acks_per_txn: 2
  consumers_per_subscription: 2
  abort_ratio: 0.0
  conflict_ratio: {conflict}
  verifiers: 0
"""

CUMULATIVE = """
workload:
  kind: consume-transform-produce
  topics: 2
  topics_per_txn: 1
  acks_per_txn: 3
  messages_per_txn: 2
  abort_ratio: 0.0
  ctp_cumulative_users: 1
  verifiers: 0
"""


def feed(feeder: Feeder, times: int) -> None:
    feeder.idle_wait_s = 0.0         # no real waiting for demand in a unit test
    for _ in range(times):
        feeder.step()


def feeder_beside_an_ack_user(h: Harness) -> tuple[Feeder, list[float], AckOnly]:
    """A feeder whose pauses are recorded (not waited), and an ack-only user that asked for inputs
    (demand: 2 transactions x 2 acks)."""
    feeder = Feeder(h.ctx)
    pauses: list[float] = []
    feeder.pause = pauses.append
    user = AckOnly(h.ctx)
    user.step()
    return feeder, pauses, user


def feeds_of(h: Harness, feeder: Feeder) -> list[list[dict[str, Any]]]:
    """The feeder's own transactions, each its operations in order."""
    return [t for t in transactions(h.ops()).values() if t[0]["process"] == feeder.process]


def test_ctp_outputs_carry_each_input_once_and_ack_in_the_same_transaction(
        make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(CTP.format(abort=0.0))
    worker = ConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    worker.step()                                   # subscribes, finds nothing yet
    feed(feeder, 6)                                 # demand: 2 transactions x 3 inputs
    assert h.ctx.feed.take(0) is None               # demand met: nothing more to send
    worker.step()
    worker.step()
    ops = h.ops()
    assert_well_formed(ops)
    assert_unique_values(ops)
    fed = {op["value"] for op in ops if op["f"] == "send" and op["txn"] is None and op["type"] == "ok"}
    assert len(fed) == 6
    for done in transactions(ops).values():
        assert [op["f"] for op in done] == ["txn-open", "send", "send", "ack", "ack", "ack", "txn-commit"]
        carried = [v for op in done if op["f"] == "send" for v in op["inputs"]]
        acked = [op["value"] for op in done if op["f"] == "ack"]
        assert sorted(carried) == sorted(acked) and len(set(carried)) == 3
        assert all(op["subscription"] == "ctp" for op in done if op["f"] == "ack")
        assert {op["topic"] for op in done if op["f"] == "send"} == set(h.topology.topics_for(TopicRole.CTP_OUTPUT))
    receives = [op for op in ops if op["f"] == "receive"]
    assert {op["value"] for op in receives} == fed
    assert all(op["extra"]["redelivery"] == 0 and op["subscription"] == "ctp" for op in receives)
    assert all("delivered_ns" not in op["extra"] for op in receives)   # the fake cannot tell


def test_ctp_aborted_inputs_are_delivered_again_and_committed_later(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(CTP.format(abort=0.0))
    worker = ConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    worker.step()
    feed(feeder, 3)
    h.client.fail_next("ack-after", ConnectionLostError("ack lost"))   # first transaction cannot commit
    worker.step()
    worker.step()
    ops = h.ops()
    assert_well_formed(ops)
    first, second = transactions(ops).values()
    assert [(op["f"], op["type"]) for op in first][-2:] == [("ack", "info"), ("txn-abort", "ok")]
    assert second[-1]["f"] == "txn-commit" and second[-1]["type"] == "ok"
    redelivered = [op for op in ops if op["f"] == "receive" and op["extra"]["redelivery"] == 1]
    assert len(redelivered) == 3                    # all three inputs came back once


def test_ack_only_conflicting_ack_is_a_definite_fail_and_the_transaction_aborts(
        make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=1.0))
    a, b = AckOnly(h.ctx), AckOnly(h.ctx)
    assert a.topic == b.topic and a.group is b.group        # two consumers of one subscription
    feeder = Feeder(h.ctx)
    a.step()
    b.step()
    feed(feeder, 8)
    # a holds two messages in its (still open) transaction when b steals one of them
    assert a.consumer is not None
    a_msgs = a.receive_batch(a.consumer, "acks", 2)
    a.group.hold(a.process, a_msgs)
    txn = a.open_txn()
    assert txn is not None
    for received in a_msgs:
        assert a.ack(a.consumer, received, "acks", txn=txn).ok
    b.step()                                        # acks its own two and one of a's
    ops = h.ops_of(process=b.process)
    b_txn = next(iter(transactions(ops).values()))
    types = [(op["f"], op["type"]) for op in b_txn]
    assert ("ack", "fail") in types
    conflict = next(op for op in b_txn if op["type"] == "fail" and op["f"] == "ack")
    assert "TransactionConflict" in conflict["error"]
    assert (b_txn[-1]["f"], b_txn[-1]["type"]) == ("txn-abort", "ok")
    # the load's counters: a failed ack, counted as an expected ack conflict, not as an error
    assert h.ctx.counters.failed["ack"] == 1 and h.ctx.counters.conflicts == 1 and h.ctx.counters.errors == 0
    a.end_txn(txn, abort=False)
    assert_well_formed(h.ops())


def test_ack_only_without_conflicts_commits_its_acks(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=0.0))
    user = AckOnly(h.ctx)
    feeder = Feeder(h.ctx)
    user.step()
    feed(feeder, 4)
    user.step()
    user.step()
    done = list(transactions(h.ops()).values())
    assert [[op["f"] for op in t] for t in done] == [["txn-open", "ack", "ack", "txn-commit"]] * 2
    sub = h.client.subs[(user.topic, "acks")]
    assert len(sub.acked) == 4 and not sub.pending


def test_users_spread_over_ack_topics_by_consumers_per_subscription(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=0.0).replace("topics: 1\n", "topics: 2\n"))
    users = [AckOnly(h.ctx) for _ in range(5)]
    topics = h.topology.topics_for(TopicRole.ACK)
    assert [topics.index(u.topic) for u in users] == [0, 0, 1, 1, 0]


def test_feeders_follow_demand_and_starvation_resets_it(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=0.0))
    feeder = Feeder(h.ctx)
    feed(feeder, 1)                                 # nobody consumes yet: nothing sent
    assert not h.client.logs
    user = AckOnly(h.ctx)
    user.step()                                     # subscribes; topic empty -> starved
    h.client.fail_next("send-after", ConnectionLostError("maybe sent"))
    feed(feeder, 10)
    topic = user.topic
    assert len(h.client.logs[topic]) == 4           # demand = 1 consumer x 2 txns x 2 acks
    assert h.ctx.feed.outstanding(topic) == 4
    user.step()
    user.step()
    assert h.ctx.feed.outstanding(topic) == 0
    user.step()                                     # empty again
    feed(feeder, 10)
    assert len(h.client.logs[topic]) == 8


def test_verifier_records_receives_and_acks_cumulatively(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness("""
workload:
  kind: atomic-produce
  topics: 2
  topics_per_txn: 2
  messages_per_txn: 2
  abort_ratio: 0.0
""")
    producer = AtomicProduce(h.ctx)
    verifier = Verifier(h.ctx)
    verifier.step()                                 # subscribes to both verify subscriptions
    assert len(verifier.consumers) == 2
    for _ in range(3):
        producer.step()
    h.clock.advance(1.0)
    verifier.step()
    ops = h.ops_of(process=verifier.process)
    receives = [op for op in ops if op["f"] == "receive"]
    assert Counter(op["subscription"] for op in receives) == {"verify": 6}
    assert {op["value"] for op in receives} == {op["value"] for op in h.ops_of(f="send") if op["type"] == "ok"}
    acks = [op for op in ops if op["f"] == "ack" and op["type"] == "ok"]
    assert len(acks) == 2 and all(op["extra"] == {"cumulative": True} and op["txn"] is None for op in acks)
    for topic in h.topology.topics_for(TopicRole.ATOMIC):
        assert len(h.client.subs[(topic, "verify")].acked) == 3
    verifier.close()


def test_setup_failure_is_retried_with_backoff_and_not_recorded(make_harness: Callable[[str], Harness]) -> None:
    from harness.client.errors import SetupError

    h = make_harness(CTP.format(abort=0.0))
    h.client.fail_next("subscribe", SetupError("no broker"), times=2)
    worker = ConsumeTransformProduce(h.ctx)
    worker.step()
    worker.step()
    assert worker.consumer is None and h.stop.waits == [0.2, 0.4]
    worker.step()
    assert worker.consumer is not None
    assert h.ops() == []
    assert [r[0] for r in h.requests] == ["setup", "setup"]


@pytest.mark.parametrize(("settings", "held_s", "not_held_s"), [
    ("  ack_hold_s: 4\n", 4, None),
    # long transactions (every one here): the long hold replaces ack_hold_s
    ("  ack_hold_s: 1\n  long_txn_ratio: 1\n  long_hold_s: 9\n", 9, 1)])
def test_ctp_ack_hold_keeps_the_acks_pending_before_the_commit(make_harness: Callable[[str], Harness],
                                                                settings: str, held_s: int,
                                                                not_held_s: int | None) -> None:
    h = make_harness(CTP.format(abort=0.0) + settings)
    worker = ConsumeTransformProduce(h.ctx)
    worker.step()
    feed(Feeder(h.ctx), 3)
    worker.step()
    assert held_s in h.stop.waits and not_held_s not in h.stop.waits   # a stop-aware wait, not a sleep
    done = next(iter(transactions(h.ops()).values()))
    assert [op["f"] for op in done] == ["txn-open", "send", "send", "ack", "ack", "ack", "txn-commit"]
    last_ack = max(op["time_ns"] for op in done if op["f"] == "ack")
    assert done[-1]["time_ns"] - last_ack >= held_s * 1_000_000_000


def test_ack_only_ack_hold_and_a_stop_during_it_aborts(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=0.0) + "  ack_hold_s: 6\n")
    plain_wait = h.stop.wait

    def stop_while_held(timeout: float | None = None) -> bool:
        if timeout == 6:
            h.stop.set()                            # the load stops while the acks are held
        return plain_wait(timeout)

    h.stop.wait = stop_while_held  # type: ignore[method-assign]
    user = AckOnly(h.ctx)
    user.step()
    feed(Feeder(h.ctx), 2)
    user.step()
    done = list(transactions(h.ops()).values())
    assert [[op["f"] for op in t] for t in done] == [["txn-open", "ack", "ack", "txn-abort"]]


def test_an_ack_hold_as_long_as_the_transaction_timeout_is_refused(make_harness: Callable[[str], Harness]) -> None:
    with pytest.raises(ConfigError, match=r"ack_hold_s.*txn_timeout_s"):
        make_harness(ACK.format(conflict=0.0) + "  ack_hold_s: 30\n  txn_timeout_s: 30\n")


TERMINATED = TopicTerminatedError(Op.SEND, ServerError.TopicTerminatedError, "terminated")


def test_a_feeder_backs_off_a_topic_that_refuses_its_sends(make_harness: Callable[[str], Harness]) -> None:
    """A terminated input topic refused the feeders' sends at once and they retried it in a
    tight loop; now each definite failure pauses the feeder, doubling to 5 s, reset by an ok."""
    h = make_harness(ACK.format(conflict=0.0))
    feeder = Feeder(h.ctx)
    pauses: list[float] = []
    feeder.pause = pauses.append
    AckOnly(h.ctx).step()                           # demand on its topic
    h.client.fail_next("send", TERMINATED, times=8)
    feed(feeder, 8)
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    feed(feeder, 1)                                 # sent ok: the pause starts over
    h.client.fail_next("send", TERMINATED)
    feed(feeder, 1)
    assert pauses[-1] == 0.1 and len(pauses) == 9
    sends = h.ops_of(f="send")
    assert sum(op["type"] == "fail" for op in sends) == 9


def test_an_indeterminate_feed_failure_is_not_paused(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=0.0))
    feeder = Feeder(h.ctx)
    pauses: list[float] = []
    feeder.pause = pauses.append
    AckOnly(h.ctx).step()
    h.client.fail_next("send-after", ConnectionLostError("maybe sent"))
    feed(feeder, 1)
    assert pauses == []


def test_a_feeder_sends_its_batch_at_once_through_a_batching_producer(
        make_harness: Callable[[str], Harness]) -> None:
    """feed_batch: the inputs go out as batches (what Java's default producer does), so the consumers'
    transactions ack single messages of a batch; the outputs' producers are not batched."""
    h = make_harness(CTP.format(abort=0.0) + "  feed_batch: 4\n")
    worker = ConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    worker.step()                                   # demand: 2 transactions x 3 inputs
    feed(feeder, 1)
    (input_topic,) = h.topology.topics_for(TopicRole.CTP_INPUT)
    assert len(h.client.logs[input_topic]) == 4     # one step, four sends together
    feed(feeder, 1)
    assert len(h.client.logs[input_topic]) == 6     # only what the demand still lacked
    assert h.ctx.feed.take(0) is None
    batching = h.client.batching[input_topic]
    assert batching.max_messages == 4 and batching.max_delay_s > 0
    worker.step()
    worker.step()
    assert all(h.client.batching[t] is None for t in h.topology.topics_for(TopicRole.CTP_OUTPUT))
    ops = h.ops()
    assert_well_formed(ops)
    assert_unique_values(ops)
    fed = [op for op in ops if op["f"] == "send" and op["txn"] is None]
    assert sum(op["type"] == "ok" for op in fed) == 6
    assert [done[-1]["f"] for done in transactions(ops).values()] == ["txn-commit", "txn-commit"]


def test_a_feeder_batch_gives_back_what_certainly_failed(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=0.0) + "  feed_batch: 3\n")
    feeder, pauses, user = feeder_beside_an_ack_user(h)
    h.client.fail_next("send", TERMINATED, times=3)
    feed(feeder, 1)
    assert pauses == [0.1]                          # all three refused: the topic is paused
    assert h.ctx.feed.outstanding(user.topic) == 0
    h.client.fail_next("send", TERMINATED)
    feed(feeder, 1)
    assert pauses == [0.1]                          # two of three went: no pause
    assert h.ctx.feed.outstanding(user.topic) == 2


def test_a_feeder_in_transactions_commits_its_batch_and_the_consumers_get_only_committed_inputs(
        make_harness: Callable[[str], Harness]) -> None:
    """feed_txn_ratio 1: each feed (a whole batch) is a transaction of the feeder's own; the inputs'
    subscriptions then dispatch transactional data, and an aborted feed gives its demand back."""
    h = make_harness(CTP.format(abort=0.0) + "  feed_batch: 3\n  feed_txn_ratio: 1.0\n")
    worker = ConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    worker.step()                                   # demand: 2 transactions x 3 inputs
    feed(feeder, 2)
    (input_topic,) = h.topology.topics_for(TopicRole.CTP_INPUT)
    assert len(h.client.logs[input_topic]) == 6
    assert h.ctx.feed.take(0) is None               # committed feeds keep their demand
    feeds = feeds_of(h, feeder)
    assert [[op["f"] for op in t] for t in feeds] == [["txn-open", "send", "send", "send", "txn-commit"]] * 2
    fed = {op["value"] for t in feeds for op in t if op["f"] == "send"}
    worker.step()
    worker.step()
    ops = h.ops()
    assert_well_formed(ops)
    assert_unique_values(ops)
    assert {op["value"] for op in ops if op["f"] == "receive"} == fed
    assert [t[-1]["f"] for t in transactions(ops).values()] == ["txn-commit"] * 4


def test_an_aborted_feed_is_never_delivered_and_gives_its_demand_back(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(CTP.format(abort=0.0).replace("abort_ratio: 0.0", "abort_ratio: 1.0")
                     + "  feed_batch: 3\n  feed_txn_ratio: 1.0\n")
    worker = ConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    worker.step()
    feed(feeder, 1)
    (input_topic,) = h.topology.topics_for(TopicRole.CTP_INPUT)
    assert len(h.client.logs[input_topic]) == 3
    assert h.ctx.feed.outstanding(input_topic) == 0    # none of the three will arrive
    assert [t[-1]["f"] for t in feeds_of(h, feeder)] == ["txn-abort"]
    worker.step()
    assert not [op for op in h.ops() if op["f"] == "receive"]


def test_a_feed_whose_send_failed_aborts_and_pauses_the_topic(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ACK.format(conflict=0.0) + "  feed_batch: 2\n  feed_txn_ratio: 1.0\n")
    feeder, pauses, user = feeder_beside_an_ack_user(h)
    h.client.fail_next("send", TERMINATED)
    feed(feeder, 1)
    (feed_txn,) = feeds_of(h, feeder)
    assert [(op["f"], op["type"]) for op in feed_txn][-1] == ("txn-abort", "ok")
    assert pauses == [0.1]
    assert h.ctx.feed.outstanding(user.topic) == 0


def test_a_terminated_input_is_fed_without_transactions(make_harness: Callable[[str], Harness]) -> None:
    """On v4 a transaction that registered a terminated topic can never end (its abort marker is
    refused), so after the first refusal the feeder opens no more transactions for that topic."""
    h = make_harness(ACK.format(conflict=0.0) + "  feed_txn_ratio: 1.0\n")
    feeder = Feeder(h.ctx)
    feeder.pause = lambda _s: None
    user = AckOnly(h.ctx)
    user.step()
    h.client.fail_next("send", TERMINATED, times=2)
    feed(feeder, 2)
    sends = [op for op in h.ops() if op["f"] == "send" and op["type"] != "invoke"]
    assert [(op["txn"] is not None, op["type"]) for op in sends] == [(True, "fail"), (False, "fail")]
    assert len(transactions(h.ops())) == 1


def test_feeds_without_transactions_draw_nothing_more(make_harness: Callable[[str], Harness]) -> None:
    """A run without feed_txn_ratio draws what it drew before the option existed (its seed replays)."""
    plain = make_harness(ACK.format(conflict=0.0))
    feeder = Feeder(plain.ctx)
    user = AckOnly(plain.ctx)
    user.step()
    state = feeder.rng.getstate()
    feed(feeder, 1)
    probe = Feeder(plain.ctx)
    probe.rng.setstate(state)
    probe.rng.choice([user.topic])                  # the topic (one candidate), then the key: nothing else
    probe.pick_key()
    assert feeder.rng.getstate() == probe.rng.getstate()


def test_take_more_reserves_only_what_the_demand_lacks() -> None:
    credit = FeedCredit(per_consumer=3)
    credit.add_consumer("t")
    assert credit.take(0) == "t"
    assert credit.take_more("t", 5) == 2
    assert credit.take_more("t", 5) == 0
    assert credit.take_more("other", 5) == 0        # no consumer, no demand
    assert credit.outstanding("t") == 3


def test_cumulative_users_take_the_last_input_topic_on_a_failover_subscription(
        make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(CUMULATIVE)
    first, last = h.topology.topics_for(TopicRole.CTP_INPUT)
    assert h.topology.subscription_on(first, SubscriptionRole.CTP).sub_type is SubType.SHARED
    assert h.topology.subscription_on(last, SubscriptionRole.CTP).sub_type is SubType.FAILOVER
    assert h.topology.ctp_inputs(cumulative=True) == [last]
    assert helper_users_per_process(h.config).ctp_cumulative == 1
    assert ConsumeTransformProduce(h.ctx).input_topic == first
    assert ConsumeTransformProduce(h.ctx).input_topic == first     # Shared users never take the Failover one
    assert CumulativeConsumeTransformProduce(h.ctx).input_topic == last


def test_cumulative_transaction_acks_its_last_input_cumulatively(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(CUMULATIVE)
    worker = CumulativeConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    worker.step()
    feed(feeder, 3)
    worker.step()
    ops = h.ops()
    assert_well_formed(ops)
    (done,) = transactions(ops).values()
    assert [op["f"] for op in done] == ["txn-open", "send", "send", "ack", "txn-commit"]
    received = [op["value"] for op in ops if op["f"] == "receive"]
    ack = done[3]
    assert ack["extra"] == {"cumulative": True} and ack["value"] == received[-1]
    assert sorted(v for op in done if op["f"] == "send" for v in op["inputs"]) == sorted(received)
    assert done[-1]["type"] == "ok" and h.client.acks[-1][3] is True


def test_cumulative_abort_asks_for_everything_again(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(CUMULATIVE)
    worker = CumulativeConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    worker.step()
    feed(feeder, 3)
    h.client.fail_next("commit", ConnectionLostError("commit lost"))   # committed, the client does not know
    worker.step()
    assert worker.consumer is not None and worker.consumer.redeliveries == 1   # type: ignore[attr-defined]
    h2 = make_harness(CUMULATIVE)
    worker2 = CumulativeConsumeTransformProduce(h2.ctx)
    feeder2 = Feeder(h2.ctx)
    worker2.step()
    feed(feeder2, 3)
    h2.client.fail_next("ack-after", ConnectionLostError("ack lost"))   # the cumulative ack's answer is lost
    worker2.step()
    worker2.step()
    ops = h2.ops()
    assert_well_formed(ops)
    first, second = transactions(ops).values()
    assert [(op["f"], op["type"]) for op in first][-2:] == [("ack", "info"), ("txn-abort", "ok")]
    assert second[-1]["f"] == "txn-commit" and second[-1]["type"] == "ok"
    redelivered = [op for op in ops if op["f"] == "receive" and op["extra"]["redelivery"] == 1]
    assert len(redelivered) == 3


@pytest.mark.parametrize(("change", "complaint"), [
    ("topics: 1", "set topics to 2 or more"),
    ("kind: atomic-produce", "add consume-transform-produce"),
])
def test_cumulative_users_need_their_topics(make_harness: Callable[[str], Harness], change: str,
                                           complaint: str) -> None:
    key = change.split(":")[0]
    text = "\n".join(f"  {change}" if line.strip().startswith(key + ":") else line
                     for line in CUMULATIVE.splitlines())
    with pytest.raises(ConfigError, match=complaint):
        make_harness(text)
