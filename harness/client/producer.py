"""Producers: one per topic, partition or segment, and the public `Producer` that routes to them.

Theory of operation
-------------------
`TopicProducer` is a reconnecting handler for one concrete topic (a plain topic, one
partition, or one v5 segment). On attach it looks the topic up, sends PRODUCER and
keeps the broker-assigned name and `last_sequence_id`. Sends get consecutive sequence
ids; id assignment and the socket write happen under the producer's lock, so the
broker sees sequence order. Each written SEND waits in `_pending` (by sequence id)
for its SEND_RECEIPT (the broker's MessageId) or SEND_ERROR (classified with
`errors.FAILURE_TABLE`).

Batching (optional): messages collect in an open batch that is written as one SEND
(`num_messages_in_batch`, `sequence_id` of the first, `highest_sequence_id` of the
last) when it reaches `max_messages`/`max_bytes`, after `max_delay_s` (a scheduler
timer), on `flush()`, or when a message of a different transaction arrives (a batch
carries one transaction id, as in Java). One receipt completes every message of the
batch, each with its batch index.

Connection loss: in-flight sends fail with `ConnectionLostError` (indeterminate) and
are not resent; a batch still open when the producer is not attached fails with
`NotReadyError` (definite). Sends that wait longer than `send_timeout_s` for their
receipt fail with `OperationTimeoutError` (indeterminate); the client sweeps them once
a second, and a blocking `send` gives up at its own deadline.

Transactions: before the first transactional send to a topic the transaction
registers it with the coordinator (ADD_PARTITION_TO_TXN), and every send future is
tracked by the transaction so `commit()` can wait for it.

`Producer` is what users hold. It routes each message to a `TopicProducer`: the only
one (plain topic), by key hash or round robin (partitioned topic), or by the v5
segment layout (scalable topic), where a send refused because its segment was sealed
(TopicTerminatedError, definite) is retried within the same call on the segment that
now covers the key, after the layout update arrives.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.client.config import BatchingConfig
from harness.client.connection import ClientConnection, next_request_id, next_resource_id
from harness.client.errors import (
    AlreadyClosedError,
    ConnectionLostError,
    NotReadyError,
    NotSentError,
    Op,
    OperationTimeoutError,
    SetupError,
    TopicTerminatedError,
    server_error,
    setup_error,
)
from harness.client.futures import Future, FutureTimeout
from harness.client.handler import ClientContext, HandlerState, ReconnectingHandler
from harness.client.hashing import partition_for_key
from harness.client.timers import Deadline, TimerHandle
from harness.errors import OperationError
from harness.wire import (
    BatchMessage,
    Command,
    CommandType,
    MessageId,
    ProducerAccessMode,
    ServerError,
    commands,
    encode_batch,
)

if TYPE_CHECKING:
    from harness.client.scalable import DagWatch
    from harness.client.transaction import Transaction

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """Where a sent message was stored.

    Attributes:
        message_id: the id the broker returned (batch index set for batched sends).
        topic: the logical topic the producer was created for.
        segment: the partition or v5 segment written, None for a plain topic.
    """

    message_id: MessageId
    topic: str
    segment: str | None

    @property
    def msg_id(self) -> str:
        """The history form `"<ledger>:<entry>:<batch_index>"`."""
        return str(self.message_id)


@dataclass(frozen=True)
class ProducerOptions:
    """How producers are created."""

    producer_name: str | None = None
    batching: BatchingConfig | None = None
    send_timeout_s: float | None = None
    access_mode: ProducerAccessMode | None = None
    properties: Mapping[str, str] | None = None
    txn_enabled: bool = True


class _Outgoing:
    """One message on its way: its content, its future, and where it went."""

    __slots__ = ("abandoned", "data", "event_time_ms", "future", "key", "properties", "sequence_id",
                 "txn")

    def __init__(self, data: bytes, key: str | None, properties: Mapping[str, str] | None,
                 event_time_ms: int | None, txn: Transaction | None) -> None:
        self.data = data
        self.key = key
        self.properties = properties
        self.event_time_ms = event_time_ms
        self.txn = txn
        self.future: Future[SendReceipt] = Future()
        self.sequence_id = -1     # set when written (alone or in a batch)
        self.abandoned = False    # its caller gave up before it was written: never write it


class _InFlight:
    """One written SEND (a single message or a batch) awaiting its receipt."""

    __slots__ = ("batched", "messages", "sent_at", "sequence_id")

    def __init__(self, sequence_id: int, messages: list[_Outgoing], batched: bool) -> None:
        self.sequence_id = sequence_id
        self.messages = messages
        self.batched = batched
        self.sent_at = time.monotonic()


def _as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)


class TopicProducer(ReconnectingHandler):
    """A producer on one concrete topic (plain, partition or segment)."""

    def __init__(self, ctx: ClientContext, topic: str, *, logical_topic: str,
                 segment: str | None, partition: int, options: ProducerOptions) -> None:
        super().__init__(ctx, f"producer on {topic}")
        self.topic = topic
        self.logical_topic = logical_topic
        self.segment = segment
        self.partition = partition
        self.options = options
        self.producer_id = next_resource_id()
        self.producer_name: str | None = options.producer_name
        self._name_from_broker = options.producer_name is None
        self._lock = threading.RLock()
        self._pending: dict[int, _InFlight] = {}
        self._next_seq = 0
        self._seq_initialized = False
        self._batch: list[_Outgoing] = []
        self._batch_bytes = 0
        self._batch_timer: TimerHandle | None = None
        self._awaiting: dict[int, _Outgoing] = {}   # by id(future): sends waiting for their registration
        self._send_timeout_s = options.send_timeout_s or ctx.config.operation_timeout_s

    # ---- attach ---------------------------------------------------------------------

    def _attach(self, deadline: Deadline) -> ClientConnection:
        address = self.ctx.lookup.lookup(self.topic, deadline)
        conn = self.ctx.pool.get(address.logical, address.physical, deadline)
        conn.register_producer(self.producer_id, self)
        request_id = next_request_id()
        fields: dict[str, Any] = {
            "topic": self.topic,
            "producer_id": self.producer_id,
            "request_id": request_id,
            "producer_name": self.producer_name,
            "user_provided_producer_name": False if self._name_from_broker else None,
            "txn_enabled": True if self.options.txn_enabled else None,
            "producer_access_mode": (int(self.options.access_mode)
                                     if self.options.access_mode is not None else None),
        }
        command = commands.command(CommandType.PRODUCER, **fields)
        if self.options.properties:
            for key, value in self.options.properties.items():
                command.body.metadata.add(key=key, value=value)
        try:
            answer = conn.request(command, request_id, max(0.001, deadline.remaining()))
        except (ConnectionLostError, OperationTimeoutError) as exc:
            conn.unregister_producer(self.producer_id, self)
            self._best_effort_close(conn)
            raise SetupError(f"creating {self.description}: {exc}", retriable=True) from None
        except (NotReadyError, NotSentError):
            conn.unregister_producer(self.producer_id, self)
            raise
        error = commands.error_of(answer)
        if error is not None:
            conn.unregister_producer(self.producer_id, self)
            raise setup_error(f"creating {self.description}", error[0], error[1])
        body = answer.body
        with self._lock:
            if self.producer_name is None or self._name_from_broker:
                self.producer_name = body.producer_name
            if not self._seq_initialized:
                self._next_seq = max(self._next_seq, body.last_sequence_id + 1)
                self._seq_initialized = True
        return conn

    def _best_effort_close(self, conn: ClientConnection) -> None:
        with contextlib.suppress(OperationError):
            conn.send(commands.close_producer(self.producer_id, next_request_id()))

    def _permanent_error(self, error: SetupError) -> Callable[[], OperationError] | None:
        if error.server_error is ServerError.TopicTerminatedError:
            message = str(error)
            return lambda: TopicTerminatedError(Op.SEND, ServerError.TopicTerminatedError, message)
        if error.server_error in (ServerError.TopicNotFound, ServerError.InvalidTopicName,
                                  ServerError.NotAllowedError, ServerError.AuthorizationError,
                                  ServerError.IncompatibleSchema):
            message = str(error)
            return lambda: SetupError(message, server_error=error.server_error)
        return None

    def _release(self, conn: ClientConnection) -> None:
        conn.unregister_producer(self.producer_id, self)
        self._best_effort_close(conn)

    def _detached(self, conn: ClientConnection, reason: str) -> None:
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        if pending:
            error = ConnectionLostError(
                f"{self.description}: connection lost with the send in flight ({reason}); "
                "not resent")
            for inflight in pending:
                for message in inflight.messages:
                    message.future.set_exception(error)

    def closed_by_broker(self, conn: ClientConnection, event: Command) -> None:
        """CLOSE_PRODUCER / TOPIC_MIGRATED: drop in-flight sends as indeterminate, reconnect."""
        self._lost(conn, f"the broker closed the producer ({event.type.name})")

    # ---- sending --------------------------------------------------------------------

    def send_async(self, data: bytes, key: str | None, properties: Mapping[str, str] | None,
                   event_time_ms: int | None, txn: Transaction | None,
                   deadline: Deadline) -> Future[SendReceipt]:
        """Write one message (or add it to the open batch); the future completes on receipt.

        The first send of a transaction to this topic registers it (ADD_PARTITION_TO_TXN)
        and is written when the coordinator's answer arrives, from the connection's reader,
        without a thread waiting (issue #27); a failed registration fails the future with
        the same definite error a blocking registration raises, and nothing is written.

        Raises (definite, nothing was written):
            NotReadyError, NotSentError, AlreadyClosedError, TopicTerminatedError,
            transaction registration errors.
        """
        registration: Future[None] | None = None
        owner = False
        if txn is not None:
            txn.check_open()
            registration, owner = txn.register_produced_async(self.topic, deadline)
            if registration.done():
                error = registration.exception()
                if error is not None:
                    raise txn.registration_error(error, owner=owner, topic=self.topic)
                registration = None
        conn = self.ready(deadline)
        message = _Outgoing(data, key, properties, event_time_ms, txn)
        if registration is not None:
            with self._lock:
                self._awaiting[id(message.future)] = message
            registration.add_done_callback(
                lambda f: self._write_registered(message, f, owner=owner, deadline=deadline))
            return message.future
        self._write_message(conn, message)
        return message.future

    def _write_message(self, conn: ClientConnection, message: _Outgoing) -> None:
        batching = self.options.batching
        with self._lock:
            if self._state is HandlerState.CLOSED:
                raise AlreadyClosedError(f"{self.description} is closed")
            if batching is None:
                self._write_locked(conn, [message], batched=False)
            else:
                self._add_to_batch_locked(conn, message, batching)

    def _write_registered(self, message: _Outgoing, registration: Future[None], *, owner: bool,
                          deadline: Deadline) -> None:
        """The registration a send waited for ended: write it now, or fail it (never blocks)."""
        error = registration.exception()
        failure: OperationError | None = None
        with self._lock:   # against `abandon`: a message is either written or abandoned
            self._awaiting.pop(id(message.future), None)
            if message.abandoned or message.future.done():
                return
            if error is None and not deadline.expired:
                conn = self.connection
                if conn is None:
                    failure = NotReadyError(f"{self.description} not connected when its "
                                            "transaction's registration completed")
                else:
                    try:
                        self._write_message(conn, message)
                    except OperationError as exc:
                        failure = exc
        if error is not None:
            assert message.txn is not None
            failure = message.txn.registration_error(error, owner=owner, topic=self.topic)
        elif deadline.expired:
            failure = NotReadyError(f"registering partition {self.topic} in {message.txn} took "
                                    "longer than the timeout")
        if failure is not None:
            if message.txn is not None:
                message.txn.note_failure(failure)
            message.future.set_exception(failure)

    def _write_locked(self, conn: ClientConnection, messages: list[_Outgoing], *,
                      batched: bool) -> None:
        sequence_id = self._next_seq
        self._next_seq += len(messages)
        publish_ms = int(time.time() * 1000)
        first = messages[0]
        txn_id = first.txn.id if first.txn is not None else None
        name = self.producer_name or ""
        if batched:
            entries = []
            for offset, message in enumerate(messages):
                message.sequence_id = sequence_id
                entries.append(BatchMessage(message.data, message.key, message.properties,
                                            sequence_id + offset, message.event_time_ms))
            data, count = encode_batch(entries)
            highest = sequence_id + count - 1
            metadata = commands.message_metadata(name, sequence_id, publish_ms,
                                                 num_messages_in_batch=count, txn=txn_id,
                                                 highest_sequence_id=highest)
            command = commands.send(self.producer_id, sequence_id, metadata, data,
                                    highest_sequence_id=highest)
        else:
            first.sequence_id = sequence_id
            metadata = commands.message_metadata(
                name, sequence_id, publish_ms, properties=first.properties,
                partition_key=first.key, event_time_ms=first.event_time_ms, txn=txn_id)
            command = commands.send(self.producer_id, sequence_id, metadata, first.data)
        self._pending[sequence_id] = _InFlight(sequence_id, messages, batched)
        try:
            conn.send(command)
        except (NotReadyError, NotSentError):
            self._pending.pop(sequence_id, None)
            raise

    def _add_to_batch_locked(self, conn: ClientConnection, message: _Outgoing,
                             batching: BatchingConfig) -> None:
        if self._batch and self._batch[0].txn is not message.txn:
            self._flush_locked()
        self._batch.append(message)
        self._batch_bytes += len(message.data)
        if len(self._batch) == 1:
            self._batch_timer = self.ctx.scheduler.call_later(batching.max_delay_s,
                                                              self._flush_on_timer)
        if len(self._batch) >= batching.max_messages or self._batch_bytes >= batching.max_bytes:
            self._flush_locked()

    def _flush_on_timer(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        messages = self._batch
        if not messages:
            return
        self._batch = []
        self._batch_bytes = 0
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        conn = self.connection
        error: OperationError | None = None
        if conn is None:
            error = NotReadyError(f"{self.description} not connected when its batch was due")
        else:
            try:
                self._write_locked(conn, messages, batched=True)
            except (NotReadyError, NotSentError) as exc:
                error = exc
        if error is not None:
            for message in messages:
                message.future.set_exception(error)

    def flush(self, deadline: Deadline) -> None:
        """Write the open batch and wait (until `deadline`) for every pending receipt."""
        with self._lock:
            self._flush_locked()
            futures = [m.future for inflight in self._pending.values() for m in inflight.messages]
        for future in futures:
            future.wait(deadline.remaining())

    def abandon(self, message_future: Future[SendReceipt]) -> bool:
        """Stop waiting for a send whose caller gave up; a late receipt is ignored.

        Returns whether the send may have been written (False: it was still waiting for
        its transaction's registration, and now never will be written).
        """
        with self._lock:
            for sequence_id, inflight in list(self._pending.items()):
                if any(m.future is message_future for m in inflight.messages):
                    if len(inflight.messages) == 1:
                        del self._pending[sequence_id]
                    return True
            return self._abandon_unwritten(message_future)

    def _abandon_unwritten(self, message_future: Future[SendReceipt]) -> bool:
        message = self._awaiting.pop(id(message_future), None)
        if message is None or message.future is not message_future:
            return True
        message.abandoned = True   # its registration's callback will not write it
        return False

    def expire(self, now: float) -> None:
        """Fail sends that waited longer than the send timeout for their receipt."""
        expired: list[_InFlight] = []
        with self._lock:
            for sequence_id, inflight in list(self._pending.items()):
                if now - inflight.sent_at > self._send_timeout_s:
                    expired.append(self._pending.pop(sequence_id))
        for inflight in expired:
            error = OperationTimeoutError(
                f"{self.description}: no receipt for sequence id {inflight.sequence_id} "
                f"within {self._send_timeout_s}s")
            for message in inflight.messages:
                message.future.set_exception(error)

    def handle_receipt(self, conn: ClientConnection, event: Command) -> None:
        """SEND_RECEIPT or SEND_ERROR from the broker."""
        body = event.body
        with self._lock:
            inflight = self._pending.pop(body.sequence_id, None)
        if inflight is None:
            return
        if event.type is CommandType.SEND_RECEIPT:
            stored = MessageId.from_proto(body.message_id)
            count = len(inflight.messages)
            for index, message in enumerate(inflight.messages):
                if inflight.batched:
                    message_id = MessageId(stored.ledger_id, stored.entry_id, index,
                                           self.partition, count)
                else:
                    message_id = MessageId(stored.ledger_id, stored.entry_id, -1, self.partition)
                message.future.set_result(SendReceipt(message_id, self.logical_topic, self.segment))
            return
        try:
            code = ServerError(body.error)
        except ValueError:
            code = ServerError.UnknownError
        for message in inflight.messages:
            message.future.set_exception(server_error(Op.SEND, code, body.message))
        if code is ServerError.TopicTerminatedError:
            text = body.message
            self._terminate(lambda: TopicTerminatedError(Op.SEND, ServerError.TopicTerminatedError,
                                                         text))

    # ---- closing --------------------------------------------------------------------

    def close(self, deadline: Deadline) -> None:
        """Flush, wait for receipts until `deadline`, send CLOSE_PRODUCER, and stop."""
        if self._state not in (HandlerState.CLOSED,):
            with contextlib.suppress(OperationError):
                self.flush(deadline)
        with self._lock:
            if self._batch_timer is not None:
                self._batch_timer.cancel()
        conn = self._mark_closed()
        if conn is not None:
            conn.unregister_producer(self.producer_id, self)
            request_id = next_request_id()
            with contextlib.suppress(OperationError):
                conn.request(commands.close_producer(self.producer_id, request_id), request_id,
                             max(0.001, min(deadline.remaining(), 5.0)))
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            batch = self._batch
            self._batch = []
        error = AlreadyClosedError(f"{self.description} was closed before the receipt arrived")
        for inflight in pending:
            for message in inflight.messages:
                message.future.set_exception(
                    ConnectionLostError(f"{self.description} closed with the send in flight"))
        for message in batch:
            message.future.set_exception(error)


class _Targets:
    """Chooses the `TopicProducer` for a message (plain topic: always the same one)."""

    def __init__(self, producers: list[TopicProducer]) -> None:
        self.producers = producers

    def pick(self, key: str | None, deadline: Deadline) -> TopicProducer:
        return self.producers[0]

    def all(self) -> list[TopicProducer]:
        return list(self.producers)

    def close(self) -> None:
        """Release routing resources (the DAG watch)."""


class _PartitionTargets(_Targets):
    """Keyed messages by Murmur3 hash, others round robin, as Java's default router does.

    Without batching, one message per partition in turn. With batching, Java switches the
    partition every `partition_switch_ms` of wall-clock time, from a random first partition:
    messages sent together share a batch and a partition (one transaction registers fewer
    partitions, and writes fewer commit markers, than one message per partition would).
    """

    def __init__(self, producers: list[TopicProducer], batching: BatchingConfig | None = None,
                 clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        super().__init__(producers)
        self._start = random.randrange(len(producers))
        self._round_robin = itertools.count(self._start)
        self._switch_ms = batching.partition_switch_ms if batching is not None else None
        self._clock_ms = clock_ms

    def pick(self, key: str | None, deadline: Deadline) -> TopicProducer:
        if key is not None:
            return self.producers[partition_for_key(key, len(self.producers))]
        if self._switch_ms is not None:
            return self.producers[(self._clock_ms() // self._switch_ms + self._start) % len(self.producers)]
        return self.producers[next(self._round_robin) % len(self.producers)]


class Producer:
    """Sends messages to a topic: plain, partitioned (`persistent://`) or scalable (`topic://`).

    Thread-safe; one instance may be shared by many threads or greenlets.
    """

    def __init__(self, ctx: ClientContext, topic: str, targets: _Targets,
                 dag: DagWatch | None = None,
                 on_close: Callable[[Producer], None] | None = None) -> None:
        self._ctx = ctx
        self.topic = topic
        self._targets = targets
        self._dag = dag
        self._on_close = on_close
        self._closed = False

    @property
    def producers(self) -> list[TopicProducer]:
        """The per-topic producers created so far."""
        return self._targets.all()

    def _deadline(self, timeout_s: float | None) -> Deadline:
        return Deadline.after(timeout_s if timeout_s is not None
                              else self._ctx.config.operation_timeout_s)

    def send(self, data: bytes | str, *, key: str | None = None,
             properties: Mapping[str, str] | None = None, txn: Transaction | None = None,
             event_time_ms: int | None = None, timeout_s: float | None = None) -> SendReceipt:
        """Send one message and wait for the broker's receipt.

        Raises:
            harness.errors.DefiniteError: the message was certainly not stored.
            harness.errors.IndeterminateError: it may have been stored (connection lost,
                timeout, an ambiguous broker error).
        """
        if self._closed:
            raise AlreadyClosedError(f"producer on {self.topic} is closed")
        deadline = self._deadline(timeout_s)
        payload = _as_bytes(data)
        try:
            return self._send(payload, key, properties, txn, event_time_ms, deadline)
        except OperationError as exc:
            if txn is not None:
                txn.note_failure(exc)
            raise

    def _send(self, payload: bytes, key: str | None, properties: Mapping[str, str] | None,
              txn: Transaction | None, event_time_ms: int | None,
              deadline: Deadline) -> SendReceipt:
        attempts = 10 if self._dag is not None else 1
        for attempt in range(attempts):
            layout_epoch = self._dag.epoch if self._dag is not None else -1
            target = self._targets.pick(key, deadline)
            try:
                future = target.send_async(payload, key, properties, event_time_ms, txn, deadline)
                return self._wait(target, future, deadline)
            except TopicTerminatedError:
                if self._dag is None or attempt == attempts - 1:
                    raise
                # The segment was sealed (split/merge): wait for the new layout, route again.
                self._dag.wait_for_epoch_after(layout_epoch, deadline.earlier(
                    min(0.1 * (attempt + 1), 0.5)))
                if deadline.expired:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, target: TopicProducer, future: Future[SendReceipt],
              deadline: Deadline) -> SendReceipt:
        try:
            return future.result(deadline.remaining())
        except FutureTimeout:
            written = target.abandon(future)
            if future.done():
                return future.result(0)
            if not written:
                raise NotReadyError(f"{target.description}: its transaction's registration did "
                                    "not complete before the deadline; not written") from None
            raise OperationTimeoutError(
                f"{target.description}: no receipt before the deadline") from None

    def send_async(self, data: bytes | str, *, key: str | None = None,
                   properties: Mapping[str, str] | None = None, txn: Transaction | None = None,
                   event_time_ms: int | None = None, timeout_s: float | None = None,
                   callback: Callable[[Future[SendReceipt]], None] | None = None,
                   ) -> Future[SendReceipt]:
        """Send without waiting; the future completes with the receipt or the error.

        Blocks only to (re)connect or, for the first transactional send to a topic, for
        the coordinator's ADD_PARTITION_TO_TXN answer. A failure to write is returned
        as a failed future, never raised. `callback(future)` runs in the connection's
        reader thread: keep it short. On a scalable topic a send refused by a sealed
        segment is retried (in a helper thread) on the new segment.
        """
        deadline = self._deadline(timeout_s)
        payload = _as_bytes(data)
        try:
            if self._closed:
                raise AlreadyClosedError(f"producer on {self.topic} is closed")
            target = self._targets.pick(key, deadline)
            future = target.send_async(payload, key, properties, event_time_ms, txn, deadline)
        except OperationError as exc:
            future = Future()
            future.set_exception(exc)
            if self._dag is not None and isinstance(exc, TopicTerminatedError):
                future = self._retry_in_thread(payload, key, properties, txn, event_time_ms,
                                               deadline)
        else:
            if self._dag is not None:
                future = self._retry_on_sealed(future, payload, key, properties, txn,
                                               event_time_ms, deadline)
        if txn is not None:
            txn.track(future)  # type: ignore[arg-type]
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def give_up(self, future: Future[SendReceipt]) -> None:
        """The caller of `send_async` stops waiting at its deadline: complete `future` as a
        blocking `send` fails at its deadline (`OperationTimeoutError`, or `NotReadyError`
        when the message was still waiting for its transaction's registration and now never
        will be written); a late receipt is ignored. Nothing happens to a completed future."""
        if future.done():
            return
        written = all(producer.abandon(future) for producer in self._targets.all())
        if written:
            error: OperationError = OperationTimeoutError(
                f"producer on {self.topic}: no receipt before the deadline")
        else:
            error = NotReadyError(f"producer on {self.topic}: its transaction's registration did "
                                  "not complete before the deadline; not written")
        future.set_exception(error)

    def _retry_on_sealed(self, first: Future[SendReceipt], payload: bytes, key: str | None,
                         properties: Mapping[str, str] | None, txn: Transaction | None,
                         event_time_ms: int | None, deadline: Deadline) -> Future[SendReceipt]:
        outer: Future[SendReceipt] = Future()

        def done(inner: Future[SendReceipt]) -> None:
            error = inner.exception()
            if error is None:
                outer.set_result(inner.result(0))
            elif isinstance(error, TopicTerminatedError):
                retried = self._retry_in_thread(payload, key, properties, txn, event_time_ms,
                                                deadline)
                retried.add_done_callback(lambda f: _copy(f, outer))
            else:
                outer.set_exception(error)

        first.add_done_callback(done)
        return outer

    def _retry_in_thread(self, payload: bytes, key: str | None,
                         properties: Mapping[str, str] | None, txn: Transaction | None,
                         event_time_ms: int | None, deadline: Deadline) -> Future[SendReceipt]:
        result: Future[SendReceipt] = Future()

        def run() -> None:
            try:
                result.set_result(self._send(payload, key, properties, txn, event_time_ms,
                                             deadline))
            except BaseException as exc:
                result.set_exception(exc)

        threading.Thread(target=run, name=f"resend-{self.topic}", daemon=True).start()
        return result

    def flush(self, timeout_s: float | None = None) -> None:
        """Write open batches and wait for all outstanding receipts (bounded)."""
        deadline = self._deadline(timeout_s)
        for producer in self._targets.all():
            producer.flush(deadline)

    def expire(self, now: float) -> None:
        """Fail sends that exceeded their send timeout (called by the client's timer)."""
        for producer in self._targets.all():
            producer.expire(now)

    def close(self, timeout_s: float | None = None) -> None:
        """Flush, then close every per-topic producer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = self._deadline(timeout_s)
        self._targets.close()
        for producer in self._targets.all():
            producer.close(deadline)
        if self._on_close is not None:
            self._on_close(self)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy(source: Future[SendReceipt], target: Future[SendReceipt]) -> None:
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result(0))


def plain_targets(ctx: ClientContext, topic: str, options: ProducerOptions,
                  deadline: Deadline) -> _Targets:
    """The target of a non-partitioned topic, connected now."""
    producer = TopicProducer(ctx, topic, logical_topic=topic, segment=None, partition=-1,
                             options=options)
    producer.start(deadline)
    return _Targets([producer])


def partitioned_targets(ctx: ClientContext, topic: str, partitions: int,
                        options: ProducerOptions, deadline: Deadline) -> _Targets:
    """One producer per partition, all connected now."""
    from harness.client.topics import partition_name

    producers = [
        TopicProducer(ctx, partition_name(topic, index), logical_topic=topic,
                      segment=partition_name(topic, index), partition=index, options=options)
        for index in range(partitions)
    ]
    try:
        for producer in producers:
            producer.start(deadline)
    except BaseException:
        for producer in producers:
            producer.close(Deadline.after(1.0))
        raise
    return _PartitionTargets(producers, options.batching)
