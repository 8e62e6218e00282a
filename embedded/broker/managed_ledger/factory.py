"""ManagedLedgerFactory: opens each managed ledger once per broker and shares the entry cache."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from embedded.broker.config import Settings
from embedded.broker.managed_ledger.api import ManagedLedgerConfig
from embedded.broker.managed_ledger.cache import EntryCache
from embedded.broker.managed_ledger.ledger import ManagedLedger, MlState
from embedded.broker.managed_ledger.metadata import MlMetadataStore
from embedded.ledger.client import LedgerClient
from embedded.ledger.model import LedgerKind
from embedded.metadata.backend import MetadataBackend

if TYPE_CHECKING:
    from embedded.broker.metrics import BrokerMetrics

log = logging.getLogger(__name__)

_GONE = (MlState.CLOSED, MlState.FENCED)


class ManagedLedgerFactory:
    def __init__(self, ledgers: LedgerClient, metadata: MetadataBackend, metrics: BrokerMetrics,
                 settings: Settings) -> None:
        self.ledgers = ledgers
        self.store = MlMetadataStore(metadata)
        self.metrics = metrics
        self.settings = settings
        self.cache = EntryCache(settings.int("managedLedgerCacheSizeMB") * 1024 * 1024)
        self._open: dict[str, ManagedLedger] = {}
        self._opening: dict[str, asyncio.Future[ManagedLedger]] = {}

    def config(self, kind: LedgerKind = LedgerKind.DATA, **overrides: object) -> ManagedLedgerConfig:
        """A config with this broker's settings (max entries per ledger) for `kind`."""
        base = ManagedLedgerConfig(kind=kind, max_entries_per_ledger=self.settings.int("managedLedgerMaxEntriesPerLedger"))
        return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedger:
        existing = self._open.get(name)
        if existing is not None and existing.state not in _GONE:
            return existing
        opening = self._opening.get(name)
        if opening is not None:
            return await asyncio.shield(opening)
        future: asyncio.Future[ManagedLedger] = asyncio.get_running_loop().create_future()
        self._opening[name] = future
        try:
            ml = ManagedLedger(
                name, config or self.config(), ledgers=self.ledgers, store=self.store, cache=self.cache,
                metrics=self.metrics, add_timeout_s=self.settings.float("managedLedgerAddEntryTimeoutSeconds"),
                cursor_settings={k: self.settings[k] for k in (
                    "managedLedgerDefaultMarkDeleteRateLimit", "managedLedgerCursorMaxEntriesPerLedger",
                    "managedLedgerMaxUnackedRangesToPersist")})
            await ml.open()
        except BaseException as err:
            future.set_exception(err)
            future.exception()   # retrieved: nobody else may be waiting
            raise
        finally:
            self._opening.pop(name, None)
        self._open[name] = ml
        future.set_result(ml)
        return ml

    def get(self, name: str) -> ManagedLedger | None:
        ml = self._open.get(name)
        return ml if ml is not None and ml.state not in _GONE else None

    async def exists(self, name: str) -> bool:
        return await self.store.exists(name)

    async def delete(self, name: str) -> None:
        ml = self.get(name) or await self.open(name)
        await ml.delete()
        self._open.pop(name, None)

    async def close_all(self) -> None:
        for ml in list(self._open.values()):
            try:
                await ml.close()
            except Exception:
                log.exception("closing %s failed", ml.name)
        self._open.clear()
