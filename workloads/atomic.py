"""atomic-produce: many messages over several topics, all or nothing.

Each iteration opens a transaction, sends `messages_per_txn` messages spread round
robin over `topics_per_txn` distinct topics (picked at random from the run's
`atomic` topics), each with a key from `keys` and a payload padded to
`message_size`, then commits, or, with probability `abort_ratio`, aborts on purpose.
With `hold_s` the transaction stays open that long after its sends (so about one
transaction per user is open at any moment: experiment 3 kills a coordinator
with many open); a stop during the hold aborts it.
A send that fails ends the transaction early with an abort: the application knows
it cannot commit. The checker then expects every value of a committed transaction
in the final reads and none of an aborted one.
"""

from __future__ import annotations

from typing import ClassVar

from workloads.context import LoadContext
from workloads.topology import TopicRole
from workloads.workload import UserKind, Workload


class AtomicProduce(Workload):
    kind: ClassVar[UserKind] = UserKind.ATOMIC_PRODUCE

    def __init__(self, ctx: LoadContext) -> None:
        super().__init__(ctx)
        self.topics = ctx.topology.topics_for(TopicRole.ATOMIC)
        if not self.topics:
            raise ValueError("the topology has no atomic-produce topics")
        self.per_txn = min(self.w.topics_per_txn, len(self.topics))

    def iterate(self) -> None:
        if not self.session.begin_iteration():
            return
        txn = self.open_txn()
        if txn is None:
            return
        abort = self.rng.random() < self.w.abort_ratio
        chosen = self.rng.sample(self.topics, self.per_txn)
        for index in range(self.w.messages_per_txn):
            if self.ctx.stopping.is_set():
                abort = True
                break
            sent = self.send(chosen[index % len(chosen)], txn=txn, key=self.pick_key())
            if not sent.ok:
                abort = True
                break
        if not abort and self.w.hold_s > 0 and self.ctx.stopping.wait(self.w.hold_s):
            abort = True
        self.end_txn(txn, abort=abort)
