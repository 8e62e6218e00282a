"""The binary port: sockets to `harness.wire.Connection` to `ServerCnx`, with keep-alive.

Theory of operation. One asyncio Protocol per client connection. Bytes received go into
the sans-IO `Connection` (role SERVER), whose events are handed to the connection's
`ServerCnx` in order. Commands to send are encoded at once and the bytes queued; the
queue is written once per event-loop iteration (many MESSAGE frames, one write).

Keep-alive as Pulsar's PulsarHandler: every `keepAliveIntervalSeconds` the broker
checks whether anything arrived since the last check; if not and a PING is already
outstanding the connection is closed, otherwise a PING is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import TYPE_CHECKING

from embedded.broker.server_cnx import ServerCnx
from harness.wire import (
    Command,
    Connection,
    ConnectionClosed,
    ConnectionState,
    LocalProtocolError,
    RemoteProtocolError,
    Role,
    commands,
)

if TYPE_CHECKING:
    from embedded.broker.views import ConnectionView

log = logging.getLogger(__name__)


class BrokerProtocol(asyncio.Protocol):
    def __init__(self, server: BinaryServer) -> None:
        self.server = server
        self.conn = Connection(Role.SERVER, max_message_size=server.max_message_size)
        self.transport: asyncio.Transport | None = None
        self.cnx: ServerCnx | None = None
        self.remote = "?"
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._received_since_check = True
        self._waiting_for_pong = False
        self._keepalive: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    # ---- Transport for ServerCnx --------------------------------------------------------------

    @property
    def protocol_version(self) -> int:
        return self.conn.negotiated_protocol_version or self.conn.peer_protocol_version or 0

    def peer_supports(self, feature: str) -> bool:
        return self.conn.peer_supports(feature)

    def send(self, command: Command) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        try:
            data = self.conn.send(command)
        except LocalProtocolError as err:
            log.warning("%s: not sending %s: %s", self.remote, command.type.name, err)
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.transport.is_closing():
            data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
            self._out.clear()
            self.transport.write(data)
        else:
            self._out.clear()

    def close(self) -> None:
        if self.transport is not None:
            self._flush()
            self.transport.close()

    # ---- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.remote = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cnx = ServerCnx(self.server.broker, self)
        self.server.connections.add(self)
        self.server.broker.metrics.connections.set(len(self.server.connections))
        self._schedule_keepalive()

    def data_received(self, data: bytes) -> None:
        self._received_since_check = True
        self._waiting_for_pong = False
        cnx = self.cnx
        assert cnx is not None
        try:
            self.conn.receive_data(data)
            for event in self.conn.events():
                if isinstance(event, ConnectionClosed):
                    self.close()
                    return
                try:
                    cnx.handle(event)
                except Exception:
                    log.exception("%s: handling %s failed", self.remote, event.type.name)
        except RemoteProtocolError as err:
            log.warning("%s: protocol error, closing: %s", self.remote, err)
            self.close()

    def eof_received(self) -> bool | None:
        with contextlib.suppress(RemoteProtocolError, LocalProtocolError):
            self.conn.receive_data(b"")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
        self.server.connections.discard(self)
        self.server.broker.metrics.connections.set(len(self.server.connections))
        if self.cnx is not None:
            self.cnx.connection_closed()

    # ---- keep-alive ---------------------------------------------------------------------------

    def _schedule_keepalive(self) -> None:
        interval = self.server.keepalive_s
        if interval > 0:
            self._keepalive = self._loop.call_later(interval, self._check_keepalive)

    def _check_keepalive(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if self.conn.state is ConnectionState.READY:
            if not self._received_since_check and self._waiting_for_pong:
                log.info("%s: no answer to the keep-alive PING; closing", self.remote)
                self.close()
                return
            if not self._received_since_check:
                self._waiting_for_pong = True
                self.send(commands.ping())
        elif not self._received_since_check:
            log.info("%s: no handshake within the keep-alive interval; closing", self.remote)
            self.close()
            return
        self._received_since_check = False
        self._schedule_keepalive()


class BinaryServer:
    def __init__(self, broker: ConnectionView, host: str, port: int, *, max_message_size: int,
                 keepalive_s: float) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.max_message_size = max_message_size
        self.keepalive_s = keepalive_s
        self.connections: set[BrokerProtocol] = set()
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: BrokerProtocol(self), self.host, self.port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for protocol in list(self.connections):
            protocol.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
