"""One TCP connection to a broker: handshake, a reader thread, request matching, keep-alive.

Theory of operation
-------------------
A `ClientConnection` owns a socket and a sans-IO `harness.wire.Connection`. The
handshake (CONNECT -> CONNECTED or ERROR) runs in the caller's thread; afterwards one
reader thread per connection feeds received bytes to the wire connection and
dispatches each command:

* responses carrying a `request_id` complete the `Future` registered by `request()`;
* producer, consumer and session pushes (SEND_RECEIPT, MESSAGE, SCALABLE_TOPIC_UPDATE,
  WATCH_TC_ASSIGNMENTS_UPDATE ...) go to the handler registered under their id;
* PING is answered with PONG; any received frame counts as a sign of life.

Writes are coalesced: `send` encodes the frame under a write lock (so frames keep the
order of their `send` calls) and queues its bytes; one writer thread per connection
hands everything queued to the kernel in one `sendall`. Under gevent a thread is a
greenlet, so every frame the load's greenlets send before the next switch leaves in
one write (as the Java client flushes its channel once per batch of writes), instead
of one syscall per frame: the loopback write was the load process's largest single
cost (issue #27). `send` fails definitely (`NotSentError`, `NotReadyError`) only when
the frame was never queued (a closed connection, a frame the protocol refuses); a
queued frame whose write fails closes the connection, and every request waiting on it
fails with `ConnectionLostError`, indeterminate, as for a frame written and then lost.
`close` hands what is still queued to the kernel before it shuts the socket (a
fire-and-forget ACK sent just before a close still leaves). When the connection ends
(end of stream, socket error, protocol violation, keep-alive timeout, `close()`),
every pending request fails with `ConnectionLostError` and every registered listener
(producer, consumer, coordinator handler, watch) is told, once, so it can reconnect.

Keep-alive follows Java's `PulsarHandler`: every `keepalive_interval_s` the pool
checks each connection; if nothing arrived since the PING sent at the previous check,
the connection is declared dead and closed, otherwise a new PING goes out.

`ConnectionPool` keys connections by (logical, physical) broker URL as the Java client
does: logical is the broker that owns the topic, physical where the socket goes (the
same, unless a lookup said `proxy_through_service_url`, in which case CONNECT carries
`proxy_to_broker_url`). Concurrent callers for one key share one connection attempt.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
from collections.abc import Callable, Collection
from typing import Protocol

from harness.client.config import ClientConfig
from harness.client.errors import (
    ConnectionLostError,
    NotReadyError,
    NotSentError,
    OperationTimeoutError,
    SetupError,
)
from harness.client.futures import Future, raw_lock
from harness.client.timers import Deadline, Scheduler, TimerHandle, spawn
from harness.client.topics import address_of
from harness.wire import (
    Command,
    CommandType,
    Connection,
    ConnectionClosed,
    ConnectionState,
    LocalProtocolError,
    RemoteProtocolError,
    Role,
    commands,
)

log = logging.getLogger(__name__)

T = CommandType

RESPONSES = frozenset({
    T.SUCCESS, T.ERROR, T.PRODUCER_SUCCESS, T.LOOKUP_RESPONSE, T.PARTITIONED_METADATA_RESPONSE,
    T.GET_LAST_MESSAGE_ID_RESPONSE, T.ACK_RESPONSE, T.CONSUMER_STATS_RESPONSE,
    T.GET_TOPICS_OF_NAMESPACE_RESPONSE, T.GET_SCHEMA_RESPONSE, T.GET_OR_CREATE_SCHEMA_RESPONSE,
    T.TC_CLIENT_CONNECT_RESPONSE, T.NEW_TXN_RESPONSE, T.ADD_PARTITION_TO_TXN_RESPONSE,
    T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, T.END_TXN_RESPONSE, T.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE,
    T.WATCH_TOPIC_LIST_SUCCESS,
})
"""Commands that answer a request and carry its `request_id`."""

SESSION_PUSHES = {
    T.SCALABLE_TOPIC_UPDATE: "session_id",
    T.WATCH_TC_ASSIGNMENTS_UPDATE: "watch_id",
    T.SCALABLE_TOPIC_ASSIGNMENT_UPDATE: "consumer_id",
    T.WATCH_SCALABLE_TOPICS_UPDATE: "watch_id",
}
"""Pushes for long-lived sessions, and the field that names the session."""

_request_ids = itertools.count(1)
_resource_ids = itertools.count(1)


def next_request_id() -> int:
    """A client-wide unique request id (itertools.count is atomic under the GIL)."""
    return next(_request_ids)


def next_resource_id() -> int:
    """A unique producer/consumer/session/watch id."""
    return next(_resource_ids)


class ConnectionListener(Protocol):
    """Something that must know when a connection it uses ends."""

    def connection_closed(self, conn: ClientConnection) -> None:
        """The connection ended; called once, from the thread that noticed. Must not block."""


class ProducerEndpoint(ConnectionListener, Protocol):
    """What a connection needs from a producer registered on it."""

    def handle_receipt(self, conn: ClientConnection, event: Command) -> None:
        """SEND_RECEIPT or SEND_ERROR for this producer."""

    def closed_by_broker(self, conn: ClientConnection, event: Command) -> None:
        """CLOSE_PRODUCER or TOPIC_MIGRATED: the broker dropped this producer."""


class ConsumerEndpoint(ConnectionListener, Protocol):
    """What a connection needs from a consumer registered on it."""

    def handle_push(self, conn: ClientConnection, event: Command) -> None:
        """MESSAGE, ACTIVE_CONSUMER_CHANGE or REACHED_END_OF_TOPIC for this consumer."""

    def closed_by_broker(self, conn: ClientConnection, event: Command) -> None:
        """CLOSE_CONSUMER or TOPIC_MIGRATED: the broker dropped this consumer."""


class ClientConnection:
    """A handshaken connection to one broker, shared by every handler that needs it."""

    def __init__(self, logical_url: str, physical_url: str, config: ClientConfig,
                 features: Collection[str], on_closed: Callable[[ClientConnection], None]) -> None:
        self.logical_url = logical_url
        self.physical_url = physical_url
        self._config = config
        self._features = tuple(features)
        self._on_closed = on_closed
        self._wire = Connection(Role.CLIENT, max_message_size=config.max_message_size)
        self._sock: socket.socket | None = None
        self._lock = raw_lock()         # these two guard tables and the queue: never held across a wait
        self._write_lock = raw_lock()
        self._pending: dict[int, Future[Command]] = {}
        self._producers: dict[int, ProducerEndpoint] = {}
        self._consumers: dict[int, ConsumerEndpoint] = {}
        self._sessions: dict[tuple[CommandType, int], Callable[[Command], None]] = {}
        self._listeners: set[ConnectionListener] = set()
        self._closed = False
        self.close_reason: str | None = None
        self._waiting_for_pong = False
        self._early_events: list[Command] = []
        self._out: list[bytes] = []          # encoded frames not yet handed to the kernel
        self._out_ready = threading.Event()  # set while `_out` holds frames (or on close)
        self._sock_lock = threading.Lock()   # held while bytes go to the socket: no two writes interleave

    # ---- lifecycle ---------------------------------------------------------------------

    def open(self, timeout_s: float) -> None:
        """Connect and handshake; then start the reader thread.

        Raises:
            NotReadyError: the broker is unreachable or the handshake timed out.
            SetupError: the broker rejected CONNECT.
        """
        host, port = address_of(self.physical_url)
        deadline = Deadline.after(timeout_s)
        try:
            sock = socket.create_connection((host, port), timeout=max(0.001, timeout_s))
        except OSError as exc:
            raise NotReadyError(f"cannot connect to {self.physical_url}: {exc}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = commands.connect(
                self._config.client_version,
                feature_flags=self._features or None,
                proxy_to_broker_url=(self.logical_url if self.logical_url != self.physical_url
                                     else None),
            )
            sock.sendall(self._wire.send(hello))
            self._handshake(sock, deadline)
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        spawn(self._read_loop, f"pulsar-reader-{self.physical_url}")
        spawn(self._write_loop, f"pulsar-writer-{self.physical_url}")

    def _handshake(self, sock: socket.socket, deadline: Deadline) -> None:
        while self._wire.state is ConnectionState.CONNECTING:
            remaining = deadline.remaining()
            if remaining <= 0:
                raise NotReadyError(f"no CONNECTED from {self.physical_url} within the timeout")
            sock.settimeout(remaining)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                raise NotReadyError(
                    f"no CONNECTED from {self.physical_url} within the timeout") from None
            except OSError as exc:
                raise NotReadyError(f"handshake with {self.physical_url} failed: {exc}") from None
            try:
                self._wire.receive_data(data)
                for event in self._wire.events():
                    if isinstance(event, ConnectionClosed):
                        raise NotReadyError(f"{self.physical_url} closed the connection during "
                                            "the handshake")
                    if event.type is T.ERROR:
                        code = commands.error_of(event)
                        raise SetupError(
                            f"{self.physical_url} rejected CONNECT: "
                            f"{code[0].name if code else '?'}: {event.body.message}",
                            server_error=code[0] if code else None)
                    if event.type is not T.CONNECTED:
                        self._early_events.append(event)
            except RemoteProtocolError as exc:
                raise NotReadyError(f"handshake with {self.physical_url} failed: {exc}") from None

    @property
    def closed(self) -> bool:
        """Whether the connection has ended."""
        return self._closed

    @property
    def protocol_version(self) -> int:
        """The negotiated protocol version (the broker's answer in CONNECTED)."""
        return self._wire.negotiated_protocol_version or 0

    def peer_supports(self, feature: str) -> bool:
        """Whether the broker announced `feature` in CONNECTED."""
        return self._wire.peer_supports(feature)

    def close(self, reason: str = "closed by the client") -> None:
        """End the connection: fail pending requests, tell every listener. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.close_reason = reason
            pending = self._pending
            self._pending = {}
            listeners = list(self._listeners)
            self._listeners.clear()
            self._producers.clear()
            self._consumers.clear()
            self._sessions.clear()
        sock = self._sock
        with self._write_lock:
            queued = b"".join(self._out)
            self._out.clear()
        self._out_ready.set()   # the writer wakes, sees the connection closed, and ends
        if sock is not None:
            # Best effort: what was sent before the close still leaves, after what the writer
            # is writing (never interleaved with it), bounded by a second.
            if queued and self._sock_lock.acquire(timeout=1.0):
                try:
                    with contextlib.suppress(OSError):
                        sock.settimeout(1.0)
                        sock.sendall(queued)
                finally:
                    self._sock_lock.release()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        log.info("connection to %s closed: %s", self.physical_url, reason)
        error = ConnectionLostError(f"connection to {self.physical_url} lost: {reason}")
        for future in pending.values():
            future.set_exception(error)
        for listener in listeners:
            try:
                listener.connection_closed(self)
            except Exception:
                log.exception("listener %r failed on connection close", listener)
        self._on_closed(self)

    # ---- registration -------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise NotReadyError(f"connection to {self.physical_url} is closed "
                                f"({self.close_reason})")

    def add_listener(self, listener: ConnectionListener) -> None:
        """Tell `listener` when this connection ends.

        Raises:
            NotReadyError: it already ended.
        """
        with self._lock:
            self._check_open()
            self._listeners.add(listener)

    def remove_listener(self, listener: ConnectionListener) -> None:
        """Stop telling `listener`."""
        with self._lock:
            self._listeners.discard(listener)

    def register_producer(self, producer_id: int, producer: ProducerEndpoint) -> None:
        """Route SEND_RECEIPT/SEND_ERROR/CLOSE_PRODUCER for `producer_id` to `producer`."""
        with self._lock:
            self._check_open()
            self._producers[producer_id] = producer
            self._listeners.add(producer)

    def unregister_producer(self, producer_id: int, producer: ProducerEndpoint) -> None:
        """Undo `register_producer` (only if `producer` is still the one registered)."""
        with self._lock:
            if self._producers.get(producer_id) is producer:
                del self._producers[producer_id]
            self._listeners.discard(producer)

    def register_consumer(self, consumer_id: int, consumer: ConsumerEndpoint) -> None:
        """Route MESSAGE/ACTIVE_CONSUMER_CHANGE/REACHED_END_OF_TOPIC/CLOSE_CONSUMER to `consumer`."""
        with self._lock:
            self._check_open()
            self._consumers[consumer_id] = consumer
            self._listeners.add(consumer)

    def unregister_consumer(self, consumer_id: int, consumer: ConsumerEndpoint) -> None:
        """Undo `register_consumer` (only if `consumer` is still the one registered)."""
        with self._lock:
            if self._consumers.get(consumer_id) is consumer:
                del self._consumers[consumer_id]
            self._listeners.discard(consumer)

    def register_session(self, kind: CommandType, session_id: int,
                         callback: Callable[[Command], None]) -> None:
        """Route pushes of `kind` (see SESSION_PUSHES) with this id to `callback`."""
        with self._lock:
            self._check_open()
            self._sessions[(kind, session_id)] = callback

    def unregister_session(self, kind: CommandType, session_id: int) -> None:
        """Stop routing a session's pushes."""
        with self._lock:
            self._sessions.pop((kind, session_id), None)

    # ---- writing --------------------------------------------------------------------------

    def send(self, command: Command) -> None:
        """Queue one command for the writer (frames leave in the order of their `send` calls).

        Raises:
            NotReadyError: the connection is closed (nothing queued).
            NotSentError: the command is not allowed (nothing queued).
        """
        if self._closed or self._sock is None:
            self._check_open()
            raise NotReadyError(f"connection to {self.physical_url} is not open")
        try:
            with self._write_lock:
                if self._closed:
                    raise NotReadyError(f"connection to {self.physical_url} is closed "
                                        f"({self.close_reason})")
                self._out.append(self._wire.send(command))
        except LocalProtocolError as exc:
            raise NotSentError(f"cannot send {command.type.name}: {exc}") from None
        self._out_ready.set()

    def _write_loop(self) -> None:
        """Hand the queued frames to the kernel, all that are queued in one `sendall`, until closed."""
        idle_s = max(1.0, self._config.keepalive_interval_s)
        while not self._closed:
            # bounded: a keep-alive check queues a PING at least this often while open
            self._out_ready.wait(idle_s)
            with self._write_lock:
                data = b"".join(self._out) if len(self._out) != 1 else self._out[0]
                self._out.clear()
                self._out_ready.clear()
            if not data or self._closed:
                continue
            error: OSError | None = None
            sock = self._sock
            assert sock is not None
            with self._sock_lock:
                try:
                    sock.sendall(data)
                except OSError as exc:
                    error = exc
            if error is not None:
                self.close(f"write failed: {error}")
                return

    def start_request(self, command: Command, request_id: int) -> Future[Command]:
        """Register a waiter for `request_id`, then write `command`.

        Raises:
            NotReadyError, NotSentError: as `send`; nothing is left registered.
        """
        future: Future[Command] = Future()
        with self._lock:
            self._check_open()
            self._pending[request_id] = future
        try:
            self.send(command)
        except BaseException:
            with self._lock:
                self._pending.pop(request_id, None)
            raise
        return future

    def forget(self, request_id: int) -> None:
        """Drop the waiter of a request whose answer no longer matters (timed out)."""
        with self._lock:
            self._pending.pop(request_id, None)

    def request(self, command: Command, request_id: int, timeout_s: float) -> Command:
        """Write `command` and wait for the response with `request_id`.

        Returns the response (which may carry an error: check `commands.error_of`).

        Raises:
            NotReadyError, NotSentError: definite, nothing was written.
            ConnectionLostError: the connection ended after the write (indeterminate).
            OperationTimeoutError: no answer within `timeout_s` (indeterminate).
        """
        future = self.start_request(command, request_id)
        if not future.wait(timeout_s):
            self.forget(request_id)
            if not future.done():
                raise OperationTimeoutError(
                    f"no answer to {command.type.name} from {self.physical_url} "
                    f"within {timeout_s:.3g}s")
        return future.result(0)

    # ---- keep-alive -------------------------------------------------------------------------

    def check_keepalive(self) -> None:
        """Called every keep-alive interval: close if the last PING went unanswered, else PING."""
        if self._closed:
            return
        if self._waiting_for_pong:
            self.close(f"keep-alive timeout: nothing received for "
                       f"{self._config.keepalive_interval_s}s after a PING")
            return
        self._waiting_for_pong = True
        with contextlib.suppress(NotReadyError, NotSentError):
            self.send(commands.ping())

    # ---- reading -------------------------------------------------------------------------

    def _read_loop(self) -> None:
        reason = "end of stream from the broker"
        sock = self._sock
        assert sock is not None
        try:
            for early in self._early_events:
                self._dispatch(early)
            self._early_events = []
            while not self._closed:
                data = sock.recv(262144)
                self._wire.receive_data(data)
                for event in self._wire.events():
                    if isinstance(event, ConnectionClosed):
                        return
                    self._dispatch(event)
                if not data:
                    return
        except OSError as exc:
            reason = f"socket error: {exc}"
        except RemoteProtocolError as exc:
            reason = f"protocol violation by the broker: {exc}"
        except Exception as exc:  # a dispatch bug must not leave the connection half-alive
            log.exception("reader of %s failed", self.physical_url)
            reason = f"client error while reading: {exc!r}"
        finally:
            self.close(reason)

    def _dispatch(self, event: Command) -> None:
        self._waiting_for_pong = False
        kind = event.type
        body = event.body
        if kind is T.SEND_RECEIPT or kind is T.SEND_ERROR:
            producer = self._producers.get(body.producer_id)
            if producer is not None:
                producer.handle_receipt(self, event)
            return
        if kind is T.MESSAGE:
            consumer = self._consumers.get(body.consumer_id)
            if consumer is not None:
                consumer.handle_push(self, event)
            return
        if kind in RESPONSES:
            if not body.HasField("request_id"):
                return
            if kind is T.PRODUCER_SUCCESS and body.HasField("producer_ready") \
                    and not body.producer_ready:
                return  # queued for exclusive access: the real answer follows
            with self._lock:
                future = self._pending.pop(body.request_id, None)
            if future is not None:
                future.set_result(event)
            return
        if kind is T.PING:
            with contextlib.suppress(NotReadyError, NotSentError):
                self.send(commands.pong())
            return
        if kind is T.PONG:
            return
        if kind in (T.ACTIVE_CONSUMER_CHANGE, T.REACHED_END_OF_TOPIC):
            consumer = self._consumers.get(body.consumer_id)
            if consumer is not None:
                consumer.handle_push(self, event)
            return
        if kind is T.CLOSE_PRODUCER:
            self._broker_closed_producer(body.producer_id, event)
            return
        if kind is T.CLOSE_CONSUMER:
            self._broker_closed_consumer(body.consumer_id, event)
            return
        if kind is T.TOPIC_MIGRATED:
            if body.resource_type == 0:
                self._broker_closed_producer(body.resource_id, event)
            else:
                self._broker_closed_consumer(body.resource_id, event)
            return
        field = SESSION_PUSHES.get(kind)
        if field is not None:
            callback = self._sessions.get((kind, getattr(body, field)))
            if callback is not None:
                callback(event)
            return
        if kind is T.AUTH_CHALLENGE:
            self.close("the broker asked for authentication, which harness.client does not "
                       "support; disable authentication on the test cluster")
            return
        log.debug("ignoring %s from %s", kind.name, self.physical_url)

    def _broker_closed_producer(self, producer_id: int, event: Command) -> None:
        with self._lock:
            producer = self._producers.pop(producer_id, None)
            if producer is not None:
                self._listeners.discard(producer)
        if producer is not None:
            producer.closed_by_broker(self, event)

    def _broker_closed_consumer(self, consumer_id: int, event: Command) -> None:
        with self._lock:
            consumer = self._consumers.pop(consumer_id, None)
            if consumer is not None:
                self._listeners.discard(consumer)
        if consumer is not None:
            consumer.closed_by_broker(self, event)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"ClientConnection({self.logical_url} via {self.physical_url}, {state})"


class ConnectionPool:
    """At most one live connection per (logical, physical) broker URL pair."""

    def __init__(self, config: ClientConfig, features: Collection[str], scheduler: Scheduler) -> None:
        self._config = config
        self._features = tuple(features)
        self._lock = threading.Lock()
        self._connections: dict[tuple[str, str], ClientConnection] = {}
        self._connecting: dict[tuple[str, str], threading.Lock] = {}
        self._closed = False
        self._service_index = 0
        self._keepalive: TimerHandle = scheduler.call_every(
            config.keepalive_interval_s, self._check_keepalive)

    def get(self, logical_url: str, physical_url: str | None, deadline: Deadline) -> ClientConnection:
        """A live connection to `logical_url` (through `physical_url` when given).

        Raises:
            NotReadyError: could not connect before the deadline (nothing was sent).
            SetupError: the broker rejected the handshake.
        """
        physical = physical_url or logical_url
        key = (logical_url, physical)
        with self._lock:
            if self._closed:
                raise NotReadyError("the client is closed")
            conn = self._connections.get(key)
            if conn is not None and not conn.closed:
                return conn
            gate = self._connecting.setdefault(key, threading.Lock())
        if not gate.acquire(timeout=deadline.remaining()):
            raise NotReadyError(f"connecting to {physical} took longer than the timeout")
        try:
            with self._lock:
                conn = self._connections.get(key)
                if conn is not None and not conn.closed:
                    return conn
            conn = ClientConnection(logical_url, physical, self._config, self._features,
                                    self._forget)
            conn.open(min(self._config.connect_timeout_s, max(0.001, deadline.remaining())))
            with self._lock:
                closed = self._closed
                if not closed:
                    self._connections[key] = conn
            if closed:
                # Outside the lock: closing calls back into `_forget`, which takes it.
                conn.close("the client is closed")
                raise NotReadyError("the client is closed")
            return conn
        finally:
            gate.release()

    def service_connection(self, deadline: Deadline) -> ClientConnection:
        """A connection to any service URL host, trying each once in turn.

        Raises:
            NotReadyError: none was reachable.
        """
        urls = self._config.service_urls
        errors: list[str] = []
        start = self._service_index
        for offset in range(len(urls)):
            index = (start + offset) % len(urls)
            # An unreachable host (blackholed, paused) must not eat the others' time.
            share = deadline.remaining() / (len(urls) - offset)
            try:
                conn = self.get(urls[index], None, deadline.earlier(max(share, 0.2)))
            except NotReadyError as exc:
                errors.append(str(exc))
                if deadline.expired:
                    break
                continue
            self._service_index = index  # start from a host that answered next time
            return conn
        raise NotReadyError("no service URL host reachable: " + "; ".join(errors))

    def connections(self) -> list[ClientConnection]:
        """The live connections."""
        with self._lock:
            return [conn for conn in self._connections.values() if not conn.closed]

    def _forget(self, conn: ClientConnection) -> None:
        with self._lock:
            key = (conn.logical_url, conn.physical_url)
            if self._connections.get(key) is conn:
                del self._connections[key]

    def _check_keepalive(self) -> None:
        for conn in self.connections():
            conn.check_keepalive()

    def close(self) -> None:
        """Close every connection; later `get` calls fail."""
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        self._keepalive.cancel()
        for conn in connections:
            conn.close("the client is closed")

