"""`OxiaMetadataClient`: the brokers' metadata interface on any Oxia, through the real client.

Theory of operation. The PyPI `oxia` client is synchronous (gRPC stubs and threads), so
every call runs on a dedicated thread pool and the broker's event loop awaits it with a
deadline (`request_timeout_s`); no answer by then is `MetadataUnavailable` (a write's
outcome is unknown; reads are retried until the deadline, as `MetadataClient` does).
Oxia's answers map onto the store's typed errors: KeyNotFound, UnexpectedVersionId ->
BadVersion, SessionNotFound -> SessionExpired, InvalidOptions / INVALID_ARGUMENT ->
InvalidOptions.

Session: the Oxia client keeps one session per shard, opened by the first ephemeral
put and kept alive by its own heartbeat thread, and closes it locally when no
heartbeat was answered within the timeout. The brokers' interface has one session
whose loss is announced, so this backend requires a one-shard namespace (checked at
connect) and watches that session: a monitor task notices when the client closed it
(or the store answered SessionNotFound, whereupon the local session is closed too),
runs every session listener with the old id, and opens the next session when one is
wanted. The Python client exposes neither its session nor the secondary key of an
index range scan; `_Internals` reaches both through the client's internals of the
pinned version 0.2.1, and nowhere else is anything but the public API used.

Watches: one notification stream (`Client.get_notifications()`), opened at connect and
drained by one thread, feeds every prefix watch on the loop. The client resumes the
stream from its last offset by itself, so no `on_resync` is needed for reconnects; a
KEY_RANGE_DELETED (a real Oxia's `delete_range`) runs `on_resync` of the watches whose
prefix it may cover, since it does not name the keys.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import datetime
import itertools
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
import oxia
import oxia.ex
from oxia.defs import NotificationType

from embedded import tracing
from embedded.metadata.backend import (
    ClientCallbacks,
    ClientSideWatch,
    EventsCallback,
    JsonRecords,
    ResyncCallback,
    SessionLostCallback,
)
from embedded.metadata.client import Backoff
from embedded.metadata.model import (
    BadVersion,
    Comparison,
    EventType,
    GetResult,
    InvalidOptions,
    KeyNotFound,
    MetadataError,
    MetadataUnavailable,
    Notification,
    PutResult,
    SessionExpired,
    Version,
)
from embedded.metadata.oxia_proto import pb
from embedded.metadata.state import prefix_end

log = logging.getLogger(__name__)

T = TypeVar("T")

_COMPARISONS = {Comparison.EQUAL: oxia.ComparisonType.EQUAL, Comparison.FLOOR: oxia.ComparisonType.FLOOR,
                Comparison.CEILING: oxia.ComparisonType.CEILING, Comparison.LOWER: oxia.ComparisonType.LOWER,
                Comparison.HIGHER: oxia.ComparisonType.HIGHER}
_EVENTS = {NotificationType.KEY_CREATED: EventType.CREATED, NotificationType.KEY_MODIFIED: EventType.MODIFIED,
           NotificationType.KEY_DELETED: EventType.DELETED}
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED,
              grpc.StatusCode.RESOURCE_EXHAUSTED}


def version_from_oxia(v: oxia.Version) -> Version:
    session = v.session_id()
    return Version(v.version_id(), _ms(v.created_timestamp()), _ms(v.modified_timestamp()),
                   v.modifications_count(), session is not None, session)


def _ms(ts: datetime.datetime) -> int:
    return round(ts.timestamp() * 1000)


def _text(value: bytes | None) -> str | None:
    return None if value is None else bytes(value).decode("utf-8", errors="replace")


#: What Oxia v0.14.0 says when it refuses a request as a whole, before anything is written
#: (`server/kv/db_sequences.go`, `session_manager.go`): a definite failure, not an unknown outcome.
_OXIA_REFUSALS = ("oxia: sequential key operation", "oxia: missing partition key", "oxia: invalid session timeout")


def translate(err: BaseException, what: str) -> BaseException:
    """The store's typed error for an Oxia client error (MetadataUnavailable when unknown)."""
    if isinstance(err, oxia.ex.KeyNotFound):
        return KeyNotFound(what)
    if isinstance(err, oxia.ex.UnexpectedVersionId):
        return BadVersion(what)
    if isinstance(err, oxia.ex.SessionNotFound):
        return SessionExpired(what)
    if isinstance(err, oxia.ex.InvalidOptions):
        return InvalidOptions(f"{what}: {err}")
    if isinstance(err, grpc.RpcError):
        code, details = err.code(), err.details() or ""
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return InvalidOptions(f"{what}: {details}")
        # A real Oxia sends its own codes (108 session not found, 109 invalid session timeout)
        # or wraps a refusal in UNKNOWN; a Python client sees UNKNOWN and Oxia's message.
        if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.NOT_FOUND) and "session not found" in details:
            return SessionExpired(f"{what}: {details}")
        if code == grpc.StatusCode.UNKNOWN and any(r in details for r in _OXIA_REFUSALS):
            return InvalidOptions(f"{what}: {details}")
        return MetadataUnavailable(f"{what}: Oxia answered {code.name}: {details}")
    return MetadataUnavailable(f"{what}: {type(err).__name__}: {err}")


