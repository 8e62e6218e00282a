"""The brokers' metadata interface, and the choice of its backend by `metadataStoreUrl`.

Why a Protocol: the brokers (ownership, registry, managed-ledger metadata, v4 and v5
coordinators, scalable topics, leader elections) need one narrow set of operations:
versioned get/put/delete with CAS, ranges and secondary indexes, sequence keys,
ephemeral records bound to one session whose loss is announced, and prefix watches.
`MetadataClient` (our protocol) and `OxiaMetadataClient` (the real `oxia` client over
Oxia's gRPC protocol, on our store or on any Oxia) both provide exactly this, so a
broker runs unchanged on either. Pulsar names its store by URL (`metadataStoreUrl`);
so does the broker here: `oxia://host:port[/namespace]` selects Oxia, `zk:host:port`
(Pulsar's form) selects ZooKeeper (`ZkMetadataClient`, through kazoo), anything else is
the address of our own protocol.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from embedded.metadata.model import (
    Comparison,
    GetResult,
    KeyNotFound,
    Notification,
    PutResult,
    Version,
)

EventsCallback = Callable[[list[Notification]], Any]
ResyncCallback = Callable[[], Any]
SessionLostCallback = Callable[[int], Any]

log = logging.getLogger(__name__)

OXIA_SCHEME = "oxia"
ZK_SCHEME = "zk"


class WatchHandle(Protocol):
    """A registered prefix watch."""

    async def cancel(self) -> None: ...


class ClientSideWatch:
    """A prefix watch that lives only in the client: ZooKeeper's one recursive watch on / and
    Oxia's one notification stream carry every change, and the client hands each watch the ones
    under its prefix. Cancelling forgets it; the server has nothing to be told."""

    def __init__(self, registry: dict[int, ClientSideWatch], watch_id: int, prefix: str,
                 on_events: EventsCallback, on_resync: ResyncCallback | None) -> None:
        self._registry = registry
        self.watch_id = watch_id
        self.prefix = prefix
        self.on_events = on_events
        self.on_resync = on_resync
        registry[watch_id] = self

    async def cancel(self) -> None:
        self._registry.pop(self.watch_id, None)


class _GetPut(Protocol):
    async def get(self, key: str) -> GetResult: ...

    async def put(self, key: str, value: str, *, expected_version: int | None = None, ephemeral: bool = False,
                  partition_key: str | None = None, sequence_keys_deltas: Sequence[int] | None = None,
                  secondary_indexes: Mapping[str, str] | None = None) -> PutResult: ...


class JsonRecords:
    """`get_json`/`put_json` over a backend's `get`/`put`, so every backend stores JSON alike
    (compact, sorted keys: equal objects are equal bytes, whichever broker wrote them), and
    `get_or_none`, so a missing key reads the same on every backend."""

    async def get_or_none(self: _GetPut, key: str) -> GetResult | None:
        try:
            return await self.get(key)
        except KeyNotFound:
            return None

    async def get_json(self: _GetPut, key: str) -> tuple[Any, Version]:
        """The JSON value at `key` and its version (the CAS token for `put_json`)."""
        result = await self.get(key)
        return json.loads(result.value or "null"), result.version

    async def put_json(self: _GetPut, key: str, obj: Any, *, expected_version: int | None = None,
                       ephemeral: bool = False, partition_key: str | None = None,
                       sequence_keys_deltas: Sequence[int] | None = None,
                       secondary_indexes: Mapping[str, str] | None = None) -> PutResult:
        return await self.put(key, json.dumps(obj, separators=(",", ":"), sort_keys=True),
                              expected_version=expected_version, ephemeral=ephemeral,
                              partition_key=partition_key, sequence_keys_deltas=sequence_keys_deltas,
                              secondary_indexes=secondary_indexes)


class ClientCallbacks:
    """Calling a backend's users back: the session-lost listeners, and callbacks (watch events,
    listeners) that may be coroutines, run as tasks the backend cancels when it closes.

    The three backends share this so that a failing or slow callback behaves the same on
    every store: it is logged and never breaks the backend's own loop.
    """

    def _init_callbacks(self, on_session_lost: SessionLostCallback | None) -> None:
        self._session_listeners: builtins.list[SessionLostCallback] = [on_session_lost] if on_session_lost else []
        self._callback_tasks: set[asyncio.Task[Any]] = set()

    def add_session_listener(self, callback: SessionLostCallback) -> None:
        """`callback(old_session_id)` runs whenever the session is lost."""
        self._session_listeners.append(callback)

    def remove_session_listener(self, callback: SessionLostCallback) -> None:
        with contextlib.suppress(ValueError):
            self._session_listeners.remove(callback)

    def _announce_session_lost(self, session_id: int) -> None:
        """Tell every listener, in the order they registered (owners step down first)."""
        for listener in builtins.list(self._session_listeners):
            self._invoke(listener, session_id)

    def _invoke(self, callback: Callable[..., Any], *args: Any) -> None:
        try:
            result = callback(*args)
        except Exception:
            log.exception("metadata callback %r failed", callback)
            return
        if inspect.isawaitable(result):
            self._spawn(result)

    def _spawn(self, awaitable: Any) -> None:
        task = asyncio.ensure_future(awaitable)
        self._callback_tasks.add(task)
        task.add_done_callback(self._callback_done)

    def _callback_done(self, task: asyncio.Task[Any]) -> None:
        self._callback_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("metadata callback failed: %r", task.exception())

    def _cancel_callbacks(self) -> None:
        for task in builtins.list(self._callback_tasks):
            task.cancel()


class MetadataBackend(Protocol):
    """What the brokers use of a metadata store (see the module docstring)."""

    @property
    def address(self) -> str: ...

    @property
    def current_session(self) -> int | None: ...

    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def get(self, key: str, *, comparison: Comparison = Comparison.EQUAL, use_index: str | None = None,
                  include_value: bool = True) -> GetResult: ...

    async def get_or_none(self, key: str) -> GetResult | None: ...

    async def put(self, key: str, value: str, *, expected_version: int | None = None, ephemeral: bool = False,
                  partition_key: str | None = None, sequence_keys_deltas: Sequence[int] | None = None,
                  secondary_indexes: Mapping[str, str] | None = None) -> PutResult: ...

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool: ...

    async def delete_range(self, min_key: str, max_key: str) -> int: ...

    async def list(self, min_key: str, max_key: str, *, use_index: str | None = None) -> builtins.list[str]: ...

    async def list_prefix(self, prefix: str) -> builtins.list[str]: ...

    async def range_scan(self, min_key: str, max_key: str, *, use_index: str | None = None,
                         limit: int | None = None, include_value: bool = True) -> builtins.list[GetResult]: ...

    async def get_json(self, key: str) -> tuple[Any, Version]: ...

    async def put_json(self, key: str, obj: Any, *, expected_version: int | None = None,
                       ephemeral: bool = False, partition_key: str | None = None,
                       sequence_keys_deltas: Sequence[int] | None = None,
                       secondary_indexes: Mapping[str, str] | None = None) -> PutResult: ...

    async def watch(self, prefix: str, on_events: EventsCallback, *,
                    on_resync: ResyncCallback | None = None) -> WatchHandle: ...

    async def session_id(self) -> int: ...

    def add_session_listener(self, callback: SessionLostCallback) -> None: ...

    def remove_session_listener(self, callback: SessionLostCallback) -> None: ...


class UnsupportedStoreUrl(ValueError):
    """`metadataStoreUrl` names a store this cluster cannot use."""


def parse_oxia_url(url: str) -> tuple[str, str]:
    """`oxia://host:port[/namespace]` -> (`host:port`, namespace), Pulsar's form of an Oxia URL."""
    parts = urlsplit(url)
    if parts.scheme != OXIA_SCHEME or not parts.hostname or parts.port is None:
        raise UnsupportedStoreUrl(f"metadataStoreUrl {url!r}: an Oxia store is written oxia://HOST:PORT[/NAMESPACE]")
    namespace = parts.path.strip("/") or "default"
    return f"{parts.hostname}:{parts.port}", namespace


