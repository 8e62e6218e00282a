"""Live brokers: each broker's ephemeral `/brokers/<broker_id>` record, and a watched view of all.

A broker registers with a plain ephemeral put (no version check): a record left by its
own previous incarnation (same id, older session, killed with -9) is simply taken
over, so a restarted broker is live at once. After losing its session it registers
again on the next one. The view of all live brokers is re-read whenever a watch event
arrives under `/brokers/` or the watch was resynchronised after a reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from embedded.broker.txn_api import BrokerInfo
from embedded.metadata.backend import MetadataBackend, WatchHandle
from embedded.metadata.model import MetadataError, MetadataUnavailable, Notification, SessionExpired

log = logging.getLogger(__name__)

ROOT = "/brokers/"
_PAUSES = (0.1, 0.2, 0.5, 1.0, 2.0)


class LiveBrokers:
    def __init__(self, metadata: MetadataBackend, me: BrokerInfo) -> None:
        self.metadata = metadata
        self.me = me
        self._live: dict[int, BrokerInfo] = {}
        self._watch: WatchHandle | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        self._register_task: asyncio.Task[None] | None = None
        self._stopped = False
        self.registered = asyncio.Event()

    @property
    def key(self) -> str:
        return f"{ROOT}{self.me.broker_id}"

    def live(self) -> dict[int, BrokerInfo]:
        return dict(self._live)

    async def start(self) -> None:
        self.metadata.add_session_listener(self._on_session_lost)
        await self._register()
        self._watch = await self.metadata.watch(ROOT, self._on_events, on_resync=self._schedule_refresh)
        await self._refresh()

    async def stop(self) -> None:
        self._stopped = True
        for task in (self._refresh_task, self._register_task):
            if task is not None:
                task.cancel()
        if self._watch is not None:
            with contextlib.suppress(Exception):
                await self._watch.cancel()
        with contextlib.suppress(Exception):
            await self.metadata.delete(self.key)

    async def _register(self) -> None:
        value = json.dumps({"broker_id": self.me.broker_id, "service_url": self.me.service_url,
                            "web_url": self.me.web_url}, separators=(",", ":"), sort_keys=True)
        await self.metadata.put(self.key, value, ephemeral=True)
        self.registered.set()
        log.info("registered %s", self.key)

    def _on_session_lost(self, session_id: int) -> None:
        self.registered.clear()
        if self._stopped or (self._register_task is not None and not self._register_task.done()):
            return
        self._register_task = asyncio.ensure_future(self._register_again())

    async def _register_again(self) -> None:
        attempt = 0
        while not self._stopped:   # bounded by the broker's life
            try:
                await self._register()
                await self._refresh()
                return
            except (MetadataUnavailable, SessionExpired, MetadataError) as err:
                log.info("cannot register %s yet (%s)", self.key, err)
                await asyncio.sleep(_PAUSES[min(attempt, len(_PAUSES) - 1)])
                attempt += 1

    def _on_events(self, events: list[Notification]) -> None:
        if any(e.key.startswith(ROOT) for e in events):
            self._schedule_refresh()

    def _schedule_refresh(self) -> None:
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.ensure_future(self._refresh_quietly())

    async def _refresh_quietly(self) -> None:
        with contextlib.suppress(MetadataUnavailable, MetadataError):
            await self._refresh()

    async def _refresh(self) -> None:
        records = await self.metadata.range_scan(ROOT, ROOT[:-1] + chr(ord("/") + 1))
        live: dict[int, BrokerInfo] = {}
        for record in records:
            try:
                data = json.loads(record.value or "{}")
                info = BrokerInfo(int(data["broker_id"]), str(data["service_url"]), str(data.get("web_url", "")))
            except (ValueError, KeyError):
                continue
            live[info.broker_id] = info
        self._live = live