# data operations a request's span counts (embedded.tracing), by the first word of `what`
_TRACED = {op: tracing.CallKind.METADATA_READ for op in ("get", "list", "range_scan")} | {
    op: tracing.CallKind.METADATA_WRITE for op in ("put", "delete", "delete_range")}


class _Internals:
    """The two things the Python client 0.2.1 keeps to itself: its sessions and the
    secondary keys of index range scans. Isolated here; any other version fails loudly."""

    def __init__(self, client: oxia.Client) -> None:
        sessions = getattr(client, "_session_manager", None)
        discovery = getattr(client, "_service_discovery", None)
        if sessions is None or discovery is None or not hasattr(sessions, "get_session"):
            raise RuntimeError(f"oxia {getattr(oxia, '__version__', '?')}: the client's sessions are not where "
                               f"version 0.2.1 keeps them; pin oxia==0.2.1 (make setup does)")
        self._sessions: Any = sessions
        self._discovery: Any = discovery

    def shards(self) -> builtins.list[tuple[int, Any]]:
        return list(self._discovery.get_all_shards())

    def session(self, shard: int) -> Any:
        """The shard's live session object, opened now if there is none (blocking)."""
        return self._sessions.get_session(shard)

    def current(self, shard: int) -> Any:
        with self._sessions.lock:
            return self._sessions.sessions_by_shard.get(shard)

    def index_scan(self, min_key: str, max_key: str, index: str) -> builtins.list[pb.GetResponse]:
        out: builtins.list[pb.GetResponse] = []
        for shard, stub in self.shards():
            for response in stub.range_scan(pb.RangeScanRequest(shard=shard, start_inclusive=min_key,
                                                                end_exclusive=max_key, secondary_index_name=index)):
                out.extend(response.records)
        out.sort(key=lambda r: (r.secondary_index_key or "", r.key or ""))
        return out


class _DaemonPool:
    """Threads that run blocking client calls for the loop.

    Daemon threads, unlike a ThreadPoolExecutor's (joined at interpreter exit): a call the
    client never returns from (an unanswered RPC has no deadline in the Python client, and
    its `close()` can block for good, see the README) must not keep a broker from exiting.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((fn, future))
        return future

    def _work(self) -> None:
        while True:   # bounded by the pool's life: a None job ends the thread
            job = self._jobs.get()
            if job is None:
                return
            fn, future = job
            loop = future.get_loop()
            try:
                result = fn()
            except BaseException as err:
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_settle, future, None, err)
            else:
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_settle, future, result, None)

    def shutdown(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)


def _settle(future: asyncio.Future[Any], result: Any, err: BaseException | None) -> None:
    if future.done():   # the caller gave up (deadline)
        return
    if err is not None:
        future.set_exception(err)
    else:
        future.set_result(result)


#: oxia 0.2.1 (the newest on PyPI) starts its ServiceDiscovery thread before it creates the
#: barrier that thread waits on: when the first shard assignments arrive before the barrier
#: exists, the thread dies (AttributeError) and the constructor times out after 30 s with this
#: message. Seen under load in `make test` (twice, 2026-11-29); a new client is a new draw.
DISCOVERY_RACE = "waiting for initial shard assignments"
CLIENT_ATTEMPTS = 3


def new_oxia_client(address: str, **options: Any) -> Any:
    """`oxia.Client(address, **options)`, made again when the library's discovery race killed it."""
    for attempt in range(1, CLIENT_ATTEMPTS + 1):
        try:
            return oxia.Client(address, **options)
        except RuntimeError as err:
            if DISCOVERY_RACE not in str(err) or attempt == CLIENT_ATTEMPTS:
                raise
            log.warning("oxia client for %s: %s (the client library's discovery race); a new client", address, err)
    raise AssertionError("unreachable")


