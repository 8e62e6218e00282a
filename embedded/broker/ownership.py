"""Topic ownership: an ephemeral record per topic in the metadata store.

Theory of operation. `/topic-owners/<domain>/<t>/<ns>/<encoded topic>` holds the owner's
`{broker_id, service_url, web_url}` as an ephemeral record of its metadata session
(Pulsar keeps one such record per namespace bundle; per-topic records are our
simplification). Acquiring is a put with `expected_version=-1`; when the put's answer
was lost, reading the record back tells whether our session holds it. A record with
our broker id but an older session is ours from before a restart: we replace it by
CAS on its version. Releasing deletes it by CAS.

When the metadata client reports the session lost, the store will (or did) delete our
records, so this broker owns nothing any more: every owned topic is dropped and the
listeners run (the broker unloads the topics and closes their producers and
consumers so clients look the topics up again). The metadata client declares a
session lost no later than the store can expire it, so no two brokers ever both
believe they own a topic; fencing in the ledger store covers the rest.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from embedded.broker.topic_name import TopicName
from embedded.broker.txn_api import OwnerInfo, OwnershipListener, call_listener
from embedded.metadata.backend import MetadataBackend
from embedded.metadata.model import MUST_NOT_EXIST, BadVersion, GetResult, KeyNotFound

if TYPE_CHECKING:
    from embedded.broker.metrics import BrokerMetrics

log = logging.getLogger("embedded.broker.ownership")

ROOT = "/topic-owners/"


def owner_key(topic: TopicName) -> str:
    return f"{ROOT}{topic.domain.value}/{topic.tenant}/{topic.namespace_part}/{topic.encoded_local_name}"


def parse_owner(result: GetResult) -> OwnerInfo:
    data = json.loads(result.value or "{}")
    return OwnerInfo(broker_id=int(data["broker_id"]), service_url=str(data["service_url"]),
                     web_url=str(data.get("web_url", "")), session_id=result.version.session_id,
                     version_id=result.version.version_id)


class OwnershipService:
    def __init__(self, metadata: MetadataBackend, broker_id: int, service_url: str, web_url: str,
                 metrics: BrokerMetrics) -> None:
        self.metadata = metadata
        self.broker_id = broker_id
        self.service_url = service_url
        self.web_url = web_url
        self.metrics = metrics
        self._owned: dict[TopicName, OwnerInfo] = {}
        self._listeners: list[OwnershipListener] = []
        self._value = json.dumps({"broker_id": broker_id, "service_url": service_url, "web_url": web_url},
                                 separators=(",", ":"), sort_keys=True)
        self.assign: Callable[[TopicName], Awaitable[OwnerInfo]] | None = None   # set by the broker
        metadata.add_session_listener(self._on_session_lost)

    # ---- OwnershipApi -------------------------------------------------------------------------

    def is_owned(self, topic: TopicName) -> bool:
        held = self._owned.get(topic)
        return held is not None and held.session_id == self.metadata.current_session

    def owned_topics(self) -> list[TopicName]:
        return list(self._owned)

    def add_listener(self, listener: OwnershipListener) -> None:
        self._listeners.append(listener)

    async def owner_of(self, topic: TopicName) -> OwnerInfo | None:
        try:
            return parse_owner(await self.metadata.get(owner_key(topic)))
        except KeyNotFound:
            return None

    async def ensure_owner(self, topic: TopicName) -> OwnerInfo:
        if self.is_owned(topic):
            return self._owned[topic]
        if self.assign is None:
            raise RuntimeError("ownership assignment is not wired (the broker sets OwnershipService.assign)")
        return await self.assign(topic)

    # ---- acquiring and releasing ----------------------------------------------------------------

    async def try_acquire(self, topic: TopicName) -> OwnerInfo:
        """Become the owner if nobody is; returns whoever owns the topic afterwards."""
        if self.is_owned(topic):
            return self._owned[topic]
        key = owner_key(topic)
        session = await self.metadata.session_id()
        for _ in range(5):   # bounded: each round either decides or saw the record vanish
            try:
                result = await self.metadata.put(key, self._value, expected_version=MUST_NOT_EXIST, ephemeral=True)
            except BadVersion:
                pass
            else:
                return await self._owned_now(topic, result.version.version_id, session)
            try:
                current = parse_owner(await self.metadata.get(key))
            except KeyNotFound:
                continue
            if current.broker_id != self.broker_id:
                return current
            if current.session_id == session:
                return await self._owned_now(topic, current.version_id, session)
            return await self.take_over(topic, current)
        raise BadVersion(f"ownership of {topic} kept changing")

    async def take_over(self, topic: TopicName, stale: OwnerInfo) -> OwnerInfo:
        """Replace a record of ours from an earlier session (this broker restarted)."""
        session = await self.metadata.session_id()
        try:
            result = await self.metadata.put(owner_key(topic), self._value, expected_version=stale.version_id,
                                             ephemeral=True)
        except BadVersion:
            current = await self.owner_of(topic)
            if current is None:
                return await self.try_acquire(topic)
            return current
        log.info("took over %s from this broker's earlier session %s", topic, stale.session_id)
        return await self._owned_now(topic, result.version.version_id, session)

    async def _owned_now(self, topic: TopicName, version_id: int | None, session: int) -> OwnerInfo:
        info = OwnerInfo(self.broker_id, self.service_url, self.web_url, session, version_id)
        fresh = topic not in self._owned
        self._owned[topic] = info
        if fresh:
            self.metrics.ownership_changes.inc(event="acquired")
            log.info("now owning %s", topic)
            for listener in list(self._listeners):
                await call_listener(listener.on_owned, topic)
        return info

    async def release(self, topic: TopicName) -> None:
        """Stop owning `topic` and delete its record (by CAS) so another broker can take it."""
        held = self._owned.pop(topic, None)
        if held is None:
            return
        self.metrics.ownership_changes.inc(event="released")
        try:
            await self.metadata.delete(owner_key(topic), expected_version=held.version_id)
        except (BadVersion, KeyNotFound):
            pass
        except Exception as err:   # the session going away removes it anyway
            log.info("could not delete the owner record of %s (%s)", topic, err)
        for listener in list(self._listeners):
            await call_listener(listener.on_released, topic)

    def _on_session_lost(self, session_id: int) -> None:
        lost = [t for t, info in self._owned.items() if info.session_id == session_id]
        if not lost:
            return
        log.warning("metadata session %d lost: dropping ownership of %d topics", session_id, len(lost))
        for topic in lost:
            del self._owned[topic]
        self.metrics.ownership_changes.inc(len(lost), event="lost")
        for topic in lost:
            for listener in list(self._listeners):
                task = asyncio.ensure_future(call_listener(listener.on_released, topic))
                task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
