"""atomic-produce over the fake client: the history each transaction leaves."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from harness.client.errors import (
    ConnectionLostError,
    NotReadyError,
    Op,
    OperationTimeoutError,
    TopicTerminatedError,
)
from harness.config import ConfigError
from harness.wire import ServerError
from tests.unit.workloads.conftest import Harness, scenario
from tests.unit.workloads.history_checks import (
    assert_unique_values,
    assert_well_formed,
    transactions,
)
from workloads.atomic import AtomicProduce
from workloads.payload import decode

BASE = """
workload:
  kind: atomic-produce
  topics: 4
  topics_per_txn: 2
  messages_per_txn: 4
  message_size: 300
  keys: 3
  abort_ratio: {abort}
"""


def test_each_transaction_opens_sends_across_topics_and_commits(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    user = AtomicProduce(h.ctx)
    for _ in range(5):
        user.step()
    ops = h.ops()
    assert_well_formed(ops)
    assert_unique_values(ops)
    assert {op["process"] for op in ops} == {"w0/u0"}
    txns = transactions(ops)
    assert len(txns) == 5
    for txn_id, done in txns.items():
        assert [op["f"] for op in done] == ["txn-open", "send", "send", "send", "send", "txn-commit"]
        assert all(op["type"] == "ok" for op in done)
        sends = [op for op in done if op["f"] == "send"]
        assert len({op["topic"] for op in sends}) == 2      # topics_per_txn
        assert all(op["key"] in ("k0", "k1", "k2") for op in sends)
        assert all(op["msg_id"] for op in sends)
        assert txn_id.startswith("1:")
    # the broker holds exactly the committed values, each payload padded and decodable
    stored = [e for log in h.client.logs.values() for e in log]
    assert len(stored) == 20
    assert all(len(e.data) == 300 for e in stored)
    assert {decode(e.data).value for e in stored} == {op["value"] for op in ops if op["f"] == "send"}
    assert all(e.state == "committed" for e in stored)


def test_abort_ratio_one_aborts_every_transaction(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=1.0))
    user = AtomicProduce(h.ctx)
    for _ in range(3):
        user.step()
    txns = transactions(h.ops())
    assert [done[-1]["f"] for done in txns.values()] == ["txn-abort"] * 3
    assert all(e.state == "aborted" for log in h.client.logs.values() for e in log)
    assert h.ctx.counters.committed == 0


def test_abort_ratio_is_honoured_roughly_and_deterministically(make_harness: Callable[[str], Harness]) -> None:
    ends = []
    for _ in range(2):
        h = make_harness(BASE.format(abort=0.3))
        user = AtomicProduce(h.ctx)
        for _ in range(200):
            user.step()
        ends.append([done[-1]["f"] for done in transactions(h.ops()).values()])
    assert ends[0] == ends[1]                      # same seed, same choices
    aborted = ends[0].count("txn-abort")
    assert 30 <= aborted <= 90                     # 0.3 of 200 = 60


def test_definite_send_failure_is_fail_and_the_transaction_aborts(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    h.client.fail_next("send", NotReadyError("no connection"))
    AtomicProduce(h.ctx).step()
    done = next(iter(transactions(h.ops()).values()))
    assert [(op["f"], op["type"]) for op in done] == [("txn-open", "ok"), ("send", "fail"), ("txn-abort", "ok")]
    assert done[1]["error"].startswith("NotReadyError")


def test_indeterminate_send_is_info(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    h.client.fail_next("send-after", ConnectionLostError("lost after write"))
    AtomicProduce(h.ctx).step()
    done = next(iter(transactions(h.ops()).values()))
    assert [(op["f"], op["type"]) for op in done] == [("txn-open", "ok"), ("send", "info"), ("txn-abort", "ok")]


def test_commit_with_unknown_outcome_is_info(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    h.client.fail_next("commit", OperationTimeoutError("no END_TXN answer"))
    AtomicProduce(h.ctx).step()
    done = next(iter(transactions(h.ops()).values()))
    assert (done[-1]["f"], done[-1]["type"]) == ("txn-commit", "info")
    assert "OperationTimeoutError" in done[-1]["error"]


def test_failed_open_records_fail_and_sends_nothing(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    h.client.fail_next("new-txn", NotReadyError("coordinator not ready"))
    AtomicProduce(h.ctx).step()
    ops = h.ops()
    assert [(op["f"], op["type"]) for op in ops] == [("txn-open", "invoke"), ("txn-open", "fail")]
    assert not h.client.logs


def test_stop_in_the_middle_aborts_the_open_transaction(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    user = AtomicProduce(h.ctx)
    original = h.client.create_producer

    def stop_on_second_producer(topic: str, **kw: object):  # the second topic's first send
        if len(h.client.logs) == 1:
            h.ctx.stop()
        return original(topic, **kw)  # type: ignore[arg-type]

    h.client.create_producer = stop_on_second_producer  # type: ignore[method-assign]
    user.step()
    done = next(iter(transactions(h.ops()).values()))
    assert done[-1]["f"] == "txn-abort"
    assert sum(op["f"] == "send" for op in done) < 4
    user.step()                     # a stopped load runs no more iterations
    assert len(transactions(h.ops())) == 1


def test_locust_sees_every_op_and_the_transaction(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    AtomicProduce(h.ctx).step()
    kinds = [(r[0], r[1]) for r in h.requests]
    assert kinds == [("txn-open", "atomic-produce")] + [("send", "atomic-produce")] * 4 + [
        ("txn-commit", "atomic-produce"), ("txn", "atomic-produce")]
    assert [r[3] for r in h.requests if r[0] == "send"] == [300] * 4
    assert all(r[4] is None for r in h.requests)
    assert h.ctx.counters.committed == 1 and h.ctx.counters.messages == 4


def test_payload_json_shape(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    AtomicProduce(h.ctx).step()
    entry = next(iter(h.client.logs.values()))[0]
    obj = json.loads(entry.data)
    assert set(obj) == {"v", "i", "p"} and obj["i"] == [] and obj["v"].startswith("w0.0.")


def test_hold_keeps_the_transaction_open_after_its_sends(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0) + "  hold_s: 5\n")
    user = AtomicProduce(h.ctx)
    user.step()
    assert 5 in h.stop.waits                       # the hold is a stop-aware wait, not a sleep
    done = next(iter(transactions(h.ops()).values()))
    assert [op["f"] for op in done][-1] == "txn-commit"
    last_send = max(op["time_ns"] for op in done if op["f"] == "send")
    assert done[-1]["time_ns"] - last_send >= 5_000_000_000


def test_a_stop_during_the_hold_aborts(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0) + "  hold_s: 20\n")
    plain_wait = h.stop.wait

    def stop_while_held(timeout: float | None = None) -> bool:
        if timeout == 20:
            h.stop.set()                           # the load stops while the transaction is held
        return plain_wait(timeout)

    h.stop.wait = stop_while_held  # type: ignore[method-assign]
    AtomicProduce(h.ctx).step()
    done = next(iter(transactions(h.ops()).values()))
    assert [op["f"] for op in done] == ["txn-open", "send", "send", "send", "send", "txn-abort"]


def test_a_hold_as_long_as_the_transaction_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"hold_s.*txn_timeout_s"):
        scenario(BASE.format(abort=0.0) + "  hold_s: 30\n  txn_timeout_s: 30\n")


def test_long_transactions_are_a_seeded_share_held_open_long(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0) + "  long_txn_ratio: 0.5\n  long_hold_s: 7\n")
    user = AtomicProduce(h.ctx)
    for _ in range(40):
        user.step()
    long_holds = h.stop.waits.count(7)
    assert 8 <= long_holds <= 32                    # about half of 40, drawn from the user's seeded rng
    assert all(w in (7, None) or w < 1 for w in h.stop.waits)   # the others are not held (hold_s 0)
    held = [t for t in transactions(h.ops()).values()
            if t[-1]["time_ns"] - max(op["time_ns"] for op in t if op["f"] == "send") >= 7_000_000_000]
    assert len(held) == long_holds and all(t[-1]["f"] == "txn-commit" for t in held)


def test_a_long_hold_as_long_as_the_transaction_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"long_hold_s.*txn_timeout_s"):
        scenario(BASE.format(abort=0.0) + "  long_txn_ratio: 0.1\n  long_hold_s: 30\n  txn_timeout_s: 30\n")
    scenario(BASE.format(abort=0.0) + "  long_hold_s: 30\n  txn_timeout_s: 30\n")   # no long ones: no limit


def test_a_terminated_topic_is_never_chosen_again(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    user = AtomicProduce(h.ctx)
    user.step()
    first = next(iter(transactions(h.ops()).values()))
    refused = next(op["topic"] for op in first if op["f"] == "send")
    h.client.fail_next("send", TopicTerminatedError(Op.SEND, ServerError.TopicTerminatedError,
                                                          "topic was already terminated"))
    user.step()                                      # its first send meets the terminated topic
    for _ in range(30):
        user.step()
    txns = list(transactions(h.ops()).values())
    assert txns[1][-1]["f"] == "txn-abort"           # the transaction that met it aborted
    later = {op["topic"] for t in txns[2:] for op in t if op["f"] == "send"}
    refused_second = next(op["topic"] for op in txns[1] if op["f"] == "send")
    assert refused_second not in later and len(later) == 3   # the three others, never it again
    assert refused in {op["topic"] for t in txns for op in t if op["f"] == "send"}


def test_a_sealed_v5_segment_does_not_take_its_topic_out_of_the_load(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(BASE.format(abort=0.0))
    h.ctx.note_terminated("topic://public/txnbench/t0")      # a v5 seal: the topic goes on in new segments
    assert list(h.ctx.writable(["topic://public/txnbench/t0", "topic://public/txnbench/t1"], 2)) == [
        "topic://public/txnbench/t0", "topic://public/txnbench/t1"]
    h.ctx.note_terminated("persistent://public/txnbench/t1")
    assert list(h.ctx.writable(["persistent://public/txnbench/t0", "persistent://public/txnbench/t1"], 1)) == [
        "persistent://public/txnbench/t0"]
    # never fewer than a transaction needs: then every topic stays a choice
    assert len(h.ctx.writable(["persistent://public/txnbench/t0", "persistent://public/txnbench/t1"], 2)) == 2
