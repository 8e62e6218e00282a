"""ServerCnx: one client connection's commands, answered as Pulsar's ServerCnx answers them.

Theory of operation. The wire layer (`wire_server`) decodes frames with
`harness.wire.Connection` and hands each `Command` to `handle()`; answers go back
through `send()`, which the wire layer encodes and writes at the end of the loop
iteration. The hot commands (SEND, FLOW, ACK without receipt, PING) are handled
synchronously, in arrival order. Everything that must wait for the metadata or
ledger store (lookups, PRODUCER, SUBSCRIBE, ack receipts, transactions) runs as a
task of this connection; SEND keeps its order because a client sends it only after
PRODUCER_SUCCESS. The transaction commands (coordinator, per-topic ends, the v5
assignment watch) are the rows of one table, `txn_commands.TXN_COMMANDS`.

The same class serves in-process requests (`LoopbackTransport`): broker-to-broker
commands addressed to a topic this broker owns are handled here without a socket.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from embedded import tracing
from embedded.broker import txn_commands
from embedded.broker.consumer import Consumer
from embedded.broker.managed_ledger.api import CursorClosed, ManagedLedgerError
from embedded.broker.position import Position
from embedded.broker.producer import Producer
from embedded.broker.subscription import ConsumerBusy, Subscription, SubscriptionBusy
from embedded.broker.topic_name import InvalidTopicName, TopicName
from embedded.broker.txn_api import TxnError
from harness.wire import (
    CURRENT_PROTOCOL_VERSION,
    Command,
    CommandType,
    InitialPosition,
    MessageId,
    SchemaType,
    ServerError,
    SubType,
    TopicsMode,
    TxnId,
    commands,
    proto,
)

if TYPE_CHECKING:
    from embedded.broker.views import ConnectionView

log = logging.getLogger(__name__)

T = CommandType
_U64 = (1 << 64) - 1
_cnx_ids = itertools.count(1)


class Transport(Protocol):
    """How a ServerCnx talks back: the socket (wire_server) or an in-process loopback."""

    remote: str

    def send(self, command: Command) -> None: ...

    def close(self) -> None: ...

    @property
    def protocol_version(self) -> int: ...

    def peer_supports(self, feature: str) -> bool: ...


class LoopbackTransport:
    """In-process requests: `request(command)` returns the answer with the same request_id."""

    remote = "in-process"
    protocol_version = int(CURRENT_PROTOCOL_VERSION)

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future[Command]] = {}

    def peer_supports(self, feature: str) -> bool:
        return False

    def send(self, command: Command) -> None:
        request_id = commands.request_id_of(command)
        future = self._waiting.pop(request_id, None) if request_id is not None else None
        if future is not None and not future.done():
            future.set_result(command)

    def close(self) -> None:
        for future in self._waiting.values():
            if not future.done():
                future.cancel()
        self._waiting.clear()

    def expect(self, request_id: int) -> asyncio.Future[Command]:
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        return future


class ServerCnx:
    def __init__(self, broker: ConnectionView, transport: Transport) -> None:
        self.broker = broker
        self.transport = transport
        self.cnx_id = next(_cnx_ids)
        self.remote = transport.remote
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self._closed_producers: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._close_listeners: list[Callable[[], Any]] = []
        self.closed = False
        self.client_version = ""
        self._handlers: dict[CommandType, Callable[[Command], None]] = {
            T.CONNECT: self._connect,
            T.PING: self._ping,
            T.PONG: lambda c: None,
            T.SEND: self._send,
            T.FLOW: self._flow,
            T.ACK: self._ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._redeliver,
            T.CONSUMER_STATS: self._consumer_stats,
            T.PARTITIONED_METADATA: self._spawner(self._partitioned_metadata),
            T.LOOKUP: self._spawner(self._lookup),
            T.PRODUCER: self._spawner(self._producer),
            T.CLOSE_PRODUCER: self._spawner(self._close_producer),
            T.SUBSCRIBE: self._spawner(self._subscribe),
            T.CLOSE_CONSUMER: self._spawner(self._close_consumer),
            T.UNSUBSCRIBE: self._spawner(self._unsubscribe),
            T.SEEK: self._spawner(self._seek),
            T.GET_LAST_MESSAGE_ID: self._spawner(self._get_last_message_id),
            T.GET_SCHEMA: self._spawner(self._get_schema),
            T.GET_OR_CREATE_SCHEMA: self._spawner(self._get_or_create_schema),
            T.GET_TOPICS_OF_NAMESPACE: self._spawner(self._get_topics_of_namespace),
        }
        for kind, row in txn_commands.TXN_COMMANDS.items():   # the transaction commands: one table
            self._handlers[kind] = self._spawner(self._txn_command, traced=kind.name if row.traced else None)

    # ---- ClientChannel ------------------------------------------------------------------------

    @property
    def protocol_version(self) -> int:
        return self.transport.protocol_version

    def peer_supports(self, feature: str) -> bool:
        return self.transport.peer_supports(feature)

    def send(self, command: Command) -> None:
        if not self.closed:
            self.transport.send(command)

    @property
    def understands_end_of_topic(self) -> bool:
        """The C++ client (and the Python one on it) closes the connection on REACHED_END_OF_TOPIC,
        which it does not handle; it is not sent to them (embedded/README.md)."""
        return not self.client_version.startswith("Pulsar-CPP-v")

    def add_close_listener(self, listener: Callable[[], Any]) -> None:
        self._close_listeners.append(listener)

    def forget_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.producer_id) is producer:
            del self.producers[producer.producer_id]
            self._closed_producers.add(producer.producer_id)

    def forget_consumer(self, consumer: Consumer) -> None:
        if self.consumers.get(consumer.consumer_id) is consumer:
            del self.consumers[consumer.consumer_id]

    # ---- dispatch -----------------------------------------------------------------------------

    def handle(self, command: Command) -> None:
        handler = self._handlers.get(command.type)
        if handler is not None:
            handler(command)
            return
        extension = self.broker.txn_registry.command_handler(command.type)
        if extension is not None:
            self._spawn(extension(self, command))
            return
        log.info("%s: ignoring %s (not supported by this broker)", self.remote, command.type.name)

    def _spawner(self, fn: Callable[[Command], Any], traced: str | None = None) -> Callable[[Command], None]:
        """A handler running `fn` as a task; `traced` names the span it runs in (embedded.tracing)."""
        def spawn(command: Command) -> None:
            self._spawn(fn(command) if traced is None else tracing.run(traced, fn(command)))
        return spawn

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: command handler failed", self.remote, exc_info=task.exception())

    def connection_closed(self) -> None:
        """The client went away: producers and consumers go, unacked messages are redelivered."""
        if self.closed:
            return
        self.closed = True
        for producer in list(self.producers.values()):
            producer.topic.remove_producer(producer)
        self.producers.clear()
        for consumer in list(self.consumers.values()):
            self._remove_consumer(consumer)
        self.consumers.clear()
        for task in list(self._tasks):
            task.cancel()
        for listener in self._close_listeners:
            try:
                listener()
            except Exception:
                log.exception("%s: close listener failed", self.remote)

    def _remove_consumer(self, consumer: Consumer) -> None:
        subscription = consumer.subscription
        subscription.remove_consumer(consumer)
        subscription.topic.subscription_closed(subscription)

    # ---- connection ---------------------------------------------------------------------------

    def _connect(self, command: Command) -> None:
        self.client_version = command.body.client_version
        flags = sorted(self.broker.txn_registry.feature_flags)
        self.send(commands.connected("txnbench-embedded-broker", feature_flags=flags or None))

    def _ping(self, command: Command) -> None:
        self.send(commands.pong())

    def _error(self, request_id: int, error: ServerError, message: str) -> None:
        self.send(commands.error(request_id, error, message))

    # ---- discovery ----------------------------------------------------------------------------

    def _parse(self, text: str) -> TopicName:
        return TopicName.parse(text)

    async def _partitioned_metadata(self, command: Command) -> None:
        body = command.body
        try:
            topic = self._parse(body.topic)
        except InvalidTopicName as err:
            self.send(commands.partitioned_metadata_failed(body.request_id, ServerError.InvalidTopicName, str(err)))
            return
        if not topic.domain.is_stored:
            if await self._to_domain_handler(topic, command):
                return
            self.send(commands.partitioned_metadata_failed(
                body.request_id, ServerError.NotAllowedError, f"{topic.domain.value}:// topics are not served here"))
            return
        try:
            partitions = await self.broker.resources.partitions(topic)
        except Exception as err:
            self.send(commands.partitioned_metadata_failed(body.request_id, ServerError.MetadataError, str(err)))
            return
        self.send(commands.partitioned_metadata_response(body.request_id, partitions))

    async def _stored_topic(self, request_id: int, topic: str, command: Command) -> TopicName | None:
        """The stored topic a producer or subscribe command names; None when it was answered here: an
        invalid name refused, or a topic of another domain (v5's scalable topics) handed to its handler."""
        try:
            topic_name = self._parse(topic)
        except InvalidTopicName as err:
            self._error(request_id, ServerError.InvalidTopicName, str(err))
            return None
        if not topic_name.domain.is_stored:
            if not await self._to_domain_handler(topic_name, command):
                self._error(request_id, ServerError.NotAllowedError,
                            f"{topic_name.domain.value}:// topics are not served by this broker")
            return None
        return topic_name

    async def _to_domain_handler(self, topic: TopicName, command: Command) -> bool:
        handler = self.broker.txn_registry.domain_handler(topic.domain)
        if handler is None:
            return False
        await handler(self, command)
        return True

    async def _lookup(self, command: Command) -> None:
        body = command.body
        try:
            topic = self._parse(body.topic)
        except InvalidTopicName as err:
            self.send(commands.lookup_failed(body.request_id, ServerError.InvalidTopicName, str(err)))
            return
        if not topic.domain.is_stored:
            if await self._to_domain_handler(topic, command):
                return
            self.send(commands.lookup_failed(body.request_id, ServerError.NotAllowedError,
                                             f"{topic.domain.value}:// topics are not served by this broker"))
            return
        try:
            answer = await self.broker.lookup(topic, authoritative=body.authoritative)
        except TxnError as err:
            self.send(commands.lookup_failed(body.request_id, err.error, err.message))
            return
        self.send(commands.lookup_response(body.request_id, answer.url or "", redirect=answer.redirect,
                                           authoritative=True))

    async def _get_topics_of_namespace(self, command: Command) -> None:
        body = command.body
        try:
            topics = await self.broker.topics_of_namespace(body.namespace)
        except Exception as err:
            self._error(body.request_id, ServerError.MetadataError, str(err))
            return
        if body.mode == TopicsMode.NON_PERSISTENT:
            topics = []
        self.send(commands.get_topics_of_namespace_response(body.request_id, topics, filtered=False))

    # ---- producing ----------------------------------------------------------------------------

    async def _producer(self, command: Command) -> None:
        body = command.body
        request_id, producer_id = body.request_id, body.producer_id
        existing = self.producers.get(producer_id)
        if existing is not None and not existing.closed:
            if str(existing.topic.name) == str(TopicName.parse(body.topic)):
                self.send(commands.producer_success(request_id, existing.name, last_sequence_id=-1,
                                                    schema_version=b""))
            else:
                self._error(request_id, ServerError.ProducerBusy, f"producer id {producer_id} is already in use")
            return
        topic_name = await self._stored_topic(request_id, body.topic, command)
        if topic_name is None:
            return
        try:
            topic = await self.broker.get_topic(topic_name, create=True)
            if topic.ledger.terminated_position is not None:
                raise TxnError(ServerError.TopicTerminatedError, f"{topic_name} was terminated")
            schema_version = b""
            if body.HasField("schema"):
                schema_version = await self.broker.schema_version_for(topic_name, body.schema)
            user_named = body.user_provided_producer_name and body.HasField("producer_name")
            name = body.producer_name if user_named else self.broker.new_producer_name()
            producer = Producer(topic, self, producer_id, name, user_provided_name=user_named,
                                access_mode=int(body.producer_access_mode), epoch=body.epoch,
                                metadata={kv.key: kv.value for kv in body.metadata})
            topic.add_producer(producer)
        except TxnError as err:
            self._error(request_id, err.error, err.message)
            return
        except ManagedLedgerError as err:
            self._error(request_id, ServerError.PersistenceError, str(err))
            return
        if self.closed:
            topic.remove_producer(producer)
            return
        self.producers[producer_id] = producer
        self._closed_producers.discard(producer_id)
        self.send(commands.producer_success(request_id, name, last_sequence_id=-1, schema_version=schema_version))

    def _send(self, command: Command) -> None:
        body = command.body
        producer = self.producers.get(body.producer_id)
        if producer is None:
            if body.producer_id in self._closed_producers:
                return   # the broker closed it; the client resends after reconnecting
            log.warning("%s: SEND for unknown producer %d; closing the connection", self.remote, body.producer_id)
            self.transport.close()
            return
        producer.publish(body, command.payload)   # type: ignore[arg-type]

    async def _close_producer(self, command: Command) -> None:
        body = command.body
        producer = self.producers.pop(body.producer_id, None)
        if producer is not None:
            producer.topic.remove_producer(producer)
        self.send(commands.success(body.request_id))

    # ---- consuming ----------------------------------------------------------------------------

    async def _subscribe(self, command: Command) -> None:
        body = command.body
        request_id, consumer_id = body.request_id, body.consumer_id
        existing = self.consumers.get(consumer_id)
        if existing is not None and not existing.closed:
            self.send(commands.success(request_id))
            return
        topic_name = await self._stored_topic(request_id, body.topic, command)
        if topic_name is None:
            return
        sub_type = SubType(body.subType)
        try:
            topic = await self.broker.get_topic(topic_name, create=body.force_topic_creation)
            ml = topic.ledger
            if body.initialPosition == InitialPosition.Earliest:
                initial = Position(ml.first_position().ledger_id, ml.first_position().entry_id - 1)
            else:
                initial = ml.last_confirmed
            start = None
            if not body.durable:
                start = self._reader_start(topic.ledger, body, initial)
            subscription = await topic.get_or_create_subscription(
                body.subscription, durable=body.durable, initial_position=initial, start=start)
            consumer = Consumer(subscription, self, consumer_id,
                                body.consumer_name or f"consumer-{self.cnx_id}-{consumer_id}",
                                sub_type=sub_type, priority=body.priority_level,
                                metadata={kv.key: kv.value for kv in body.metadata},
                                track_pending=sub_type is SubType.Shared,
                                max_unacked=self.broker.settings.int("maxUnackedMessagesPerConsumer"),
                                epoch=body.consumer_epoch if body.HasField("consumer_epoch") else None)
            await subscription.add_consumer(consumer)
        except ConsumerBusy as err:
            self._error(request_id, ServerError.ConsumerBusy, str(err))
            return
        except TxnError as err:
            self._error(request_id, err.error, err.message)
            return
        except ManagedLedgerError as err:
            self._error(request_id, ServerError.PersistenceError, str(err))
            return
        if self.closed:
            subscription.remove_consumer(consumer)
            topic.subscription_closed(subscription)
            return
        self.consumers[consumer_id] = consumer
        self.send(commands.success(request_id))
        if subscription.dispatcher is not None:
            subscription.dispatcher.wake()   # a terminated topic's end is announced on the first round

    @staticmethod
    def _reader_start(ml: Any, body: Any, initial: Position) -> Position:
        """A non-durable cursor's mark-delete position from `start_message_id` (PersistentTopic rules)."""
        if not body.HasField("start_message_id"):
            return initial
        mid = MessageId.from_proto(body.start_message_id)
        if mid.ledger_id < 0 or mid.entry_id < 0:
            return Position(-1, -1)
        if mid.ledger_id >= (1 << 62):
            return ml.last_confirmed
        entry_id = mid.entry_id - 1 if mid.batch_index >= 0 else mid.entry_id
        return Position(mid.ledger_id, entry_id)

    def _consumer(self, consumer_id: int) -> Consumer | None:
        consumer = self.consumers.get(consumer_id)
        return consumer if consumer is not None and not consumer.closed else None

    def _flow(self, command: Command) -> None:
        consumer = self._consumer(command.body.consumer_id)
        if consumer is None:
            return
        consumer.permits += command.body.messagePermits
        dispatcher = consumer.subscription.dispatcher
        if dispatcher is not None:
            dispatcher.wake()

    def _ack(self, command: Command) -> None:
        body = command.body
        consumer = self._consumer(body.consumer_id)
        has_request = body.HasField("request_id")
        if consumer is None:
            if has_request:
                self.send(commands.ack_response(body.consumer_id, body.request_id,
                                                error=ServerError.ConsumerNotFound, message="consumer not found"))
            return
        acks: list[tuple[Position, list[int] | None]] = []
        for mid in body.message_id:
            ack_set = [w & _U64 for w in mid.ack_set] if len(mid.ack_set) else None
            acks.append((Position(mid.ledgerId, mid.entryId), ack_set))
        if not acks:
            return
        cumulative = body.ack_type == 1
        txn = TxnId.from_fields(body)
        if txn is not None:
            self._spawn(tracing.run("ACK", self._transactional_ack(consumer, txn, acks, cumulative, body)))
            return
        try:
            consumer.subscription.acknowledge(consumer, acks, cumulative)
        except TxnError as err:
            if has_request:
                self.send(commands.ack_response(body.consumer_id, body.request_id, error=err.error,
                                                message=err.message))
            else:
                log.info("%s: ack refused: %s", self.remote, err)
            return
        if has_request:
            self._spawn(self._ack_receipt(consumer, body.consumer_id, body.request_id, time.monotonic()))

    async def _ack_receipt(self, consumer: Consumer, consumer_id: int, request_id: int, started: float) -> None:
        try:
            await consumer.subscription.cursor.flush()
        except CursorClosed as err:
            self.send(commands.ack_response(consumer_id, request_id, error=ServerError.ServiceNotReady,
                                            message=f"the ack was not persisted: {err}"))
            return
        self.broker.metrics.ack_receipt_latency.observe((time.monotonic() - started) * 1000.0)
        self.send(commands.ack_response(consumer_id, request_id))

    async def _transactional_ack(self, consumer: Consumer, txn: TxnId, acks: list[tuple[Position, list[int] | None]],
                                 cumulative: bool, body: Any) -> None:
        has_request = body.HasField("request_id")
        try:
            await consumer.subscription.transactional_ack(consumer, txn, acks, cumulative)
        except TxnError as err:
            if has_request:
                self.send(commands.ack_response(body.consumer_id, body.request_id, txn=txn, error=err.error,
                                                message=err.message))
            return
        if has_request:
            self.send(commands.ack_response(body.consumer_id, body.request_id, txn=txn))

    def _redeliver(self, command: Command) -> None:
        consumer = self._consumer(command.body.consumer_id)
        if consumer is None or consumer.subscription.dispatcher is None:
            return
        ids = command.body.message_ids
        positions = [Position(m.ledgerId, m.entryId) for m in ids] if len(ids) else None
        if command.body.HasField("consumer_epoch"):
            consumer.raise_epoch(command.body.consumer_epoch)
        consumer.subscription.dispatcher.redeliver(consumer, positions)

    async def _close_consumer(self, command: Command) -> None:
        body = command.body
        consumer = self.consumers.pop(body.consumer_id, None)
        if consumer is not None:
            self._remove_consumer(consumer)
        self.send(commands.success(body.request_id))

    async def _unsubscribe(self, command: Command) -> None:
        body = command.body
        consumer = self._consumer(body.consumer_id)
        if consumer is None:
            self._error(body.request_id, ServerError.ConsumerNotFound, "consumer not found")
            return
        subscription: Subscription = consumer.subscription
        others = [c for c in subscription.consumers if c is not consumer and not c.closed]
        if others and not body.force:
            self._error(body.request_id, ServerError.ConsumerBusy,
                        f"subscription {subscription.name} has other connected consumers")
            return
        self.consumers.pop(body.consumer_id, None)
        subscription.remove_consumer(consumer)
        try:
            await subscription.topic.unsubscribe(subscription.name)
        except Exception as err:
            self._error(body.request_id, ServerError.MetadataError, f"unsubscribe failed: {err}")
            return
        self.send(commands.success(body.request_id))

    async def _seek(self, command: Command) -> None:
        body = command.body
        consumer = self._consumer(body.consumer_id)
        if consumer is None:
            self._error(body.request_id, ServerError.ConsumerNotFound, "consumer not found")
            return
        subscription = consumer.subscription
        ml = subscription.topic.ledger
        try:
            if body.HasField("message_id"):
                mid = MessageId.from_proto(body.message_id)
                if mid.ledger_id < 0 or mid.entry_id < 0:
                    target = ml.first_position()
                elif mid.ledger_id >= (1 << 62):
                    target = ml.next_position(ml.last_confirmed)
                else:
                    target = Position(mid.ledger_id, mid.entry_id)
            elif body.HasField("message_publish_time"):
                from embedded.broker.entry import publish_time_of

                when = body.message_publish_time
                found = await ml.find_first(lambda e: publish_time_of(e.data) >= when)
                target = found if found is not None else ml.next_position(ml.last_confirmed)
            else:
                self._error(body.request_id, ServerError.MetadataError, "seek needs a message id or a publish time")
                return
            await subscription.reset_to(target)
        except SubscriptionBusy as err:
            self._error(body.request_id, ServerError.ConsumerBusy, str(err))
            return
        except (ManagedLedgerError, CursorClosed) as err:
            self._error(body.request_id, ServerError.PersistenceError, f"seek failed: {err}")
            return
        self.send(commands.success(body.request_id))

    async def _get_last_message_id(self, command: Command) -> None:
        body = command.body
        consumer = self._consumer(body.consumer_id)
        if consumer is None:
            self._error(body.request_id, ServerError.ConsumerNotFound, "consumer not found")
            return
        topic = consumer.subscription.topic
        position, batch_index = await topic.last_message_id()
        partition = topic.name.partition_index
        last = MessageId(position.ledger_id, position.entry_id, batch_index, partition)
        mark_delete = consumer.subscription.cursor.mark_delete_position
        self.send(commands.get_last_message_id_response(
            body.request_id, last, mark_delete_position=MessageId(mark_delete.ledger_id, mark_delete.entry_id,
                                                                  -1, partition)))

    def _consumer_stats(self, command: Command) -> None:
        body = command.body
        consumer = self._consumer(body.consumer_id)
        if consumer is None:
            self.send(commands.consumer_stats_response(body.request_id, error_code=int(ServerError.ConsumerNotFound),
                                                       error_message="consumer not found"))
            return
        subscription = consumer.subscription
        stats = consumer.stats()
        self.send(commands.consumer_stats_response(
            body.request_id, msgRateOut=0.0, msgThroughputOut=0.0, msgRateRedeliver=0.0,
            consumerName=consumer.name, availablePermits=max(0, consumer.permits),
            unackedMessages=consumer.unacked_messages, blockedConsumerOnUnackedMsgs=consumer.blocked,
            address=self.remote, connectedSince=stats["connectedSince"],
            type=subscription.stats()["type"], msgRateExpired=0.0, msgBacklog=subscription.backlog()))

    # ---- schemas ------------------------------------------------------------------------------

    async def _get_schema(self, command: Command) -> None:
        body = command.body
        try:
            topic = self._parse(body.topic)
            stored = await self.broker.resources.schema(topic)
        except Exception as err:
            self.send(commands.get_schema_response(body.request_id, error=ServerError.MetadataError, message=str(err)))
            return
        if stored is None:
            self.send(commands.get_schema_response(body.request_id, error=ServerError.TopicNotFound,
                                                   message="Topic not found or no-schema"))
            return
        schema = commands.schema(stored.get("name", ""), SchemaType(int(stored.get("type", 0))),
                                 bytes.fromhex(stored.get("data", "")), properties=stored.get("properties") or None)
        self.send(commands.get_schema_response(body.request_id, schema=schema,
                                               schema_version=int(stored.get("version", 0)).to_bytes(8, "big")))

    async def _get_or_create_schema(self, command: Command) -> None:
        body = command.body
        try:
            topic = self._parse(body.topic)
            version = await self.broker.schema_version_for(topic, body.schema)
        except Exception as err:
            self.send(commands.get_or_create_schema_response(body.request_id, error=ServerError.MetadataError,
                                                             message=str(err)))
            return
        self.send(commands.get_or_create_schema_response(body.request_id, schema_version=version))

    # ---- transactions -------------------------------------------------------------------------

    async def _txn_command(self, command: Command) -> None:
        """The nine transaction commands: a row of `txn_commands.TXN_COMMANDS` each."""
        await txn_commands.handle(self.broker, self, command)


__all__ = ["LoopbackTransport", "ServerCnx", "Transport", "proto"]
