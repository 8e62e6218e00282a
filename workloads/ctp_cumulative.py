"""consume-transform-produce with cumulative acks on a Failover subscription.

Stream processors that keep their input's order (one consumer per partition, a
standby for each) consume through a Failover or Exclusive subscription and commit
their progress as one cumulative ack per partition in each transaction: Pulsar's
`acknowledgeCumulativeAsync(message, txn)`. That is a different part of Pulsar from
the Shared pipeline's individual acks: the pending-ack handle keeps one cumulative
position per transaction and refuses a second transaction's (conflict) or one behind
the mark-delete position; an abort rewinds the single active consumer's cursor; the
consumer epoch (PIP-84) has the client drop what was dispatched before its
redelivery; and a standby takes over a partition, with a transaction's cumulative ack
pending, when the active consumer's process dies or is cut off.

`workload.ctp_cumulative_users` such users run in every load process (fixed-count
users, so each Failover subscription has an active consumer and standbys whatever the
mix draws), all on the last consume-transform-produce input topic, whose `ctp`
subscription is Failover (workloads.topology). An iteration is the Shared pipeline's
(workloads.ctp) with two differences:

* the transaction acks, for each partition or segment its inputs came from, the last
  input it received from there, cumulatively (one `ack` op with `extra.cumulative`;
  the checker counts it for every message at or before it on that subscription);
* when the transaction did not commit (aborted, failed, or its end unknown), the user
  asks the broker for everything unacknowledged again (REDELIVER_UNACKNOWLEDGED_MESSAGES,
  which raises the consumer epoch and drops the client's queue), as a Java application
  must: the broker's own redelivery after the abort rewinds the cursor without a new
  epoch, so the messages queued behind the aborted ones would otherwise be processed
  first, and the next cumulative ack would cover inputs nobody transformed. What the
  broker does with the aborted cumulative ack is still checked (stuck-ack, double-ack).

No sibling's input is ever taken (`conflict_ratio` applies to the Shared pipeline):
conflicts here come from the subscription itself, when a consumer that lost a
partition still acks what it was sent before the switch.
"""

from __future__ import annotations

import contextlib
from typing import ClassVar

from workloads.ctp import ConsumeTransformProduce
from workloads.workload import Received, UserKind


class CumulativeConsumeTransformProduce(ConsumeTransformProduce):
    kind: ClassVar[UserKind] = UserKind.CTP_CUMULATIVE
    cumulative: ClassVar[bool] = True

    def starved(self) -> bool:
        """A standby consumer receives nothing by design: only an active one's silence is a dry topic."""
        return getattr(self.consumer, "is_active", True) is not False

    def to_ack(self, inputs: list[Received]) -> list[Received]:
        """For each partition or segment, the last input received from it (acked cumulatively)."""
        last: dict[tuple[str, str | None], Received] = {}
        for received in inputs:
            last[(received.message.topic, received.message.segment)] = received
        return list(last.values())

    def give_back(self, inputs: list[Received]) -> None:
        """Everything unacknowledged again, whichever inputs the transaction held (the module docstring)."""
        assert self.consumer is not None
        with contextlib.suppress(Exception):   # a reconnecting consumer is sent them again anyway
            self.consumer.redeliver_unacknowledged()
