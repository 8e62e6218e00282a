"""One accepted client connection and its upstream connection, joined by two links.

Theory of operation. The connection dials the upstream (bounded by a timeout; a
failure closes the client, as Toxiproxy does), then runs two links: upstream
(client -> server) and downstream (server -> client). When a link ends, the
connection acts on its destination: after end of stream or a toxic's close it closes
the destination socket, which flushes what was written and sends FIN; that socket's
reader then sees end of stream, so the other link drains its toxics and ends the same
way. A Toxiproxy link likewise closes its destination fully, not half. A reset ends
both sockets at once with RST (SO_LINGER 0). `abort()` (the proxy disabled or
deleted) cuts both sockets and cancels both links. A graceful close that cannot
flush within `FLUSH_TIMEOUT_S` (a peer that never reads) is aborted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Callable

from faultproxy.addresses import Address
from faultproxy.chain import ToxicChain
from faultproxy.link import READ_SIZE, Link, LinkEnd
from faultproxy.stats import ByteCounter
from harness.toxiproxy.model import Stream

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
FLUSH_TIMEOUT_S = 5.0

CountersFor = Callable[[Stream], tuple[ByteCounter, ByteCounter]]


def close_gracefully(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if transport.is_closing():
        return
    writer.close()
    asyncio.get_running_loop().call_later(FLUSH_TIMEOUT_S, transport.abort)


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST: SO_LINGER on, timeout 0, then close without flushing."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Connection:
    def __init__(self, proxy_name: str, client_reader: asyncio.StreamReader,
                 client_writer: asyncio.StreamWriter, upstream: Address,
                 chains: dict[Stream, ToxicChain], counters_for: CountersFor) -> None:
        self.proxy_name = proxy_name
        self.client = client_writer.get_extra_info("peername")
        self._client_reader = client_reader
        self._client_writer = client_writer
        self._server_writer: asyncio.StreamWriter | None = None
        self._upstream = upstream
        self._chains = chains
        self._counters_for = counters_for
        self._task: asyncio.Task[None] | None = None
        self._aborted = False

    async def run(self) -> bool:
        """Serve until both links end; False if the upstream could not be reached."""
        self._task = asyncio.current_task()
        try:
            try:
                server_reader, server_writer = await asyncio.wait_for(
                    asyncio.open_connection(self._upstream.host, self._upstream.port, limit=2 * READ_SIZE),
                    CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as err:
                log.info("%s: upstream %s unreachable (%s); closing client %s",
                         self.proxy_name, self._upstream, err, self.client)
                self._client_writer.transport.abort()
                return False
            self._server_writer = server_writer
            if self._aborted:
                server_writer.transport.abort()
                return True
            await self._serve(server_reader, server_writer)
            return True
        except asyncio.CancelledError:
            if not self._aborted:
                raise
            return True
        finally:
            for writer in (self._client_writer, self._server_writer):
                if writer is None:
                    continue
                if self._aborted:
                    writer.transport.abort()
                else:
                    close_gracefully(writer)

    async def _serve(self, server_reader: asyncio.StreamReader,
                     server_writer: asyncio.StreamWriter) -> None:
        links = {
            Stream.UPSTREAM: (Link(self._chains[Stream.UPSTREAM], self._client_reader, server_writer,
                                   *self._counters_for(Stream.UPSTREAM)), server_writer),
            Stream.DOWNSTREAM: (Link(self._chains[Stream.DOWNSTREAM], server_reader, self._client_writer,
                                     *self._counters_for(Stream.DOWNSTREAM)), self._client_writer),
        }
        tasks = {asyncio.create_task(link.run()): dest for link, dest in links.values()}
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                ends = {task: task.result() for task in done}
                if LinkEnd.RESET in ends.values():
                    reset(self._client_writer)
                    reset(server_writer)
                    return
                for task, end in ends.items():
                    if end is LinkEnd.BROKEN:
                        tasks[task].transport.abort()
                    else:
                        close_gracefully(tasks[task])
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def abort(self) -> None:
        """Cut both sockets now (the proxy was disabled or deleted)."""
        if self._aborted:
            return
        self._aborted = True
        self._client_writer.transport.abort()
        if self._server_writer is not None:
            self._server_writer.transport.abort()
        if self._task is not None:
            self._task.cancel()
