"""A consumer on a subscription: its permits, its unacknowledged messages, and MESSAGE frames.

Permits are counted in messages, as in Pulsar: a batch entry of n messages takes n
permits, and a consumer with any permit left may receive a whole batch (its permits
may go negative). In Shared subscriptions the consumer remembers what it was sent and
has not acknowledged (`pending`), so that when it leaves those entries go to the
other consumers; single-active subscriptions rewind instead.

An Exclusive or Failover consumer keeps the client's consumer epoch (PIP-84, Pulsar
2.10+): SUBSCRIBE sets it, a REDELIVER that carries a higher one raises it, and every
MESSAGE is stamped with it, so the client can drop what was dispatched before its
redelivery (the rewound cursor sends it again).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from embedded.broker.entry import Entry
from embedded.broker.position import Position
from harness.wire import Command, CommandType, Payload, SubType, proto

if TYPE_CHECKING:
    from embedded.broker.server_cnx import ServerCnx
    from embedded.broker.subscription import Subscription

_MESSAGE = CommandType.MESSAGE
_EPOCH_SUB_TYPES = (SubType.Exclusive, SubType.Failover)


class Consumer:
    def __init__(self, subscription: Subscription, cnx: ServerCnx, consumer_id: int, name: str, *,
                 sub_type: SubType, priority: int, metadata: dict[str, str], track_pending: bool,
                 max_unacked: int = 0, epoch: int | None = None) -> None:
        self.subscription = subscription
        self.cnx = cnx
        self.consumer_id = consumer_id
        self.name = name
        self.sub_type = sub_type
        self.priority = priority
        self.metadata = metadata
        self.permits = 0
        self.pending: dict[Position, int] | None = {} if track_pending else None
        self.closed = False
        self.reached_end_sent = False
        self.connected_since = time.time()
        self.msgs_out = 0
        self.bytes_out = 0
        self.unacked_messages = 0
        self.max_unacked = max_unacked if track_pending else 0
        self.blocked = False
        self.epoch = epoch if sub_type in _EPOCH_SUB_TYPES else None

    @property
    def available(self) -> bool:
        return not self.closed and self.permits > 0 and not self.blocked

    def _check_blocked(self) -> None:
        """Pulsar's maxUnackedMessagesPerConsumer: block at the limit, unblock below half of it."""
        limit = self.max_unacked
        if limit <= 0:
            return
        if not self.blocked and self.unacked_messages >= limit:
            self.blocked = True
        elif self.blocked and self.unacked_messages < limit // 2:
            self.blocked = False
            dispatcher = self.subscription.dispatcher
            if dispatcher is not None:
                dispatcher.wake()

    def send_entries(self, batch: list[tuple[Entry, int, list[int] | None]]) -> int:
        """Send (entry, redelivery count, ack set) triples as MESSAGE frames; returns messages sent."""
        cnx = self.cnx
        consumer_id = self.consumer_id
        pending = self.pending
        epoch = self.epoch
        sent = 0
        size = 0
        for entry, redelivery, ack_set in batch:
            body = proto.CommandMessage(consumer_id=consumer_id)
            message_id = body.message_id
            message_id.ledgerId = entry.position.ledger_id
            message_id.entryId = entry.position.entry_id
            if redelivery:
                body.redelivery_count = redelivery
            if ack_set is not None:
                body.ack_set.extend(ack_set)
            if epoch is not None:
                body.consumer_epoch = epoch
            cnx.send(Command(_MESSAGE, body, Payload.parse(entry.data, verify=False)))
            count = entry.info.num_messages
            sent += count
            size += len(entry.data)
            if pending is not None:
                pending[entry.position] = count
        self.permits -= sent
        self.msgs_out += sent
        self.bytes_out += size
        self.unacked_messages += sent
        self._check_blocked()
        self.subscription.topic.counters.dispatched(sent, size)
        return sent

    def raise_epoch(self, epoch: int) -> None:
        """A redelivery's epoch: what is dispatched from now on carries it (never lowered)."""
        if self.epoch is not None and epoch > self.epoch:
            self.epoch = epoch

    def acked(self, positions: list[Position]) -> None:
        pending = self.pending
        if pending is None:
            self.unacked_messages = max(0, self.unacked_messages - len(positions))
            return
        for position in positions:
            count = pending.pop(position, None)
            if count is not None:
                self.unacked_messages = max(0, self.unacked_messages - count)
        self._check_blocked()

    def take_pending(self) -> list[Position]:
        """Everything sent and not acknowledged (Shared); cleared."""
        if not self.pending:
            return []
        positions = sorted(self.pending)
        self.pending.clear()
        self.unacked_messages = 0
        self._check_blocked()
        return positions

    def close_by_broker(self) -> None:
        """Tell the client to reconnect (topic unloaded, seek, ...)."""
        if not self.closed and not self.cnx.closed:
            self.cnx.send(Command(CommandType.CLOSE_CONSUMER, proto.CommandCloseConsumer(
                consumer_id=self.consumer_id, request_id=0)))

    def active_change(self, active: bool) -> None:
        if not self.cnx.closed:
            self.cnx.send(Command(CommandType.ACTIVE_CONSUMER_CHANGE, proto.CommandActiveConsumerChange(
                consumer_id=self.consumer_id, is_active=active)))

    def reached_end_of_topic(self) -> None:
        if not self.cnx.understands_end_of_topic:
            return
        if not self.reached_end_sent and not self.cnx.closed:
            self.reached_end_sent = True
            self.cnx.send(Command(CommandType.REACHED_END_OF_TOPIC, proto.CommandReachedEndOfTopic(
                consumer_id=self.consumer_id)))

    def stats(self) -> dict[str, Any]:
        return {"consumerName": self.name, "availablePermits": self.permits, "unackedMessages": self.unacked_messages,
                "msgOutCounter": self.msgs_out, "bytesOutCounter": self.bytes_out, "address": self.cnx.remote,
                "connectedSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.connected_since)),
                "priorityLevel": self.priority, "metadata": self.metadata,
                "blockedConsumerOnUnackedMsgs": self.blocked}
