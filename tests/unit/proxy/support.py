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
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import requests

from faultproxy.server import ProxyServer
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


OURS, REAL = "ours", "toxiproxy"
#: Which servers the suite runs against: `ours` (default), `toxiproxy` (the real one, built
#: on first use by targets.gobuild) or both (`ours,toxiproxy`; `make test-proxy-real`).
UNDER_TEST_ENV = "TXNBENCH_PROXY_UNDER_TEST"


@dataclass
class ProxyEnv:
    loop: BackgroundLoop
    server: ProxyServer | None     # ours, in process; None for the real Toxiproxy
    client: ToxiproxyClient
    echo_address: str
    impl: str = OURS
    api_url: str = ""

    @property
    def url(self) -> str:
        return self.server.url if self.server is not None else self.api_url

    @property
    def ours(self) -> ProxyServer:
        """Our server's internals (metrics), for the tests marked `ours_only`."""
        assert self.server is not None, "only our proxy has in-process internals"
        return self.server


class RealToxiproxy:
    """The real Toxiproxy server (`toxiproxy-server -host 127.0.0.1 -port P`) as a child process."""

    def __init__(self, binary: str, log: str) -> None:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}"
        self._log = open(log, "ab")   # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([binary, "-host", HOST, "-port", str(self.port)], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(self.url + "/version", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"toxiproxy-server did not start (see {log})")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


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


def assert_cut(sock: socket.socket) -> None:
    """The peer closed or reset the connection (and sent nothing more)."""
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the connection to be cut, got {data!r}"
