"""Asyncio client of the metadata store, for brokers.

Theory of operation. One `MetadataClient` holds one connection to the store and
replaces it when it breaks: a supervisor task reconnects with capped exponential
backoff for as long as the client is open. Requests made while disconnected wait
for the connection until their own deadline. Reads are retried on a new connection
(idempotent); a write whose connection broke after it was sent fails with
`MetadataUnavailable`, because it may or may not have been applied.

Session: opened on first need (`session_id()`, an ephemeral put, a
`LeaderElection`), kept alive every timeout/3 by the session task. The client
considers the session valid until `send time of the last acknowledged keepalive +
timeout` minus one check interval, which is before the store's own deadline (the
store received that keepalive after it was sent), so once that passes (or the store
answers SessionNotFound) the session is declared lost: every session
listener (`on_session_lost`, elections) runs so brokers can drop what they own, and
a new session is opened. A session declared lost locally is also closed on the
server once it is reachable again, so its ephemeral records do not linger.

Watches: each watch has a client-chosen id, registered on the current connection;
the store pushes `notify` frames with events in commit order. After a reconnect
every watch is registered again and its `on_resync` callback runs, because events
may have been missed while disconnected: the owner must re-read what it watches.
Callbacks may be plain functions or coroutine functions (the latter run as tasks).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import itertools
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from embedded import tracing
from embedded.metadata import requests
from embedded.metadata.backend import ClientCallbacks, JsonRecords
from embedded.metadata.model import (
    Comparison,
    GetResult,
    MetadataUnavailable,
    Notification,
    PutResult,
    SessionExpired,
    error_from_code,
)
from embedded.metadata.state import prefix_end
from embedded.rpc import AsyncRpcClient, RpcError, RpcUnavailable

log = logging.getLogger(__name__)

EventsCallback = Callable[[list[Notification]], Any]
ResyncCallback = Callable[[], Any]
SessionLostCallback = Callable[[int], Any]


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with jitter."""

    initial_s: float = 0.05
    max_s: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * self.multiplier ** max(0, attempt))
        return base * (1 + random.uniform(-self.jitter, self.jitter))


