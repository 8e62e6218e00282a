"""The metadata store service: RPC handlers, watches, session expiry, metrics.

Theory of operation. One asyncio loop owns the `DurableStore`. Each request runs as
its own task (see `embedded.rpc`): it executes against the state at once and then
awaits durability of the lsn it observed before answering, so concurrent writers
share fsyncs and no answer reveals an undurable state. A read of one key (`get`,
equal, no index) waits only for that key's own newest write if it is not durable yet,
not for every applied write: reads serve committed state without paying for unrelated
fsyncs, as Oxia's and ZooKeeper's do. Scans, comparisons and index reads keep the
full barrier (the keys they could reveal are not known in advance). Watches are per connection
(`conn.state["watches"]`) and are not persisted: a client re-registers them after a
reconnect. A watch registered when the store had applied lsn W receives every event
with lsn > W, in lsn order; the events up to W are visible to a read issued after
the watch's answer. A background task expires sessions whose deadline passed; an
expiry is an ordinary logged mutation, so its deletions are durable and notified
like any other. An fsync failure drops the connection instead of answering (the
outcome is unknown to the client) and stops the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from embedded import planted_bugs
from embedded.metadata.durable import DurabilityConfig, DurableStore, FlushStats, StoreFailed
from embedded.metadata.model import (
    BadVersion,
    Comparison,
    InvalidOptions,
    KeyNotFound,
    MetadataError,
    Notification,
    SessionExpired,
)
from embedded.metadata.oxia_frontend import OxiaFrontend, OxiaListener, parse_listeners
from embedded.metadata.state import (
    Delete,
    DeleteRange,
    Put,
    SessionClose,
    SessionExpire,
    SessionOpen,
    command_from_wire,
)
from embedded.rpc import RpcError, RpcServer, ServerConnection
from harness.metrics import Registry
from harness.service import http_app, start_http

log = logging.getLogger(__name__)

EXPIRY_CHECK_S = 0.05
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
DATA_OPS = ("get", "list", "range_scan", "put", "delete", "delete_range")


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class MetadataConfig:
    name: str
    host: str
    data_dir: Path
    rpc_port: int
    http_port: int
    snapshot_every_records: int = 50_000
    snapshot_every_bytes: int = 64 * 1024 * 1024
    oxia_listeners: tuple[OxiaListener, ...] = ()   # Oxia's gRPC protocol beside ours (oxia_frontend.py)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetadataConfig:
        def port(key: str) -> int:
            value = d.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
                raise ConfigError(f"metadata config: `{key}` must be a port number (0 picks a free one), got {value!r}")
            return value

        def positive(key: str, default: int) -> int:
            value = d.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"metadata config: `{key}` must be a positive integer, got {value!r}")
            return value

        data_dir = d.get("data_dir")
        if not isinstance(data_dir, str) or not data_dir:
            raise ConfigError("metadata config: `data_dir` must name the directory for the log and snapshots")
        host = d.get("host", "127.0.0.1")
        if host != "127.0.0.1":
            raise ConfigError(f"metadata config: `host` must be 127.0.0.1 (servers bind loopback only), got {host!r}")
        try:
            oxia = tuple(parse_listeners(d.get("oxia_listeners"), d.get("oxia_port")))
        except ValueError as err:
            raise ConfigError(str(err)) from None
        return cls(str(d.get("name", "metadata")), host, Path(data_dir), port("rpc_port"), port("http_port"),
                   positive("snapshot_every_records", 50_000), positive("snapshot_every_bytes", 64 * 1024 * 1024),
                   oxia)


_FAMILIES = (("/txn/id/", "txn-header"), ("/txn/op/", "txn-op"), ("/txn/segment-events/", "txn-event"),
             ("/txn/subscription-events/", "txn-event"), ("/txn/segment-state/watermark/", "txn-watermark"),
             ("/txn/segment-state/aborted/", "txn-aborted"), ("/txn/tc-seq/", "txn-id-counter"),
             ("/txn/tc/", "txn-leader"))


def key_family(header: dict[str, Any]) -> str:
    """Which kind of record a data operation touches, from its key (index queries: `index`)."""
    if header.get("use_index"):
        return "index"
    key = header.get("key") if header.get("key") is not None else header.get("min")
    if not isinstance(key, str):
        return "other"
    return next((family for prefix, family in _FAMILIES if key.startswith(prefix)), "other")


def request_kind(op: str, header: dict[str, Any]) -> str:
    """`read`, `create`, `cas`, `put` or `delete`: what a cost ledger counts a data operation as.

    A put at version -1 (must not exist) or with sequence-key deltas creates a key; a put or
    delete at a version is a compare-and-set; a put with neither is blind; delete_range and an
    unversioned delete are deletes.
    """
    if op in ("get", "list", "range_scan"):
        return "read"
    expected = header.get("expected_version")
    if op == "put":
        if expected == -1 or header.get("sequence_keys_deltas"):
            return "create"
        return "put" if expected is None else "cas"
    return "cas" if op == "delete" and expected is not None else "delete"


@dataclass(frozen=True)
class _Watch:
    prefix: str
    from_lsn: int


class _Metrics:
    def __init__(self, registry: Registry) -> None:
        self.ops = registry.counter("txnbench_metadata_ops_total", "Data operations by kind, CAS and result",
                                    ("op", "cas", "result"))
        self.by_kind = registry.counter(
            "txnbench_metadata_requests_total",
            "Data operations by what they are (read; create = must-not-exist or sequence-key put; cas = put or "
            "delete at a version; put = blind put; delete = unversioned delete or delete_range) and by the "
            "record family of their key (txn-header, txn-op, txn-event, txn-watermark, txn-aborted, txn-id-counter, "
            "txn-leader, index for index queries, other)", ("kind", "family", "result"))
        self.fsyncs = registry.counter("txnbench_metadata_fsyncs_total", "Write-ahead log fsyncs")
        self.wal_bytes = registry.counter("txnbench_metadata_wal_bytes_total", "Write-ahead log bytes written")
        self.wal_records = registry.counter("txnbench_metadata_wal_records_total", "Write-ahead log records written")
        self.records = registry.gauge("txnbench_metadata_records", "Live records")
        self.sessions = registry.gauge("txnbench_metadata_sessions", "Live sessions")
        self.session_ops = registry.counter("txnbench_metadata_session_ops_total", "Session operations by result",
                                            ("op", "result"))
        self.sessions_expired = registry.counter("txnbench_metadata_sessions_expired_total",
                                                 "Sessions expired for want of keepalives")
        self.watches = registry.gauge("txnbench_metadata_watches", "Registered watches")
        self.notifications = registry.counter("txnbench_metadata_notifications_total",
                                              "Change events pushed to watchers")
        self.latency = registry.histogram("txnbench_metadata_op_seconds",
                                          "Request latency including the wait for durability",
                                          _LATENCY_BUCKETS, ("op",))
        self.group_commit = registry.histogram("txnbench_metadata_group_commit_records",
                                               "Log records made durable by one group commit", _BATCH_BUCKETS)
        self.fsync_seconds = registry.histogram("txnbench_metadata_fsync_seconds",
                                                "Time to write and fsync one group commit", _LATENCY_BUCKETS)
        self.snapshots = registry.counter("txnbench_metadata_snapshots_total", "Snapshots written")
        self.recovery_seconds = registry.gauge("txnbench_metadata_recovery_seconds", "Last start-up recovery time")
        self.recovery_replayed = registry.gauge("txnbench_metadata_recovery_replayed_records",
                                                "Log records replayed at the last start-up")
        self.applied_lsn = registry.gauge("txnbench_metadata_applied_lsn", "Last applied log sequence number")


Handler = Callable[[ServerConnection, dict[str, Any]], Awaitable[dict[str, Any]]]


class MetadataService:
    """`harness.service.Service` for `python -m embedded.metadata`."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = MetadataConfig.from_dict(config)
        planted = planted_bugs.activate(config.get("planted_bugs") or ())
        if planted:
            log.warning("PLANTED BUGS ON (deliberate faults for the txnbench self-test): %s", ", ".join(sorted(planted)))
        self.registry = Registry()
        self.metrics = _Metrics(self.registry)
        self.store = DurableStore(
            DurabilityConfig(self.config.data_dir, self.config.snapshot_every_records,
                             self.config.snapshot_every_bytes),
            on_durable=self._deliver, on_flush=self._flushed)
        handlers: dict[str, Handler] = {
            "ping": self._ping, "stats": self._stats,
            "session_open": self._session_open, "session_keepalive": self._session_keepalive,
            "session_close": self._session_close,
            "put": self._put, "get": self._get, "delete": self._delete, "delete_range": self._delete_range,
            "list": self._list, "range_scan": self._range_scan,
            "watch": self._watch, "unwatch": self._unwatch,
        }
        self.rpc = RpcServer({op: self._wrap(op, h) for op, h in handlers.items()},
                             host=self.config.host, port=self.config.rpc_port,
                             on_disconnect=lambda conn: self._refresh_gauges())
        self._ready = False
        self._http: web.AppRunner | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        self.oxia = OxiaFrontend(self, self.config.oxia_listeners, self.config.host) \
            if self.config.oxia_listeners else None

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        report = self.store.recover()
        log.info("recovered lsn %d: snapshot lsn %d with %d records, %d log records replayed, "
                 "%d torn bytes dropped, %.3fs", report.applied_lsn, report.snapshot_lsn,
                 report.snapshot_records, report.replayed, report.truncated_bytes, report.seconds)
        replayed = self.store.take_replayed_changes()
        if self.oxia is not None:
            self.oxia.seed_history(replayed)
        self.metrics.recovery_seconds.set(report.seconds)
        self.metrics.recovery_replayed.set(report.replayed)
        self._refresh_gauges()
        if report.replayed >= self.config.snapshot_every_records:
            self.store.request_snapshot()
        await self.rpc.start()
        if self.oxia is not None:
            await self.oxia.start()
        app = http_app(self.registry, lambda: self._ready)
        app.router.add_get("/stats", self._http_stats)
        self._http = await start_http(app, self.config.http_port, self.config.host)
        self._expiry_task = asyncio.create_task(self._expire_sessions_loop())
        self._ready = True
        log.info("metadata store serving RPC on %s:%d%s", self.config.host, self.rpc.port,
                 f", Oxia protocol on {self.oxia.ports}" if self.oxia is not None else "")

    async def stop(self) -> None:
        self._ready = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        if self.oxia is not None:
            await self.oxia.stop()
        await self.rpc.close()
        await self.store.close()
        if self._http is not None:
            await self._http.cleanup()

    # ---- plumbing -----------------------------------------------------------------------------

    def _wrap(self, op: str, handler: Handler) -> Callable[[ServerConnection, dict[str, Any], bytes],
                                                          Awaitable[dict[str, Any]]]:
        async def run(conn: ServerConnection, header: dict[str, Any], _payload: bytes) -> dict[str, Any]:
            started = time.perf_counter()
            cas = "true" if header.get("expected_version") is not None else "false"
            result = "ok"
            try:
                reply = await handler(conn, header)
                if op == "delete" and not reply.get("deleted"):
                    result = "not_found"
                return reply
            except MetadataError as err:
                result = {KeyNotFound: "not_found", BadVersion: "conflict"}.get(type(err), "error")
                # A definite error is an answer too: it must not reveal a state a crash could undo.
                try:
                    await self._read_barrier()
                except StoreFailed:
                    self._abandon(conn)
                    raise
                raise RpcError(err.code.value, err.message) from None
            except StoreFailed:
                result = "error"
                self._abandon(conn)
                raise
            except RpcError:
                result = "error"
                raise
            except Exception:
                result = "error"
                log.exception("%s failed", op)
                raise
            finally:
                self.metrics.latency.observe(time.perf_counter() - started, op=op)
                if op in DATA_OPS:
                    self.metrics.ops.inc(op=op, cas=cas, result=result)
                    self.metrics.by_kind.inc(kind=request_kind(op, header), family=key_family(header), result=result)
                elif op.startswith("session_"):
                    self.metrics.session_ops.inc(op=op, result=result)
                self._refresh_gauges()
        return run

    def _abandon(self, conn: ServerConnection) -> None:
        """The outcome is unknown: drop the connection rather than answer, then stop."""
        conn.closed = True
        with contextlib.suppress(Exception):
            conn.writer.close()
        os.kill(os.getpid(), signal.SIGTERM)

    async def _mutate(self, cmd: Any) -> Any:
        applied, lsn = self.store.execute(cmd)
        await self.store.wait_durable(lsn)
        return applied.result

    async def _read_barrier(self) -> None:
        await self.store.wait_durable(self.store.applied_lsn)

    def _refresh_gauges(self) -> None:
        state = self.store.state
        self.metrics.records.set(state.record_count)
        self.metrics.sessions.set(state.session_count)
        self.metrics.applied_lsn.set(self.store.applied_lsn)
        self.metrics.watches.set(sum(len(c.state.get("watches", {})) for c in self.rpc.connections))
        missing = self.store.snapshots - self.metrics.snapshots.get()
        if missing > 0:
            self.metrics.snapshots.inc(missing)

    def _flushed(self, stats: FlushStats) -> None:
        self.metrics.fsyncs.inc(stats.fsyncs)
        self.metrics.wal_bytes.inc(stats.bytes)
        self.metrics.wal_records.inc(stats.records)
        if stats.records:
            self.metrics.group_commit.observe(stats.records)
            self.metrics.fsync_seconds.observe(stats.seconds)

    def _deliver(self, ready: list[tuple[int, tuple[Notification, ...]]]) -> None:
        if self.oxia is not None:
            self.oxia.on_durable(ready)
        for conn in list(self.rpc.connections):
            watches: dict[int, _Watch] = conn.state.get("watches", {})
            for watch_id, watch in watches.items():
                events = [n.to_wire() for lsn, batch in ready if lsn > watch.from_lsn
                          for n in batch if n.key.startswith(watch.prefix)]
                if events:
                    conn.push("notify", watch_id=watch_id, events=events)
                    self.metrics.notifications.inc(len(events))

    async def _expire_sessions_loop(self) -> None:
        while True:   # bounded by the process's life; cancelled in stop()
            await asyncio.sleep(EXPIRY_CHECK_S)
            if self.store.failed:
                return
            self._expire_due(self.store.now_ms())

    def _expire_due(self, now_ms: int, only: int | None = None) -> int:
        """Expire due sessions (all, or just `only`); returns the lsn to await."""
        lsn = self.store.applied_lsn
        for sid in self.store.state.due_sessions(now_ms):
            if only is not None and sid != only:
                continue
            applied, lsn = self.store.execute(SessionExpire(sid))
            self.metrics.sessions_expired.inc()
            log.info("session %d expired; %d ephemeral records deleted", sid, applied.result)
        self._refresh_gauges()
        return lsn

    # ---- what the Oxia frontend uses (oxia_frontend.StoreAccess) ------------------------------

    async def read_barrier(self) -> None:
        await self._read_barrier()

    def expire_due(self, now_ms: int, only: int | None = None) -> int:
        return self._expire_due(now_ms, only)

    def account(self, op: str, cas: bool, result: str, seconds: float) -> None:
        """Count an operation served by the other frontend in the same metrics as ours."""
        self.metrics.latency.observe(seconds, op=op)
        if op in DATA_OPS:
            self.metrics.ops.inc(op=op, cas="true" if cas else "false", result=result)
        elif op.startswith("session_"):
            self.metrics.session_ops.inc(op=op, result=result)
        self._refresh_gauges()

    def fail_stop(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    # ---- handlers -----------------------------------------------------------------------------

    async def _ping(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _stats_dict(self) -> dict[str, Any]:
        s = self.store
        recovery = s.last_recovery
        return {
            "records": s.state.record_count, "sessions": s.state.session_count,
            "last_version_id": s.state.last_version_id, "applied_lsn": s.applied_lsn,
            "durable_lsn": s.durable_lsn, "fsyncs": s.fsyncs, "wal_bytes": s.wal_bytes,
            "wal_records": s.wal_records, "snapshots": s.snapshots, "snapshot_running": s.snapshot_running,
            "watches": sum(len(c.state.get("watches", {})) for c in self.rpc.connections),
            "recovery_seconds": recovery.seconds if recovery else None,
            "recovery_replayed": recovery.replayed if recovery else None,
            "indexes": s.state.index_names(),
            "oxia_ports": self.oxia.ports if self.oxia is not None else [],
        }

    async def _stats(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        return {"stats": self._stats_dict()}

    async def _http_stats(self, _: web.Request) -> web.Response:
        return web.json_response(self._stats_dict())

    async def _session_open(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        cmd = command_from_wire({**h, "op": "session_open"})
        assert isinstance(cmd, SessionOpen)
        return {"session_id": await self._mutate(cmd)}

    async def _session_keepalive(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        sid = _int_arg(h, "session_id")
        now = self.store.now_ms()
        self._expire_due(now, only=sid)        # a late keepalive does not revive a dead session
        self.store.state.keepalive(sid, now)   # raises SessionExpired when gone
        await self._read_barrier()
        return {}

    async def _session_close(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        return {"deleted": await self._mutate(SessionClose(_int_arg(h, "session_id")))}

    async def _put(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        cmd = command_from_wire({**h, "op": "put"})
        assert isinstance(cmd, Put)
        if cmd.ephemeral and cmd.session_id is not None:
            self._expire_due(self.store.now_ms(), only=cmd.session_id)
        result = await self._mutate(cmd)
        return {"key": result.key, "version": result.version.to_wire()}

    async def _delete(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        cmd = command_from_wire({**h, "op": "delete"})
        assert isinstance(cmd, Delete)
        return {"deleted": await self._mutate(cmd)}

    async def _delete_range(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        cmd = command_from_wire({**h, "op": "delete_range"})
        assert isinstance(cmd, DeleteRange)
        return {"count": await self._mutate(cmd)}

    async def _get(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        try:
            comparison = Comparison(h.get("comparison") or "equal")
        except ValueError:
            raise InvalidOptions(f"comparison must be one of {[c.value for c in Comparison]}, "
                                 f"got {h.get('comparison')!r}") from None
        key, use_index = _str_arg(h, "key"), _opt_str_arg(h, "use_index")
        result = self.store.state.get(key, comparison, use_index=use_index,
                                      include_value=h.get("include_value", True) is not False)
        if comparison is Comparison.EQUAL and use_index is None:
            # committed state at once: only this key's own undurable write is waited for
            # (Oxia and ZooKeeper answer reads from committed state without a log sync)
            await self.store.wait_durable(self.store.key_lsn(key))
        else:
            await self._read_barrier()
        return result.to_wire()

    async def _list(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        keys = self.store.state.list(_str_arg(h, "min"), _str_arg(h, "max"), use_index=_opt_str_arg(h, "use_index"))
        await self._read_barrier()
        return {"keys": keys}

    async def _range_scan(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        limit = h.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidOptions(f"`limit` must be an integer, got {limit!r}")
        records = self.store.state.range_scan(_str_arg(h, "min"), _str_arg(h, "max"),
                                              use_index=_opt_str_arg(h, "use_index"), limit=limit,
                                              include_value=h.get("include_value", True) is not False)
        await self._read_barrier()
        return {"records": [r.to_wire() for r in records]}

    async def _watch(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        prefix = _str_arg(h, "prefix")
        watches: dict[int, _Watch] = conn.state.setdefault("watches", {})
        requested = h.get("watch_id")
        if requested is None:
            watch_id = max(watches, default=0) + 1
        elif isinstance(requested, int) and not isinstance(requested, bool):
            watch_id = requested
        else:
            raise InvalidOptions(f"watch_id must be an integer chosen by the client, got {requested!r}")
        existing = watches.get(watch_id)
        if existing is not None and existing.prefix != prefix:
            raise InvalidOptions(f"watch_id {watch_id} already watches {existing.prefix!r} on this connection")
        if existing is None:   # a repeated registration (a client's retry) is idempotent
            watches[watch_id] = _Watch(prefix, self.store.applied_lsn)
        await self._read_barrier()
        return {"watch_id": watch_id}

    async def _unwatch(self, conn: ServerConnection, h: dict[str, Any]) -> dict[str, Any]:
        conn.state.get("watches", {}).pop(_int_arg(h, "watch_id"), None)
        return {}


def _int_arg(h: dict[str, Any], name: str) -> int:
    value = h.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"`{name}` must be an integer, got {value!r}")
    return value


def _str_arg(h: dict[str, Any], name: str) -> str:
    value = h.get(name)
    if not isinstance(value, str):
        raise InvalidOptions(f"`{name}` must be a string, got {value!r}")
    return value


def _opt_str_arg(h: dict[str, Any], name: str) -> str | None:
    value = h.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidOptions(f"`{name}` must be a string, got {value!r}")
    return value


__all__ = ["ConfigError", "MetadataConfig", "MetadataService", "SessionExpired"]
