"""The verifying consumer: records everything the produced topics deliver, as it happens.

A verifier subscribes to every `verify` subscription of the run (Failover, so the
verifiers of several load processes share the work: one is active per partition or
segment) and records a `receive` event for each message, with `extra.redelivery`.
Those events are what the checker holds against the transactions' outcomes while
the run is going (`aborted-read`, `dirty-read`); the drain's final reads are the
other half.

It acknowledges cumulatively (non-transactional, recorded as `ack` ops with
`extra.cumulative`), per partition or segment, at most every half second or every
256 messages, so the subscriptions' backlogs stay small and, on v5, parent segments
are finished so their children are delivered. A Locust `receive` request event per
message carries the time from publish to receipt.
"""

from __future__ import annotations

import time
from typing import ClassVar

from workloads.api import ConsumerApi
from workloads.context import LoadContext
from workloads.topology import SubscriptionPlan, SubscriptionRole
from workloads.workload import Received, UserKind, Workload

ACK_EVERY_S = 0.5
ACK_EVERY_MESSAGES = 256
TAKE_PER_POLL = 64
IDLE_WAIT_S = 0.2


class Verifier(Workload):
    kind: ClassVar[UserKind] = UserKind.VERIFIER
    paced: ClassVar[bool] = False
    # no failure pause: it acks at most every ACK_EVERY_S and an empty poll waits IDLE_WAIT_S, so it
    # never loops on failures, and a pause would only make its receive events late
    backs_off: ClassVar[bool] = False

    def __init__(self, ctx: LoadContext) -> None:
        super().__init__(ctx)
        self.plans: list[SubscriptionPlan] = ctx.topology.subscriptions_for(SubscriptionRole.VERIFY)
        self.consumers: list[tuple[SubscriptionPlan, ConsumerApi]] = []
        self._pending: dict[tuple[int, str | None], Received] = {}
        self._unacked = 0
        self._last_ack_ns = ctx.clock.now_ns()
        self._turn = 0

    def setup(self) -> None:
        subscribed = {plan.topic for plan, _ in self.consumers}
        for plan in self.plans:
            if plan.topic in subscribed:
                continue
            consumer = self.ctx.client.subscribe(plan.topic, plan.name, sub_type=plan.sub_type.value,
                                                 consumer_name=self.process, timeout_s=self.op_timeout_s)
            self.consumers.append((plan, consumer))

    def teardown(self) -> None:
        if self.consumers and not self.ctx.recorder.closed:
            self._ack_pending()
        for _, consumer in self.consumers:
            self.close_quietly(consumer)
        self.consumers = []

    def iterate(self) -> None:
        if not self.consumers:
            self.ctx.stopping.wait(IDLE_WAIT_S)
            return
        taken = 0
        for index, (plan, consumer) in enumerate(self.consumers):
            for _ in range(TAKE_PER_POLL):
                received = self.receive_one(consumer, plan.name, 0.0)
                if received is None:
                    break
                self._took(index, received)
                taken += 1
        if taken == 0:  # nothing waiting anywhere: block briefly on one, in turn
            self._turn = (self._turn + 1) % len(self.consumers)
            plan, consumer = self.consumers[self._turn]
            received = self.receive_one(consumer, plan.name, IDLE_WAIT_S)
            if received is not None:
                self._took(self._turn, received)
        if (self._unacked >= ACK_EVERY_MESSAGES
                or self.ctx.clock.now_ns() - self._last_ack_ns >= ACK_EVERY_S * 1e9):
            self._ack_pending()

    def _took(self, index: int, received: Received) -> None:
        message = received.message
        self._pending[(index, message.segment)] = received
        self._unacked += 1
        publish_ms = getattr(message, "publish_time_ms", 0) or 0
        if publish_ms:
            self.session.fire("receive", max(0.0, time.time() * 1000.0 - publish_ms))

    def _ack_pending(self) -> None:
        pending, self._pending = self._pending, {}
        self._unacked = 0
        self._last_ack_ns = self.ctx.clock.now_ns()
        for (index, _segment), received in sorted(pending.items(), key=lambda item: (item[0][0], item[0][1] or "")):
            plan, consumer = self.consumers[index]
            self.ack(consumer, received, plan.name, txn=None, cumulative=True)
