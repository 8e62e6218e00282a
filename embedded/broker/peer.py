"""Broker-to-broker requests over the `peers` links (Pulsar's broker client, e.g. the TB client).

Theory of operation. For each peer this broker keeps at most one binary-protocol
connection, as a *client* (`harness.wire.Connection(Role.CLIENT)`), to the peer's
address in the config (the proxy's `broker-<i>-broker-<j>` link, so faults apply).
It is opened on first use (CONNECT / CONNECTED), answers the peer's PINGs, and matches
every answer to its request by `request_id`. A request gets no answer within its
timeout, or the connection drops: `PeerUnavailable` (the outcome is unknown, as with
any lost request). The next request reconnects.

`request_owner(topic, ...)` finds the topic's owner (assigning one if there is none,
through the lookup logic) and sends there; when the owner is this broker the command
is handled in-process by a loopback ServerCnx, so callers need not care where a topic
lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from embedded import tracing
from embedded.broker.topic_name import TopicName
from embedded.broker.txn_api import OwnerInfo, PeerUnavailable
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

if TYPE_CHECKING:
    from embedded.broker.metrics import BrokerMetrics

log = logging.getLogger(__name__)


class PeerConnection:
    def __init__(self, broker_id: int, address: str, *, connect_timeout_s: float = 3.0) -> None:
        self.broker_id = broker_id
        host, _, port = address.rpartition(":")
        self.host, self.port = host or "127.0.0.1", int(port)
        self.connect_timeout_s = connect_timeout_s
        self._conn: Connection | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[Command]] = {}
        self._ready: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.state is ConnectionState.READY and self._writer is not None

    async def _ensure(self) -> None:
        if self.connected:
            return
        async with self._lock:
            if self.connected:
                return
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port),
                                                        self.connect_timeout_s)
            except (TimeoutError, OSError) as err:
                raise PeerUnavailable(f"cannot connect to broker {self.broker_id} at {self.host}:{self.port}: "
                                      f"{err}") from None
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(Role.CLIENT)
            self._conn, self._writer = conn, writer
            self._ready = asyncio.get_running_loop().create_future()
            self._reader_task = asyncio.ensure_future(self._read(reader, conn))
            writer.write(conn.send(commands.connect("txnbench-broker-peer")))
            try:
                await asyncio.wait_for(asyncio.shield(self._ready), self.connect_timeout_s)
            except (TimeoutError, PeerUnavailable) as err:
                await self.close()
                raise PeerUnavailable(f"no handshake with broker {self.broker_id}: {err}") from None

    async def _read(self, reader: asyncio.StreamReader, conn: Connection) -> None:
        try:
            while True:   # bounded by the connection's life
                data = await reader.read(256 * 1024)
                conn.receive_data(data)
                for event in conn.events():
                    if isinstance(event, ConnectionClosed):
                        return
                    self._on_command(event)
                if not data:
                    return
        except (OSError, RemoteProtocolError, LocalProtocolError) as err:
            log.info("connection to broker %d lost: %s", self.broker_id, err)
        finally:
            self._lost()

    def _on_command(self, command: Command) -> None:
        if command.type is CommandType.CONNECTED:
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(None)
            return
        if command.type is CommandType.PING:
            self._write(commands.pong())
            return
        if command.type is CommandType.ERROR and self._ready is not None and not self._ready.done():
            self._ready.set_exception(PeerUnavailable(f"broker {self.broker_id} refused the connection: "
                                                      f"{command.body.message}"))
            return
        request_id = commands.request_id_of(command)
        if request_id is None:
            return
        future = self._waiting.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(command)

    def _write(self, command: Command) -> None:
        if self._writer is None or self._conn is None:
            raise PeerUnavailable(f"not connected to broker {self.broker_id}")
        self._writer.write(self._conn.send(command))

    def _lost(self) -> None:
        self._conn = None
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(PeerUnavailable(f"connection to broker {self.broker_id} closed"))
            self._ready.exception()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(PeerUnavailable(f"connection to broker {self.broker_id} lost"))
        self._waiting.clear()

    async def request(self, build: Callable[[int], Command], timeout_s: float) -> Command:
        await self._ensure()
        request_id = next(self._ids)
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            self._write(build(request_id))
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise PeerUnavailable(f"no answer from broker {self.broker_id} within {timeout_s}s") from None
        finally:
            self._waiting.pop(request_id, None)

    async def close(self) -> None:
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        self._lost()


LocalHandler = Callable[[Command], Awaitable[Command]]


class PeerClient:
    def __init__(self, broker_id: int, peers: Mapping[int, str], *, metrics: BrokerMetrics,
                 ensure_owner: Callable[[TopicName], Awaitable[OwnerInfo]], local: LocalHandler,
                 timeout_s: float = 10.0) -> None:
        self.broker_id = broker_id
        self.peers = dict(peers)
        self.metrics = metrics
        self._ensure_owner = ensure_owner
        self._local = local
        self.timeout_s = timeout_s
        self._connections: dict[int, PeerConnection] = {}
        self._local_ids = itertools.count(1 << 40)

    def _connection(self, broker_id: int) -> PeerConnection:
        connection = self._connections.get(broker_id)
        if connection is None:
            address = self.peers.get(broker_id)
            if address is None:
                raise PeerUnavailable(f"broker {broker_id} is not among this broker's peers "
                                      f"({sorted(self.peers)}); check the `peers` config")
            connection = self._connections[broker_id] = PeerConnection(broker_id, address)
        return connection

    async def request(self, broker_id: int, build: Callable[[int], Command], *,
                      timeout_s: float | None = None) -> Command:
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        started = time.monotonic()
        if broker_id == self.broker_id:
            try:
                return await asyncio.wait_for(self._local(build(next(self._local_ids))), timeout)
            finally:
                tracing.record(tracing.CallKind.PEER, started)
        try:
            answer = await self._connection(broker_id).request(build, timeout)
        except PeerUnavailable:
            self.metrics.peer_requests.inc(result="unavailable")
            raise
        finally:
            tracing.record(tracing.CallKind.PEER, started)
        self.metrics.peer_requests.inc(result="error" if commands.error_of(answer) else "ok")
        return answer

    async def request_owner(self, topic: TopicName, build: Callable[[int], Command], *,
                            timeout_s: float | None = None) -> Command:
        owner = await self._ensure_owner(topic)
        return await self.request(owner.broker_id, build, timeout_s=timeout_s)

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
