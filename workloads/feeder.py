"""Feeder users: keep the consume-transform-produce and ack-only inputs supplied.

A feeder sends non-transactionally by default (recorded `send` ops with `txn` null, so every input
value is one the history knows) to whichever input topic of this load process is furthest
below its demand (workloads.shared.FeedCredit). With no demand it waits. Feeders are not
paced by `rate_per_user`: they follow the consumers, whose transactions are the measured load.

With `feed_batch` 1 a feeder sends one message at a time. With more it sends up to that many
to the chosen topic at once (as much as its demand lacks) through a batching producer
(workloads.context.feeder_batching), as an application on Java's default producer does: the
consumers then receive batches, and their transactions acknowledge single messages of a batch,
conflict over them and give them back on abort (batch-index acknowledgement, the part of
Pulsar's pending-ack code that unbatched inputs never reach).

With `feed_txn_ratio` a share of the feeds (a whole batch each) goes in a transaction of the
feeder's own, aborted with `abort_ratio` (drawn with the feeder's seeded rng, and only when the
ratio is above 0: a run without it draws what it drew before). The inputs then hold committed,
aborted and open transactional messages besides plain ones, so the consumers' subscriptions
dispatch past markers, filter aborted messages and wait at a read position an open feed holds,
on the entries their own transactions' acks are pending on: with plain feeds, Pulsar's Shared
dispatcher never meets transactional data in these runs. An aborted feed (on purpose, or because
a send failed) gives its demand back: none of its inputs will arrive. A topic that answered
"terminated" is fed plainly (and refuses, with the pause below): on v4 a transaction that
registered it can never end (its abort marker is refused), so each feed would leave one more.

A send that certainly failed (a terminated topic, a sealed segment with no successor, a
refused producer) comes back at once, and the topic is still the one furthest below its
demand: without a pause the feeder would retry it in a tight loop, filling the history
with failed sends and taking the CPU the run measures. So a definite failure pauses the
feeder, per topic, 0.1 s doubling to 5 s (as the client's reconnect backoff), and an ok
send to that topic starts the pause over. Indeterminate failures already took their
operation timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from workloads.context import LoadContext
from workloads.workload import UserKind, Workload

IDLE_WAIT_S = 0.5
FAIL_BACKOFF_S = (0.1, 5.0)
"""The pause after a definite send failure to a topic: first, and at most (doubling)."""


class Feeder(Workload):
    kind: ClassVar[UserKind] = UserKind.FEEDER
    paced: ClassVar[bool] = False
    backs_off: ClassVar[bool] = False    # its own pause, per topic (above), not the workload's
    idle_wait_s: float = IDLE_WAIT_S
    """How long a feeder waits for demand before its iteration ends empty."""

    def __init__(self, ctx: LoadContext) -> None:
        super().__init__(ctx)
        self._fail_pause_s: dict[str, float] = {}
        self.pause: Callable[[float], object] = self.ctx.stopping.wait
        """Waits the backoff (returns early on stop); tests replace it to record the pauses."""

    def iterate(self) -> None:
        topic = self.ctx.feed.take(self.idle_wait_s, choose=self.rng.choice)
        if topic is None or self.ctx.stopping.is_set():
            if topic is not None:
                self.ctx.feed.unreserve(topic)
            return
        more = self.ctx.feed.take_more(topic, self.w.feed_batch - 1) if self.w.feed_batch > 1 else 0
        if self.w.feed_txn_ratio > 0:
            in_txn, abort = self.rng.random() < self.w.feed_txn_ratio, self.rng.random() < self.w.abort_ratio
            if in_txn and not self.ctx.terminated(topic):
                self._feed_in_txn(topic, 1 + more, abort=abort)
                return
        if more:
            planned = [(topic, self.pick_key(), self.values.next(), ()) for _ in range(1 + more)]
            outcomes = self.send_together(None, planned, limit=len(planned))
        else:
            outcomes = [self.send(topic, txn=None, key=self.pick_key())]
        definite = [o for o in outcomes if not o.ok and o.definite]
        for _ in definite:
            self.ctx.feed.unreserve(topic)
        self._after_sends(topic, ok=any(o.ok for o in outcomes), definite_failure=bool(definite))

    def _feed_in_txn(self, topic: str, count: int, *, abort: bool) -> None:
        """`count` inputs to `topic` in one transaction, committed, or aborted (`abort`, or a send
        failed). An abort, or a commit that certainly failed, gives the whole demand back."""
        txn = self.open_txn()
        if txn is None:
            self.ctx.feed.consumed(topic, count)
            self._after_sends(topic, ok=False, definite_failure=True)
            return
        planned = [(topic, self.pick_key(), self.values.next(), ()) for _ in range(count)]
        outcomes = self.send_together(txn, planned, limit=len(planned))
        sent = all(o.ok for o in outcomes)
        ended = self.end_txn(txn, abort=abort or not sent)
        if abort or not sent or (not ended.ok and ended.definite):
            self.ctx.feed.consumed(topic, count)
        self._after_sends(topic, ok=sent, definite_failure=any(not o.ok and o.definite for o in outcomes))

    def _after_sends(self, topic: str, *, ok: bool, definite_failure: bool) -> None:
        """An ok send to `topic` starts its pause over; a definite failure alone doubles it."""
        if ok:
            self._fail_pause_s.pop(topic, None)
        elif definite_failure:
            pause = self._fail_pause_s.get(topic, FAIL_BACKOFF_S[0])
            self._fail_pause_s[topic] = min(pause * 2, FAIL_BACKOFF_S[1])
            self.pause(pause)
