"""The small RPC the embedded metadata and ledger stores speak.

Theory of operation. A frame is

    [total: u32 BE][header_len: u32 BE][header: UTF-8 JSON object][payload: bytes]

where `total` counts every byte after itself. Requests carry `{"id": n, "op": name, ...}`
and get exactly one response `{"id": n, "ok": true, ...}` or
`{"id": n, "ok": false, "error": Code, "message": text}`. A server may also push
frames without an `id` (watch notifications); they carry `{"push": kind, ...}`.
The payload holds raw bytes (ledger entries) and is empty for the metadata store.

`FrameDecoder` is sans-IO: feed bytes, take whole frames. The asyncio server and
client below, and the blocking client, are thin I/O layers over it. Requests on
one connection are answered in any order (matched by id), so a slow fsync on one
request never blocks unrelated ones.

Failure semantics for callers: `RpcError` is a definite answer from the server
(e.g. KeyNotFound, Fenced). `RpcUnavailable` (connection refused or lost, timeout)
leaves the outcome unknown: a write may or may not have been applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

MAX_FRAME = 64 * 1024 * 1024
_U32 = struct.Struct(">I")
_U32x2 = struct.Struct(">II")


class RpcError(Exception):
    """The server answered: the request definitely failed with `code`."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


class RpcUnavailable(Exception):
    """No answer (refused, lost, timed out): the request's outcome is unknown."""


class FrameError(Exception):
    """The peer sent bytes that are not a frame; the connection must be dropped."""


@dataclass(frozen=True)
class Frame:
    header: dict[str, Any]
    payload: bytes = b""


def encode_frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    head = json.dumps(header, separators=(",", ":")).encode()
    total = 4 + len(head) + len(payload)
    if total > MAX_FRAME:
        raise FrameError(f"frame of {total} bytes exceeds {MAX_FRAME}")
    return _U32x2.pack(total, len(head)) + head + payload


