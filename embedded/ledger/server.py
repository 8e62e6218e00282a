"""The ledger store process: RPC operations, /health and /metrics, lifecycle.

`python -m embedded.ledger --config ledger.json` runs `LedgerService` through
`harness.service.run_service`. The HTTP port comes up first and answers /health
with 503 while the journal is replayed; the RPC port opens once the store is ready.
The operations are the table in docs/architecture.md ("Ledger store"), plus `ping`
and `list` (optional `kind` filter). Request fields are validated here and a bad one
is answered `InvalidRequest` naming the field; everything else is `LedgerStore`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from embedded import planted_bugs
from embedded.ledger.journal import DEFAULT_SEGMENT_BYTES
from embedded.ledger.model import InvalidRequest, LedgerError, LedgerKind, LedgerMetadata
from embedded.ledger.stats import LedgerStats
from embedded.ledger.store import READ_MAX_BYTES, LedgerStore
from embedded.rpc import RpcError, RpcServer, ServerConnection
from harness.metrics import Registry
from harness.service import http_app, start_http

log = logging.getLogger(__name__)

FATAL_EXIT_CODE = 75


@dataclass(frozen=True)
class LedgerServiceConfig:
    """The service's config file (docs/architecture.md, "Service processes")."""

    name: str
    data_dir: Path
    rpc_port: int
    http_port: int
    host: str = "127.0.0.1"
    log_level: str = "INFO"
    parent_pid: int | None = None
    segment_bytes: int = DEFAULT_SEGMENT_BYTES

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LedgerServiceConfig:
        missing = [k for k in ("name", "data_dir", "rpc_port", "http_port") if k not in raw]
        if missing:
            raise SystemExit(f"ledger config is missing {missing}; it needs name, host, data_dir, "
                             "rpc_port, http_port (and optionally log_level, parent_pid)")
        host = str(raw.get("host", "127.0.0.1"))
        if host != "127.0.0.1":
            raise SystemExit(f"ledger config host {host!r}: the embedded cluster binds 127.0.0.1 only")
        for key in ("rpc_port", "http_port"):
            value = raw[key]
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
                raise SystemExit(f"ledger config {key} must be a port number (0 picks a free one), not {value!r}")
        parent = raw.get("parent_pid")
        segment_bytes = raw.get("segment_bytes", DEFAULT_SEGMENT_BYTES)
        if not isinstance(segment_bytes, int) or isinstance(segment_bytes, bool) or segment_bytes < 4096:
            raise SystemExit(f"ledger config segment_bytes must be an integer of at least 4096, not {segment_bytes!r}")
        return cls(name=str(raw["name"]), data_dir=Path(raw["data_dir"]), rpc_port=raw["rpc_port"],
                   http_port=raw["http_port"], host=host, log_level=str(raw.get("log_level", "INFO")),
                   parent_pid=int(parent) if parent else None, segment_bytes=segment_bytes)


def _ledger_id(header: dict[str, Any]) -> int:
    value = header.get("ledger_id")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidRequest(f"ledger_id must be a non-negative integer, not {value!r}")
    return value


def _int_field(header: dict[str, Any], key: str) -> int:
    value = header.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequest(f"{key} must be an integer, not {value!r}")
    return value


