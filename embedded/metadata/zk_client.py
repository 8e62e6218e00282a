"""`ZkMetadataClient`: the brokers' metadata interface on a real ZooKeeper, through kazoo.

Theory of operation, after Pulsar's `ZKMetadataStore` (pulsar-metadata, impl/):
- A key is a znode path (keys must start with "/"); a put creates missing parents as
  empty persistent znodes, as Pulsar does. Those parents are znodes, so a range scan
  that covers them lists them, as Pulsar's `getChildren` would.
- Versions are znode versions (`Stat.version`): a record's first version is 0 and every
  set adds one. CAS is ZooKeeper's versioned `setData` / `delete`; `MUST_NOT_EXIST` is a
  `create`. Versions are per znode, not store-wide as on Oxia: the brokers only compare
  a record's version with an earlier version of the same record.
- Ephemeral records are ephemeral znodes of this client's ZooKeeper session; the session
  id is ZooKeeper's, and its loss is announced to the session listeners: when the server
  says it expired (kazoo's LOST state; kazoo then opens the next session by itself), or,
  as Pulsar's `ZKSessionWatcher` does, when ZooKeeper has not answered a probe (`exists /`
  every 1/15 of the session timeout, each allowed one such tick) for 5/6 of the session
  timeout, counted from the last answered probe: before the server can expire the session
  and hand our ephemeral records to another broker. The brokers keep serving what they own
  meanwhile and revalidate it on the next session (embedded/broker/ownership.py), as
  Pulsar's brokers revalidate their locks on `SessionReestablished`. A session declared
  lost stays lost: if ZooKeeper had not expired it (a restarted server restores its
  sessions) and kazoo reconnects on it, this client closes it (its ephemeral records go,
  as the listeners were told) and opens a new one, on which the brokers take their records
  again.
- Watches are one persistent recursive watch on "/" (ZooKeeper >= 3.6 `addWatch`), which
  kazoo 2.11 does not offer: `_AddWatch` is that request and `_route_events` hooks the
  connection's event reader to deliver its events (see `_install_event_hook`). After a
  reconnect the watch is added again and every prefix watch is resynced (`on_resync`),
  since events may have been missed while disconnected.
- Sequence keys and secondary indexes are emulated as Pulsar 5.0 emulates them on
  ZooKeeper: a sequence key's counter is a CAS-incremented sidecar znode (then the key
  `<prefix>-<%020d>` is created), and an index scan is scan-and-filter: each indexed
  record's index entries sit in a sidecar znode written in the same ZooKeeper `multi` as
  the record; an index scan lists every sidecar, filters by index and range, and sorts.
  Its cost grows with the number of indexed records, which is the point to measure.
  Sidecars live under `/__txnbench` and are never listed nor watched.

Every call is kazoo's async form, bridged to the loop, with the deadline
`request_timeout_s`: no answer by then is `MetadataUnavailable` (a write's outcome is
unknown); reads are retried on connection loss until the deadline.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import itertools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.serialization import Watch, int_struct, write_string
from kazoo.protocol.states import KazooState

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
    MUST_NOT_EXIST,
    BadVersion,
    Comparison,
    EventType,
    GetResult,
    InvalidOptions,
    KeyNotFound,
    MetadataUnavailable,
    Notification,
    PutResult,
    SessionExpired,
    Version,
)
from embedded.metadata.state import prefix_end

log = logging.getLogger(__name__)

#: Our bookkeeping: sequence counters and index sidecars (never listed nor watched).
SIDECARS = "/__txnbench"
SEQUENCES = SIDECARS + "/seq"
INDEXES = SIDECARS + "/idx"
_HIDDEN = (SIDECARS, "/zookeeper")

_ZK_EVENTS = {1: EventType.CREATED, 2: EventType.DELETED, 3: EventType.MODIFIED}
_PERSISTENT_RECURSIVE = 1   # AddWatchMode.PERSISTENT_RECURSIVE
_RETRYABLE = (ConnectionLoss, OperationTimeoutError)
_CAS_ATTEMPTS = 50


class _AddWatch:
    """ZooKeeper's `addWatch` request (opcode 106, ZooKeeper >= 3.6)."""

    type = 106

    def __init__(self, path: str, mode: int) -> None:
        self.path = path
        self.mode = mode

    def serialize(self) -> bytearray:
        return write_string(self.path) + int_struct.pack(self.mode)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> bool:
        return True