class FrameDecoder:
    """Sans-IO frame decoder: `feed(data)` then iterate `frames()`."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def frames(self) -> list[Frame]:
        out: list[Frame] = []
        while len(self._buf) >= 4:
            (total,) = _U32.unpack_from(self._buf, 0)
            if total < 4 or total > MAX_FRAME:
                raise FrameError(f"bad frame length {total}")
            if len(self._buf) < 4 + total:
                break
            (head_len,) = _U32.unpack_from(self._buf, 4)
            if head_len > total - 4:
                raise FrameError(f"header length {head_len} exceeds frame {total}")
            head = bytes(self._buf[8:8 + head_len])
            payload = bytes(self._buf[8 + head_len:4 + total])
            del self._buf[:4 + total]
            try:
                header = json.loads(head)
            except ValueError as err:
                raise FrameError(f"header is not JSON: {err}") from None
            if not isinstance(header, dict):
                raise FrameError("header is not a JSON object")
            out.append(Frame(header, payload))
        return out


# ---- asyncio server ---------------------------------------------------------------------------

Handler = Callable[["ServerConnection", dict[str, Any], bytes], Awaitable[tuple[dict[str, Any], bytes] | dict[str, Any]]]


class ServerConnection:
    """One client connection on the server side; handlers may `push()` to it."""

    def __init__(self, writer: asyncio.StreamWriter, conn_id: int) -> None:
        self.writer = writer
        self.conn_id = conn_id
        self.closed = False
        self.state: dict[str, Any] = {}   # per-connection data for the service (watches, session)

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        if not self.closed:
            self.writer.write(encode_frame(header, payload))

    def push(self, kind: str, **fields: Any) -> None:
        self.send({"push": kind, **fields})


class RpcServer:
    """Serves `handlers[op](conn, header, payload)` on 127.0.0.1.

    A handler returns a result dict (or `(dict, payload)`) merged into the OK
    response, or raises `RpcError` for a definite error. Each request runs as its
    own task, so handlers may await durability without blocking the connection.
    """

    def __init__(self, handlers: dict[str, Handler], *, host: str = "127.0.0.1", port: int = 0,
                 on_disconnect: Callable[[ServerConnection], None] | None = None) -> None:
        self.handlers = handlers
        self.host = host
        self.port = port
        self.on_disconnect = on_disconnect
        self._server: asyncio.base_events.Server | None = None
        self._ids = itertools.count(1)
        self.connections: set[ServerConnection] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.closed = True
                conn.writer.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection(writer, next(self._ids))
        self.connections.add(conn)
        decoder = FrameDecoder()
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                data = await reader.read(256 * 1024)
                if not data:
                    break
                decoder.feed(data)
                for frame in decoder.frames():
                    task = asyncio.create_task(self._dispatch(conn, frame))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        except (ConnectionError, FrameError, asyncio.IncompleteReadError):
            pass
        finally:
            conn.closed = True
            self.connections.discard(conn)
            if self.on_disconnect is not None:
                self.on_disconnect(conn)
            with contextlib.suppress(Exception):
                writer.close()

    async def _dispatch(self, conn: ServerConnection, frame: Frame) -> None:
        header = frame.header
        req_id = header.get("id")
        op = header.get("op")
        handler = self.handlers.get(op) if isinstance(op, str) else None
        try:
            if handler is None:
                raise RpcError("UnknownOp", f"no operation {op!r}")
            result = await handler(conn, header, frame.payload)
            payload = b""
            if isinstance(result, tuple):
                result, payload = result
            conn.send({"id": req_id, "ok": True, **result}, payload)
        except RpcError as err:
            conn.send({"id": req_id, "ok": False, "error": err.code, "message": err.message})
        except Exception as err:  # a bug in a handler: answer, do not kill the connection
            conn.send({"id": req_id, "ok": False, "error": "InternalError", "message": repr(err)})


# ---- asyncio client ---------------------------------------------------------------------------

class AsyncRpcClient:
    """One connection to an RPC server. Reconnecting is the caller's job.

    `on_push(header, payload)` receives server pushes; `on_close()` fires once when
    the connection is lost, after every pending call failed with RpcUnavailable.
    """

    def __init__(self, host: str, port: int, *,
                 on_push: Callable[[dict[str, Any], bytes], None] | None = None,
                 on_close: Callable[[], None] | None = None) -> None:
        self.host, self.port = host, port
        self.on_push = on_push
        self.on_close = on_close
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Frame]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self.closed = True

    async def connect(self, timeout: float = 5.0) -> None:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except (OSError, TimeoutError) as err:
            raise RpcUnavailable(f"cannot connect to {self.host}:{self.port}: {err}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._writer = writer
        self.closed = False
        self._reader_task = asyncio.create_task(self._read_loop(reader))

    async def call(self, op: str, payload: bytes = b"", *, timeout: float = 10.0,
                   **args: Any) -> tuple[dict[str, Any], bytes]:
        if self.closed or self._writer is None:
            raise RpcUnavailable(f"not connected to {self.host}:{self.port}")
        req_id = next(self._ids)
        fut: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        try:
            self._writer.write(encode_frame({"id": req_id, "op": op, **args}, payload))
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation of
            # the caller that races with the reply, which left callers hanging.
            async with asyncio.timeout(timeout):
                frame = await fut
        except TimeoutError:
            raise RpcUnavailable(f"{op} to {self.host}:{self.port} timed out after {timeout}s") from None
        finally:
            self._pending.pop(req_id, None)
        if not frame.header.get("ok"):
            raise RpcError(str(frame.header.get("error", "UnknownError")), str(frame.header.get("message", "")))
        return frame.header, frame.payload

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        self._fail_all()

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder()
        try:
            while True:
                data = await reader.read(256 * 1024)
                if not data:
                    break
                decoder.feed(data)
                for frame in decoder.frames():
                    req_id = frame.header.get("id")
                    if req_id is None:
                        if self.on_push is not None:
                            self.on_push(frame.header, frame.payload)
                        continue
                    fut = self._pending.get(req_id)
                    if fut is not None and not fut.done():
                        fut.set_result(frame)
        except (ConnectionError, FrameError, OSError):
            pass
        finally:
            self._fail_all()

    def _fail_all(self) -> None:
        was_open = not self.closed
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(RpcUnavailable(f"connection to {self.host}:{self.port} lost"))
        self._pending.clear()
        if was_open and self.on_close is not None:
            self.on_close()


# ---- blocking client (tools, tests, fault injection) ---------------------------------------------

class BlockingRpcClient:
    """A thread-safe blocking client for request/response use without pushes."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder()
        self._ids = itertools.count(1)

    def call(self, op: str, payload: bytes = b"", **args: Any) -> tuple[dict[str, Any], bytes]:
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
                    self._decoder = FrameDecoder()
                req_id = next(self._ids)
                self._sock.sendall(encode_frame({"id": req_id, "op": op, **args}, payload))
                while True:
                    for frame in self._decoder.frames():
                        if frame.header.get("id") == req_id:
                            if not frame.header.get("ok"):
                                raise RpcError(str(frame.header.get("error")), str(frame.header.get("message", "")))
                            return frame.header, frame.payload
                    data = self._sock.recv(256 * 1024)
                    if not data:
                        raise ConnectionError("connection closed")
                    self._decoder.feed(data)
            except RpcError:
                raise
            except (OSError, FrameError) as err:
                self.close_locked()
                raise RpcUnavailable(f"{op} to {self.host}:{self.port}: {err}") from None

    def close_locked(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    def close(self) -> None:
        with self._lock:
            self.close_locked()
