"""A user whose operations fail waits before its next iteration (workloads.workload, `_back_off`).

A chaos run whose bookie had died (results/20261129-024544-chaos-chaos, v4) had one
atomic-produce user (w1/u7) open ~25,000 transactions in 19 s, each refused at once
("new-txn rejected by the broker: UnknownError: Not enough non-faulty bookies"), 0.6 ms
apart: the load's errors went from 24 to 5,014 in the recovery phase, the coordinators'
transaction ids from ~350 to ~6,500, and the CPU went to the load instead of the cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.client.errors import Op, ServerRejectedError, TransactionConflictError
from harness.history import OpF
from harness.wire import ServerError
from tests.unit.workloads.conftest import Harness
from tests.unit.workloads.history_checks import assert_well_formed
from workloads.atomic import AtomicProduce
from workloads.ctp import ConsumeTransformProduce
from workloads.workload import FAIL_BACKOFF_S

ATOMIC = """
workload:
  kind: atomic-produce
  topics: 2
  topics_per_txn: 2
  messages_per_txn: 2
  verifiers: 0
  txn_pipeline: {pipeline}
"""


def no_bookies() -> ServerRejectedError:
    return ServerRejectedError(Op.NEW_TXN, ServerError.UnknownError, "Not enough non-faulty bookies available")


def refuse_every_transaction(h: Harness) -> list[float]:
    """The client refuses every new transaction at once, as the cluster without its bookie did;
    returns the times of the attempts."""
    attempts: list[float] = []

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        attempts.append(time.monotonic())
        raise no_bookies()

    h.client.new_transaction = refuse  # type: ignore[method-assign]
    return attempts


@pytest.mark.parametrize("pipeline", ["serial", "sends-async"])
def test_a_user_whose_transactions_are_all_refused_makes_few_attempts_in_a_second(
        make_harness: Callable[[str], Harness], pipeline: str) -> None:
    h = make_harness(ATOMIC.format(pipeline=pipeline))
    h.ctx.stopping = threading.Event()          # real waits, on the real clock
    attempts = refuse_every_transaction(h)
    user = AtomicProduce(h.ctx)
    deadline = time.monotonic() + 1.0
    steps = 0
    while time.monotonic() < deadline and steps < 100_000:
        user.step()
        steps += 1
    # 5 + 10 + 20 + ... + 640 ms: the 9th attempt comes 1.275 s after the first (was thousands)
    assert 3 <= len(attempts) <= 10, len(attempts)
    assert user.fail_pause_s > 0.1
    ops = h.ops()
    assert_well_formed(ops)
    assert {(op["f"], op["type"]) for op in ops} == {("txn-open", "invoke"), ("txn-open", "fail")}


def test_the_pause_doubles_to_its_bound_and_an_iteration_that_went_well_starts_it_over(
        make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(pipeline="serial"))
    user = AtomicProduce(h.ctx)
    h.client.fail_next("new-txn", no_bookies(), times=10)
    for _ in range(10):
        user.step()
    assert h.stop.waits == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0])
    assert FAIL_BACKOFF_S == (0.005, 1.0)
    user.step()                                     # committed: no pause, and the next starts over
    assert len(h.stop.waits) == 10 and user.fail_pause_s == 0.0
    h.client.fail_next("new-txn", no_bookies())
    user.step()
    assert h.stop.waits[-1] == pytest.approx(0.005)
    # the history is what it always was: one refused open per failed iteration, one transaction
    opens = h.ops_of(f="txn-open")
    assert [op["type"] for op in opens] == ["invoke", "fail"] * 10 + ["invoke", "ok"] + ["invoke", "fail"]
    assert_well_formed(h.ops())


def test_a_failed_send_pauses_the_user_after_its_aborted_transaction(make_harness: Callable[[str], Harness]) -> None:
    """Not only refused opens: any failed operation (here a send; the abort after it went well)."""
    h = make_harness(ATOMIC.format(pipeline="serial"))
    user = AtomicProduce(h.ctx)
    h.client.fail_next("send", ServerRejectedError(Op.SEND, ServerError.UnknownError, "no bookies"))
    user.step()
    assert h.stop.waits == pytest.approx([0.005])
    done = [op["f"] for op in h.ops() if op["type"] != "invoke"]
    assert done == ["txn-open", "send", "txn-abort"]


def test_an_ack_conflict_is_no_failure_to_back_off_from(make_harness: Callable[[str], Harness]) -> None:
    """ack-only provokes conflicts on purpose (`conflict_ratio`): the broker's rule at work."""
    h = make_harness(ATOMIC.format(pipeline="serial"))
    user = AtomicProduce(h.ctx)
    conflict = TransactionConflictError(Op.ACK, ServerError.TransactionConflict, "acked by another txn")

    def refused() -> None:
        raise conflict

    assert not user.session.op(OpF.ACK, refused, topic="t", msg_id="1:0").ok
    assert user.session.failures == 0
    user._back_off()
    assert h.stop.waits == []
    assert not user.session.op(OpF.ACK, lambda: (_ for _ in ()).throw(no_bookies()), topic="t", msg_id="1:1").ok
    assert user.session.failures == 1
    user._back_off()
    assert h.stop.waits == pytest.approx([0.005])


def test_an_iteration_without_operations_leaves_the_pause_as_it_was(make_harness: Callable[[str], Harness]) -> None:
    """A consumer with nothing to consume already waited for its input: no pause of its own."""
    h = make_harness("workload: {kind: consume-transform-produce, topics: 1, topics_per_txn: 1, verifiers: 0}\n")
    user = ConsumeTransformProduce(h.ctx)
    user.step()
    user.step()
    assert h.ops() == [] and h.stop.waits == [] and user.fail_pause_s == 0.0


def test_a_stop_ends_the_pause_at_once(make_harness: Callable[[str], Harness],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # A 30 s pause against a stop after 0.05 s: a step that waited its pause out takes 30 s, one
    # the stop ended well under 10 s even on a machine too busy to run the timer on time.
    monkeypatch.setattr("workloads.workload.FAIL_BACKOFF_S", (FAIL_BACKOFF_S[0], 30.0))
    h = make_harness(ATOMIC.format(pipeline="serial"))
    h.ctx.stopping = threading.Event()
    refuse_every_transaction(h)
    user = AtomicProduce(h.ctx)
    user.fail_pause_s = 15.0                         # the next pause is the longest, 30 s
    threading.Timer(0.05, h.ctx.stop).start()
    started = time.monotonic()
    user.step()
    assert user.fail_pause_s == 30.0
    assert time.monotonic() - started < 10.0
