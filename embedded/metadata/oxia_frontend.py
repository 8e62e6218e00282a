"""Oxia's gRPC client protocol in front of the metadata store: one store, two frontends.

Theory of operation. The store process owns one `DurableStore` on one asyncio loop;
our own RPC protocol (`server.py`) and this frontend both execute commands against it,
so a broker on our protocol and a real `oxia` client see the same keys, versions,
sessions and notifications. The frontend is a `grpc.aio` server on the same loop
serving the service of the `oxia` package's `client.proto` (`oxia_proto.py`): each
request is translated into the store's commands and reads, and the answer into Oxia's
messages and status codes. The store's rules stay the store's: a write is answered
once its log position is durable; reads and definite failures wait for the store's
read barrier (whatever `MetadataService.read_barrier` is at the time), so neither
frontend reveals a state a crash could take back.

What follows Oxia's data server (`oxiad/dataserver`, read, not copied):
* One shard (`0`) over the whole xxhash range, led by the address the listener
  advertises.
* Status codes and messages as a real Oxia v0.14.0 answers them, checked side by side by
  tests/cluster/test_oxia_client.py (`make test-oxia-real`). Oxia's own codes (100-111,
  `common/constant/grpc_errors.go`) and its wrapped errors reach a Python client as
  UNKNOWN with Oxia's message, so ours are UNKNOWN with the same message: another shard
  "node is not leader for shard N", another namespace "oxia: namespace not found", a
  session timeout outside [2 s, 5 min] "timeoutMs=T: oxia: invalid session timeout", a
  KeepAlive of an unknown session "oxia: session not found", a write the store refuses
  (a sequence's first delta of 0, too few deltas) "oxia db: failed to apply batch: oxia:
  ...". CloseSession of an unknown session answers OK, as Oxia does.
* Per-operation statuses OK / KEY_NOT_FOUND / UNEXPECTED_VERSION_ID /
  SESSION_DOES_NOT_EXIST; a delete of a missing key is KEY_NOT_FOUND, also with
  expected version -1, as `checkExpectedVersionId` + `applyDelete` answer; a sequence-key
  put with an expected version is UNEXPECTED_VERSION_ID (`generateUniqueKeyFromSequences`).
* Notifications: one `NotificationBatch` per committed log position (offset = our
  lsn), keyed by key, KEY_DELETED without a version; a `delete_range` sent through this
  frontend is one KEY_RANGE_DELETED keyed by its start, with `key_range_last` its end. A stream without a start offset
  first gets an empty batch at the commit offset (the client waits for it before it
  hands out its iterator); a stream with `start_offset_exclusive` gets every retained
  batch after it, then live ones.
* Sequence updates: the highest existing key of the sequence at once, then the key of
  every new record of the sequence (the latest only when the client lags).

Where it differs (the README's table): notifications are retained in memory (the last
`HISTORY_BATCHES` batches; after a restart those of the log records recovery replayed,
i.e. since the last snapshot, as `seed_history` says), a write batch is applied
operation by operation rather than as one log entry, values must be UTF-8 (the store
keeps text) and keys non-empty, a record has at most one secondary key per index,
`client_identity` is not kept, and a `delete_range` sent through our own protocol
notifies each deleted key (our protocol's watches expect that) instead of one
KEY_RANGE_DELETED; a range delete that deletes nothing notifies nothing.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

import grpc
from grpc import aio

from embedded.metadata.durable import DurableStore, StoreFailed
from embedded.metadata.model import (
    BadVersion,
    Comparison,
    EventType,
    GetResult,
    InvalidOptions,
    KeyNotFound,
    Notification,
    SessionExpired,
    Version,
)
from embedded.metadata.oxia_proto import (
    DEFAULT_NAMESPACE,
    HASH_MAX,
    HASH_MIN,
    MAX_SESSION_TIMEOUT_MS,
    MIN_SESSION_TIMEOUT_MS,
    SERVICE,
    SHARD,
    pb,
)
from embedded.metadata.state import Delete, DeleteRange, Put, SessionClose, SessionOpen
from harness.metrics import Registry

log = logging.getLogger(__name__)

#: Notification batches kept for clients that resume a stream from an offset.
HISTORY_BATCHES = 10_000
#: Batches one notification stream may lag behind before it is ended (the client resumes).
STREAM_BACKLOG = 10_000
#: The Python client 0.2.1 starts its discovery thread before it creates the barrier that
#: thread signals on the first assignments; an answer that comes back before the constructor
#: gets there kills the thread and the constructor gives up after 30 s. Seen here on a loaded
#: machine; a short pause before the first answer (start-up only) keeps clear of that race.
FIRST_ASSIGNMENTS_DELAY_S = 0.05
LIST_CHUNK = 1_000
SCAN_CHUNK = 100

_COMPARISONS = {0: Comparison.EQUAL, 1: Comparison.FLOOR, 2: Comparison.CEILING,
                3: Comparison.LOWER, 4: Comparison.HIGHER}
_EVENT_TYPES = {EventType.CREATED: pb.NotificationType.KEY_CREATED,
                EventType.MODIFIED: pb.NotificationType.KEY_MODIFIED,
                EventType.DELETED: pb.NotificationType.KEY_DELETED}


class StoreAccess(Protocol):
    """What the frontend needs of the store process (`MetadataService` provides it)."""

    store: DurableStore
    registry: Registry

    async def read_barrier(self) -> None: ...

    def expire_due(self, now_ms: int, only: int | None = None) -> int: ...

    def account(self, op: str, cas: bool, result: str, seconds: float) -> None: ...

    def fail_stop(self) -> None: ...


@dataclass(frozen=True)
class OxiaListener:
    """One gRPC port; `advertised` is the shard leader address its clients are told.

    Behind a fault proxy each client reaches the store through its own link, so each
    link gets a listener that advertises the link's address: otherwise the client
    would learn the store's real port and bypass the proxy after discovery.
    """

    port: int
    advertised: str | None = None


class _Invalid(Exception):
    """A request this store rejects as a whole (INVALID_ARGUMENT): values that are not
    UTF-8, empty keys, two secondary keys for one index (Oxia takes them all)."""


#: An item of the notification history: (lsn, ms, events, the range a range delete of
#: Oxia's protocol removed at that lsn).
_Batch = tuple[int, int, tuple[Notification, ...], tuple[str, str] | None]


@dataclass(eq=False)   # identity: kept in a set
class _Subscriber:
    queue: asyncio.Queue[_Batch] = field(
        default_factory=lambda: asyncio.Queue(STREAM_BACKLOG))
    overflowed: bool = False


@dataclass(eq=False)   # identity: kept in a set
class _SequenceWaiter:
    latest: str | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, key: str) -> None:
        self.latest = key
        self.ready.set()


def version_to_pb(v: Version) -> pb.Version:
    return pb.Version(version_id=v.version_id, modifications_count=v.modifications_count,
                      created_timestamp=v.created_ms, modified_timestamp=v.modified_ms,
                      session_id=v.session_id if v.ephemeral else None)


def record_to_pb(r: GetResult, include_value: bool = True) -> pb.GetResponse:
    value = r.value.encode() if include_value and r.value is not None else None
    return pb.GetResponse(status=pb.Status.OK, version=version_to_pb(r.version), value=value, key=r.key,
                          secondary_index_key=r.secondary_key)


def batch_to_pb(lsn: int, ms: int, events: Iterable[Notification],
                deleted_range: tuple[str, str] | None = None) -> pb.NotificationBatch:
    """Oxia's batch: one entry per key, the last event on a key wins (as Oxia's `seal`); a
    range delete is one KEY_RANGE_DELETED at its start, for the keys of `[start, end)`."""
    entries: dict[str, pb.Notification] = {}
    for e in events:
        if deleted_range is not None and e.type is EventType.DELETED \
                and deleted_range[0] <= e.key < deleted_range[1]:
            continue
        entries[e.key] = pb.Notification(type=_EVENT_TYPES[e.type],
                                         version_id=None if e.type is EventType.DELETED else e.version_id)
    if deleted_range is not None:
        entries[deleted_range[0]] = pb.Notification(type=pb.NotificationType.KEY_RANGE_DELETED,
                                                    key_range_last=deleted_range[1])
    return pb.NotificationBatch(shard=SHARD, offset=lsn, timestamp=ms, notifications=entries)



def put_from_pb(p: pb.PutRequest) -> Put:
    if not p.key:
        raise _Invalid("a put needs a non-empty key")
    try:
        value = bytes(p.value).decode("utf-8")
    except UnicodeDecodeError:
        raise _Invalid(f"value of {p.key!r} is not UTF-8: this store keeps text values") from None
    names = [si.index_name for si in p.secondary_indexes]
    if len(set(names)) != len(names) or not all(names):
        raise _Invalid(f"secondary indexes of {p.key!r}: one secondary key per named index, got {names}")
    return Put(key=p.key, value=value, expected_version=p.expected_version_id,
               ephemeral=p.session_id is not None, session_id=p.session_id, partition_key=p.partition_key,
               sequence_keys_deltas=tuple(p.sequence_key_delta) or None,
               secondary_indexes=tuple(sorted((si.index_name, si.secondary_key) for si in p.secondary_indexes)))


class OxiaFrontend:
    """The gRPC servers (one per listener) of one store process."""

    def __init__(self, service: StoreAccess, listeners: Iterable[OxiaListener], host: str = "127.0.0.1") -> None:
        self._service = service
        self._listeners = list(listeners)
        self._host = host
        self._servers: list[aio.Server] = []
        self.ports: list[int] = []
        self._closing = asyncio.Event()
        self._history: collections.deque[_Batch] = collections.deque(maxlen=HISTORY_BATCHES)
        self._deleted_ranges: dict[int, tuple[str, str]] = {}   # lsn -> range, until durable
        self._subscribers: set[_Subscriber] = set()
        self._sequence_waiters: dict[str, set[_SequenceWaiter]] = {}
        self._rpcs = service.registry.counter("txnbench_metadata_oxia_rpcs_total",
                                              "Oxia-protocol RPCs by method and gRPC status", ("rpc", "code"))

    @property
    def store(self) -> DurableStore:
        return self._service.store

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        for listener in self._listeners:
            server = aio.server()
            port = server.add_insecure_port(f"{self._host}:{listener.port}")
            if port == 0:
                raise OSError(f"cannot bind the Oxia port {self._host}:{listener.port}")
            advertised = listener.advertised or f"{self._host}:{port}"
            server.add_generic_rpc_handlers((self._handlers(advertised),))
            await server.start()
            self._servers.append(server)
            self.ports.append(port)
            log.info("Oxia protocol on %s:%d (advertised as %s)", self._host, port, advertised)

    async def stop(self) -> None:
        self._closing.set()
        for server in self._servers:
            await server.stop(grace=0.5)
        self._servers.clear()

    # ---- fed by the store ---------------------------------------------------------------------

    def seed_history(self, replayed: Iterable[_Batch]) -> None:
        """The changes recovery replayed (`DurableStore.take_replayed_changes`), before serving:
        a client that resumes its notification stream across a restart gets the batches after
        its offset, as from Oxia's database, instead of nothing."""
        self._history.extend(replayed)

    def on_durable(self, ready: list[tuple[int, tuple[Notification, ...]]]) -> None:
        """Called by the store, on its loop, with every newly durable batch of events."""
        ms = int(time.time() * 1000)
        for lsn, events in ready:
            item: _Batch = (lsn, ms, events, self._deleted_ranges.pop(lsn, None))
            self._history.append(item)
            for sub in list(self._subscribers):
                if sub.overflowed:
                    continue
                try:
                    sub.queue.put_nowait(item)
                except asyncio.QueueFull:
                    sub.overflowed = True
                    sub.queue = asyncio.Queue(1)   # wake the stream so it ends; the client resumes
                    sub.queue.put_nowait(item)
            if self._sequence_waiters:
                for event in events:
                    if event.type is EventType.CREATED:
                        self._offer_sequence_key(event.key)

    def _offer_sequence_key(self, key: str) -> None:
        for prefix, waiters in self._sequence_waiters.items():
            if _is_sequence_key_of(key, prefix):
                for waiter in waiters:
                    waiter.offer(key)

    # ---- gRPC plumbing ------------------------------------------------------------------------

    def _handlers(self, advertised: str) -> grpc.GenericRpcHandler:
        def unary(fn: Any, req: Any, resp: Any) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req.FromString,
                                                       response_serializer=resp.SerializeToString)

        def stream(fn: Any, req: Any, resp: Any) -> grpc.RpcMethodHandler:
            return grpc.unary_stream_rpc_method_handler(fn, request_deserializer=req.FromString,
                                                        response_serializer=resp.SerializeToString)

        async def assignments(request: pb.ShardAssignmentsRequest,
                              context: aio.ServicerContext) -> AsyncIterator[pb.ShardAssignments]:
            async for item in self._shard_assignments(request, context, advertised):
                yield item

        return grpc.method_handlers_generic_handler(SERVICE, {
            "GetShardAssignments": stream(assignments, pb.ShardAssignmentsRequest, pb.ShardAssignments),
            "Write": unary(self._write, pb.WriteRequest, pb.WriteResponse),
            "WriteStream": grpc.stream_stream_rpc_method_handler(
                self._write_stream, request_deserializer=pb.WriteRequest.FromString,
                response_serializer=pb.WriteResponse.SerializeToString),
            "Read": stream(self._read, pb.ReadRequest, pb.ReadResponse),
            "List": stream(self._list, pb.ListRequest, pb.ListResponse),
            "RangeScan": stream(self._range_scan, pb.RangeScanRequest, pb.RangeScanResponse),
            "GetSequenceUpdates": stream(self._sequence_updates, pb.GetSequenceUpdatesRequest,
                                         pb.GetSequenceUpdatesResponse),
            "GetNotifications": stream(self._notifications, pb.NotificationsRequest, pb.NotificationBatch),
            "CreateSession": unary(self._create_session, pb.CreateSessionRequest, pb.CreateSessionResponse),
            "KeepAlive": unary(self._keep_alive, pb.SessionHeartbeat, pb.KeepAliveResponse),
            "CloseSession": unary(self._close_session, pb.CloseSessionRequest, pb.CloseSessionResponse),
        })

    async def _abort(self, context: aio.ServicerContext, rpc: str, code: grpc.StatusCode, message: str) -> NoReturn:
        self._rpcs.inc(rpc=rpc, code=code.name)
        await context.abort(code, message)
        raise AssertionError("unreachable")   # abort raises

    async def _check_shard(self, context: aio.ServicerContext, rpc: str, shard: int | None) -> None:
        if shard is not None and shard != SHARD:
            await self._abort(context, rpc, grpc.StatusCode.UNKNOWN, f"node is not leader for shard {shard}")

    async def _store_failed(self, context: aio.ServicerContext, rpc: str, err: StoreFailed) -> NoReturn:
        """The outcome is unknown: say UNAVAILABLE and stop the process, as our protocol does."""
        self._service.fail_stop()
        await self._abort(context, rpc, grpc.StatusCode.UNAVAILABLE, f"oxia: store failed: {err}")

    # ---- discovery ----------------------------------------------------------------------------

    async def _shard_assignments(self, request: pb.ShardAssignmentsRequest, context: aio.ServicerContext,
                                 advertised: str) -> AsyncIterator[pb.ShardAssignments]:
        namespace = request.namespace or DEFAULT_NAMESPACE
        if namespace != DEFAULT_NAMESPACE:
            await self._abort(context, "GetShardAssignments", grpc.StatusCode.UNKNOWN, "oxia: namespace not found")
        self._rpcs.inc(rpc="GetShardAssignments", code="OK")
        await asyncio.sleep(FIRST_ASSIGNMENTS_DELAY_S)
        assignment = pb.ShardAssignment(shard=SHARD, leader=advertised,
                                        int32_hash_range=pb.Int32HashRange(min_hash_inclusive=HASH_MIN,
                                                                           max_hash_inclusive=HASH_MAX))
        yield pb.ShardAssignments(namespaces={namespace: pb.NamespaceShardsAssignment(
            assignments=[assignment], shard_key_router=pb.ShardKeyRouter.XXHASH3)})
        await self._closing.wait()   # assignments never change: hold the stream until shutdown

    # ---- writes -------------------------------------------------------------------------------

    async def _write(self, request: pb.WriteRequest, context: aio.ServicerContext) -> pb.WriteResponse:
        return await self._apply_write(request, context, "Write")

    async def _write_stream(self, requests: AsyncIterator[pb.WriteRequest],
                            context: aio.ServicerContext) -> AsyncIterator[pb.WriteResponse]:
        async for request in requests:   # bounded by the client's stream
            yield await self._apply_write(request, context, "WriteStream")

    async def _apply_write(self, request: pb.WriteRequest, context: aio.ServicerContext,
                           rpc: str) -> pb.WriteResponse:
        await self._check_shard(context, rpc, request.shard)
        started = time.perf_counter()
        try:
            puts = [put_from_pb(p) for p in request.puts]
        except _Invalid as err:
            await self._abort(context, rpc, grpc.StatusCode.INVALID_ARGUMENT, f"oxia: {err}")
        outcomes: list[tuple[str, bool, str]] = []   # (op, cas, result) for the metrics
        response = pb.WriteResponse()
        invalid: str | None = None
        try:
            for cmd in puts:
                put_resp, result = self._put(cmd)
                response.puts.append(put_resp)
                outcomes.append(("put", cmd.expected_version is not None, result))
            for d in request.deletes:
                del_resp, result = self._delete(Delete(d.key, d.expected_version_id))
                response.deletes.append(del_resp)
                outcomes.append(("delete", d.expected_version_id is not None, result))
            for r in request.delete_ranges:
                applied, lsn = self.store.execute(DeleteRange(r.start_inclusive, r.end_exclusive))
                if applied.notifications:
                    self._deleted_ranges[lsn] = (r.start_inclusive, r.end_exclusive)
                response.delete_ranges.append(pb.DeleteRangeResponse(status=pb.Status.OK))
                outcomes.append(("delete_range", False, "ok"))
        except InvalidOptions as err:
            invalid = err.message or str(err)
        except StoreFailed as err:
            await self._store_failed(context, rpc, err)
        try:   # every answer, a failure too, waits until what it observed is durable
            await self.store.wait_durable(self.store.applied_lsn)
        except StoreFailed as err:
            await self._store_failed(context, rpc, err)
        elapsed = time.perf_counter() - started
        for op, cas, result in outcomes:
            self._service.account(op, cas, result, elapsed)
        if invalid is not None:
            await self._abort(context, rpc, grpc.StatusCode.UNKNOWN, f"oxia db: failed to apply batch: oxia: {invalid}")
        self._rpcs.inc(rpc=rpc, code="OK")
        return response

    def _put(self, cmd: Put) -> tuple[pb.PutResponse, str]:
        if cmd.ephemeral and cmd.session_id is not None:
            self._service.expire_due(self.store.now_ms(), only=cmd.session_id)
        try:
            applied, _ = self.store.execute(cmd)
        except BadVersion:
            return pb.PutResponse(status=pb.Status.UNEXPECTED_VERSION_ID), "conflict"
        except SessionExpired:
            return pb.PutResponse(status=pb.Status.SESSION_DOES_NOT_EXIST), "error"
        result = applied.result
        key = result.key if cmd.sequence_keys_deltas is not None else None
        return pb.PutResponse(status=pb.Status.OK, version=version_to_pb(result.version), key=key), "ok"

    def _delete(self, cmd: Delete) -> tuple[pb.DeleteResponse, str]:
        try:
            applied, _ = self.store.execute(cmd)
        except BadVersion:
            return pb.DeleteResponse(status=pb.Status.UNEXPECTED_VERSION_ID), "conflict"
        if not applied.result:
            return pb.DeleteResponse(status=pb.Status.KEY_NOT_FOUND), "not_found"
        return pb.DeleteResponse(status=pb.Status.OK), "ok"

    # ---- reads --------------------------------------------------------------------------------

    async def _barrier(self, context: aio.ServicerContext, rpc: str) -> None:
        try:
            await self._service.read_barrier()
        except StoreFailed as err:
            await self._store_failed(context, rpc, err)

    async def _read(self, request: pb.ReadRequest, context: aio.ServicerContext) -> AsyncIterator[pb.ReadResponse]:
        await self._check_shard(context, "Read", request.shard)
        started = time.perf_counter()
        gets: list[tuple[pb.GetResponse, str]] = []
        for g in request.gets:
            comparison = _COMPARISONS.get(int(g.comparison_type))
            if comparison is None:
                await self._abort(context, "Read", grpc.StatusCode.INVALID_ARGUMENT,
                                  f"oxia: unknown comparison type {g.comparison_type}")
            try:
                found = self.store.state.get(g.key, comparison, use_index=g.secondary_index_name,
                                             include_value=g.include_value)
                gets.append((record_to_pb(found, g.include_value), "ok"))
            except KeyNotFound:
                gets.append((pb.GetResponse(status=pb.Status.KEY_NOT_FOUND), "not_found"))
        await self._barrier(context, "Read")
        elapsed = time.perf_counter() - started
        for _, result in gets:
            self._service.account("get", False, result, elapsed)
        self._rpcs.inc(rpc="Read", code="OK")
        yield pb.ReadResponse(gets=[g for g, _ in gets])

    async def _list(self, request: pb.ListRequest, context: aio.ServicerContext) -> AsyncIterator[pb.ListResponse]:
        await self._check_shard(context, "List", request.shard)
        started = time.perf_counter()
        keys = self.store.state.list(request.start_inclusive, request.end_exclusive,
                                     use_index=request.secondary_index_name)
        await self._barrier(context, "List")
        self._service.account("list", False, "ok", time.perf_counter() - started)
        self._rpcs.inc(rpc="List", code="OK")
        for i in range(0, len(keys), LIST_CHUNK):
            yield pb.ListResponse(keys=keys[i:i + LIST_CHUNK])

    async def _range_scan(self, request: pb.RangeScanRequest,
                          context: aio.ServicerContext) -> AsyncIterator[pb.RangeScanResponse]:
        await self._check_shard(context, "RangeScan", request.shard)
        started = time.perf_counter()
        records = self.store.state.range_scan(request.start_inclusive, request.end_exclusive,
                                              use_index=request.secondary_index_name)
        await self._barrier(context, "RangeScan")
        self._service.account("range_scan", False, "ok", time.perf_counter() - started)
        self._rpcs.inc(rpc="RangeScan", code="OK")
        for i in range(0, len(records), SCAN_CHUNK):
            yield pb.RangeScanResponse(records=[record_to_pb(r) for r in records[i:i + SCAN_CHUNK]])

    # ---- streams of changes -------------------------------------------------------------------

    async def _notifications(self, request: pb.NotificationsRequest,
                             context: aio.ServicerContext) -> AsyncIterator[pb.NotificationBatch]:
        await self._check_shard(context, "GetNotifications", request.shard)
        sub = _Subscriber()
        self._subscribers.add(sub)   # before reading the offset: nothing falls in between
        try:
            if request.start_offset_exclusive is None:
                offset = self.store.durable_lsn   # every batch up to it has been handed to on_durable
                yield pb.NotificationBatch(shard=SHARD, offset=offset, timestamp=0)
            else:
                offset = request.start_offset_exclusive
                retained = list(self._history)
                if retained and retained[0][0] > offset + 1 and len(retained) == HISTORY_BATCHES:
                    log.warning("notification stream resumes after offset %d but the oldest retained batch "
                                "is %d: batches in between are no longer kept", offset, retained[0][0])
                for lsn, ms, events, deleted_range in retained:
                    if lsn > offset:
                        yield batch_to_pb(lsn, ms, events, deleted_range)
                        offset = lsn
            self._rpcs.inc(rpc="GetNotifications", code="OK")
            while not self._closing.is_set():   # bounded by the stream's life
                lsn, ms, events, deleted_range = await sub.queue.get()
                if sub.overflowed:
                    await self._abort(context, "GetNotifications", grpc.StatusCode.RESOURCE_EXHAUSTED,
                                      f"oxia: notification stream fell {STREAM_BACKLOG} batches behind; "
                                      f"resume from offset {offset}")
                if lsn > offset:
                    yield batch_to_pb(lsn, ms, events, deleted_range)
                    offset = lsn
        finally:
            self._subscribers.discard(sub)

    async def _sequence_updates(self, request: pb.GetSequenceUpdatesRequest,
                                context: aio.ServicerContext) -> AsyncIterator[pb.GetSequenceUpdatesResponse]:
        await self._check_shard(context, "GetSequenceUpdates", request.shard)
        prefix = request.key
        if not prefix:
            await self._abort(context, "GetSequenceUpdates", grpc.StatusCode.INVALID_ARGUMENT,
                              "oxia: sequence updates need the sequence's prefix key")
        waiter = _SequenceWaiter()
        self._sequence_waiters.setdefault(prefix, set()).add(waiter)
        try:
            highest = self._highest_sequence_key(prefix)
            if highest is not None:
                waiter.offer(highest)
            await self._barrier(context, "GetSequenceUpdates")
            self._rpcs.inc(rpc="GetSequenceUpdates", code="OK")
            while not self._closing.is_set():   # bounded by the stream's life
                await waiter.ready.wait()
                waiter.ready.clear()
                if waiter.latest is not None:
                    yield pb.GetSequenceUpdatesResponse(highest_sequence_key=waiter.latest)
        finally:
            waiters = self._sequence_waiters.get(prefix)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._sequence_waiters[prefix]

    def _highest_sequence_key(self, prefix: str) -> str | None:
        try:
            found = self.store.state.get(prefix + "-:", Comparison.LOWER, include_value=False)   # ':' follows '9'
        except KeyNotFound:
            return None
        return found.key if _is_sequence_key_of(found.key, prefix) else None

    # ---- sessions -----------------------------------------------------------------------------

    async def _create_session(self, request: pb.CreateSessionRequest,
                              context: aio.ServicerContext) -> pb.CreateSessionResponse:
        await self._check_shard(context, "CreateSession", request.shard)
        timeout = request.session_timeout_ms
        if not MIN_SESSION_TIMEOUT_MS <= timeout <= MAX_SESSION_TIMEOUT_MS:
            self._service.account("session_open", False, "error", 0.0)
            await self._abort(context, "CreateSession", grpc.StatusCode.UNKNOWN,
                              f"timeoutMs={timeout}: oxia: invalid session timeout")
        started = time.perf_counter()
        try:
            applied, lsn = self.store.execute(SessionOpen(timeout, request.client_identity))
            await self.store.wait_durable(lsn)
        except StoreFailed as err:
            await self._store_failed(context, "CreateSession", err)
        self._service.account("session_open", False, "ok", time.perf_counter() - started)
        self._rpcs.inc(rpc="CreateSession", code="OK")
        return pb.CreateSessionResponse(session_id=int(applied.result))

    async def _keep_alive(self, request: pb.SessionHeartbeat, context: aio.ServicerContext) -> pb.KeepAliveResponse:
        await self._check_shard(context, "KeepAlive", request.shard)
        started = time.perf_counter()
        now = self.store.now_ms()
        self._service.expire_due(now, only=request.session_id)   # a late heartbeat does not revive it
        try:
            self.store.state.keepalive(request.session_id, now)
        except SessionExpired:
            self._service.account("session_keepalive", False, "error", time.perf_counter() - started)
            await self._barrier(context, "KeepAlive")
            await self._abort(context, "KeepAlive", grpc.StatusCode.UNKNOWN, "oxia: session not found")
        await self._barrier(context, "KeepAlive")
        self._service.account("session_keepalive", False, "ok", time.perf_counter() - started)
        self._rpcs.inc(rpc="KeepAlive", code="OK")
        return pb.KeepAliveResponse()

    async def _close_session(self, request: pb.CloseSessionRequest,
                             context: aio.ServicerContext) -> pb.CloseSessionResponse:
        await self._check_shard(context, "CloseSession", request.shard)
        started = time.perf_counter()
        try:
            _, lsn = self.store.execute(SessionClose(request.session_id))
            await self.store.wait_durable(lsn)
        except SessionExpired:   # Oxia answers OK: the session is gone either way
            self._service.account("session_close", False, "not_found", time.perf_counter() - started)
            await self._barrier(context, "CloseSession")
        except StoreFailed as err:
            await self._store_failed(context, "CloseSession", err)
        self._service.account("session_close", False, "ok", time.perf_counter() - started)
        self._rpcs.inc(rpc="CloseSession", code="OK")
        return pb.CloseSessionResponse()


