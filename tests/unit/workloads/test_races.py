"""Racing decisions the load makes on purpose (issue #43): two transactions acking one message of a
Shared subscription, commits at the transaction timeout, a second client's abort beside a commit,
END_TXN resends; what the history records and what the load counts. Over the fake client."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from harness.history import RunClock
from tests.unit.workloads.conftest import Harness, ManualClock
from tests.unit.workloads.fakes import FakeClient, FakeTxn
from tests.unit.workloads.history_checks import assert_well_formed, transactions
from tests.unit.workloads.test_consumers import feed
from workloads.api import ClientApi
from workloads.atomic import AtomicProduce
from workloads.context import Counters, LoadContext
from workloads.ctp import ConsumeTransformProduce
from workloads.feeder import Feeder
from workloads.foreign import FOREIGN_PROCESS
from workloads.status import StatusReporter
from workloads.topology import TopicRole
from workloads.workload import PLAIN_ENDING

CTP_SHARED = """
workload:
  kind: consume-transform-produce
  topics: {topics}
  topics_per_txn: 1
  acks_per_txn: 2
  messages_per_txn: 2
  abort_ratio: 0.0
  verifiers: 0
  ctp_consumers_per_subscription: 2
  conflict_ratio: {conflict}
"""

ATOMIC = """
workload:
  kind: atomic-produce
  topics: 2
  topics_per_txn: 1
  messages_per_txn: 2
  abort_ratio: 0.0
  txn_timeout_s: 5
  {extra}