class LedgerHandlers:
    """RPC handlers over a `LedgerStore`; errors become the architecture's codes."""

    def __init__(self, store: LedgerStore, stats: LedgerStats) -> None:
        self.store = store
        self.stats = stats

    def table(self) -> dict[str, Any]:
        ops = {"ping": self.ping, "create": self.create, "append": self.append, "read": self.read,
               "close": self.close, "fence": self.fence, "info": self.info, "delete": self.delete,
               "list": self.list}
        return {name: self._counted(name, handler) for name, handler in ops.items()}

    def _counted(self, op: str, handler: Any) -> Any:
        requests = self.stats.requests

        async def run(conn: ServerConnection, header: dict[str, Any], payload: bytes) -> Any:
            try:
                result = await handler(header, payload)
            except LedgerError as err:
                requests.inc(op=op, result=err.code)
                raise RpcError(err.code, err.message or str(err)) from None
            requests.inc(op=op, result="ok")
            return result

        return run

    async def ping(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        return {}

    async def create(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        metadata = LedgerMetadata.from_json(header.get("metadata"))
        return {"ledger_id": await self.store.create(metadata)}

    async def append(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        return {"entry_id": await self.store.append(_ledger_id(header), payload)}

    async def read(self, header: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        max_bytes = header.get("max_bytes", READ_MAX_BYTES)
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 1:
            raise InvalidRequest(f"max_bytes must be a positive integer, not {max_bytes!r}")
        entries = await self.store.read(_ledger_id(header), _int_field(header, "first"),
                                        _int_field(header, "last"), min(max_bytes, READ_MAX_BYTES))
        return {"sizes": [len(e) for e in entries]}, b"".join(entries)

    async def close(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        return {"last_entry_id": await self.store.close_ledger(_ledger_id(header))}

    async def fence(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        return {"last_entry_id": await self.store.fence(_ledger_id(header))}

    async def info(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        return self.store.info(_ledger_id(header)).to_json()

    async def delete(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        await self.store.delete(_ledger_id(header))
        return {}

    async def list(self, header: dict[str, Any], payload: bytes) -> dict[str, Any]:
        kind_text = header.get("kind")
        kind = None
        if kind_text is not None:
            kinds = [k.value for k in LedgerKind]
            if kind_text not in kinds:
                raise InvalidRequest(f"kind {kind_text!r} is not one of {kinds}")
            kind = LedgerKind(kind_text)
        return {"ledgers": [info.to_json() for info in self.store.list_ledgers(kind)]}


def _exit_on_journal_failure(err: BaseException) -> None:
    """Fail-stop: what reached the disk is unknown, so stop answering; recovery sorts it out."""
    logging.getLogger("embedded.ledger").critical("exiting after a journal failure: %r", err)
    logging.shutdown()
    os._exit(FATAL_EXIT_CODE)


class LedgerService:
    """The process: HTTP first (health 503 while recovering), then the store, then RPC."""

    def __init__(self, config: LedgerServiceConfig) -> None:
        self.config = config
        self.registry = Registry()
        self.stats = LedgerStats(self.registry)
        self.store: LedgerStore | None = None
        self.rpc: RpcServer | None = None
        self._http: web.AppRunner | None = None
        self.rpc_port: int | None = None
        self.http_port: int | None = None

    @classmethod
    def from_config(cls, raw: dict[str, Any]) -> LedgerService:
        planted = planted_bugs.activate(raw.get("planted_bugs") or ())
        if planted:
            log.warning("PLANTED BUGS ON (deliberate faults for the txnbench self-test): %s", ", ".join(sorted(planted)))
        return cls(LedgerServiceConfig.from_dict(raw))

    @property
    def ready(self) -> bool:
        return self.rpc_port is not None

    async def start(self) -> None:
        cfg = self.config
        self._http = await start_http(http_app(self.registry, lambda: self.ready), cfg.http_port, cfg.host)
        self.http_port = self._http.addresses[0][1] if self._http.addresses else cfg.http_port
        self.store = await LedgerStore.open(cfg.data_dir, stats=self.stats, on_fatal=_exit_on_journal_failure,
                                           segment_bytes=cfg.segment_bytes)
        self.rpc = RpcServer(LedgerHandlers(self.store, self.stats).table(), host=cfg.host, port=cfg.rpc_port)
        self.rpc_port = await self.rpc.start()
        log.info("ledger store %s ready: rpc %s:%d, http %s:%d, data %s", cfg.name, cfg.host, self.rpc_port,
                 cfg.host, self.http_port, cfg.data_dir)

    async def stop(self) -> None:
        if self.rpc is not None:
            await self.rpc.close()
        if self.store is not None:
            await self.store.shutdown()
        if self._http is not None:
            await self._http.cleanup()
