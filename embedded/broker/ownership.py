"""Topic ownership: an ephemeral record per topic in the metadata store.

Theory of operation. `/topic-owners/<domain>/<t>/<ns>/<encoded topic>` holds the owner's
`{broker_id, service_url, web_url}` as an ephemeral record of its metadata session
(Pulsar keeps one such record per namespace bundle; per-topic records are our
simplification). Acquiring is a put with `expected_version=-1`; when the put's answer
was lost, reading the record back tells whether our session holds it. A record with
our broker id but an older session is ours from before a restart: we replace it as
Pulsar's `ResourceLockImpl.revalidate` does ("Deleting stale lock"): delete it by CAS on
its version, then create ours. Not a versioned put: on ZooKeeper an ephemeral znode
belongs to the session that created it (setData keeps that owner, so `ZkMetadataClient`
refuses it), and a restarted broker could then not serve its own topics (nor v4
coordinators) until its killed predecessor's session expired. Releasing deletes by CAS.

When the metadata client reports the session lost, the store will (or did) delete our
records, but this broker keeps serving what it owns, as Pulsar's brokers do under their
default `zookeeperSessionExpiredPolicy=reconnect` ("the broker will keep serving the
topics, while attempting to recreate a new session"): Pulsar's `LockManagerImpl` does
nothing on `SessionLost` and revalidates every lock on `SessionReestablished`
(`ResourceLockImpl.revalidate`). So here each topic held under a lost session is
revalidated on the next session (`_revalidate_loop`, retried while the store is out of
reach): a record that is gone is acquired again, one of ours from the old session is
replaced, and one naming another broker means the topic was taken over: it is dropped
and the listeners run (the broker unloads it; clients look it up again). A gone record
may also hide a takeover: another broker owned the topic and lost it again before this
revalidation (its own session expired). So a gone record is acquired again only when the
listeners that can tell (`still_current`: the topic's or coordinator's managed ledger list
still the version they loaded) say nothing changed; otherwise the topic is dropped as taken
over, and the next lookup loads it afresh. (Pulsar revalidates every lock at once on
`SessionReestablished`, which leaves that window narrow; here it is checked.)

Meanwhile two brokers may both believe they own a topic: the one that lost its session
(a zombie: paused, or cut off from the store) and the one that took the topic over. The
ledger store's fencing keeps that safe, as BookKeeper's does in Pulsar: the new owner's
open fences the last ledger of every managed ledger of the topic, so the zombie's next
append fails `Fenced` and it lets the topic go (`ManagedLedger._fence`, the topic's and
the v4 coordinator's fenced listeners). With `zookeeperSessionExpiredPolicy=shutdown` (Pulsar: the broker exits and is restarted)
every topic of the lost session is given up at once instead (listeners told), as before.
A zombie never deletes a record by CAS on a
version of a lost session (a new owner's record may carry the same version number).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from embedded.broker.topic_name import TopicName
from embedded.broker.txn_api import OwnerInfo, OwnershipListener, call_listener
from embedded.metadata.backend import MetadataBackend
from embedded.metadata.model import (
    MUST_NOT_EXIST,
    BadVersion,
    GetResult,
    KeyNotFound,
    MetadataError,
    MetadataUnavailable,
    PutResult,
)

if TYPE_CHECKING:
    from embedded.broker.metrics import BrokerMetrics

log = logging.getLogger(__name__)

ROOT = "/topic-owners/"
_PAUSES = (0.1, 0.25, 0.5, 1.0, 2.0)   # between revalidation rounds while the store is out of reach


def owner_key(topic: TopicName) -> str:
    return f"{ROOT}{topic.domain.value}/{topic.tenant}/{topic.namespace_part}/{topic.encoded_local_name}"


def parse_owner(result: GetResult) -> OwnerInfo:
    data = json.loads(result.value or "{}")
    return OwnerInfo(broker_id=int(data["broker_id"]), service_url=str(data["service_url"]),
                     web_url=str(data.get("web_url", "")), session_id=result.version.session_id,
                     version_id=result.version.version_id)


class OwnershipService:
    def __init__(self, metadata: MetadataBackend, broker_id: int, service_url: str, web_url: str,
                 metrics: BrokerMetrics, *, shutdown_on_session_loss: bool = False) -> None:
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
        self._stale: set[TopicName] = set()      # held under a lost session: revalidate on the next one
        self._revalidating: asyncio.Task[None] | None = None
        self._closed = False
        self.shutdown_on_session_loss = shutdown_on_session_loss
        metadata.add_session_listener(self._on_session_lost)

    # ---- OwnershipApi -------------------------------------------------------------------------

    def is_owned(self, topic: TopicName) -> bool:
        """Whether this broker serves `topic`: also while a lost session's record awaits revalidation."""
        return topic in self._owned

    def is_confirmed(self, topic: TopicName) -> bool:
        """Owned, and the owner record is of the live session (not awaiting revalidation)."""
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
            result = await self._recreate(owner_key(topic), stale.version_id)
        except BadVersion:
            current = await self.owner_of(topic)
            if current is None:
                return await self.try_acquire(topic)
            return current
        log.info("took over %s from this broker's earlier session %s", topic, stale.session_id)
        return await self._owned_now(topic, result.version.version_id, session)

    async def _recreate(self, key: str, stale_version: int | None) -> PutResult:
        """Replace our record of an earlier session: delete it by CAS on `stale_version`, then
        create ours (Pulsar's "Deleting stale lock" ... "re-acquired stale lock").

        Raises:
            BadVersion: the record changed in between (another broker may have taken it).
        """
        if stale_version is None:
            raise BadVersion(f"{key}: the stale record's version is unknown")
        with contextlib.suppress(KeyNotFound):   # gone meanwhile (its session expired): just create
            await self.metadata.delete(key, expected_version=stale_version)
        return await self.metadata.put(key, self._value, expected_version=MUST_NOT_EXIST, ephemeral=True)

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
        self._stale.discard(topic)
        if held is None:
            return
        self.metrics.ownership_changes.inc(event="released")
        try:
            if held.session_id == self.metadata.current_session:
                await self.metadata.delete(owner_key(topic), expected_version=held.version_id)
            else:   # the store removes it with the lost session, but a revalidation may have re-created it
                await self._delete_live_record(topic)
        except (BadVersion, KeyNotFound):
            pass
        except Exception as err:   # the session going away removes it anyway
            log.info("could not delete the owner record of %s (%s)", topic, err)
        for listener in list(self._listeners):
            await call_listener(listener.on_released, topic)

    async def close(self) -> None:
        """Stop revalidating (the broker is stopping)."""
        self._closed = True
        task, self._revalidating = self._revalidating, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    # ---- a lost session: keep serving, revalidate on the next one ---------------------------------

    def _on_session_lost(self, session_id: int) -> None:
        held = [t for t, info in self._owned.items() if info.session_id == session_id]
        if not held or self._closed:
            return
        if self.shutdown_on_session_loss:   # Pulsar's `shutdown` policy: the broker gives up everything
            log.warning("metadata session %d lost: giving up %d topics (zookeeperSessionExpiredPolicy=shutdown)",
                        session_id, len(held))
            for topic in held:
                del self._owned[topic]
            self.metrics.ownership_changes.inc(len(held), event="lost")
            for topic in held:
                for listener in list(self._listeners):
                    task = asyncio.ensure_future(call_listener(listener.on_released, topic))
                    task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
            return
        log.warning("metadata session %d lost: keeping %d topics until the next session revalidates them",
                    session_id, len(held))
        self.metrics.ownership_changes.inc(len(held), event="session-lost")
        self._stale.update(held)
        if self._revalidating is None or self._revalidating.done():
            self._revalidating = asyncio.ensure_future(self._revalidate_loop())

    async def _revalidate_loop(self) -> None:
        """Revalidate every stale topic on the live session, retrying while the store is out of reach
        (bounded by the broker's life: `close` cancels it)."""
        attempt = 0
        while self._stale and not self._closed:
            try:
                session = await self.metadata.session_id()
                for topic in sorted(self._stale, key=str):
                    await self._revalidate(topic, session)
                if not self._stale:
                    return
            except (MetadataUnavailable, MetadataError) as err:
                log.info("cannot revalidate %d topics yet (%s)", len(self._stale), err)
            await asyncio.sleep(_PAUSES[min(attempt, len(_PAUSES) - 1)])
            attempt += 1

    async def _revalidate(self, topic: TopicName, session: int) -> None:
        """Pulsar's `ResourceLockImpl.revalidate`: still ours (acquired again, or our stale record
        replaced), or taken over by another broker (dropped, the listeners run)."""
        held = self._owned.get(topic)
        if held is None or held.session_id == session:
            self._stale.discard(topic)
            return
        key = owner_key(topic)
        for _ in range(3):   # bounded: each round either decides or saw the record change under it
            try:
                current: OwnerInfo | None = parse_owner(await self.metadata.get(key))
            except KeyNotFound:
                current = None
            if self._owned.get(topic) is not held:   # released or taken again meanwhile
                self._stale.discard(topic)
                return
            if current is not None and current.broker_id != self.broker_id:
                self._stale.discard(topic)
                await self._lost(topic, f"broker {current.broker_id} took it over")
                return
            if current is None and not await self._still_current(topic):
                self._stale.discard(topic)
                await self._lost(topic, "another broker owned it while this broker's session was gone "
                                        "(what this broker loaded of it changed since)")
                return
            if current is not None and current.session_id == session:
                version = current.version_id
            else:
                try:
                    if current is None:
                        result = await self.metadata.put(key, self._value, expected_version=MUST_NOT_EXIST,
                                                         ephemeral=True)
                    else:   # ours, of the lost session: delete it and create ours (not a versioned put)
                        result = await self._recreate(key, current.version_id)
                except BadVersion:
                    continue
                version = result.version.version_id
            if topic not in self._owned:   # released while we re-created its record
                await self._undo_record(topic, key, version)
                self._stale.discard(topic)
                return
            if self._owned.get(topic) is held:
                self._owned[topic] = OwnerInfo(self.broker_id, self.service_url, self.web_url, session, version)
                self.metrics.ownership_changes.inc(event="revalidated")
                log.info("still owning %s on metadata session %d", topic, session)
            self._stale.discard(topic)
            return
        log.info("the owner record of %s kept changing while revalidating it; trying again", topic)

    async def _still_current(self, topic: TopicName) -> bool:
        """Whether every listener that can tell (`still_current`) says what it loaded of `topic` is
        unchanged. A gone record says only that our session ended: another broker may have owned
        the topic meanwhile and lost it again (its own session expired) before this revalidation,
        and what it wrote is then unknown to our loaded state (embedded chaos-sessions, 2026-12-04:
        a partition served with the ledger list of before, its newer committed values unread)."""
        for listener in list(self._listeners):
            check = getattr(listener, "still_current", None)
            if check is None:
                continue
            try:
                if not await check(topic):
                    return False
            except (MetadataUnavailable, MetadataError):
                raise                    # the store is out of reach: the revalidation is tried again
            except Exception as err:     # cannot tell: loading it afresh is the safe side
                log.warning("cannot tell whether %s is still current (%r); loading it afresh", topic, err)
                return False
        return True

    async def _undo_record(self, topic: TopicName, key: str, version: int | None) -> None:
        """Delete the record a revalidation re-created for a topic released meanwhile.

        Left behind, it would name this broker under its live session for a topic it no longer
        serves: lookups would send clients here and `get_topic` refuse them for the session's
        whole life (a record of our live session is never taken over). It is ours and of the
        live session, so a CAS on its version cannot remove another owner's record."""
        try:
            await self.metadata.delete(key, expected_version=version)
            log.info("released %s while revalidating it: deleted the record re-created for it", topic)
        except (BadVersion, KeyNotFound):
            pass
        except Exception as err:   # the live session's end removes it anyway
            log.warning("could not delete the re-created owner record of released %s (%s)", topic, err)

    async def _delete_live_record(self, topic: TopicName) -> None:
        """On a release of a topic held under a lost session: a revalidation round whose put
        landed but whose answer was lost left a record of the live session; remove it."""
        current = await self.owner_of(topic)
        if current is not None and current.broker_id == self.broker_id and \
                current.session_id == self.metadata.current_session:
            await self._undo_record(topic, owner_key(topic), current.version_id)

    async def _lost(self, topic: TopicName, why: str) -> None:
        if self._owned.pop(topic, None) is None:
            return
        log.warning("lost the ownership of %s: %s", topic, why)
        self.metrics.ownership_changes.inc(event="lost")
        for listener in list(self._listeners):
            await call_listener(listener.on_released, topic)
