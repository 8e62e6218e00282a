"""Feeder users: keep the consume-transform-produce and ack-only inputs supplied.

A feeder sends one message at a time, non-transactionally (recorded `send` ops with
`txn` null, so every input value is one the history knows), to whichever input topic
of this load process is furthest below its demand (workloads.shared.FeedCredit).
With no demand it waits. Feeders are not paced by `rate_per_user`: they follow the
consumers, whose transactions are the measured load.
"""

from __future__ import annotations

from typing import ClassVar

from workloads.workload import UserKind, Workload

IDLE_WAIT_S = 0.5


class Feeder(Workload):
    kind: ClassVar[UserKind] = UserKind.FEEDER
    paced: ClassVar[bool] = False
    idle_wait_s: float = IDLE_WAIT_S
    """How long a feeder waits for demand before its iteration ends empty."""

    def iterate(self) -> None:
        topic = self.ctx.feed.take(self.idle_wait_s, choose=self.rng.choice)
        if topic is None or self.ctx.stopping.is_set():
            if topic is not None:
                self.ctx.feed.unreserve(topic)
            return
        sent = self.send(topic, txn=None, key=self.pick_key())
        if sent.definite:
            self.ctx.feed.unreserve(topic)
