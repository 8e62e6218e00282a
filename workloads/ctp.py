"""consume-transform-produce: an exactly-once pipeline.

Each user consumes one `ctp-input` topic through the Shared subscription `ctp`
(users are spread over the input topics in turn, `ctp_consumers_per_subscription` at a
time: 1 by default, one user per topic before the next topic gets its second). An iteration:

1. receives up to `acks_per_txn` inputs (waiting at most a second for the first),
   recording a `receive` event for each;
   with `ctp_consumers_per_subscription` 2 or more, the user publishes them to its group
   (workloads.shared.AckGroup: the process's users of the same subscription) and, with
   probability `conflict_ratio`, also takes one input a sibling holds right now, so two
   transactions process and ack the same message: Pulsar's ack-conflict rule must refuse
   one of the acks (TransactionConflict, a definite `fail`; that transaction aborts), or,
   when the other transaction already ended, commit it once (the checker's `double-ack`
   and `ctp-duplicate` see it otherwise);
2. opens a transaction;
3. sends min(`messages_per_txn`, inputs) outputs to `ctp-output` topics (spread over
   `topics_per_txn` of them); output j carries the inputs j, j+k, j+2k ... in its
   payload and in the history's `inputs`, so every input is carried by exactly one
   output of the transaction (`send_concurrency` of them in flight at once, each on its
   own process lane; any failed one makes the transaction abort);
4. acks every input in the transaction;
5. with `ack_hold_s`, keeps the transaction open that long (its acks pending) and
   aborts it if the load stops meanwhile;
6. commits, or aborts on purpose with probability `abort_ratio` (and aborts when a
   send or ack failed). With `timeout_commit_ratio` the commit is held until the
   transaction's timeout (within a second either side) and races the coordinator's
   timeout abort, in the background while the user goes on; with `foreign_abort_ratio`
   a second client aborts the transaction beside the commit (workloads.foreign).

When the transaction did not commit, inputs it acked are delivered again by the
broker (Pulsar's pending-ack store redelivers on abort; the checker's stuck-ack
checks it); inputs it never acked are negatively acknowledged so they come back too
(never one taken from a sibling: that one is its holder's to settle).
The checker then expects each input to have exactly one visible output once its ack
committed (`ctp-loss`, `ctp-duplicate`).

Inputs are supplied by feeder users (workloads.feeder) with non-transactional sends.
The same pipeline on a Failover subscription with cumulative acks is
workloads.ctp_cumulative; the last input topic is its when `ctp_cumulative_users` > 0.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

from workloads.api import ConsumerApi
from workloads.context import LoadContext
from workloads.shared import AckGroup
from workloads.topology import SubscriptionRole, TopicRole
from workloads.workload import Ending, OpenTxn, Received, UserKind, Workload


@dataclass
class _Work:
    """One transaction's inputs and how far it got (its end may run in the background)."""

    txn: OpenTxn
    inputs: list[Received]               # in the order they are carried and acked
    stolen: Received | None              # the one taken from a sibling, if any (also in `inputs`)
    on_purpose: bool                     # abort on purpose
    hold_s: float
    ending: Ending
    failed: bool = False
    held: list[Received] | None = None   # inputs the transaction may have acked


