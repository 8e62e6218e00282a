"""Helpers for the fault proxy tests: a background event loop, upstream peers, socket I/O.

The proxy (and an asyncio echo server) run on an event loop in a background thread;
tests talk to them with blocking sockets and HTTP, as the harness will. A `Peer` is a
listening socket the test accepts on itself, so it holds the server end of each
proxied connection and can check exactly what arrives, and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from faults.proxy.server import ProxyServer
from harness.toxiproxy.client import ToxiproxyClient

T = TypeVar("T")
HOST = "127.0.0.1"
IO_TIMEOUT_S = 10.0


class BackgroundLoop:
    """An asyncio loop in a daemon thread; `run` executes a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="proxy-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        async def invoke() -> T:
            return fn()
        return self.run(invoke(), timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


async def echo_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@dataclass
class ProxyEnv:
    loop: BackgroundLoop
    server: ProxyServer
    client: ToxiproxyClient
    echo_address: str

    @property
    def url(self) -> str:
        return self.server.url


class Peer:
    """A listening socket on 127.0.0.1 whose connections the test accepts itself."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.sock.settimeout(IO_TIMEOUT_S)
        self.address = f"{HOST}:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []

    def accept(self) -> socket.socket:
        conn, _ = self.sock.accept()
        conn.settimeout(IO_TIMEOUT_S)
        self.accepted.append(conn)
        return conn

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def port_of(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


@contextlib.contextmanager
def connect(listen: str, timeout: float = IO_TIMEOUT_S) -> Iterator[socket.socket]:
    sock = socket.create_connection((HOST, port_of(listen)), timeout=timeout)
    try:
        yield sock
    finally:
        sock.close()


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < size:
        data = sock.recv(min(65536, size - got))
        if not data:
            raise AssertionError(f"connection closed after {got} of {size} bytes")
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def recv_until_closed(sock: socket.socket) -> bytes:
    """All bytes until the peer closes (bounded by the socket's timeout per read)."""
    parts: list[bytes] = []
    while data := sock.recv(65536):
        parts.append(data)
    return b"".join(parts)


def round_trip(sock: socket.socket, payload: bytes = b"ping") -> float:
    """Send to the echo server and wait for the echo; seconds taken."""
    started = time.perf_counter()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.perf_counter() - started


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def assert_cut(sock: socket.socket) -> None:
    """The peer closed or reset the connection (and sent nothing more)."""
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the connection to be cut, got {data!r}"
