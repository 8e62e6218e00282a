"""atomic-produce with operations at once: sends together, transactions pipelined, lanes in the history.

The fake client's hooks hold operations in flight, so a test passes only when the
operations really overlap; the history must still have one outstanding op per process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import cast

import pytest

from harness.config import ConfigError
from tests.unit.workloads.conftest import Harness, scenario
from tests.unit.workloads.fakes import FakeProducer, FakeTxn
from tests.unit.workloads.history_checks import (
    assert_unique_values,
    assert_well_formed,
    transactions,
)
from workloads.atomic import AtomicProduce

BASE = """
workload:
  kind: atomic-produce
  topics: 4
  topics_per_txn: 2
  messages_per_txn: 4
  keys: 3
  abort_ratio: 0
  op_timeout_s: 5
  send_concurrency: {sends}
  txn_pipeline: {pipeline}
  open_txns_per_user: {slots}
"""


def config(sends: int = 1, pipeline: str = "serial", slots: int = 16) -> str:
    return BASE.format(sends=sends, pipeline=pipeline, slots=slots)


def test_sends_run_at_once_each_on_its_own_lane(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(config(sends=4))
    together = threading.Barrier(4, timeout=5)   # breaks (and the sends fail) unless 4 are in flight at once
    h.client.on_send = together.wait
    user = AtomicProduce(h.ctx)
    for _ in range(3):
        user.step()
    ops = h.ops()
    assert_well_formed(ops)
    assert_unique_values(ops)
    for done in transactions(ops).values():
        assert done[0]["f"] == "txn-open" and done[-1]["f"] == "txn-commit"
        assert all(op["type"] == "ok" for op in done)
        sends = [op for op in done if op["f"] == "send"]
        assert len(sends) == 4 and len({op["process"] for op in sends}) == 4
    lanes = {op["process"] for op in ops}
    assert lanes == {"w0/u0", "w0/u0/l1", "w0/u0/l2", "w0/u0/l3"}   # reused, lowest free first
    assert all(op["process"] == "w0/u0" for op in ops if op["f"] in ("txn-open", "txn-commit"))


def test_a_failed_send_among_concurrent_ones_aborts(make_harness: Callable[[str], Harness]) -> None:
    from harness.client.errors import NotReadyError

    h = make_harness(config(sends=4))
    h.client.fail_next("send", NotReadyError("planted"))
    user = AtomicProduce(h.ctx)
    user.step()
    done = next(iter(transactions(h.ops()).values()))
    assert done[-1]["f"] == "txn-abort" and done[-1]["type"] == "ok"
    assert sum(1 for op in done if op["f"] == "send") == 4    # all were issued


def test_a_send_past_its_deadline_is_given_up_recorded_info_and_the_txn_aborts(
        make_harness: Callable[[str], Harness]) -> None:
    """Sends started together wait no thread each (workloads.sends): one whose receipt does not
    come by its deadline is given up by its producer and recorded `info`; the others are not held."""
    h = make_harness(config(sends=4).replace("op_timeout_s: 5", "op_timeout_s: 0.3"))
    release = threading.Event()
    calls = [0]
    lock = threading.Lock()

    def hang_the_first() -> None:
        with lock:
            calls[0] += 1
            first = calls[0] == 1
        if first:
            release.wait(5)

    h.client.on_send = hang_the_first
    user = AtomicProduce(h.ctx)
    started = time.monotonic()
    user.step()
    assert time.monotonic() - started < 3.0      # waited about the op timeout, not the hang
    release.set()
    ops = h.ops()
    assert_well_formed(ops)
    done = next(iter(transactions(ops).values()))
    sends = [op for op in done if op["f"] == "send" and op["type"] != "invoke"]
    assert sorted(op["type"] for op in sends) == ["info", "ok", "ok", "ok"]
    assert next(op for op in sends if op["type"] == "info")["error"].startswith("OperationTimeoutError")
    assert done[-1]["f"] == "txn-abort"
    assert sum(len(cast(FakeProducer, p).given_up) for p in h.ctx.producers._producers.values()) == 1


def test_at_most_send_concurrency_sends_are_in_flight(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(config(sends=2))
    lock = threading.Lock()
    in_flight = [0, 0]   # now, most

    def note() -> None:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        time.sleep(0.02)
        with lock:
            in_flight[0] -= 1

    h.client.on_send = note
    user = AtomicProduce(h.ctx)
    for _ in range(3):
        user.step()
    ops = h.ops()
    assert_well_formed(ops)
    assert in_flight[1] == 2                       # the window is full, never over
    for done in transactions(ops).values():
        assert [op["type"] for op in done if op["f"] == "send"].count("ok") == 4
        assert done[-1]["f"] == "txn-commit"
    assert {op["process"] for op in ops} == {"w0/u0", "w0/u0/l1"}


def test_a_terminated_topic_met_by_concurrent_sends_is_never_chosen_again(
        make_harness: Callable[[str], Harness]) -> None:
    from harness.client.errors import Op, TopicTerminatedError
    from harness.wire import ServerError

    h = make_harness(config(sends=4))
    user = AtomicProduce(h.ctx)
    user.step()
    h.client.fail_next("send", TopicTerminatedError(Op.SEND, ServerError.TopicTerminatedError,
                                                          "topic was already terminated"))
    user.step()                                      # one of its sends meets the terminated topic
    txns = list(transactions(h.ops()).values())
    refused = next(op["topic"] for op in txns[1] if op["f"] == "send" and op["type"] == "fail")
    for _ in range(20):
        user.step()
    txns = list(transactions(h.ops()).values())
    assert txns[1][-1]["f"] == "txn-abort"
    assert refused not in {op["topic"] for t in txns[2:] for op in t if op["f"] == "send"}


def test_a_producer_that_cannot_be_made_fails_its_send_only(make_harness: Callable[[str], Harness]) -> None:
    from harness.client.errors import NotReadyError

    h = make_harness(config(sends=4))
    h.client.fail_next("create-producer", NotReadyError("planted"))
    user = AtomicProduce(h.ctx)
    user.step()
    ops = h.ops()
    assert_well_formed(ops)
    done = next(iter(transactions(ops).values()))
    sends = [op for op in done if op["f"] == "send" and op["type"] != "invoke"]
    assert len(sends) == 4 and sum(op["type"] == "fail" for op in sends) >= 1
    assert done[-1]["f"] == "txn-abort"


def test_commit_async_opens_the_next_transaction_before_the_commit_returns(
        make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(config(sends=4, pipeline="commit-async"))
    opened = threading.Condition()
    count = [0]

    def note_open() -> None:
        with opened:
            count[0] += 1
            opened.notify_all()

    def commit_after_next_open(txn: FakeTxn) -> None:
        number = int(str(txn.id).split(":")[1])
        if number < 3:   # the last one has no successor
            with opened:
                assert opened.wait_for(lambda: count[0] > number, timeout=5), \
                    "the next transaction was not opened while this commit was pending"

    h.client.on_new_txn = note_open
    h.client.on_commit = commit_after_next_open
    user = AtomicProduce(h.ctx)
    for _ in range(3):
        user.step()
    user.close()
    ops = h.ops()
    assert_well_formed(ops)
    assert_unique_values(ops)
    txns = transactions(ops)
    assert len(txns) == 3
    assert all(done[-1]["f"] == "txn-commit" and done[-1]["type"] == "ok" for done in txns.values())
    first_commit_ok = next(i for i, op in enumerate(ops) if op["f"] == "txn-commit" and op["type"] == "ok")
    second_open = [i for i, op in enumerate(ops) if op["f"] == "txn-open" and op["type"] == "invoke"][1]
    assert second_open < first_commit_ok
    # a transaction's sends all completed before its commit was invoked
    for done in txns.values():
        assert [op["f"] for op in done][-1] == "txn-commit"
    requests = [r for r in h.requests if r[0] == "txn"]
    assert len(requests) == 3 and all(r[4] is None for r in requests)


def test_sends_async_bounds_the_transactions_in_flight(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(config(sends=4, pipeline="sends-async", slots=2))
    h.client.on_commit = lambda txn: time.sleep(0.02)
    user = AtomicProduce(h.ctx)
    for _ in range(8):
        user.step()
    user.close()
    ops = h.ops()
    assert_well_formed(ops)
    assert_unique_values(ops)
    txns = transactions(ops)
    assert len(txns) == 8
    assert all(done[-1]["f"] == "txn-commit" and done[-1]["type"] == "ok" for done in txns.values())
    assert user.background.most_in_flight == 2
    assert h.ctx.most_in_flight() == 2
    # every transaction's sends were invoked after its open completed and before its commit was invoked
    for txn_id, done in txns.items():
        fs = [op["f"] for op in done]
        assert fs[0] == "txn-open" and fs[-1] == "txn-commit" and fs.count("send") == 4, (txn_id, fs)


def test_a_stop_ends_every_pipelined_transaction(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(config(sends=2, pipeline="sends-async", slots=4))
    release = threading.Event()
    h.client.on_send = lambda: release.wait(5)
    user = AtomicProduce(h.ctx)
    for _ in range(3):
        user.step()
    h.stop.set()
    release.set()
    user.step()        # stopping: joins its background
    ops = h.ops()
    assert_well_formed(ops)          # nothing left outstanding
    txns = transactions(ops)
    assert len(txns) == 3
    assert all(done[-1]["f"] in ("txn-commit", "txn-abort") for done in txns.values())
    assert h.ctx.join_background(1.0)


def test_pipelines_apply_to_atomic_produce_only() -> None:
    with pytest.raises(ConfigError, match="txn_pipeline"):
        scenario("workload:\n  kind: ack-only\n  txn_pipeline: commit-async\n")
    assert scenario("workload:\n  kind: mixed\n  mix: {atomic-produce: 1, ack-only: 1}\n"
                    "  txn_pipeline: sends-async\n").workload.txn_pipeline.value == "sends-async"


def test_serial_default_records_under_the_user_name_only(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness("workload:\n  kind: atomic-produce\n  abort_ratio: 0\n")
    assert h.config.workload.send_concurrency == 1 and h.config.workload.txn_pipeline.value == "serial"
    user = AtomicProduce(h.ctx)
    for _ in range(2):
        user.step()
    assert {op["process"] for op in h.ops()} == {"w0/u0"}