class OxiaMetadataClient(JsonRecords, ClientCallbacks):
    """The brokers' `MetadataBackend` on an Oxia service (ours or a real one)."""

    def __init__(self, address: str, *, namespace: str = "default", session_timeout_ms: int = 10_000,
                 client_name: str = "", request_timeout_s: float = 5.0, connect_attempts: int = 20,
                 backoff: Backoff | None = None, on_session_lost: SessionLostCallback | None = None,
                 workers: int = 32) -> None:
        self._address = address
        self.namespace = namespace
        self.session_timeout_ms = session_timeout_ms
        self.client_name = client_name
        self.request_timeout_s = request_timeout_s
        self.connect_attempts = connect_attempts
        self.backoff = backoff or Backoff()
        self._init_callbacks(on_session_lost)
        self._workers = workers
        self._pool: _DaemonPool | None = None
        self._client: Any = None   # oxia.Client (untyped)
        self._internals: _Internals | None = None
        self._shard = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._session: int | None = None
        self._session_obj: Any = None
        self._want_session = False
        self._session_lock = asyncio.Lock()
        self._monitor: asyncio.Task[None] | None = None
        self._notifications: Any = None
        self._drain_thread: threading.Thread | None = None
        self._watch_ids = itertools.count(1)
        self._watches: dict[int, ClientSideWatch] = {}
        self._pending: builtins.list[Any] = []
        self.sessions_lost = 0

    # ---- connection ---------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"oxia://{self._address}/{self.namespace}"

    @property
    def current_session(self) -> int | None:
        return self._session

    async def connect(self) -> None:
        """Reach the service (bounded retries), discover its shard, open the notification stream."""
        self._loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = _DaemonPool(self._workers, "oxia-client")
        host, _, port = self._address.rpartition(":")
        last: Exception | None = None
        for attempt in range(self.connect_attempts):
            try:   # probe first: the client's discovery thread outlives a constructor that times out
                await asyncio.wait_for(self._blocking(_probe, host, int(port)), 3.0)
                break
            except (OSError, TimeoutError) as err:
                last = err
                await asyncio.sleep(self.backoff.delay(attempt))
        else:
            raise MetadataUnavailable(f"cannot reach Oxia at {self._address} after {self.connect_attempts} "
                                      f"attempts ({last})")
        self._client = await self._blocking(lambda: new_oxia_client(
            self._address, namespace=self.namespace, session_timeout_ms=self.session_timeout_ms,
            client_identifier=self.client_name or None))
        self._internals = _Internals(self._client)
        shards = self._internals.shards()
        if len(shards) != 1:
            raise MetadataUnavailable(f"Oxia namespace {self.namespace!r} at {self._address} has {len(shards)} "
                                      f"shards; the brokers' one-session model needs a one-shard namespace")
        self._shard = shards[0][0]
        client = self._client
        self._notifications = await self._blocking(lambda: client.get_notifications())
        self._drain_thread = threading.Thread(target=self._drain, name="oxia-notifications-drain", daemon=True)
        self._drain_thread.start()
        self._monitor = asyncio.create_task(self._session_monitor())

    async def close(self) -> None:
        """Close the session (its ephemeral records go at once), the streams and the channels."""
        if self._closing:
            return
        self._closing = True
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        client, notifications = self._client, self._notifications
        if notifications is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._blocking(notifications.close), 10)
        if client is not None:   # closes the session first: its ephemeral records go at once
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._blocking(client.close), 10)
        self._session = None
        self._cancel_callbacks()
        if self._pool is not None:
            self._pool.shutdown()

    async def __aenter__(self) -> OxiaMetadataClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            raise MetadataUnavailable(f"the Oxia client for {self._address} is not connected")
        return await self._pool.submit(lambda: fn(*args))

    def _require(self) -> oxia.Client:
        if self._client is None or self._closing:
            raise MetadataUnavailable(f"the Oxia client for {self._address} is not connected")
        return self._client

    async def _call(self, what: str, fn: Callable[[oxia.Client], T], *, idempotent: bool) -> T:
        """One client call with a deadline; reads retried on unavailability until it."""
        deadline = time.monotonic() + self.request_timeout_s
        for attempt in itertools.count():   # bounded by the deadline
            client = self._require()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise MetadataUnavailable(f"{what}: no answer from Oxia at {self._address} within "
                                          f"{self.request_timeout_s:.1f}s; the outcome is unknown")
            kind = _TRACED.get(what.split(" ", 1)[0])
            started = time.monotonic()
            try:
                result = await asyncio.wait_for(self._blocking(fn, client), remaining)
                if kind is not None:
                    tracing.record(kind, started)   # a request's span (embedded.tracing)
                return result
            except TimeoutError:
                continue
            except (oxia.ex.OxiaException, grpc.RpcError, RuntimeError, OSError, ValueError) as err:
                translated = translate(err, what)
                retry = idempotent and isinstance(err, grpc.RpcError) and err.code() in _RETRYABLE
                if not retry:
                    raise translated from None
            await asyncio.sleep(min(self.backoff.delay(attempt), max(0.0, deadline - time.monotonic())))
        raise AssertionError("unreachable")

    # ---- data operations ----------------------------------------------------------------------

    async def get(self, key: str, *, comparison: Comparison = Comparison.EQUAL, use_index: str | None = None,
                  include_value: bool = True) -> GetResult:
        k, value, version = await self._call(
            f"get {key!r}", lambda c: c.get(key, comparison_type=_COMPARISONS[comparison],
                                             include_value=include_value, use_index=use_index), idempotent=True)
        return GetResult(k, _text(value) if include_value else None, version_from_oxia(version))

    async def put(self, key: str, value: str, *, expected_version: int | None = None, ephemeral: bool = False,
                  partition_key: str | None = None, sequence_keys_deltas: Sequence[int] | None = None,
                  secondary_indexes: Mapping[str, str] | None = None) -> PutResult:
        if not isinstance(value, str):
            raise TypeError(f"metadata values are text; got {type(value).__name__} for {key!r}")
        if ephemeral:
            await self.session_id()
        deltas = list(sequence_keys_deltas) if sequence_keys_deltas is not None else None
        try:
            k, version = await self._call(
                f"put {key!r}", lambda c: c.put(key, value, partition_key=partition_key,
                                                 expected_version_id=expected_version, ephemeral=ephemeral,
                                                 sequence_keys_deltas=deltas,
                                                 secondary_indexes=dict(secondary_indexes or {}) or None),
                idempotent=False)
        except SessionExpired:
            await self._session_gone("the store says it does not exist", confirmed=True)
            raise
        result = PutResult(k, version_from_oxia(version))
        if ephemeral and result.version.session_id != self._session:
            # The client opened a new session under us (its old one had ended): announce the old one's end.
            await self._session_gone("the client replaced it")
            await self.session_id()
        return result

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        return await self._call(f"delete {key!r}", lambda c: bool(c.delete(key, expected_version_id=expected_version)),
                                idempotent=False)

    async def delete_range(self, min_key: str, max_key: str) -> int:
        """Oxia does not count what a range delete removed; the count is of the keys listed before it."""
        keys = await self.list(min_key, max_key)
        if keys:
            await self._call(f"delete_range {min_key!r}..{max_key!r}", lambda c: c.delete_range(min_key, max_key),
                             idempotent=False)
        return len(keys)

    async def list(self, min_key: str, max_key: str, *, use_index: str | None = None) -> builtins.list[str]:
        keys = await self._call(f"list {min_key!r}..{max_key!r}",
                                lambda c: c.list(min_key, max_key, use_index=use_index), idempotent=True)
        return list(keys) if use_index is not None else sorted(keys)   # the client sorts hierarchically

    async def list_prefix(self, prefix: str) -> builtins.list[str]:
        return await self.list(prefix, prefix_end(prefix))

    async def range_scan(self, min_key: str, max_key: str, *, use_index: str | None = None,
                         limit: int | None = None, include_value: bool = True) -> builtins.list[GetResult]:
        what = f"range_scan {min_key!r}..{max_key!r}"
        if use_index is not None:
            internals = self._internals
            assert internals is not None
            records = await self._call(what, lambda c: internals.index_scan(min_key, max_key, use_index),
                                       idempotent=True)
            out = [GetResult(r.key or "", _text(r.value) if include_value else None,
                             _version_from_pb(r.version), r.secondary_index_key) for r in records]
        else:
            rows = await self._call(what, lambda c: builtins.list(c.range_scan(min_key, max_key)), idempotent=True)
            out = sorted((GetResult(k, _text(v) if include_value else None, version_from_oxia(ver))
                          for k, v, ver in rows), key=lambda r: r.key)
        return out[:limit] if limit is not None else out

    # ---- watches ------------------------------------------------------------------------------

    async def watch(self, prefix: str, on_events: EventsCallback, *,
                    on_resync: ResyncCallback | None = None) -> ClientSideWatch:
        """Watch every key under `prefix`; the stream is live since connect, so nothing later is missed."""
        self._require()
        return ClientSideWatch(self._watches, next(self._watch_ids), prefix, on_events, on_resync)

    def _drain(self) -> None:
        """Thread: hand every notification to the loop (ends when the stream is closed)."""
        loop, stream = self._loop, self._notifications
        assert loop is not None
        for n in stream:
            if self._closing:
                return
            with contextlib.suppress(RuntimeError):   # the loop closed under us
                loop.call_soon_threadsafe(self._arrived, n)

    def _arrived(self, n: Any) -> None:
        self._pending.append(n)
        if len(self._pending) == 1:
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        batch, self._pending = self._pending, []
        events: builtins.list[Notification] = []
        resync: set[int] = set()
        for n in batch:
            kind = n.notification_type()
            if kind is NotificationType.KEY_RANGE_DELETED:
                low, high = n.key(), n.key_range_end() or ""
                resync.update(w.watch_id for w in self._watches.values()
                              if low < prefix_end(w.prefix) and w.prefix < high)
                continue
            events.append(Notification(_EVENTS[kind], n.key(), n.version_id() or 0))
        for watch in list(self._watches.values()):
            mine = [e for e in events if e.key.startswith(watch.prefix)]
            if mine:
                self._invoke(watch.on_events, mine)
            if watch.watch_id in resync and watch.on_resync is not None:
                self._invoke(watch.on_resync)

    # ---- session ------------------------------------------------------------------------------

    async def session_id(self) -> int:
        """The live session, opened now if there is none."""
        self._want_session = True
        async with self._session_lock:
            if self._session is None:
                internals = self._internals
                if internals is None:
                    raise MetadataUnavailable(f"the Oxia client for {self._address} is not connected")
                session = await self._call("open a session", lambda c: internals.session(self._shard),
                                           idempotent=False)
                self._session_obj = session
                self._session = int(session.session_id())
                log.info("opened Oxia session %d (timeout %d ms)", self._session, self.session_timeout_ms)
            return self._session

    async def _session_monitor(self) -> None:
        tick = min(0.5, max(0.02, self.session_timeout_ms / 15000))
        while not self._closing:   # bounded by the client's life
            await asyncio.sleep(tick)
            sid, obj, internals = self._session, self._session_obj, self._internals
            if sid is not None and internals is not None and (obj.is_closed() or internals.current(self._shard)
                                                                is not obj):
                await self._session_gone("no heartbeat was answered within its timeout")
            if self._session is None and self._want_session and not self._closing:
                with contextlib.suppress(MetadataError, MetadataUnavailable):
                    await self.session_id()

    async def _session_gone(self, reason: str, *, confirmed: bool = False) -> None:
        sid, obj = self._session, self._session_obj
        if sid is None:
            return
        self._session, self._session_obj = None, None
        self.sessions_lost += 1
        log.warning("Oxia session %d lost: %s", sid, reason)
        if confirmed and obj is not None and not obj.is_closed():
            # The store dropped it; the client would keep heartbeating it until its own timeout.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._blocking(obj.close), self.request_timeout_s)
        self._announce_session_lost(sid)


def _version_from_pb(v: pb.Version | None) -> Version:
    if v is None:
        return Version(0, 0, 0, 0, False, None)
    return Version(v.version_id, v.created_timestamp, v.modified_timestamp, v.modifications_count,
                   v.session_id is not None, v.session_id)


def _probe(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=2.0):
        pass


__all__ = ["OxiaMetadataClient", "translate", "version_from_oxia"]
