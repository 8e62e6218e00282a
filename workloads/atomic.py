"""atomic-produce: many messages over several topics, all or nothing.

Each iteration opens a transaction, sends `messages_per_txn` messages spread round
robin over `topics_per_txn` distinct topics (picked at random from the run's
`atomic` topics), each with a key from `keys` and a payload padded to
`message_size`, then commits, or, with probability `abort_ratio`, aborts on purpose.
With `hold_s` the transaction stays open that long after its sends (so about one
transaction per user is open at any moment: experiment 3 kills a coordinator
with many open); a stop during the hold aborts it.
With `timeout_commit_ratio` a transaction holds its commit until its timeout (within a
second either side) and ends in the background while the user goes on, also with the
serial pipeline; with `foreign_abort_ratio` a second client aborts it beside its commit
(workloads.foreign; workloads.workload, `Ending`).
A send that fails ends the transaction early with an abort: the application knows
it cannot commit. The checker then expects every value of a committed transaction
in the final reads and none of an aborted one.

How much of it runs at once (each operation under its own process lane, see
workloads.session): `send_concurrency` sends of the transaction in flight together
(all are issued; any failed one makes it abort), and `txn_pipeline` says when the user
opens its next transaction: `serial` after this one ended; `commit-async` once this one's
sends completed, the commit going on in the background; `sends-async` as soon as this one
opened, its sends and commit going on in the background. Those two are what
`pulsar-perf transaction` does with the V5 and the v4 client (its threads block only on
opening a transaction), bounded here by `open_txns_per_user`. The random choices (abort,
topics, keys, values) are drawn by the user in order before anything goes to the
background, so a run's choices do not depend on timing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.config import TxnPipeline
from workloads.context import LoadContext
from workloads.topology import TopicRole
from workloads.workload import PLAIN_ENDING, Ending, OpenTxn, UserKind, Workload


@dataclass(frozen=True)
class _Plan:
    """One transaction's choices, drawn before its operations start."""

    abort: bool
    sends: tuple[tuple[str, str | None, str], ...]   # (topic, key or None, value)
    hold_s: float = 0.0                       # open this long after the sends (hold_s, or a long one)
    ending: Ending = PLAIN_ENDING             # a commit at the timeout, or raced by a second client


class AtomicProduce(Workload):
    kind: ClassVar[UserKind] = UserKind.ATOMIC_PRODUCE

    def __init__(self, ctx: LoadContext) -> None:
        super().__init__(ctx)
        self.topics = ctx.topology.topics_for(TopicRole.ATOMIC)
        if not self.topics:
            raise ValueError("the topology has no atomic-produce topics")
        self.per_txn = min(self.w.topics_per_txn, len(self.topics))
        self.pipeline = self.w.txn_pipeline

    def iterate(self) -> None:
        if self.pipeline is TxnPipeline.SERIAL:
            if not self.session.begin_iteration():
                return
            txn = self.open_txn()
            if txn is None:
                return
            plan = self._plan()
            opened = txn
            if plan.ending.at_timeout and not plan.abort and self.finish_later(
                    lambda: self._finish(opened, plan, sent=False)):
                return    # it commits at its timeout, in the background: the user goes on
            self._finish(txn, plan, sent=False)
            return
        # pipelined: a slot for one more transaction in flight, then open it and move on
        if not self.background.acquire(self.ctx.stopping, self.finish_timeout_s()):
            return
        spawned = False
        try:
            if not self.session.begin_iteration():
                return
            txn = self.open_txn()
            if txn is None:
                return
            plan = self._plan()
            sent = False
            if self.pipeline is TxnPipeline.COMMIT_ASYNC:
                plan = self._send_all(txn, plan)
                sent = True
            self.background.spawn(lambda: self._finish(txn, plan, sent=sent))
            spawned = True
        finally:
            if not spawned:
                self.background.release()

    def _plan(self) -> _Plan:
        abort = self.rng.random() < self.w.abort_ratio
        chosen = self.rng.sample(self.ctx.writable(self.topics, self.per_txn), self.per_txn)
        sends = tuple((chosen[i % len(chosen)], self.pick_key(), self.values.next())
                      for i in range(self.w.messages_per_txn))
        hold_s = self.draw_hold_s(self.w.hold_s)
        return _Plan(abort, sends, hold_s, self.draw_ending())

    def _send_all(self, txn: OpenTxn, plan: _Plan) -> _Plan:
        """The plan's sends (`send_concurrency` at once); the plan to end with (abort if any failed)."""
        abort = plan.abort
        if self.w.send_concurrency <= 1:
            for topic, key, value in plan.sends:
                if self.ctx.stopping.is_set():
                    abort = True
                    break
                if not self.send(topic, txn=txn, key=key, value=value).ok:
                    abort = True
                    break
        elif self.ctx.stopping.is_set():
            abort = True
        else:
            outcomes = self.send_together(txn, [(topic, key, value, ()) for topic, key, value in plan.sends])
            abort = abort or not all(o.ok for o in outcomes)
        return _Plan(abort, plan.sends, plan.hold_s, plan.ending)

    def _finish(self, txn: OpenTxn, plan: _Plan, *, sent: bool) -> None:
        """Send (unless done), hold, then commit or abort."""
        if not sent:
            plan = self._send_all(txn, plan)
        abort = plan.abort
        if not abort and plan.hold_s > 0 and self.ctx.stopping.wait(plan.hold_s):
            abort = True
        self.end_txn(txn, abort=abort, ending=plan.ending)