"""


def once(action: Callable[[], None]) -> Callable[..., None]:
    """A fake-client hook that runs `action` the first time only."""
    done = threading.Event()

    def hook(*_: Any) -> None:
        if not done.is_set():
            done.set()
            action()

    return hook


# ---- several transactional consumers on one Shared subscription ---------------------------------


def test_ctp_users_share_input_subscriptions_by_ctp_consumers_per_subscription(
        make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(CTP_SHARED.format(topics=2, conflict=0.0))
    users = [ConsumeTransformProduce(h.ctx) for _ in range(5)]
    inputs = h.topology.topics_for(TopicRole.CTP_INPUT)
    assert [inputs.index(u.input_topic) for u in users] == [0, 0, 1, 1, 0]
    assert users[0].group is users[1].group and users[0].group is not users[2].group
    plain = make_harness(CTP_SHARED.format(topics=2, conflict=0.0).replace("  ctp_consumers_per_subscription: 2\n",
                                                                          ""))
    spread = [ConsumeTransformProduce(plain.ctx) for _ in range(3)]
    assert [inputs.index(u.input_topic) for u in spread] == [0, 1, 0]     # the default: as before
    assert all(u.group is None for u in spread)


def test_ctp_thief_acks_first_and_the_holder_is_refused_then_aborts(make_harness: Callable[[str], Harness]) -> None:
    """b takes an input a holds before a acks it: b's transaction carries and acks it and commits; a's
    ack is refused (TransactionConflict, definite) and a aborts, so the input has one visible output."""
    h = make_harness(CTP_SHARED.format(topics=1, conflict=1.0))
    a, b = ConsumeTransformProduce(h.ctx), ConsumeTransformProduce(h.ctx)
    assert a.input_topic == b.input_topic and a.group is b.group
    feeder = Feeder(h.ctx)
    a.step()
    b.step()                                  # both subscribe; nothing to consume yet
    feed(feeder, 8)
    h.client.on_new_txn = once(b.step)        # a has received and published its inputs: b runs now
    a.step()
    ops = h.ops()
    assert_well_formed(ops)
    by_process = {p: transactions([op for op in ops if op["process"] == p]) for p in (a.process, b.process)}
    (b_txn,) = by_process[b.process].values()
    (a_txn,) = by_process[a.process].values()
    assert (b_txn[-1]["f"], b_txn[-1]["type"]) == ("txn-commit", "ok")
    b_acked = {op["value"] for op in b_txn if op["f"] == "ack" and op["type"] == "ok"}
    a_received = {op["value"] for op in ops if op["f"] == "receive" and op["process"] == a.process}
    stolen = b_acked & a_received
    assert len(stolen) == 1                    # b acked one of a's inputs in its own transaction
    carried = {v for op in b_txn if op["f"] == "send" and op["type"] == "ok" for v in op["inputs"]}
    assert stolen <= carried                   # ... and produced its output
    refused = [op for op in a_txn if op["f"] == "ack" and op["type"] == "fail"]
    assert len(refused) == 1 and "TransactionConflict" in refused[0]["error"]
    assert refused[0]["value"] in stolen
    assert (a_txn[-1]["f"], a_txn[-1]["type"]) == ("txn-abort", "ok")
    counters = h.ctx.counters
    assert counters.ack_steals == 1 and counters.conflicts == 1 and counters.errors == 0


def test_ctp_thief_is_refused_while_the_holder_keeps_the_ack_pending(make_harness: Callable[[str], Harness]) -> None:
    """a has acked its inputs (pending in its open transaction) when b takes one: b's ack is refused
    and b aborts, giving back only its own inputs (the taken one is a's to settle); a commits."""
    h = make_harness(CTP_SHARED.format(topics=1, conflict=1.0))
    a, b = ConsumeTransformProduce(h.ctx), ConsumeTransformProduce(h.ctx)
    feeder = Feeder(h.ctx)
    a.step()
    b.step()
    feed(feeder, 8)
    h.client.on_commit = once(b.step)          # a's acks are pending: b runs before a's commit lands
    a.step()
    ops = h.ops()
    assert_well_formed(ops)
    (a_txn,) = transactions([op for op in ops if op["process"] == a.process]).values()
    (b_txn,) = transactions([op for op in ops if op["process"] == b.process]).values()
    assert (a_txn[-1]["f"], a_txn[-1]["type"]) == ("txn-commit", "ok")
    refused = [op for op in b_txn if op["f"] == "ack" and op["type"] == "fail"]
    assert len(refused) == 1 and "TransactionConflict" in refused[0]["error"]
    assert (b_txn[-1]["f"], b_txn[-1]["type"]) == ("txn-abort", "ok")
    sub = h.client.subs[(a.input_topic, "ctp")]
    assert refused[0]["msg_id"] in sub.acked and not sub.pending   # a's commit settled it, once
    assert h.ctx.counters.conflicts == 1 and h.ctx.counters.errors == 0


def test_without_a_shared_subscription_ctp_draws_nothing_more(make_harness: Callable[[str], Harness]) -> None:
    """No group, no racing decisions asked for: the user's random draws are exactly the old ones."""
    h = make_harness(CTP_SHARED.format(topics=1, conflict=1.0).replace("  ctp_consumers_per_subscription: 2\n", ""))
    user = ConsumeTransformProduce(h.ctx)
    before = user.rng.getstate()
    assert user.draw_ending() is PLAIN_ENDING
    assert user.rng.getstate() == before and user.group is None


# ---- commits at the transaction timeout -----------------------------------------------------------


def test_a_planned_commit_is_invoked_at_the_timeout_in_the_background(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra="timeout_commit_ratio: 1.0"))
    user = AtomicProduce(h.ctx)
    user.step()
    assert user.background.join(10.0)
    ops = h.ops()
    assert_well_formed(ops)
    (done,) = transactions(ops).values()
    opened = next(op for op in done if op["f"] == "txn-open")
    commit_inv = next(op for op in ops if op["f"] == "txn-commit" and op["type"] == "invoke")
    offset = (commit_inv["time_ns"] - opened["time_ns"]) / 1e9 - 5.0
    assert -1.0 <= offset <= 1.0
    assert commit_inv["extra"]["timeout_offset_s"] == round(offset, 3)
    assert (done[-1]["f"], done[-1]["type"]) == ("txn-commit", "ok")
    counted = h.ctx.counters.timeout_commits
    assert counted["count"] == counted["planned"] == counted["ok"] == 1
    assert counted["after"] == (1 if offset > 0 else 0)


