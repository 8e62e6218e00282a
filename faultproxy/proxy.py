"""One named proxy: a listener on 127.0.0.1 that joins each client to the upstream.

Theory of operation. Enabled, the proxy listens and runs a `Connection` per accepted
client. Disabling it is Toxiproxy's "down": the listener closes, so new connections
are refused, and every live connection is cut. While disabled, the proxy keeps its
port reserved by a bound socket that does not listen (connections to it are still
refused), so no other program can take the port before the proxy is enabled again on
the same port: Linux lets a listening socket and a bound, non-listening one share a
port when both set SO_REUSEADDR. `listen` port 0 means "pick one"; the chosen port is
what `listen` says from then on, as in Toxiproxy.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from faultproxy.addresses import Address
from faultproxy.chain import ToxicCollection
from faultproxy.connection import Connection
from faultproxy.errors import server_error
from faultproxy.link import READ_SIZE
from faultproxy.stats import ByteCounter, ProxyMetrics
from harness.toxiproxy.model import Stream

log = logging.getLogger(__name__)

BACKLOG = 512
STOP_WAIT_S = 2.0


def _reserve(address: Address) -> socket.socket | None:
    """Hold `address` bound without listening; None if that is not possible."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address.host, address.port))
    except OSError:
        sock.close()
        return None
    return sock


class Proxy:
    def __init__(self, name: str, listen: Address, upstream: Address, metrics: ProxyMetrics) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics = ToxicCollection(on_change=self._toxics_changed)
        self._metrics = metrics
        self._server: asyncio.Server | None = None
        self._placeholder: socket.socket | None = None
        self._connections: dict[Connection, asyncio.Task[Any]] = {}
        metrics.enabled.set(0, proxy=name)
        metrics.active_connections.set(0, proxy=name)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "listen": str(self.listen), "upstream": str(self.upstream),
                "enabled": self.enabled, "toxics": self.toxics.to_json()}

    async def start(self) -> None:
        if self.enabled:
            return
        try:
            server = await asyncio.start_server(
                self._on_client, self.listen.host, self.listen.port,
                reuse_address=True, backlog=BACKLOG, limit=2 * READ_SIZE)
        except OSError as err:
            raise server_error(
                f"proxy {self.name}: cannot listen on {self.listen}: {err.strerror or err}; "
                "another program holds the port: choose another listen port") from None
        self._release_placeholder()
        self.listen = Address(self.listen.host, server.sockets[0].getsockname()[1])
        self._server = server
        self.enabled = True
        self._metrics.enabled.set(1, proxy=self.name)
        log.info("proxy %s listening on %s -> %s", self.name, self.listen, self.upstream)

    async def stop(self, *, hold_port: bool = True) -> None:
        """Stop listening and cut every connection; keep the port reserved if asked."""
        self._release_placeholder()
        if self._server is not None:
            self._server.close()
            self._server = None
            if hold_port:
                self._placeholder = _reserve(self.listen)
        was_enabled, self.enabled = self.enabled, False
        self._metrics.enabled.set(0, proxy=self.name)
        tasks = list(self._connections.values())
        for conn in list(self._connections):
            conn.abort()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT_S)
        if was_enabled:
            log.info("proxy %s stopped (%d connections cut)", self.name, len(tasks))

    async def update(self, listen: Address, upstream: Address, enabled: bool) -> None:
        """Toxiproxy's update: a new address restarts the proxy; then apply `enabled`."""
        if listen != self.listen or upstream != self.upstream:
            await self.stop(hold_port=False)
            self.listen, self.upstream = listen, upstream
        if enabled and not self.enabled:
            await self.start()
        elif not enabled and self.enabled:
            await self.stop()

    async def close(self) -> None:
        await self.stop(hold_port=False)
        self.toxics.reset()
        self._metrics.forget(self.name)

    def hold_port(self) -> None:
        """Reserve the listen port of a proxy created disabled (no-op for port 0)."""
        if not self.enabled and self._placeholder is None and self.listen.port != 0:
            self._placeholder = _reserve(self.listen)

    def _release_placeholder(self) -> None:
        if self._placeholder is not None:
            self._placeholder.close()
            self._placeholder = None

    def _toxics_changed(self) -> None:
        self._metrics.set_toxics(self.name, self.toxics.all())

    def _counters_for(self, stream: Stream) -> tuple[ByteCounter, ByteCounter]:
        return self._metrics.byte_counters(stream, self.name, str(self.listen), str(self.upstream))

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.enabled:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        conn = Connection(self.name, reader, writer, self.upstream, self.toxics.chains, self._counters_for)
        self._connections[conn] = task
        self._metrics.connections.inc(proxy=self.name)
        self._metrics.active_connections.inc(proxy=self.name)
        try:
            if not await conn.run():
                self._metrics.upstream_failures.inc(proxy=self.name)
        except Exception:
            log.exception("proxy %s: connection from %s failed", self.name, conn.client)
        finally:
            self._connections.pop(conn, None)
            self._metrics.active_connections.dec(proxy=self.name)