def parse_zk_url(url: str) -> str:
    """`zk:HOST:PORT[,HOST:PORT...]` (Pulsar's form; `zk://` accepted too) -> kazoo's hosts string."""
    if not url.startswith("zk:"):
        raise ValueError(f"metadataStoreUrl {url!r}: ZooKeeper is written zk:HOST:PORT")
    hosts = url[3:].removeprefix("//").rstrip("/")
    if not hosts or any(not h.rpartition(":")[2].isdigit() for h in hosts.split(",")):
        raise ValueError(f"metadataStoreUrl {url!r}: ZooKeeper is written zk:HOST:PORT")
    return hosts


def version_from_stat(stat: Any) -> Version:
    owner = int(stat.ephemeralOwner)
    return Version(int(stat.version), int(stat.ctime), int(stat.mtime), int(stat.version), owner != 0,
                   owner or None)


def _check_key(key: str) -> None:
    if not key.startswith("/") or (key.endswith("/") and key != "/") or "//" in key:
        raise InvalidOptions(f"{key!r}: a ZooKeeper key is an absolute path (/a/b), without a trailing /")
    if key == SIDECARS or key.startswith(SIDECARS + "/"):
        raise InvalidOptions(f"{key!r}: {SIDECARS} holds this backend's bookkeeping")


def _hidden(key: str) -> bool:
    return any(key == h or key.startswith(h + "/") for h in _HIDDEN)


def _parent(key: str) -> str:
    return key.rsplit("/", 1)[0] or "/"


def _walk_root(min_key: str, max_key: str) -> str:
    """The deepest znode under which every key of [min_key, max_key) lies."""
    common = 0
    while common < min(len(min_key), len(max_key)) and min_key[common] == max_key[common]:
        common += 1
    head = min_key[:common]
    cut = head.rfind("/")
    return "/" if cut <= 0 else head[:cut]


def _sidecar(base: str, key: str) -> str:
    return f"{base}/{quote(key, safe='')}"