def test_a_refused_commit_at_the_timeout_is_a_lost_race_not_an_error(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra="timeout_commit_ratio: 1.0"))
    user = AtomicProduce(h.ctx)

    def timed_out(txn: FakeTxn) -> None:       # the coordinator's timeout abort came first
        if txn.state == "open":
            txn._finish("aborted")

    h.client.on_commit = timed_out
    user.step()
    assert user.background.join(10.0)
    (done,) = transactions(h.ops()).values()
    assert (done[-1]["f"], done[-1]["type"]) == ("txn-commit", "fail")
    counters = h.ctx.counters
    assert counters.timeout_commits["fail"] == 1 and counters.race_losses == 1 and counters.errors == 0
    assert user.session.failures == 0          # no back-off for a race the load made


def test_a_stop_while_holding_until_the_timeout_aborts(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra="timeout_commit_ratio: 1.0"))
    user = AtomicProduce(h.ctx)
    h.ctx.stopping.set()
    txn = user.open_txn()
    assert txn is not None
    ending = user.draw_ending()
    assert ending.at_timeout
    user.end_txn(txn, abort=False, ending=ending)
    (done,) = transactions(h.ops()).values()
    assert (done[-1]["f"], done[-1]["type"]) == ("txn-abort", "ok")
    assert not h.ctx.counters.timeout_commits


def test_an_unplanned_commit_near_the_timeout_is_counted_too(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra=""))
    user = AtomicProduce(h.ctx)
    txn = user.open_txn()
    assert txn is not None
    h.clock.advance(5.4)                       # a commit delayed past the timeout (a fault, a slow user)
    assert user.end_txn(txn, abort=False).ok
    inv = next(op for op in h.ops() if op["f"] == "txn-commit" and op["type"] == "invoke")
    assert inv["extra"] == {"timeout_offset_s": 0.4}
    assert dict(h.ctx.counters.timeout_commits) == {"count": 1, "ok": 1, "after": 1, "after_ok": 1}
    far = user.open_txn()
    assert far is not None
    h.clock.advance(2.0)
    user.end_txn(far, abort=False)
    assert h.ctx.counters.timeout_commits["count"] == 1       # 3 s before its timeout: not counted


# ---- a second client's abort beside the commit ----------------------------------------------------


class SecondClient:
    """The second client of a test: aborts through the same fake cluster, on its own 'connection'."""

    def __init__(self, fake: FakeClient, before: threading.Event | None = None) -> None:
        self.fake = fake
        self.before = before
        self.aborted: list[str] = []
        self.closed = False

    def abort_transaction(self, txn_id: str, timeout_s: float | None = None) -> None:
        if self.before is not None:
            assert self.before.wait(10.0)
        self.aborted.append(txn_id)
        self.fake.abort_transaction(txn_id, timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        self.closed = True


def _foreign_context(h: Harness, second: SecondClient) -> LoadContext:
    return LoadContext(config=h.config, topology=h.topology, client=h.client, recorder=h.recorder,
                       clock=cast(RunClock, h.clock), writer="w0", stopping=h.stop,
                       second_client=lambda: cast(ClientApi, second))


def test_a_second_clients_abort_that_lands_first_makes_the_commit_fail(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra="foreign_abort_ratio: 1.0"))
    second = SecondClient(h.client)
    ctx = _foreign_context(h, second)
    assert ctx.foreign is not None
    aborted = threading.Event()
    original = second.abort_transaction

    def abort_then_tell(txn_id: str, timeout_s: float | None = None) -> None:
        try:
            original(txn_id, timeout_s)
        finally:
            aborted.set()

    second.abort_transaction = abort_then_tell  # type: ignore[method-assign]
    h.client.on_commit = lambda txn: aborted.wait(10.0)    # the commit reaches the coordinator second
    user = AtomicProduce(ctx)
    user.step()
    assert ctx.join_background(10.0)
    ops = h.ops()
    assert_well_formed(ops)
    (done,) = transactions(ops).values()
    foreign = [op for op in done if op["process"] == f"w0/{FOREIGN_PROCESS}"]
    assert [(op["f"], op["type"]) for op in foreign] == [("txn-abort", "ok")]
    inv = next(op for op in ops if op["f"] == "txn-abort" and op["type"] == "invoke")
    assert inv["extra"] == {"foreign": {"owner": user.process}} and inv["txn"] == done[0]["txn"]
    own_end = [op for op in done if op["process"] == user.process and op["f"] == "txn-commit"]
    assert [op["type"] for op in own_end] == ["fail"]
    assert second.aborted == [done[0]["txn"]]
    counters = ctx.counters
    assert dict(counters.foreign_aborts) == {"count": 1, "ok": 1}
    assert counters.race_losses == 1 and counters.errors == 0
    ctx.close_second_client(1.0)
    assert second.closed


