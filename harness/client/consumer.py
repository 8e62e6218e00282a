"""Consumers: one per topic, partition or segment, feeding one receive queue per `Consumer`.

Theory of operation
-------------------
`TopicConsumer` is a reconnecting handler for one concrete topic. On attach it sends
SUBSCRIBE and, unless its flow is held (a v5 child segment whose parents are not
drained yet), FLOW with the whole receiver queue as permits. Each MESSAGE is
checksum-verified, unpacked (batches become one `Message` per index, skipping indexes
the broker's `ack_set` marks as already acknowledged) and appended to the shared
`ReceiveQueue`. Permits are returned to the broker in FLOW once the application has
taken half the receiver queue, as the Java client does.

Every attach starts a new *epoch*. Messages queued under an older epoch are dropped
by `receive()` (the connection that delivered them is gone; the broker redelivers
them), which is how "the receiver queue of the lost connection is dropped" is done
without scanning the shared queue. Exclusive and Failover consumers also keep the
broker's *consumer epoch* (PIP-84, Pulsar 2.10+), as Java's `ConsumerBase` does: SUBSCRIBE
carries it, redelivering everything raises it and REDELIVER carries the new one, and a
MESSAGE the broker stamped with an older one was dispatched before that redelivery and is
dropped (its permit returned): the broker sends it again from the rewound cursor, so
without the epoch a message in flight at a redelivery would reach the application twice
and out of order. A non-durable consumer (a reader) resubscribes
from the last message it handed out and drops anything at or before it.

Acknowledgements always ask for a receipt (`request_id`, protocol v17+) and wait for
ACK_RESPONSE; a batch message is acked by its entry id plus an `ack_set` bit set of
the indexes that stay unacknowledged (batch-index acknowledgement; the broker needs
`acknowledgmentAtBatchIndexLevelEnabled`, the default from Pulsar 4.1 (PIP-391; off in
4.0.8 and before), or it acks the whole entry). A transactional ack first registers (topic, subscription) with the
coordinator (ADD_SUBSCRIPTION_TO_TXN).

`Consumer` is what users hold: it owns the receive queue and routes acks to the
`TopicConsumer` a message came from (partitions and v5 segments each have their own).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.client.connection import ClientConnection, next_request_id, next_resource_id
from harness.client.errors import (
    AlreadyClosedError,
    ConnectionLostError,
    InvalidStateError,
    NotReadyError,
    NotSentError,
    Op,
    OperationTimeoutError,
    SetupError,
    server_error,
    setup_error,
)
from harness.client.handler import ClientContext, HandlerState, ReconnectingHandler
from harness.client.timers import Deadline
from harness.errors import OperationError
from harness.wire import (
    AckType,
    AckValidationError,
    Command,
    CommandType,
    InitialPosition,
    MessageFormatError,
    MessageId,
    ServerError,
    SubType,
    commands,
    unpack_messages,
)

if TYPE_CHECKING:
    from harness.client.scalable import SegmentTracker
    from harness.client.transaction import Transaction

log = logging.getLogger(__name__)

# The subscription types whose consumers keep the broker's consumer epoch (Java's `isValidConsumerEpoch`).
_EPOCH_SUB_TYPES = (SubType.Exclusive, SubType.Failover)

_INT64 = 1 << 64
_INT63 = 1 << 63


@dataclass(frozen=True, slots=True, eq=False)
class Message:
    """One received message.

    Attributes:
        message_id: where it is stored (batch index set inside a batch).
        data: the payload.
        key: the message key, if any.
        properties: the message properties.
        redelivery_count: how often the broker delivered it before.
        topic: the logical topic the consumer subscribed to.
        segment: the partition or v5 segment it came from; None for a plain topic.
        publish_time_ms: the producer's publish time.
        event_time_ms: the event time, if set.
        producer_name: the producer that sent it.
        sequence_id: its producer sequence id.
        arrived_ns: `time.monotonic_ns()` when its MESSAGE frame arrived from the broker.
            A message can wait in the receiver queue after the broker dispatched it; the
            history needs the dispatch side of that wait to tell "dispatched before an
            ack committed" from "delivered again after it".
    """

    message_id: MessageId
    data: bytes
    key: str | None
    properties: Mapping[str, str]
    redelivery_count: int
    topic: str
    segment: str | None
    publish_time_ms: int
    event_time_ms: int | None
    producer_name: str
    sequence_id: int
    source: TopicConsumer = field(repr=False)
    epoch: int = field(repr=False, default=0)
    arrived_ns: int = field(repr=False, default=0)

    @property
    def msg_id(self) -> str:
        """The history form `"<ledger>:<entry>:<batch_index>"`."""
        return str(self.message_id)


@dataclass(frozen=True)
class ConsumerOptions:
    """How consumers are created.

    `initial_position` defaults to Earliest (Pulsar's default is Latest) so a
    subscription made just after a send still sees it.
    """

    sub_type: SubType = SubType.Exclusive
    consumer_name: str | None = None
    initial_position: InitialPosition = InitialPosition.Earliest
    receiver_queue_size: int = 1000
    durable: bool = True
    start_message_id: MessageId | None = None
    key_shared_ranges: tuple[tuple[int, int], ...] | None = None
    properties: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.receiver_queue_size < 1:
            raise ValueError(f"receiver_queue_size must be >= 1, got {self.receiver_queue_size}")


class ReceiveQueue:
    """Messages from every `TopicConsumer` of one `Consumer`, in arrival order."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: collections.deque[Message] = collections.deque()
        self._closed = False

    def put_many(self, messages: list[Message]) -> None:
        """Append; wakes waiting receivers."""
        with self._cond:
            self._items.extend(messages)
            self._cond.notify(len(messages))

    def wake(self) -> None:
        """Wake receivers (e.g. to notice end of topic)."""
        with self._cond:
            self._cond.notify_all()

    def get(self, deadline: Deadline, stop: Callable[[], bool] | None = None) -> Message | None:
        """The next current message, or None at the deadline (or when `stop()` turns true).

        Raises:
            AlreadyClosedError: the consumer was closed.
        """
        while True:
            with self._cond:
                while not self._items:
                    if self._closed:
                        raise AlreadyClosedError("the consumer is closed")
                    if stop is not None and stop():
                        return None
                    remaining = deadline.remaining()
                    if remaining <= 0:
                        return None
                    self._cond.wait(remaining)
                message = self._items.popleft()
            # outside the queue lock: accepting may write FLOW to the socket
            if message.source.accept(message):
                return message

    def __len__(self) -> int:
        return len(self._items)

    def close(self) -> None:
        """Wake and refuse receivers from now on."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def ack_set_words(batch_size: int, indexes: Iterable[int]) -> list[int]:
    """Java `BitSet.toLongArray()` of the given set indexes, as signed int64 words.

    As Java's, without trailing zero words: an ack of a batch's last unacknowledged messages
    (a batch of one, above all) carries no ack set at all, and a broker takes it as an ack of
    the whole entry. A zero word sent instead reaches code no Java client does (Pulsar's
    conflict check reads an all-zero pending ack set as empty, docs/findings).
    """
    words = [0] * ((batch_size + 63) // 64)
    for index in indexes:
        words[index // 64] |= 1 << (index % 64)
    while words and words[-1] == 0:
        words.pop()
    return [word - _INT64 if word >= _INT63 else word for word in words]


def _bit_is_set(words: list[int], index: int) -> bool:
    word = index // 64
    if word >= len(words):
        return False
    return bool((words[word] % _INT64) >> (index % 64) & 1)


class TopicConsumer(ReconnectingHandler):
    """A subscription on one concrete topic (plain, partition or segment)."""

    def __init__(self, ctx: ClientContext, topic: str, subscription: str, *, logical_topic: str,
                 segment: str | None, partition: int, options: ConsumerOptions,
                 queue: ReceiveQueue, hold_flow: bool = False) -> None:
        super().__init__(ctx, f"consumer {subscription!r} on {topic}")
        self.topic = topic
        self.subscription = subscription
        self.logical_topic = logical_topic
        self.segment = segment
        self.partition = partition
        self.options = options
        self.consumer_id = next_resource_id()
        self._queue = queue
        self._lock = threading.Lock()
        self._epoch = 0
        self._consumer_epoch = 0   # the broker's (PIP-84), distinct from `_epoch`: see the module docstring
        self._permits = 0
        self._queued = 0
        self._flow_held = hold_flow
        self._resume_after: MessageId | None = None
        self.is_active: bool | None = None
        self.reached_end = False
        self._end_listeners: list[Callable[[TopicConsumer], None]] = []

    # ---- attach ---------------------------------------------------------------------

    def _attach(self, deadline: Deadline) -> ClientConnection:
        address = self.ctx.lookup.lookup(self.topic, deadline)
        conn = self.ctx.pool.get(address.logical, address.physical, deadline)
        conn.register_consumer(self.consumer_id, self)
        with self._lock:
            self._epoch += 1
            self._permits = 0
            self._queued = 0
            start = self._resume_after or self.options.start_message_id
            consumer_epoch = self._consumer_epoch
        request_id = next_request_id()
        options = self.options
        command = commands.subscribe(
            self.topic, self.subscription, self.consumer_id, request_id,
            sub_type=options.sub_type, consumer_name=options.consumer_name,
            initial_position=options.initial_position,
            durable=None if options.durable else False,
            start_message_id=start if not options.durable else None,
            metadata=options.properties,
            key_shared_ranges=list(options.key_shared_ranges) if options.key_shared_ranges
            else None,
            consumer_epoch=consumer_epoch,
        )
        try:
            answer = conn.request(command, request_id, max(0.001, deadline.remaining()))
        except (ConnectionLostError, OperationTimeoutError) as exc:
            conn.unregister_consumer(self.consumer_id, self)
            raise SetupError(f"subscribing {self.description}: {exc}", retriable=True) from None
        except (NotReadyError, NotSentError):
            conn.unregister_consumer(self.consumer_id, self)
            raise
        error = commands.error_of(answer)
        if error is not None:
            conn.unregister_consumer(self.consumer_id, self)
            raise setup_error(f"subscribing {self.description}", error[0], error[1])
        return conn

    def _on_ready(self, conn: ClientConnection) -> None:
        with self._lock:
            held = self._flow_held
        if not held:
            self._send_flow(conn, self.options.receiver_queue_size)

    def _send_flow(self, conn: ClientConnection, permits: int) -> None:
        try:
            conn.send(commands.flow(self.consumer_id, permits))
        except (NotReadyError, NotSentError) as exc:
            log.debug("%s: FLOW not sent: %s", self.description, exc)

    def _permanent_error(self, error: SetupError) -> Callable[[], OperationError] | None:
        if error.server_error in (ServerError.TopicNotFound, ServerError.InvalidTopicName,
                                  ServerError.NotAllowedError, ServerError.AuthorizationError,
                                  ServerError.SubscriptionNotFound):
            message = str(error)
            code = error.server_error
            return lambda: SetupError(message, server_error=code)
        return None

    def _release(self, conn: ClientConnection) -> None:
        conn.unregister_consumer(self.consumer_id, self)
        with contextlib.suppress(OperationError):  # subscribed, but no longer wanted
            conn.send(commands.close_consumer(self.consumer_id, next_request_id()))

    def closed_by_broker(self, conn: ClientConnection, event: Command) -> None:
        """CLOSE_CONSUMER / TOPIC_MIGRATED: resubscribe (queued messages become stale)."""
        self._lost(conn, f"the broker closed the consumer ({event.type.name})")

    def release_flow(self) -> None:
        """Start the message flow of a consumer created with `hold_flow`."""
        with self._lock:
            if not self._flow_held:
                return
            self._flow_held = False
        conn = self.connection
        if conn is not None:
            self._send_flow(conn, self.options.receiver_queue_size)

    @property
    def flow_held(self) -> bool:
        """Whether the consumer waits for `release_flow` before taking messages."""
        return self._flow_held

    @property
    def last_dequeued(self) -> MessageId | None:
        """A non-durable consumer's last message handed to the application (None before any).

        Pulsar's `lastDequeuedMessageId`: where a reader resubscribes after a reconnect, and
        what `Reader.read_to_end` compares with the broker's last message id to tell that a
        partition has nothing more to read, also in a later call than the one that read it.
        """
        with self._lock:
            return self._resume_after

    def on_end_of_topic(self, listener: Callable[[TopicConsumer], None]) -> None:
        """Call `listener(self)` when REACHED_END_OF_TOPIC arrives (at once if it did)."""
        with self._lock:
            reached = self.reached_end
            if not reached:
                self._end_listeners.append(listener)
        if reached:
            listener(self)

    # ---- receiving ------------------------------------------------------------------

    def handle_push(self, conn: ClientConnection, event: Command) -> None:
        """MESSAGE, ACTIVE_CONSUMER_CHANGE or REACHED_END_OF_TOPIC."""
        kind = event.type
        if kind is CommandType.MESSAGE:
            self._handle_message(conn, event)
        elif kind is CommandType.ACTIVE_CONSUMER_CHANGE:
            self.is_active = bool(event.body.is_active)
        elif kind is CommandType.REACHED_END_OF_TOPIC:
            with self._lock:
                self.reached_end = True
                listeners = self._end_listeners
                self._end_listeners = []
            for listener in listeners:
                listener(self)
            self._queue.wake()

    def _handle_message(self, conn: ClientConnection, event: Command) -> None:
        arrived_ns = time.monotonic_ns()
        body = event.body
        payload = event.payload
        stored = MessageId.from_proto(body.message_id)
        assert payload is not None
        if not payload.checksum_ok:
            self._discard(conn, stored, AckValidationError.ChecksumMismatch, 1)
            return
        try:
            metadata = payload.metadata
            singles = unpack_messages(payload)
        except MessageFormatError as exc:
            log.warning("%s: discarding undecodable message %s: %s", self.description, stored, exc)
            self._discard(conn, stored, AckValidationError.BatchDeSerializeError, 1)
            return
        batched = metadata.HasField("num_messages_in_batch")
        count = len(singles)
        if self._stale_epoch(body):
            with self._lock:
                epoch = self._epoch
            self._processed(count, epoch)
            return
        ack_set = list(body.ack_set)
        redelivery = body.redelivery_count
        with self._lock:
            epoch = self._epoch
            resume = self._resume_after
        out: list[Message] = []
        skipped = 0
        base_props: Mapping[str, str] = {kv.key: kv.value for kv in metadata.properties}
        for single in singles:
            if batched:
                index = single.batch_index
                if ack_set and not _bit_is_set(ack_set, index):
                    skipped += 1
                    continue
                message_id = MessageId(stored.ledger_id, stored.entry_id, index, self.partition,
                                       count)
                meta = single.single_metadata
                key = meta.partition_key if meta.HasField("partition_key") else None
                properties: Mapping[str, str] = {kv.key: kv.value for kv in meta.properties}
                event_time = meta.event_time if meta.HasField("event_time") else None
                sequence = (meta.sequence_id if meta.HasField("sequence_id")
                            else metadata.sequence_id + index)
            else:
                message_id = MessageId(stored.ledger_id, stored.entry_id, -1, self.partition)
                key = metadata.partition_key if metadata.HasField("partition_key") else None
                properties = base_props
                event_time = metadata.event_time if metadata.HasField("event_time") else None
                sequence = metadata.sequence_id
            if resume is not None and message_id <= resume:
                skipped += 1
                continue
            out.append(Message(
                message_id, single.data, key, properties, redelivery, self.logical_topic,
                self.segment, metadata.publish_time, event_time or None, metadata.producer_name,
                sequence, self, epoch, arrived_ns))
        if out:
            with self._lock:
                if epoch == self._epoch:
                    self._queued += len(out)
            self._queue.put_many(out)
        if skipped:
            self._processed(skipped, epoch)

    def _stale_epoch(self, body: Any) -> bool:
        """Whether an Exclusive or Failover MESSAGE was dispatched before this consumer's last
        redelivery (Java's `ConsumerBase.isValidConsumerEpoch`, negated)."""
        if self.options.sub_type not in _EPOCH_SUB_TYPES or not body.HasField("consumer_epoch"):
            return False
        with self._lock:
            return bool(body.consumer_epoch < self._consumer_epoch)

    def _discard(self, conn: ClientConnection, stored: MessageId, reason: AckValidationError,
                 permits: int) -> None:
        with contextlib.suppress(OperationError):
            conn.send(commands.ack(self.consumer_id, [stored], validation_error=reason))
        with self._lock:
            epoch = self._epoch
        self._processed(permits, epoch)

    def accept(self, message: Message) -> bool:
        """Whether a message popped from the queue is current; counts it as processed if so."""
        with self._lock:
            if message.epoch != self._epoch or self._state is HandlerState.CLOSED:
                return False
            self._queued -= 1
            if not self.options.durable:
                self._resume_after = message.message_id
        self._processed(1, message.epoch)
        return True

    def _processed(self, count: int, epoch: int) -> None:
        threshold = max(1, self.options.receiver_queue_size // 2)
        with self._lock:
            if epoch != self._epoch or self._flow_held:
                return
            self._permits += count
            if self._permits < threshold:
                return
            permits = self._permits
            self._permits = 0
        conn = self.connection
        if conn is not None:
            self._send_flow(conn, permits)

    # ---- acknowledging --------------------------------------------------------------

    def acknowledge(self, message: Message, *, cumulative: bool, txn: Transaction | None,
                    deadline: Deadline) -> None:
        """Ack one message and wait for the broker's ACK_RESPONSE.

        Raises:
            harness.errors.DefiniteError: the ack certainly had no effect.
            harness.errors.IndeterminateError: it may have (connection lost, timeout).
        """
        if cumulative and self.options.sub_type in (SubType.Shared, SubType.Key_Shared):
            raise InvalidStateError(
                f"{self.description}: cumulative acks are not allowed on a "
                f"{self.options.sub_type.name} subscription; use individual acks")
        if txn is not None:
            txn.check_open()
            txn.register_acked(self.topic, self.subscription, deadline)
        conn = self.ready(deadline)
        if txn is not None:
            txn.check_open()   # waiting for a connection may have outlasted the transaction's timeout
        receipt = conn.protocol_version >= 17
        request_id = next_request_id() if receipt else None
        command = self._ack_command(message, cumulative=cumulative, txn=txn, request_id=request_id)
        if request_id is None:
            conn.send(command)
            return
        answer = conn.request(command, request_id, max(0.001, deadline.remaining()))
        error = commands.error_of(answer)
        if error is not None:
            raise server_error(Op.ACK, error[0], error[1])

    def _ack_command(self, message: Message, *, cumulative: bool, txn: Transaction | None,
                     request_id: int | None) -> Command:
        message_id = message.message_id
        ack_sets = None
        if message_id.is_batched and message_id.batch_size > 0:
            size = message_id.batch_size
            if cumulative:
                remaining = list(range(message_id.batch_index + 1, size))
            else:
                remaining = [i for i in range(size) if i != message_id.batch_index]
            ack_sets = {message_id: ack_set_words(size, remaining)}
        command = commands.ack(
            self.consumer_id, [message_id],
            ack_type=AckType.Cumulative if cumulative else AckType.Individual,
            txn=txn.id if txn is not None else None, request_id=request_id, ack_sets=ack_sets)
        if ack_sets is not None:
            command.body.message_id[0].batch_size = message_id.batch_size
        return command

    def acknowledge_cumulative_unconfirmed(self, message: Message) -> None:
        """A cumulative ack up to `message`, sent without asking for a receipt, as Java's
        `ReaderImpl` acks every message it hands out. A reader needs it: a broker tells a
        subscription that a terminated topic reached its end only once its backlog is empty
        (Pulsar's `PersistentSubscription.acknowledgeMessage` and the dispatcher's
        NoMoreEntriesToRead path), and a non-durable cursor's backlog empties only by acks.
        Nothing happens without a connection: the next ack covers this one."""
        conn = self.connection
        if conn is None:
            return
        with contextlib.suppress(OperationError):
            conn.send(self._ack_command(message, cumulative=True, txn=None, request_id=None))

    def redeliver(self, message_ids: list[MessageId] | None) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: the given ids (Shared/Key_Shared) or all unacked.

        Redelivering everything also drops this consumer's queued messages (the broker
        sends them again) and returns their permits, as the Java client does, connected or
        not (ConsumerImpl raises the epoch and clears its queue before it looks at the
        connection): an application that asks while its consumer reconnects must not be
        handed the messages queued before it asked.
        """
        conn = self.connection
        if message_ids is None or self.options.sub_type not in (SubType.Shared, SubType.Key_Shared):
            epoch_bound = self.options.sub_type in _EPOCH_SUB_TYPES
            with self._lock:
                self._epoch += 1
                if epoch_bound:
                    self._consumer_epoch += 1
                consumer_epoch = self._consumer_epoch if epoch_bound else None
                returned = self._queued
                self._queued = 0
                self._permits = 0
            if conn is None:
                return   # the next attach subscribes with the raised epoch and its whole queue as permits
            try:
                conn.send(commands.redeliver_unacknowledged(self.consumer_id, consumer_epoch=consumer_epoch))
            except OperationError:
                return
            if returned and not self._flow_held:
                self._send_flow(conn, returned)
            return
        if conn is None:
            return
        entries = [mid.entry() if mid.is_batched else mid for mid in message_ids]
        with contextlib.suppress(OperationError):
            conn.send(commands.redeliver_unacknowledged(self.consumer_id, entries))

    def last_message_id(self, deadline: Deadline) -> MessageId:
        """GET_LAST_MESSAGE_ID: the last dispatchable message of the topic.

        Raises:
            OperationError: as for any request.
        """
        conn = self.ready(deadline)
        request_id = next_request_id()
        answer = conn.request(commands.get_last_message_id(self.consumer_id, request_id),
                              request_id, max(0.001, deadline.remaining()))
        error = commands.error_of(answer)
        if error is not None:
            raise setup_error(f"last message id of {self.topic}", error[0], error[1])
        found = commands.message_id_of(answer)
        assert found is not None
        return MessageId(found.ledger_id, found.entry_id, found.batch_index, self.partition)

    # ---- closing --------------------------------------------------------------------

    def close(self, deadline: Deadline, *, unsubscribe: bool = False) -> None:
        """CLOSE_CONSUMER (or UNSUBSCRIBE) and stop; idempotent.

        Raises:
            OperationError: only for `unsubscribe=True`, when the broker refused or
                did not answer (the subscription may still exist).
        """
        conn = self._mark_closed()
        if conn is None:
            if unsubscribe:
                raise NotReadyError(f"{self.description}: not connected, cannot unsubscribe")
            return
        request_id = next_request_id()
        command = (commands.unsubscribe(self.consumer_id, request_id) if unsubscribe
                   else commands.close_consumer(self.consumer_id, request_id))
        try:
            answer = conn.request(command, request_id, max(0.001, min(deadline.remaining(), 10.0)))
            error = commands.error_of(answer)
            if error is not None and unsubscribe:
                raise setup_error(f"unsubscribing {self.description}", error[0], error[1])
        except OperationError:
            if unsubscribe:
                raise
        finally:
            conn.unregister_consumer(self.consumer_id, self)


class Consumer:
    """A subscription on a topic (plain, partitioned or scalable), read through `receive()`.

    Thread-safe. Acknowledge messages with the consumer that received them.
    """

    def __init__(self, ctx: ClientContext, topic: str, subscription: str,
                 options: ConsumerOptions, queue: ReceiveQueue,
                 children: list[TopicConsumer], tracker: SegmentTracker | None = None,
                 on_close: Callable[[Consumer], None] | None = None) -> None:
        self._ctx = ctx
        self.topic = topic
        self.subscription = subscription
        self.options = options
        self._queue = queue
        self._children = children
        self._tracker = tracker
        self._on_close = on_close
        self._closed = False

    @property
    def consumers(self) -> list[TopicConsumer]:
        """The per-topic consumers (partitions or segments) created so far."""
        if self._tracker is not None:
            return self._tracker.consumers()
        return list(self._children)

    def _deadline(self, timeout_s: float | None) -> Deadline:
        return Deadline.after(timeout_s if timeout_s is not None
                              else self._ctx.config.operation_timeout_s)

    def receive(self, timeout_s: float | None = None) -> Message | None:
        """The next message, or None when none arrives within `timeout_s`.

        Raises:
            AlreadyClosedError: the consumer is closed.
        """
        return self._queue.get(self._deadline(timeout_s))

    def acknowledge(self, message: Message, *, txn: Transaction | None = None,
                    timeout_s: float | None = None) -> None:
        """Acknowledge `message` (in `txn` when given); waits for the broker's receipt.

        Raises:
            harness.errors.DefiniteError / IndeterminateError: see `harness.client.errors`.
        """
        self._ack(message, cumulative=False, txn=txn, timeout_s=timeout_s)

    def acknowledge_cumulative(self, message: Message, *, txn: Transaction | None = None,
                               timeout_s: float | None = None) -> None:
        """Acknowledge everything up to `message` on its partition/segment."""
        self._ack(message, cumulative=True, txn=txn, timeout_s=timeout_s)

    def _ack(self, message: Message, *, cumulative: bool, txn: Transaction | None,
             timeout_s: float | None) -> None:
        if self._closed:
            raise AlreadyClosedError(f"consumer {self.subscription!r} on {self.topic} is closed")
        try:
            message.source.acknowledge(message, cumulative=cumulative, txn=txn,
                                       deadline=self._deadline(timeout_s))
        except OperationError as exc:
            if txn is not None:
                txn.note_failure(exc)
            raise

    def negative_acknowledge(self, message: Message) -> None:
        """Ask for `message` to be delivered again (sent at once, no nack delay)."""
        message.source.redeliver([message.message_id])

    def redeliver_unacknowledged(self) -> None:
        """Ask the broker to redeliver every unacknowledged message of this consumer."""
        for child in self.consumers:
            child.redeliver(None)

    @property
    def is_active(self) -> bool | None:
        """Failover: whether the broker made this consumer active (None before it said)."""
        states = [child.is_active for child in self.consumers]
        if not states or any(state is None for state in states):
            return None
        return any(states)

    @property
    def reached_end_of_topic(self) -> bool:
        """Whether every partition/segment reported REACHED_END_OF_TOPIC."""
        children = self.consumers
        return bool(children) and all(child.reached_end for child in children)

    def close(self, timeout_s: float | None = None) -> None:
        """Close every per-topic consumer; idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = self._deadline(timeout_s)
        if self._tracker is not None:
            self._tracker.close()
        for child in self.consumers:
            child.close(deadline)
        self._queue.close()
        if self._on_close is not None:
            self._on_close(self)

    def unsubscribe(self, timeout_s: float | None = None) -> None:
        """Delete the subscription (UNSUBSCRIBE on every per-topic consumer), then close.

        Raises:
            OperationError: a broker refused or did not answer.
        """
        deadline = self._deadline(timeout_s)
        if self._tracker is not None:
            self._tracker.close()
        first_error: OperationError | None = None
        for child in self.consumers:
            try:
                child.close(deadline, unsubscribe=True)
            except OperationError as exc:
                first_error = first_error or exc
        self._closed = True
        self._queue.close()
        if self._on_close is not None:
            self._on_close(self)
        if first_error is not None:
            raise first_error

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