class ZkMetadataClient(JsonRecords, ClientCallbacks):
    """The brokers' `MetadataBackend` on ZooKeeper (see the module docstring)."""

    def __init__(self, hosts: str, *, session_timeout_ms: int = 10_000, client_name: str = "",
                 request_timeout_s: float = 5.0, connect_attempts: int = 20, backoff: Backoff | None = None,
                 on_session_lost: SessionLostCallback | None = None) -> None:
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.client_name = client_name
        self.request_timeout_s = request_timeout_s
        self.connect_attempts = connect_attempts
        self.backoff = backoff or Backoff()
        self._init_callbacks(on_session_lost)
        self._zk: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._session: int | None = None
        self._watch_ids = itertools.count(1)
        self._watches: dict[int, ClientSideWatch] = {}
        self._pending: builtins.list[Notification] = []
        self._hooked: Any = None
        self._parents: set[str] = set()
        self._disconnected_at: float | None = None
        self._heard = 0.0                     # when the last answered probe was sent
        self._abandoned: set[int] = set()     # sessions declared lost: never used again
        self._renewing = False
        self.sessions_lost = 0
        self.renewals = 0                     # sessions closed because they answered after being declared lost

    # ---- connection ---------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"zk:{self.hosts}"

    @property
    def current_session(self) -> int | None:
        return self._session

    async def connect(self) -> None:
        """Open the ZooKeeper session (bounded wait) and the persistent recursive watch on /."""
        self._loop = asyncio.get_running_loop()
        zk = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000,
                         connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 1.0},
                         logger=logging.getLogger("kazoo.client"))
        zk.add_listener(self._state_changed)
        budget = max(5.0, self.connect_attempts * 0.5)
        try:
            await asyncio.wait_for(asyncio.to_thread(zk.start, budget), budget + 2)
        except Exception as err:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(zk.stop)
            raise MetadataUnavailable(f"cannot reach ZooKeeper at {self.hosts} within {budget:.0f}s ({err})") from None
        self._zk = zk
        self._session = int(zk.client_id[0])
        await self._add_watch()
        self._spawn(self._watch_session())

    async def close(self) -> None:
        """Close the session: its ephemeral znodes go at once."""
        if self._closing:
            return
        self._closing = True
        zk, self._zk = self._zk, None
        self._session = None
        if zk is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.to_thread(zk.stop), 10)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(zk.close)
        self._cancel_callbacks()

    async def __aenter__(self) -> ZkMetadataClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _require(self) -> KazooClient:
        if self._zk is None or self._closing:
            raise MetadataUnavailable(f"the ZooKeeper client for {self.hosts} is not connected")
        return self._zk

    async def _await(self, async_result: Any, remaining: float) -> Any:
        """A kazoo IAsyncResult as an awaitable on this loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any) -> None:
            def apply() -> None:
                if future.done():
                    return
                try:
                    future.set_result(result.get_nowait())
                except BaseException as err:   # the call's own error, re-raised by get_nowait
                    future.set_exception(err)
            with contextlib.suppress(RuntimeError):   # the loop closed under us
                loop.call_soon_threadsafe(apply)

        async_result.rawlink(settle)
        return await asyncio.wait_for(future, remaining)

    async def _call(self, what: str, fn: Callable[[KazooClient], Any], *, idempotent: bool) -> Any:
        """One ZooKeeper call with a deadline; reads retried on connection loss until it."""
        deadline = time.monotonic() + self.request_timeout_s
        kind = _TRACED.get(what.split(" ", 1)[0])
        for attempt in itertools.count():   # bounded by the deadline
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise MetadataUnavailable(f"{what}: no answer from ZooKeeper at {self.hosts} within "
                                          f"{self.request_timeout_s:.1f}s; the outcome is unknown")
            started = time.monotonic()
            try:
                result = await self._await(fn(self._require()), remaining)
                if kind is not None:
                    tracing.record(kind, started)   # a request's span (embedded.tracing)
                return result
            except TimeoutError:
                continue
            except _RETRYABLE as err:
                if not idempotent:
                    raise MetadataUnavailable(f"{what}: {type(err).__name__}; the outcome is unknown") from None
            except (SessionExpiredError, ConnectionClosedError) as err:
                if isinstance(err, SessionExpiredError):
                    raise SessionExpired(what) from None
                raise MetadataUnavailable(f"{what}: {type(err).__name__}") from None
            except BadArgumentsError as err:
                raise InvalidOptions(f"{what}: {err}") from None
            await asyncio.sleep(min(self.backoff.delay(attempt), max(0.0, deadline - time.monotonic())))
        raise AssertionError("unreachable")

    # ---- data operations ----------------------------------------------------------------------

    async def _read(self, key: str) -> tuple[bytes, Any] | None:
        try:
            data, stat = await self._call(f"get {key!r}", lambda zk: zk.get_async(key), idempotent=True)
        except NoNodeError:
            return None
        return data, stat

    async def get(self, key: str, *, comparison: Comparison = Comparison.EQUAL, use_index: str | None = None,
                  include_value: bool = True) -> GetResult:
        if use_index is not None:
            return await self._get_by_index(key, comparison, use_index, include_value)
        if comparison is Comparison.EQUAL:
            _check_key(key)
            got = await self._read(key)
            if got is None:
                raise KeyNotFound(key)
            return GetResult(key, got[0].decode() if include_value else None, version_from_stat(got[1]))
        # Floor / ceiling / lower / higher: ZooKeeper has no ordered lookup; scan the key's folder.
        candidates = await self.range_scan(_walk_root(key, key), prefix_end(_walk_root(key, key) + "/"),
                                           include_value=include_value)
        chosen = _pick(candidates, key, comparison, lambda r: r.key)
        if chosen is None:
            raise KeyNotFound(f"{key} ({comparison.value})")
        return chosen

    async def _get_by_index(self, key: str, comparison: Comparison, index: str, include_value: bool) -> GetResult:
        records = await self.range_scan("", "\U0010ffff", use_index=index, include_value=include_value)
        chosen = _pick(records, key, comparison, lambda r: r.secondary_key or "")
        if chosen is None:
            raise KeyNotFound(f"{key} ({comparison.value}, index {index})")
        return chosen

    async def put(self, key: str, value: str, *, expected_version: int | None = None, ephemeral: bool = False,
                  partition_key: str | None = None, sequence_keys_deltas: Sequence[int] | None = None,
                  secondary_indexes: Mapping[str, str] | None = None) -> PutResult:
        """partition_key only groups keys on a sharded store; ZooKeeper has one."""
        if not isinstance(value, str):
            raise TypeError(f"metadata values are text; got {type(value).__name__} for {key!r}")
        _check_key(key)
        if sequence_keys_deltas is not None:
            if expected_version is not None or partition_key is None:
                raise InvalidOptions(f"{key!r}: sequence keys need a partition key and no expected version")
            key = await self._next_sequence_key(key, sequence_keys_deltas)
            expected_version = MUST_NOT_EXIST
        if ephemeral:
            await self.session_id()
        data = value.encode()
        check_sidecar = expected_version != MUST_NOT_EXIST
        for _ in range(_CAS_ATTEMPTS):   # bounded: a create/set race retried a few times
            await self._ensure_parent(key)
            if secondary_indexes:
                await self._ensure_parent(_sidecar(INDEXES, key))
            try:
                stat = await self._write(key, data, expected_version, ephemeral, secondary_indexes, check_sidecar)
                return PutResult(key, version_from_stat(stat))
            except _Retry:
                # a parent may have gone (a range delete), or a sidecar outlived its ephemeral record
                self._parents.clear()
                check_sidecar = True
        raise MetadataUnavailable(f"put {key!r}: kept racing concurrent creators/deleters")

    async def _write(self, key: str, data: bytes, expected_version: int | None, ephemeral: bool,
                     indexes: Mapping[str, str] | None, check_sidecar: bool) -> Any:
        """One attempt: create or versioned set, with the index sidecar in the same multi.

        A record created with MUST_NOT_EXIST has no sidecar (both go in one multi), so that
        lookup is skipped on the first attempt: v5's op records and events are such creates.
        """
        sidecar = _sidecar(INDEXES, key)

        async def nothing() -> None:
            return None

        sidecar_stat, existing = await asyncio.gather(
            self._call(f"get {sidecar!r}", lambda zk: zk.exists_async(sidecar), idempotent=True)
            if check_sidecar else nothing(),
            self._call(f"get {key!r}", lambda zk: zk.exists_async(key), idempotent=True)
            if expected_version is None or ephemeral else nothing())
        had_sidecar = sidecar_stat is not None
        create = expected_version == MUST_NOT_EXIST or (expected_version is None and existing is None)
        if ephemeral and existing is not None and expected_version is None:
            # An ephemeral znode of another session (or a persistent one) is replaced, as a put would.
            create = True
        if not create and ephemeral:
            raise InvalidOptions(f"{key!r}: an ephemeral record is only created; its version is its owner's")

        def build(zk: KazooClient) -> Any:
            txn = zk.transaction()
            if create:
                if existing is not None and expected_version is None:
                    txn.delete(key, version=existing.version)
                txn.create(key, data, ephemeral=ephemeral)
            else:
                txn.set_data(key, data, version=-1 if expected_version is None else expected_version)
            if had_sidecar:
                txn.delete(sidecar)
            if indexes:
                txn.create(sidecar, json.dumps(dict(indexes), sort_keys=True).encode())
            return txn.commit_async()

        results = await self._call(f"put {key!r}", build, idempotent=False)
        mine = results[1 if create and existing is not None and expected_version is None else 0]
        if any(isinstance(r, Exception) for r in results):
            # ZooKeeper marks the op that failed; the others answer RolledBackError
            if isinstance(mine, NodeExistsError) and expected_version == MUST_NOT_EXIST:
                raise BadVersion(key)
            if isinstance(mine, BadVersionError) and expected_version is not None:
                raise BadVersion(key)
            if isinstance(mine, NoNodeError) and expected_version is not None and not create:
                raise BadVersion(key)
            raise _Retry()
        if not create:
            return results[0]
        stat = await self._call(f"get {key!r}", lambda zk: zk.exists_async(key), idempotent=True)
        if stat is None:   # deleted again at once (or the session ended)
            raise _Retry()
        return stat

    async def _ensure_parent(self, key: str) -> None:
        """Create the key's missing parents, as Pulsar does; parents seen to exist are remembered."""
        parent = _parent(key)
        if parent == "/" or parent in self._parents:
            return
        with contextlib.suppress(NodeExistsError):
            await self._call(f"put {parent!r}", lambda zk: zk.ensure_path_async(parent), idempotent=True)
        if len(self._parents) > 10_000:   # bounded memory: forget and re-learn
            self._parents.clear()
        self._parents.add(parent)

    async def _next_sequence_key(self, prefix: str, deltas: Sequence[int]) -> str:
        """CAS-increment the prefix's counter sidecar (Pulsar's emulation on ZooKeeper)."""
        if len(deltas) != 1 or deltas[0] <= 0:
            raise InvalidOptions(f"{prefix!r}: this backend supports one positive sequence delta")
        counter = _sidecar(SEQUENCES, prefix)
        await self._ensure_parent(counter)
        for _ in range(_CAS_ATTEMPTS):   # bounded: concurrent appenders retry a few times
            got = await self._read(counter)
            value = deltas[0] + (0 if got is None else int(got[0].decode() or "0"))
            version = None if got is None else int(got[1].version)
            try:
                await self._call(f"put {counter!r}", functools.partial(_bump, counter, value, version),
                                 idempotent=False)
            except (NodeExistsError, BadVersionError):
                continue
            return f"{prefix}-{value:020d}"
        raise MetadataUnavailable(f"{prefix!r}: the sequence counter kept racing other appenders")

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        _check_key(key)
        sidecar = _sidecar(INDEXES, key)
        had_sidecar = await self._call(f"get {sidecar!r}", lambda zk: zk.exists_async(sidecar),
                                       idempotent=True) is not None

        def build(zk: KazooClient) -> Any:
            txn = zk.transaction()
            txn.delete(key, version=-1 if expected_version is None else expected_version)
            if had_sidecar:
                txn.delete(sidecar)
            return txn.commit_async()

        results = await self._call(f"delete {key!r}", build, idempotent=False)
        failure = next((r for r in results if isinstance(r, Exception)), None)
        if failure is None:
            return True
        if isinstance(failure, BadVersionError):
            raise BadVersion(key)
        if isinstance(failure, NoNodeError) and isinstance(results[0], NoNodeError):
            return False
        if isinstance(failure, NotEmptyError):
            raise InvalidOptions(f"{key!r}: a znode with children cannot be deleted")
        if isinstance(failure, NoNodeError):   # the sidecar went under us: try again without it
            return await self.delete(key, expected_version=expected_version)
        raise MetadataUnavailable(f"delete {key!r}: {type(failure).__name__}")

    async def delete_range(self, min_key: str, max_key: str) -> int:
        """Deepest keys first, since a znode with children cannot be deleted."""
        keys = await self.list(min_key, max_key)
        deleted = 0
        for key in sorted(keys, key=lambda k: -k.count("/")):
            with contextlib.suppress(InvalidOptions):
                deleted += await self.delete(key)
        return deleted

    async def _walk(self, root: str, min_key: str, max_key: str, include_value: bool) -> builtins.list[GetResult]:
        """Every znode below `root` in [min_key, max_key): level by level, each level's reads pipelined."""
        out: builtins.list[GetResult] = []
        level = [root]
        while level:   # bounded by the tree's depth
            children = await asyncio.gather(*(self._children(p) for p in level))
            keys = [f"{p.rstrip('/')}/{c}" for p, names in zip(level, children, strict=True) for c in names]
            keys = [p for p in keys if not _hidden(p)]
            reads = await asyncio.gather(*(self._read(p) for p in keys))
            level = []
            for key, got in zip(keys, reads, strict=True):
                if got is None:
                    continue
                data, stat = got
                if min_key <= key < max_key:
                    out.append(GetResult(key, data.decode() if include_value else None, version_from_stat(stat)))
                below = key + "/"
                if stat.numChildren and below < max_key and min_key < prefix_end(below):
                    level.append(key)
        out.sort(key=lambda r: r.key)
        return out

    async def _children(self, key: str) -> builtins.list[str]:
        try:
            return list(await self._call(f"list {key!r}", lambda zk: zk.get_children_async(key),
                                         idempotent=True))
        except NoNodeError:
            return []

    async def list(self, min_key: str, max_key: str, *, use_index: str | None = None) -> builtins.list[str]:
        records = await self.range_scan(min_key, max_key, use_index=use_index, include_value=False)
        return [r.key for r in records]

    async def list_prefix(self, prefix: str) -> builtins.list[str]:
        return await self.list(prefix, prefix_end(prefix))

    async def range_scan(self, min_key: str, max_key: str, *, use_index: str | None = None,
                         limit: int | None = None, include_value: bool = True) -> builtins.list[GetResult]:
        if use_index is not None:
            out = await self._index_scan(min_key, max_key, use_index, include_value)
        else:
            out = await self._walk(_walk_root(min_key, max_key), min_key, max_key, include_value)
        return out[:limit] if limit is not None else out

    async def _index_scan(self, low: str, high: str, index: str, include_value: bool) -> builtins.list[GetResult]:
        """Scan-and-filter: every index sidecar read, kept when its entry for `index` is in range."""
        names = await self._children(INDEXES)
        sidecars = await asyncio.gather(*(self._read(f"{INDEXES}/{n}") for n in names))
        hits: builtins.list[tuple[str, str]] = []
        for name, got in zip(names, sidecars, strict=True):
            if got is None:
                continue
            secondary = json.loads(got[0].decode() or "{}").get(index)
            if secondary is not None and low <= secondary < high:
                hits.append((secondary, unquote(name)))
        hits.sort()
        records = await asyncio.gather(*(self._read(key) for _, key in hits))
        return [GetResult(key, data.decode() if include_value else None, version_from_stat(stat), secondary)
                for (secondary, key), got in zip(hits, records, strict=True) if got is not None
                for data, stat in (got,)]

    # ---- watches ------------------------------------------------------------------------------

    async def watch(self, prefix: str, on_events: EventsCallback, *,
                    on_resync: ResyncCallback | None = None) -> ClientSideWatch:
        """Watch every key under `prefix`; the recursive watch on / is live since connect."""
        self._require()
        return ClientSideWatch(self._watches, next(self._watch_ids), prefix, on_events, on_resync)

    async def _add_watch(self) -> None:
        self._install_event_hook()
        await self._call("watch /", lambda zk: _send(zk, _AddWatch("/", _PERSISTENT_RECURSIVE)), idempotent=True)

    def _install_event_hook(self) -> None:
        """Route the persistent watch's events (kazoo 2.11 drops events it has no one-shot watcher for)."""
        zk = self._require()
        connection = zk._connection
        if self._hooked is connection:
            return
        original = connection._read_watch_event
        loop = self._loop
        assert loop is not None

        def read_watch_event(buffer: bytes, offset: int) -> Any:
            with contextlib.suppress(Exception):
                event, _ = Watch.deserialize(buffer, offset)
                kind = _ZK_EVENTS.get(event.type)
                if kind is not None and not _hidden(event.path):
                    note = Notification(kind, event.path, 0 if kind is EventType.CREATED else -1)
                    loop.call_soon_threadsafe(self._arrived, note)
            return original(buffer, offset)

        connection._read_watch_event = read_watch_event
        self._hooked = connection

    def _arrived(self, note: Notification) -> None:
        self._pending.append(note)
        if len(self._pending) == 1:
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        batch, self._pending = self._pending, []
        for watch in list(self._watches.values()):
            mine = [e for e in batch if e.key.startswith(watch.prefix)]
            if mine:
                self._invoke(watch.on_events, mine)

    # ---- session ------------------------------------------------------------------------------

    async def session_id(self) -> int:
        """The live ZooKeeper session; while kazoo opens the next one, waits for it (bounded)."""
        deadline = time.monotonic() + self.request_timeout_s
        while self._session is None:   # bounded by the deadline
            self._require()
            if time.monotonic() >= deadline:
                raise MetadataUnavailable(f"no ZooKeeper session at {self.hosts} within {self.request_timeout_s}s")
            await asyncio.sleep(0.02)
        return self._session

    async def _watch_session(self) -> None:
        """Pulsar's ZKSessionWatcher: probe every tick; unanswered for 5/6 of the timeout is a lost session."""
        tick = self.session_timeout_ms / 15_000
        limit = self.session_timeout_ms * 5 / 6_000
        self._heard = sent = time.monotonic()
        while not self._closing:   # bounded by the client's life: close() cancels it
            await asyncio.sleep(max(0.0, sent + tick - time.monotonic()))   # one probe per tick, at a fixed rate
            zk = self._zk
            if zk is None or self._closing:
                return
            sent = time.monotonic()
            if await self._probe(zk, tick):
                self._heard, self._disconnected_at = max(self._heard, sent), None
                current = int(zk.client_id[0]) if zk.connected and zk.client_id is not None else None
                if self._session is None and current is not None:
                    if current not in self._abandoned:
                        self._session = current   # kazoo's next session, answering
                    else:   # the pause ended before kazoo dropped the connection: no CONNECTED comes
                        self._spawn(self._renew_session(zk, current))
                continue
            # counted from the last answer, not the first miss: the server's expiry clock started then
            self._disconnected_at = self._disconnected_at or self._heard
            if time.monotonic() - self._heard >= limit:
                self._declare_lost(f"ZooKeeper unanswered for {time.monotonic() - self._heard:.1f}s "
                                   f"(5/6 of the {self.session_timeout_ms} ms session timeout)")

    async def _probe(self, zk: KazooClient, tick: float) -> bool:
        try:
            await self._await(zk.exists_async("/"), tick)
        except Exception:   # no connection, timeout, expired: not answered
            return False
        return True

    def _declare_lost(self, why: str) -> None:
        sid, self._session = self._session, None
        if sid is None:
            return
        self._abandoned.add(sid)
        self.sessions_lost += 1
        log.warning("ZooKeeper session %#x lost: %s", sid, why)
        self._announce_session_lost(sid)

    def _state_changed(self, state: str) -> None:
        """kazoo's thread: hand the state change to the loop."""
        loop = self._loop
        if loop is None or self._closing:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._on_state, state)

    def _on_state(self, state: str) -> None:
        zk = self._zk
        if self._closing or zk is None:
            return
        if state == KazooState.LOST:
            self._declare_lost("expired by the server")
        elif state == KazooState.CONNECTED:
            self._disconnected_at, self._heard = None, time.monotonic()
            sid = int(zk.client_id[0])
            if sid in self._abandoned:
                self._spawn(self._renew_session(zk, sid))
                return
            self._session = sid
            self._spawn(self._rewatch())

    async def _renew_session(self, zk: KazooClient, sid: int) -> None:
        """kazoo came back on a session the listeners were told is lost: close it, open a new one."""
        if self._renewing:
            return
        self._renewing = True
        self.renewals += 1
        log.info("ZooKeeper session %#x answered again after it was declared lost: closing it "
                 "(its ephemeral records go) and opening a new one", sid)
        try:
            await asyncio.wait_for(asyncio.to_thread(zk.stop), 15)   # closeSession
            if not self._closing:
                zk.start_async()   # a new session; kazoo retries the connection until it has one
        except Exception as err:   # kazoo keeps the old one; the next CONNECTED tries again
            log.warning("could not renew ZooKeeper session %#x: %s", sid, err)
        finally:
            self._renewing = False

    async def _rewatch(self) -> None:
        """A new connection carries no watch: add it again, and resync what may have been missed."""
        try:
            await self._add_watch()
        except Exception as err:   # the next reconnect tries again
            log.warning("re-adding the ZooKeeper watch failed: %s", err)
            return
        for watch in list(self._watches.values()):
            if watch.on_resync is not None:
                self._invoke(watch.on_resync)


