"""ack-only: transactional acknowledgements on Shared subscriptions, with conflicts.

Users are grouped `consumers_per_subscription` at a time onto the `ack` topics (the
first group on topic 0, the next on topic 1, ... wrapping around), each user a
consumer of that topic's Shared subscription `acks`. An iteration:

1. receives up to `acks_per_txn` messages (recording `receive` events) and publishes
   them to its conflict group (workloads.shared.AckGroup);
2. with probability `conflict_ratio`, also picks one message a sibling consumer of
   the same subscription holds right now, so two transactions ack the same message;
3. opens a transaction, acks every message in it (the stolen one at a random place);
4. with `ack_hold_s`, keeps the transaction open that long (its acks pending; a stop
   meanwhile aborts it);
5. commits, or aborts on purpose with probability `abort_ratio`; with
   `timeout_commit_ratio` the commit is held until the transaction's timeout (within a
   second either side) and races the coordinator's timeout abort, in the background
   while the user goes on; with `foreign_abort_ratio` a second client aborts the
   transaction beside the commit (workloads.foreign).

A conflicting ack is refused by the broker with TransactionConflict: a definite
`fail` of that ack. The user then stops acking and aborts the transaction (a
recorded `txn-abort`, so the history shows it ended; committing it would only make
the client abort it instead). Messages the aborted transaction acked are the
broker's to deliver again (Pulsar redelivers on abort; stuck-ack checks it);
messages it never acked are negatively acknowledged. The checker expects no committed-acked message to be delivered again to the
subscription (`lost-ack`) and every aborted-acked one to become deliverable again
(`stuck-ack`).

Messages are supplied by feeder users with non-transactional sends.
"""

from __future__ import annotations

import contextlib
from typing import ClassVar

from workloads.api import ConsumerApi
from workloads.context import LoadContext
from workloads.topology import SubscriptionRole, TopicRole
from workloads.workload import Received, UserKind, Workload


class AckOnly(Workload):
    kind: ClassVar[UserKind] = UserKind.ACK_ONLY

    def __init__(self, ctx: LoadContext) -> None:
        super().__init__(ctx)
        topics = ctx.topology.topics_for(TopicRole.ACK)
        if not topics:
            raise ValueError("the topology has no ack-only topics")
        ordinal = ctx.ordinal(self.kind.value)
        self.topic = topics[(ordinal // self.w.consumers_per_subscription) % len(topics)]
        self.subscription = ctx.topology.subscription_on(self.topic, SubscriptionRole.ACKS)
        self.group = ctx.ack_groups.get(self.topic, self.subscription.name)
        self.consumer: ConsumerApi | None = None

    def setup(self) -> None:
        self.consumer = self.ctx.client.subscribe(
            self.topic, self.subscription.name, sub_type=self.subscription.sub_type.value,
            consumer_name=self.process, receiver_queue_size=max(2, self.w.acks_per_txn),
            timeout_s=self.op_timeout_s)
        self.ctx.feed.add_consumer(self.topic)

    def teardown(self) -> None:
        self.group.release(self.process)
        if self.consumer is not None:
            self.ctx.feed.remove_consumer(self.topic)
            self.close_quietly(self.consumer)
            self.consumer = None

    def iterate(self) -> None:
        assert self.consumer is not None
        if not self.session.begin_iteration():
            return
        own = self.receive_batch(self.consumer, self.subscription.name, self.w.acks_per_txn)
        if not own:
            self.ctx.feed.starved(self.topic)
            return
        self.group.hold(self.process, own)
        try:
            self._transaction(own)
        finally:
            self.group.release(self.process)

    def _transaction(self, own: list[Received]) -> None:
        assert self.consumer is not None
        to_ack = list(own)
        stolen: Received | None = None
        if self.rng.random() < self.w.conflict_ratio:
            found = self.group.steal(self.process, self.rng)
            if found is not None:
                stolen = found[1]
                to_ack.insert(self.rng.randrange(len(to_ack) + 1), stolen)
                self.ctx.counters.ack_steals += 1
        txn = self.open_txn()
        if txn is None:
            self._give_back(own)
            return
        abort = self.rng.random() < self.w.abort_ratio
        hold_s = self.draw_hold_s(self.w.ack_hold_s)
        ending = self.draw_ending()
        acked_stolen = False
        held: list[Received] = []
        for received in to_ack:
            if self.ctx.stopping.is_set():
                abort = True
                break
            outcome = self.ack(self.consumer, received, self.subscription.name, txn=txn)
            if outcome.ok or not outcome.definite:
                held.append(received)
            if not outcome.ok:
                abort = True  # the transaction cannot commit now
                break
            acked_stolen = acked_stolen or received is stolen

        def end() -> None:
            failed = abort or (hold_s > 0 and self.ctx.stopping.wait(hold_s))   # a stop in the hold aborts
            ended = self.end_txn(txn, abort=failed, ending=ending)
            if ended.ok and not failed:
                self.ctx.feed.consumed(self.topic, len(own) + (1 if acked_stolen else 0))
            else:
                self._give_back([r for r in own if not any(r is h for h in held)])

        if ending.at_timeout and not abort and self.finish_later(end):
            return    # it commits at its timeout, in the background: the user goes on
        end()

    def _give_back(self, own: list[Received]) -> None:
        """Negatively acknowledge messages no transaction acked (see workloads.ctp)."""
        assert self.consumer is not None
        for received in own:
            with contextlib.suppress(Exception):  # a reconnecting consumer redelivers them anyway
                self.consumer.negative_acknowledge(received.message)