def test_a_second_clients_abort_after_the_commit_is_refused(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra="foreign_abort_ratio: 1.0"))
    committed = threading.Event()
    second = SecondClient(h.client, before=committed)
    ctx = _foreign_context(h, second)
    user = AtomicProduce(ctx)
    original = FakeTxn.commit

    def commit_then_tell(self: FakeTxn, timeout_s: float | None = None) -> None:  # `self`: as in FakeTxn.commit
        try:
            original(self, timeout_s)
        finally:
            committed.set()

    FakeTxn.commit = commit_then_tell  # type: ignore[method-assign]
    try:
        user.step()
        assert ctx.join_background(10.0)
    finally:
        FakeTxn.commit = original  # type: ignore[method-assign]
    (done,) = transactions(h.ops()).values()
    ends = {(op["process"], op["f"], op["type"]) for op in done if op["f"] in ("txn-commit", "txn-abort")}
    assert ends == {(user.process, "txn-commit", "ok"), (f"w0/{FOREIGN_PROCESS}", "txn-abort", "fail")}
    assert dict(ctx.counters.foreign_aborts) == {"count": 1, "fail": 1}
    assert ctx.counters.race_losses == 1 and ctx.counters.errors == 0


def test_without_a_factory_the_loads_own_client_aborts(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra="foreign_abort_ratio: 1.0"))
    assert h.ctx.foreign is not None and h.ctx.foreign.client() is h.client
    h.ctx.close_second_client(1.0)
    assert not h.client.closed                 # not the foreign client's to close


# ---- END_TXN resends, and the counts in the status file ------------------------------------------


def test_end_txn_resends_are_counted_from_the_transaction(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(ATOMIC.format(extra=""))

    def resent_twice(txn: FakeTxn) -> None:
        txn.end_txn_resends = 2

    h.client.on_commit = resent_twice
    user = AtomicProduce(h.ctx)
    user.step()
    user.step()
    assert h.ctx.counters.end_txn_resends == 4


def test_the_race_counts_reach_the_status_file_and_merge_over_workers(tmp_path: Path) -> None:
    counters = Counters()
    counters.ack_steals = 3
    counters.timeout_commits.update({"count": 2, "ok": 1, "fail": 1, "planned": 2})
    counters.foreign_aborts.update({"count": 5, "ok": 2, "fail": 3})
    counters.end_txn_resends = 4
    counters.race_losses = 4
    counters.failed["txn-commit"] = 1
    counters.failed["txn-abort"] = 3
    merged = Counters.merge([json.loads(json.dumps(counters.snapshot())), counters.snapshot()])
    assert merged.timeout_commits["count"] == 4 and merged.foreign_aborts["fail"] == 6
    assert merged.end_txn_resends == 8 and merged.ack_steals == 6 and merged.errors == 0
    reporter = StatusReporter(tmp_path / "status.json", ManualClock(), run_id="r", processes=1,  # type: ignore[arg-type]
                              counters=lambda: counters, users=lambda: (1, {}), cpu=None)
    status = json.loads(json.dumps(reporter.write("running")))
    assert status["ack_steals"] == 3 and status["end_txn_resends"] == 4 and status["race_losses"] == 4
    assert status["timeout_commits"] == {"count": 2, "ok": 1, "fail": 1, "planned": 2}
    assert status["foreign_aborts"] == {"count": 5, "ok": 2, "fail": 3}
    assert status["errors"] == 0
    assert json.loads((tmp_path / "status.json").read_text())["foreign_aborts"]["count"] == 5