def _is_sequence_key_of(key: str, prefix: str) -> bool:
    """`key` is `<prefix>-<digits>...`, a record of the sequence `prefix`."""
    return key.startswith(prefix + "-") and key[len(prefix) + 1:len(prefix) + 2].isdigit()


def parse_listeners(raw: Any, oxia_port: Any) -> list[OxiaListener]:
    """Listeners from the store config: `oxia_port` (one, advertising itself) and/or
    `oxia_listeners` ([{"port": P, "advertised": "127.0.0.1:L"}, ...])."""
    out: list[OxiaListener] = []

    def port_of(value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise ValueError(f"metadata config: `{where}` must be a port number (0 picks a free one), got {value!r}")
        return value

    if oxia_port is not None:
        out.append(OxiaListener(port_of(oxia_port, "oxia_port")))
    if raw is not None:
        if not isinstance(raw, list):
            raise ValueError("metadata config: `oxia_listeners` must be a list of {\"port\": P, \"advertised\": A}")
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                raise ValueError(f"metadata config: `oxia_listeners[{i}]` must be an object, got {item!r}")
            advertised = item.get("advertised")
            if advertised is not None and (not isinstance(advertised, str) or ":" not in advertised):
                raise ValueError(f"metadata config: `oxia_listeners[{i}].advertised` must be host:port, "
                                 f"got {advertised!r}")
            out.append(OxiaListener(port_of(item.get("port"), f"oxia_listeners[{i}].port"), advertised))
    return out


__all__ = ["HISTORY_BATCHES", "OxiaFrontend", "OxiaListener", "StoreAccess", "batch_to_pb", "parse_listeners",
           "put_from_pb", "record_to_pb", "version_to_pb"]