class _Retry(Exception):
    """A create/set attempt lost a race with another writer; try again."""


def _bump(counter: str, value: int, version: int | None, zk: KazooClient) -> Any:
    """Create the counter, or CAS it from `version` to `value`."""
    data = str(value).encode()
    return zk.create_async(counter, data) if version is None else zk.set_async(counter, data, version=version)


def _send(zk: KazooClient, request: Any) -> Any:
    async_result = zk.handler.async_result()
    zk._call(request, async_result)
    return async_result


def _pick(records: Sequence[GetResult], key: str, comparison: Comparison,
          by: Callable[[GetResult], str]) -> GetResult | None:
    if comparison is Comparison.EQUAL:
        return next((r for r in records if by(r) == key), None)
    if comparison is Comparison.FLOOR:
        return max((r for r in records if by(r) <= key), key=by, default=None)
    if comparison is Comparison.LOWER:
        return max((r for r in records if by(r) < key), key=by, default=None)
    if comparison is Comparison.CEILING:
        return min((r for r in records if by(r) >= key), key=by, default=None)
    return min((r for r in records if by(r) > key), key=by, default=None)


# data operations a request's span counts (embedded.tracing), by the first word of `what`
_TRACED = {op: tracing.CallKind.METADATA_READ for op in ("get", "list", "range_scan")} | {
    op: tracing.CallKind.METADATA_WRITE for op in ("put", "delete", "delete_range")}

__all__ = ["ZkMetadataClient", "parse_zk_url", "version_from_stat"]
