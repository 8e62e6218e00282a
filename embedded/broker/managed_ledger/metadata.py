"""Managed-ledger and cursor records in the metadata store, written only by compare-and-set.

`/managed-ledgers/<name>` holds the ledger list: `{"ledgers": [{"id": L, "entries": N
or null}], "terminated": [l, e] or null}`; `entries` is null only for the ledger being
written (its length is learnt by fencing it). `/managed-ledgers/<name>/<encoded
cursor>` holds a durable cursor: the ledger its state is appended to, and the state at
the time of the last switch (used only if that ledger is gone).

A write whose answer is lost (MetadataUnavailable) may or may not have applied; the
managed ledger resolves that by reading the record back (`verify_update`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from embedded.broker.position import Position
from embedded.broker.topic_name import decode_component, encode_component
from embedded.metadata.backend import MetadataBackend
from embedded.metadata.model import MUST_NOT_EXIST, KeyNotFound

ROOT = "/managed-ledgers/"


@dataclass
class LedgerRecord:
    ledger_id: int
    entries: int | None   # None: the open ledger, length not yet known

    def to_json(self) -> dict[str, Any]:
        return {"id": self.ledger_id, "entries": self.entries}


@dataclass
class MlInfo:
    ledgers: list[LedgerRecord] = field(default_factory=list)
    terminated: Position | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ledgers": [r.to_json() for r in self.ledgers],
                "terminated": self.terminated.to_json() if self.terminated else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MlInfo:
        ledgers = [LedgerRecord(int(r["id"]), None if r.get("entries") is None else int(r["entries"]))
                   for r in data.get("ledgers", [])]
        terminated = data.get("terminated")
        return cls(ledgers, Position.from_json(terminated) if terminated else None)

    def copy(self) -> MlInfo:
        return MlInfo([LedgerRecord(r.ledger_id, r.entries) for r in self.ledgers], self.terminated)


@dataclass
class CursorRecord:
    ledger_id: int | None
    state: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"ledger": self.ledger_id, "state": self.state}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CursorRecord:
        ledger = data.get("ledger")
        return cls(None if ledger is None else int(ledger), dict(data.get("state") or {}))


def ml_key(name: str) -> str:
    return ROOT + name


def cursor_key(name: str, cursor: str) -> str:
    return f"{ROOT}{name}/{encode_component(cursor)}"


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


class MlMetadataStore:
    def __init__(self, client: MetadataBackend) -> None:
        self.client = client

    async def read(self, name: str) -> tuple[MlInfo, int] | None:
        try:
            result = await self.client.get(ml_key(name))
        except KeyNotFound:
            return None
        return MlInfo.from_json(json.loads(result.value or "{}")), result.version.version_id

    async def create(self, name: str, info: MlInfo) -> int:
        """Create the record; BadVersion when it already exists."""
        result = await self.client.put(ml_key(name), _dump(info.to_json()), expected_version=MUST_NOT_EXIST)
        return result.version.version_id

    async def update(self, name: str, info: MlInfo, expected_version: int) -> int:
        """CAS the ledger list; BadVersion when someone else changed it."""
        result = await self.client.put(ml_key(name), _dump(info.to_json()), expected_version=expected_version)
        return result.version.version_id

    async def delete(self, name: str) -> None:
        with contextlib.suppress(KeyNotFound):
            await self.client.delete(ml_key(name))

    async def exists(self, name: str) -> bool:
        return await self.client.get_or_none(ml_key(name)) is not None

    async def list_cursors(self, name: str) -> list[str]:
        prefix = ml_key(name) + "/"
        keys = await self.client.list_prefix(prefix)
        return [decode_component(k[len(prefix):]) for k in keys if "/" not in k[len(prefix):]]

    async def read_cursor(self, name: str, cursor: str) -> tuple[CursorRecord, int] | None:
        try:
            result = await self.client.get(cursor_key(name, cursor))
        except KeyNotFound:
            return None
        return CursorRecord.from_json(json.loads(result.value or "{}")), result.version.version_id

    async def put_cursor(self, name: str, cursor: str, record: CursorRecord, expected_version: int) -> int:
        result = await self.client.put(cursor_key(name, cursor), _dump(record.to_json()),
                                       expected_version=expected_version)
        return result.version.version_id

    async def delete_cursor(self, name: str, cursor: str) -> None:
        with contextlib.suppress(KeyNotFound):
            await self.client.delete(cursor_key(name, cursor))

    async def list_names(self, prefix: str) -> list[str]:
        """Managed-ledger names directly under `prefix` (e.g. `t/ns/persistent/`)."""
        root = ROOT + prefix
        keys = await self.client.list_prefix(root)
        return [prefix + k[len(root):] for k in keys if "/" not in k[len(root):]]