def is_oxia_url(url: str) -> bool:
    return url.startswith(OXIA_SCHEME + "://")


def is_zk_url(url: str) -> bool:
    return url.startswith(ZK_SCHEME + ":")


def open_metadata_client(url: str, *, session_timeout_ms: int, client_name: str = "",
                         request_timeout_s: float = 5.0, connect_attempts: int = 20,
                         on_session_lost: SessionLostCallback | None = None) -> MetadataBackend:
    """The backend `url` names: `oxia://...` the real Oxia client, `zk:...` ZooKeeper, `host:port` our protocol."""
    if is_oxia_url(url):
        from embedded.metadata.oxia_client import OxiaMetadataClient  # grpc only where it is used
        address, namespace = parse_oxia_url(url)
        return OxiaMetadataClient(address, namespace=namespace, session_timeout_ms=session_timeout_ms,
                                  client_name=client_name, request_timeout_s=request_timeout_s,
                                  connect_attempts=connect_attempts, on_session_lost=on_session_lost)
    if is_zk_url(url):
        from embedded.metadata.zk_client import (  # kazoo only where it is used
            ZkMetadataClient,
            parse_zk_url,
        )
        try:
            hosts = parse_zk_url(url)
        except ValueError as err:
            raise UnsupportedStoreUrl(str(err)) from None
        return ZkMetadataClient(hosts, session_timeout_ms=session_timeout_ms, client_name=client_name,
                                request_timeout_s=request_timeout_s, connect_attempts=connect_attempts,
                                on_session_lost=on_session_lost)
    if "://" in url:
        raise UnsupportedStoreUrl(f"metadataStoreUrl {url!r}: this cluster's brokers speak to our store "
                                  f"(HOST:PORT), to an Oxia (oxia://HOST:PORT) or to ZooKeeper (zk:HOST:PORT)")
    from embedded.metadata.client import MetadataClient
    return MetadataClient(url, session_timeout_ms=session_timeout_ms, client_name=client_name,
                          request_timeout_s=request_timeout_s, connect_attempts=connect_attempts,
                          on_session_lost=on_session_lost)


__all__ = ["EventsCallback", "MetadataBackend", "ResyncCallback", "SessionLostCallback", "UnsupportedStoreUrl",
           "WatchHandle", "is_oxia_url", "is_zk_url", "open_metadata_client", "parse_oxia_url"]