def parse_address(address: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(address, tuple):
        return address
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metadata store address must be host:port, got {address!r}")
    return host or "127.0.0.1", int(port)


# data operations a request's span counts (embedded.tracing)
_TRACED = {op: tracing.CallKind.METADATA_READ for op in ("get", "list", "range_scan")} | {
    op: tracing.CallKind.METADATA_WRITE for op in ("put", "delete", "delete_range")}

class Watch:
    """A registered prefix watch; `cancel()` removes it."""

    def __init__(self, client: MetadataClient, watch_id: int, prefix: str,
                 on_events: EventsCallback, on_resync: ResyncCallback | None) -> None:
        self.client = client
        self.watch_id = watch_id
        self.prefix = prefix
        self.on_events = on_events
        self.on_resync = on_resync

    async def cancel(self) -> None:
        await self.client._unwatch(self)


class MetadataClient(JsonRecords, ClientCallbacks):
    def __init__(self, address: str | tuple[str, int], *, session_timeout_ms: int = 10_000,
                 client_name: str = "", request_timeout_s: float = 5.0, connect_attempts: int = 20,
                 backoff: Backoff | None = None, on_session_lost: SessionLostCallback | None = None) -> None:
        self.host, self.port = parse_address(address)
        self.session_timeout_ms = session_timeout_ms
        self.client_name = client_name
        self.request_timeout_s = request_timeout_s
        self.connect_attempts = connect_attempts
        self.backoff = backoff or Backoff()
        self._init_callbacks(on_session_lost)
        self._rpc: AsyncRpcClient | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._session_task: asyncio.Task[None] | None = None
        self._keepalive_task: asyncio.Task[None] | None = None
        self._watch_ids = itertools.count(1)
        self._watches: dict[int, Watch] = {}
        self._session: int | None = None
        self._session_valid_until = 0.0
        self._last_keepalive_sent = 0.0
        self._want_session = False
        self._session_lock = asyncio.Lock()
        self._stale_sessions: list[int] = []
        self.reconnects = 0
        self.sessions_lost = 0

    # ---- connection ---------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def connect(self) -> None:
        """Connect, retrying `connect_attempts` times with backoff; then stay connected."""
        last: Exception | None = None
        for attempt in range(self.connect_attempts):
            try:
                await self._open_connection()
                break
            except RpcUnavailable as err:
                last = err
                await asyncio.sleep(self.backoff.delay(attempt))
        else:
            raise MetadataUnavailable(
                f"cannot reach the metadata store at {self.address} after {self.connect_attempts} attempts "
                f"({last}); is it running? `txnbench cluster status` lists the services and their ports")
        if self._session_task is None:
            self._session_task = asyncio.create_task(self._session_loop())

    async def close(self) -> None:
        """Close the session (its ephemeral records go at once) and the connection."""
        if self._closing:
            return
        self._closing = True
        sid = self._session
        if sid is not None and self.connected:
            with contextlib.suppress(Exception):
                await self._call("session_close", idempotent=False, timeout=1.0, session_id=sid)
        self._session = None
        for task in (self._reconnect_task, self._session_task, self._keepalive_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._rpc is not None:
            await self._rpc.close()
        self._connected.clear()
        self._cancel_callbacks()

    async def __aenter__(self) -> MetadataClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _open_connection(self) -> None:
        rpc = AsyncRpcClient(self.host, self.port, on_push=self._on_push, on_close=self._on_connection_lost)
        await rpc.connect(timeout=min(2.0, self.request_timeout_s))
        self._rpc = rpc
        self._connected.set()

    def _on_connection_lost(self) -> None:
        self._connected.clear()
        if self._closing:
            return
        log.warning("lost the metadata store connection %s; reconnecting", self.address)
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        attempt = 0
        while not self._closing:   # bounded by the client's life; each attempt is bounded in time
            try:
                await self._open_connection()
                self.reconnects += 1
                log.info("reconnected to the metadata store %s after %d attempts", self.address, attempt + 1)
                await self._after_reconnect()
                return
            except (RpcUnavailable, MetadataUnavailable):
                pass   # lost again: the close callback starts nothing while this task runs
            except Exception:
                log.exception("restoring watches after reconnecting failed")
                return
            await asyncio.sleep(self.backoff.delay(attempt))
            attempt += 1

    async def _after_reconnect(self) -> None:
        rpc = self._rpc
        for watch in list(self._watches.values()):
            await self._raw_call(rpc, "watch", prefix=watch.prefix, watch_id=watch.watch_id)
        for watch in list(self._watches.values()):
            if watch.on_resync is not None:
                self._invoke(watch.on_resync)
        await self._close_stale_sessions()
        if rpc is not None and rpc.closed:
            raise MetadataUnavailable("connection lost again while re-registering watches")

    async def _close_stale_sessions(self) -> None:
        while self._stale_sessions:
            sid = self._stale_sessions[0]
            with contextlib.suppress(SessionExpired):
                await self._raw_call(self._rpc, "session_close", session_id=sid)
            self._stale_sessions.pop(0)

    async def _raw_call(self, rpc: AsyncRpcClient | None, op: str, **args: Any) -> dict[str, Any]:
        if rpc is None or rpc.closed:
            raise MetadataUnavailable(f"{op}: not connected to the metadata store at {self.address}")
        try:
            header, _ = await rpc.call(op, timeout=self.request_timeout_s, **args)
        except RpcError as err:
            raise error_from_code(err.code, err.message) from None
        except RpcUnavailable as err:
            raise MetadataUnavailable(f"{op}: {err}") from None
        return header

    async def _call(self, op: str, *, idempotent: bool, timeout: float | None = None, **args: Any) -> dict[str, Any]:
        """One request, waiting for a connection and retrying reads until the deadline."""
        limit = self.request_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + limit
        for attempt in itertools.count():   # bounded by the deadline
            remaining = deadline - time.monotonic()
            if self._closing and op != "session_close":
                raise MetadataUnavailable(f"{op}: the metadata client is closed")
            if remaining <= 0:
                raise MetadataUnavailable(f"{op}: no answer from the metadata store at {self.address} "
                                          f"within {limit:.1f}s; the outcome is unknown")
            if not self._connected.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):   # unlike wait_for, never swallows a cancel
                        await self._connected.wait()
                continue
            rpc = self._rpc
            if rpc is None or rpc.closed:
                await asyncio.sleep(min(0.01, max(0.0, remaining)))
                continue
            kind = _TRACED.get(op)
            started = time.monotonic()
            try:
                header, _ = await rpc.call(op, timeout=remaining, **args)
                if kind is not None:
                    tracing.record(kind, started)
                return header
            except RpcError as err:
                if kind is not None:
                    tracing.record(kind, started)   # a definite answer (e.g. a lost CAS) is a round trip too
                raise error_from_code(err.code, err.message) from None
            except RpcUnavailable as err:
                if not idempotent:
                    raise MetadataUnavailable(f"{op}: {err}; the outcome is unknown") from None
                await asyncio.sleep(min(self.backoff.delay(attempt), max(0.0, deadline - time.monotonic())))
        raise AssertionError("unreachable")

    # ---- data operations ----------------------------------------------------------------------

    async def get(self, key: str, *, comparison: Comparison = Comparison.EQUAL, use_index: str | None = None,
                  include_value: bool = True) -> GetResult:
        header = await self._call("get", idempotent=True,
                                  **requests.get_args(key, comparison, use_index, include_value))
        return requests.parse_get(header)

    async def put(self, key: str, value: str, *, expected_version: int | None = None, ephemeral: bool = False,
                  partition_key: str | None = None, sequence_keys_deltas: Sequence[int] | None = None,
                  secondary_indexes: Mapping[str, str] | None = None) -> PutResult:
        session_id = await self.session_id() if ephemeral else None
        args = requests.put_args(key, value, expected_version=expected_version, ephemeral=ephemeral,
                                 session_id=session_id, partition_key=partition_key,
                                 sequence_keys_deltas=sequence_keys_deltas, secondary_indexes=secondary_indexes)
        try:
            header = await self._call("put", idempotent=False, **args)
        except SessionExpired:
            if session_id is not None:
                await self._lose_session(session_id, "the store says it expired", confirmed=True)
            raise
        return requests.parse_put(header)

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        header = await self._call("delete", idempotent=False, key=key,
                                  **({} if expected_version is None else {"expected_version": expected_version}))
        return bool(header["deleted"])

    async def delete_range(self, min_key: str, max_key: str) -> int:
        header = await self._call("delete_range", idempotent=False, min=min_key, max=max_key)
        return int(header["count"])

    async def list(self, min_key: str, max_key: str, *, use_index: str | None = None) -> builtins.list[str]:
        header = await self._call("list", idempotent=True, **requests.range_args(min_key, max_key, use_index))
        return [str(k) for k in header["keys"]]

    async def list_prefix(self, prefix: str) -> builtins.list[str]:
        return await self.list(prefix, prefix_end(prefix))

    async def range_scan(self, min_key: str, max_key: str, *, use_index: str | None = None,
                         limit: int | None = None, include_value: bool = True) -> builtins.list[GetResult]:
        header = await self._call("range_scan", idempotent=True,
                                  **requests.range_args(min_key, max_key, use_index, limit, include_value))
        return requests.parse_records(header)

    async def stats(self) -> dict[str, Any]:
        return dict((await self._call("stats", idempotent=True))["stats"])

    async def ping(self) -> None:
        await self._call("ping", idempotent=True)

    # ---- watches ------------------------------------------------------------------------------

    async def watch(self, prefix: str, on_events: EventsCallback, *,
                    on_resync: ResyncCallback | None = None) -> Watch:
        """Watch every key starting with `prefix`; events after the answer are pushed in order."""
        watch = Watch(self, next(self._watch_ids), prefix, on_events, on_resync)
        self._watches[watch.watch_id] = watch
        try:
            await self._call("watch", idempotent=True, prefix=prefix, watch_id=watch.watch_id)
        except BaseException:
            self._watches.pop(watch.watch_id, None)
            raise
        return watch

    async def _unwatch(self, watch: Watch) -> None:
        if self._watches.pop(watch.watch_id, None) is not None and self.connected:
            with contextlib.suppress(MetadataUnavailable):
                await self._call("unwatch", idempotent=True, timeout=1.0, watch_id=watch.watch_id)

    def _on_push(self, header: dict[str, Any], _payload: bytes) -> None:
        if header.get("push") != "notify":
            return
        watch = self._watches.get(header.get("watch_id", -1))
        if watch is None:
            return
        events = [Notification.from_wire(e) for e in header.get("events", [])]
        if events:
            self._invoke(watch.on_events, events)

    # ---- session ------------------------------------------------------------------------------

    @property
    def current_session(self) -> int | None:
        return self._session

    @property
    def _keepalive_interval(self) -> float:
        return self.session_timeout_ms / 3000.0

    async def session_id(self) -> int:
        """The live session, opened now if there is none."""
        self._want_session = True
        async with self._session_lock:
            if self._session is None:
                sent = time.monotonic()
                header = await self._call("session_open", idempotent=False, timeout_ms=self.session_timeout_ms,
                                          client=self.client_name)
                self._session = int(header["session_id"])
                self._session_valid_until = sent + self.session_timeout_ms / 1000.0
                self._last_keepalive_sent = sent
                log.info("opened metadata session %d (timeout %d ms)", self._session, self.session_timeout_ms)
            return self._session

    async def _session_loop(self) -> None:
        tick = min(0.5, max(0.02, self._keepalive_interval / 5))
        while not self._closing:   # bounded by the client's life
            await asyncio.sleep(tick)
            sid = self._session
            if sid is None:
                if self._want_session and self.connected:
                    with contextlib.suppress(MetadataUnavailable, SessionExpired):
                        await self.session_id()
                continue
            now = time.monotonic()
            if now >= self._session_valid_until - tick:   # one check early: before the store can expire it
                await self._lose_session(sid, f"no keepalive acknowledged within {self.session_timeout_ms} ms")
                continue
            due = now - self._last_keepalive_sent >= self._keepalive_interval
            if due and (self._keepalive_task is None or self._keepalive_task.done()):
                self._keepalive_task = asyncio.create_task(self._keepalive(sid))

    async def _keepalive(self, sid: int) -> None:
        sent = time.monotonic()
        self._last_keepalive_sent = sent
        try:
            await self._call("session_keepalive", idempotent=True, timeout=self._keepalive_interval,
                             session_id=sid)
        except SessionExpired:
            await self._lose_session(sid, "the store says it expired", confirmed=True)
            return
        except MetadataUnavailable:
            return
        if self._session == sid:
            self._session_valid_until = max(self._session_valid_until, sent + self.session_timeout_ms / 1000.0)

    async def _lose_session(self, sid: int, reason: str, *, confirmed: bool = False) -> None:
        """Drop session `sid`; `confirmed` when the store itself said it is gone."""
        if self._session != sid:
            return
        self._session = None
        self.sessions_lost += 1
        log.warning("metadata session %d lost: %s", sid, reason)
        self._announce_session_lost(sid)   # owners step down first ...
        if not confirmed:   # ... then the server forgets the session and its ephemeral records
            self._stale_sessions.append(sid)
            if self.connected:
                with contextlib.suppress(MetadataUnavailable, SessionExpired):
                    await self._close_stale_sessions()
