"""PersistentSubscription: a cursor, its consumers, a dispatcher and a pending-ack handle.

The dispatcher type follows the first consumer (Exclusive and Failover: single active;
Shared: round-robin) and may change only when the subscription has no consumers, as
in Pulsar. Non-transactional acks apply to the cursor at once; an ACK with a
request_id is answered after the cursor has persisted it. Transactional acks go to
the pending-ack handle. Seeking resets the cursor and disconnects the consumers so
they resubscribe from the new position (PersistentSubscription.resetCursor).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from embedded.broker.consumer import Consumer
from embedded.broker.dispatcher import Dispatcher, SharedDispatcher, SingleActiveDispatcher
from embedded.broker.managed_ledger.cursor import ManagedCursor
from embedded.broker.position import Position
from embedded.broker.txn_api import PendingAckHandle, TxnAck, TxnError
from harness.wire import ServerError, SubType, TxnId

if TYPE_CHECKING:
    from embedded.broker.topic import PersistentTopic

log = logging.getLogger(__name__)

SUB_TYPE_NAMES = {SubType.Exclusive: "Exclusive", SubType.Shared: "Shared", SubType.Failover: "Failover",
                  SubType.Key_Shared: "Key_Shared"}


class ConsumerBusy(Exception):
    """The subscription cannot take this consumer (ServerError.ConsumerBusy)."""


class SubscriptionBusy(ConsumerBusy):
    """A seek while another is in progress (Pulsar: "Failed to fence subscription", ConsumerBusy)."""


class Subscription:
    def __init__(self, topic: PersistentTopic, name: str, cursor: ManagedCursor, *, durable: bool) -> None:
        self._topic = topic
        self._name = name
        self._cursor = cursor
        self.durable = durable
        self.sub_type: SubType | None = None
        self.dispatcher: Dispatcher | None = None
        provider = topic.broker.txn_registry.pending_ack_provider(topic.name.domain)
        self._pending_ack: PendingAckHandle = provider.create(self)
        self.closed = False
        # Set while a seek resets the cursor: consumers that subscribe meanwhile wait for its end.
        self._reset_done: asyncio.Event | None = None

    # ---- SubscriptionServices -----------------------------------------------------------------

    @property
    def topic(self) -> PersistentTopic:
        return self._topic

    @property
    def name(self) -> str:
        return self._name

    @property
    def cursor(self) -> ManagedCursor:
        return self._cursor

    @property
    def pending_ack(self) -> PendingAckHandle:
        return self._pending_ack

    def redeliver(self, positions: Iterable[Position]) -> None:
        if self.dispatcher is not None:
            self.dispatcher.redeliver_positions(sorted(positions))

    def wake(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.wake()

    # ---- lifecycle ----------------------------------------------------------------------------

    async def init(self) -> None:
        await self._pending_ack.recover()

    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers if self.dispatcher is not None else []

    async def add_consumer(self, consumer: Consumer) -> None:
        """Add a consumer; one that subscribes during a seek is added only after the reset.

        Pulsar's PersistentSubscription.addConsumer chains on the reset in progress. Were the
        consumer added at once, the client (which reconnects as soon as the seek closed its
        consumer) could get messages before the seek's response, and the C++ client clears
        its receive queue on that response: the messages would be lost to it, still pending
        here, and never redelivered.
        """
        while self._reset_done is not None:
            await self._reset_done.wait()
        sub_type = consumer.sub_type
        if sub_type is SubType.Key_Shared:
            raise TxnError(ServerError.NotAllowedError,
                           "Key_Shared subscriptions are not supported by the embedded broker; use Shared or Failover")
        if self.dispatcher is not None and self.dispatcher.consumers:
            if sub_type is not self.sub_type:
                current = SUB_TYPE_NAMES.get(self.sub_type, "?") if self.sub_type is not None else "none"
                raise ConsumerBusy(f"Subscription {self._name} is of a different type ({current})")
            if sub_type is SubType.Exclusive:
                raise ConsumerBusy(f"Exclusive consumer is already connected to {self._name}")
        if self.dispatcher is None or (not self.dispatcher.consumers and sub_type is not self.sub_type):
            if self.dispatcher is not None:
                await self.dispatcher.close()
            self.sub_type = sub_type
            self.dispatcher = (SharedDispatcher(self) if sub_type is SubType.Shared
                               else SingleActiveDispatcher(self, failover=sub_type is SubType.Failover))
        self.dispatcher.add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        if self.dispatcher is not None:
            self.dispatcher.remove_consumer(consumer)

    async def close(self, *, disconnect: bool = True) -> None:
        """Unload: tell consumers to reconnect, stop dispatching, persist the cursor."""
        if self.closed:
            return
        self.closed = True
        for consumer in list(self.consumers):
            if disconnect:
                consumer.close_by_broker()
            consumer.closed = True
            consumer.cnx.forget_consumer(consumer)
        if self.dispatcher is not None:
            await self.dispatcher.close()
        try:
            await self._pending_ack.close()
        except Exception:
            log.exception("%s/%s: closing the pending-ack handle failed", self._topic.name, self._name)
        await self._cursor.close()

    # ---- acknowledgements ---------------------------------------------------------------------

    def acknowledge(self, consumer: Consumer, acks: Sequence[tuple[Position, Sequence[int] | None]],
                    cumulative: bool) -> None:
        positions = [p for p, _ in acks]
        self._pending_ack.check_plain_ack(positions, cumulative)
        if cumulative:
            if self.sub_type is SubType.Shared:
                raise TxnError(ServerError.NotAllowedError,
                               f"cumulative acks are not allowed on Shared subscription {self._name}")
            position, ack_set = acks[-1]
            self._cursor.acknowledge_cumulative(position, ack_set or None)
            consumer.acked([p for p in (consumer.pending or ()) if p <= position])
        else:
            self._cursor.acknowledge(acks)
            consumer.acked([p for p, ack_set in acks if not ack_set])
        if self.dispatcher is not None:
            self.dispatcher.on_acked(positions)

    def acknowledge_internally(self, acks: list[tuple[Position, None]]) -> None:
        """Markers and aborted entries, acknowledged by the dispatcher for the subscription."""
        self._cursor.acknowledge(acks)

    async def transactional_ack(self, consumer: Consumer, txn: TxnId,
                                acks: Sequence[tuple[Position, Sequence[int] | None]], cumulative: bool) -> None:
        if cumulative:
            if self.sub_type is SubType.Shared:
                raise TxnError(ServerError.NotAllowedError,
                               f"cumulative acks are not allowed on Shared subscription {self._name}")
            position, ack_set = acks[-1]
            await self._pending_ack.cumulative_ack(txn, TxnAck(position, tuple(ack_set) if ack_set else None, 0))
        else:
            await self._pending_ack.individual_ack(txn, [
                TxnAck(p, tuple(s) if s else None, 0) for p, s in acks])
        consumer.acked([p for p, ack_set in acks if not ack_set])

    # ---- seek ---------------------------------------------------------------------------------

    async def reset_to(self, position: Position) -> None:
        """Deliver from `position` on: everything before it counts as acknowledged, nothing after.

        Consumers that subscribe before it returns are added after it (`add_consumer`); the
        caller answers the seek before they are, as it runs on straight from this return.
        """
        if self._reset_done is not None:
            raise SubscriptionBusy(f"Failed to fence subscription {self._name}: a seek is in progress")
        done = self._reset_done = asyncio.Event()
        try:
            mark_delete = Position(position.ledger_id, position.entry_id - 1)
            for consumer in list(self.consumers):   # they resubscribe and read from the new position
                consumer.close_by_broker()
                consumer.cnx.forget_consumer(consumer)
                self.remove_consumer(consumer)
            self._cursor.reset(mark_delete)
            if self.dispatcher is not None:
                self.dispatcher.reset()
            if self.durable:
                await self._cursor.flush()
        finally:
            self._reset_done = None
            done.set()

    # ---- stats --------------------------------------------------------------------------------

    def backlog(self) -> int:
        ml = self._topic.ledger
        horizon = ml.last_confirmed
        mark_delete = self._cursor.mark_delete_position
        total = ml.entries_between(mark_delete, horizon)
        acked = self._cursor.state.acked
        if len(acked):
            total -= sum(acked.count_in_ledger(lid, first, last) for lid, first, last in list(acked.ranges()))
        return max(0, total)

    def read_position(self) -> Position:
        """Where this subscription reads next: its dispatcher's position (past the entries it
        read, delivered or skipped as markers and aborted messages; at an entry it could not
        read, such as one the ledger store lost), or the entry after the mark-delete position."""
        ml = self._topic.ledger
        dispatcher = self.dispatcher
        position = (dispatcher.read_position if dispatcher is not None
                    else ml.next_position(self._cursor.mark_delete_position))
        return ml.normalize(position)

    def stats(self) -> dict[str, Any]:
        consumers = [c.stats() for c in self.consumers]
        dispatcher = self.dispatcher
        return {
            "type": SUB_TYPE_NAMES.get(self.sub_type, "None") if self.sub_type is not None else "None",
            "msgBacklog": self.backlog(),
            "msgOutCounter": sum(c["msgOutCounter"] for c in consumers),
            "bytesOutCounter": sum(c["bytesOutCounter"] for c in consumers),
            "unackedMessages": sum(c["unackedMessages"] for c in consumers),
            "isDurable": self.durable,
            "consumers": consumers,
            "msgRedeliverCount": len(getattr(dispatcher, "redelivery", ())),
            "pendingAck": self._pending_ack.stats(),
            "markDeletePosition": str(self._cursor.mark_delete_position),
            "readPosition": str(dispatcher.read_position) if dispatcher is not None else None,
        }