class ConsumeTransformProduce(Workload):
    kind: ClassVar[UserKind] = UserKind.CONSUME_TRANSFORM_PRODUCE
    cumulative: ClassVar[bool] = False
    """Whether this user's input subscription is Failover and its transactions ack cumulatively
    (workloads.ctp_cumulative); Shared and individual acks otherwise."""

    def __init__(self, ctx: LoadContext) -> None:
        super().__init__(ctx)
        inputs = ctx.topology.ctp_inputs(cumulative=self.cumulative)
        self.outputs = ctx.topology.topics_for(TopicRole.CTP_OUTPUT)
        if not inputs or not self.outputs:
            raise ValueError("the topology has no consume-transform-produce topics")
        ordinal = ctx.ordinal(self.kind.value)
        self.input_topic = inputs[(ordinal // self.w.ctp_consumers_per_subscription) % len(inputs)]
        self.subscription = ctx.topology.subscription_on(self.input_topic, SubscriptionRole.CTP)
        self.consumer: ConsumerApi | None = None
        self.per_txn_topics = min(self.w.topics_per_txn, len(self.outputs))
        self.group: AckGroup | None = (ctx.ack_groups.get(self.input_topic, self.subscription.name)
                                       if self.w.ctp_consumers_per_subscription > 1 and not self.cumulative
                                       else None)

    def setup(self) -> None:
        self.consumer = self.ctx.client.subscribe(
            self.input_topic, self.subscription.name, sub_type=self.subscription.sub_type.value,
            consumer_name=self.process, receiver_queue_size=max(2, self.w.acks_per_txn),
            timeout_s=self.op_timeout_s)
        self.ctx.feed.add_consumer(self.input_topic)

    def teardown(self) -> None:
        if self.group is not None:
            self.group.release(self.process)
        if self.consumer is not None:
            self.ctx.feed.remove_consumer(self.input_topic)
            self.close_quietly(self.consumer)
            self.consumer = None

    def iterate(self) -> None:
        assert self.consumer is not None
        if not self.session.begin_iteration():
            return
        got = self.receive_batch(self.consumer, self.subscription.name, self.w.acks_per_txn)
        if not got:
            if self.starved():
                self.ctx.feed.starved(self.input_topic)
            return
        inputs = [r for r in got if r.decoded is not None]
        for foreign in (r for r in got if r.decoded is None):  # not ours: settle it, recorded
            self.ack(self.consumer, foreign, self.subscription.name, txn=None)
        if not inputs:
            return
        if self.group is None:
            self._process(inputs, None)
            return
        self.group.hold(self.process, inputs)
        try:
            self._process(inputs, self._steal())
        finally:
            self.group.release(self.process)

    def starved(self) -> bool:
        """Whether finding no input means the topic ran dry (the feeders then restart its count)."""
        return True

    def _steal(self) -> Received | None:
        """With probability `conflict_ratio`, an input a sibling of the group holds now (drawn only
        with a group, so a run without one draws what it drew before)."""
        assert self.group is not None
        if self.rng.random() >= self.w.conflict_ratio:
            return None
        found = self.group.steal(self.process, self.rng)
        if found is None or found[1].value is None:
            return None
        self.ctx.counters.ack_steals += 1
        return found[1]

    def _process(self, own: list[Received], stolen: Received | None) -> None:
        """One transaction over `own` inputs (and `stolen`, at a random place among them)."""
        inputs = list(own)
        if stolen is not None:
            inputs.insert(self.rng.randrange(len(inputs) + 1), stolen)
        txn = self.open_txn()
        if txn is None:
            self.give_back(own)
            return
        work = self._transform(txn, inputs, stolen)
        if (work.ending.at_timeout and not (work.failed or work.on_purpose)
                and self.finish_later(lambda: self._end(work))):
            return    # it commits at its timeout, in the background: the user goes on
        self._end(work)

    def _end(self, work: _Work) -> None:
        """Hold, end the transaction, then account for its inputs."""
        held = work.held or []
        failed = work.failed
        if not failed and work.hold_s > 0 and self.ctx.stopping.wait(work.hold_s):
            failed = True   # the load stops during the hold: end it now, by abort
        ended = self.end_txn(work.txn, abort=failed or work.on_purpose, ending=work.ending)
        if ended.ok and not (failed or work.on_purpose):
            self.ctx.feed.consumed(self.input_topic, len(work.inputs))
        else:
            self.give_back([r for r in work.inputs
                             if r is not work.stolen and not any(r is h for h in held)])

    def _transform(self, txn: OpenTxn, inputs: list[Received], stolen: Received | None) -> _Work:
        """Outputs, then the inputs' acks: what the transaction did, for its end (`_end`)."""
        assert self.consumer is not None
        on_purpose = self.rng.random() < self.w.abort_ratio
        failed = False
        held: list[Received] = []
        groups = min(self.w.messages_per_txn, len(inputs))
        topics = self.rng.sample(self.ctx.writable(self.outputs, self.per_txn_topics), self.per_txn_topics)
        hold_s = self.draw_hold_s(self.w.ack_hold_s)
        ending = self.draw_ending()
        if self.w.send_concurrency > 1 and groups > 1:
            failed = not self._send_at_once(txn, inputs, groups, topics)
        for j in range(groups if self.w.send_concurrency <= 1 else 0):
            carried = inputs[j::groups]
            if self.ctx.stopping.is_set():
                failed = True
                break
            key = carried[0].message.key
            sent = self.send(topics[j % len(topics)], txn=txn, key=key,
                             inputs=tuple(r.value for r in carried if r.value is not None))
            if not sent.ok:
                failed = True
                break
        if not failed:
            failed = not self.ack_inputs(txn, inputs, held)
        return _Work(txn, inputs, stolen, on_purpose, hold_s, ending, failed, held)

    def ack_inputs(self, txn: OpenTxn, inputs: list[Received], held: list[Received]) -> bool:
        """Ack `inputs` in `txn` (each of `to_ack`'s, in turn); those it may have acked go into `held`.
        True if all ok."""
        assert self.consumer is not None
        for received in self.to_ack(inputs):
            if self.ctx.stopping.is_set():
                return False
            acked = self.ack(self.consumer, received, self.subscription.name, txn=txn, cumulative=self.cumulative)
            if acked.ok or not acked.definite:
                held.append(received)
            if not acked.ok:
                return False
        return True

    def to_ack(self, inputs: list[Received]) -> list[Received]:
        """The messages the transaction acks: every input, individually."""
        return inputs

    def _send_at_once(self, txn: OpenTxn, inputs: list[Received], groups: int, topics: list[str]) -> bool:
        """The outputs with `send_concurrency` in flight together (each on its own lane); True if all ok."""
        if self.ctx.stopping.is_set():
            return False
        planned = [(topics[j % len(topics)], inputs[j::groups][0].message.key,
                    tuple(r.value for r in inputs[j::groups] if r.value is not None), self.values.next())
                   for j in range(groups)]
        outcomes = self.send_together(txn, [(topic, key, value, carried) for topic, key, carried, value in planned])
        return all(o.ok for o in outcomes)

    def give_back(self, inputs: list[Received]) -> None:
        """Ask for redelivery of inputs no transaction acked (not a history op).

        Inputs acked in a transaction that then aborted are the broker's to deliver again
        (Pulsar's pending-ack store redelivers them on abort); asking here too would hide
        a broker that does not, which the checker's stuck-ack is there to find.
        """
        assert self.consumer is not None
        for received in inputs:
            with contextlib.suppress(Exception):  # a reconnecting consumer redelivers them anyway
                self.consumer.negative_acknowledge(received.message)
