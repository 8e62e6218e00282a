"""Layout operations of scalable topics: create, split, merge, terminate, delete (PIP-460).

Theory of operation (Pulsar 5.0's `ScalableTopicController`). A split or merge runs in
this order, so nobody ever sees a layout whose segments are not ready:

1. create the child segment topics on their owners, with every subscription the topic
   has (the recorded ones and the durable cursors of the parents), positioned before
   their first entry, so nothing written to a child before its consumer arrives is lost;
2. terminate (seal) the parent segment topics on their owners: producers get
   TopicTerminatedError and wait for the new layout;
3. CAS the new layout into the metadata store; every broker's DAG watch sessions push
   it to their clients (SCALABLE_TOPIC_UPDATE).

A step that fails leaves the layout unchanged (children without traffic, a parent
sealed early: producers retry until an operator repeats the split). Work on a segment
topic runs on its owner: in-process when that is this broker, otherwise through the
owner's admin REST (`/admin/v2/segments/...`), as Pulsar's controller uses its admin
client. Transactions are not involved at all: sealing writes nothing transactional,
and open transactions on a sealed parent end through the metadata store (PIP-473).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import aiohttp

from embedded import planted_bugs
from embedded.broker.managed_ledger.metadata import MlInfo, MlMetadataStore
from embedded.broker.position import Position
from embedded.broker.topic_name import TopicDomain, TopicName
from embedded.broker.txn_api import BrokerContext, TxnError
from embedded.broker.v5.scalable.layout import SegmentInfo, SegmentLayout
from embedded.broker.v5.scalable.resources import ScalableTopicNotFound, ScalableTopicResources
from embedded.metadata.model import BadVersion
from harness.wire import ServerError

if TYPE_CHECKING:
    from embedded.broker.v5.settings import V5Settings

log = logging.getLogger(__name__)

_OWNER_TIMEOUT_S = 15.0


class OwnerCallFailed(Exception):
    """The owner of a segment refused or did not answer an admin call."""

    def __init__(self, message: str, status: int = 503) -> None:
        super().__init__(message)
        self.status = status


class LoadedSegment(Protocol):
    """What the controller needs of a loaded segment topic (the broker's PersistentTopic)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def ledger(self) -> Any: ...

    async def get_or_create_subscription(self, name: str, *, durable: bool, initial_position: Position,
                                         start: Position | None) -> Any: ...

    async def terminate(self) -> Position: ...

    def stats(self) -> dict[str, Any]: ...


def segment_topic(topic: TopicName, segment: SegmentInfo) -> TopicName:
    return TopicName(TopicDomain.SEGMENT, topic.tenant, topic.namespace_part,
                     f"{topic.local_name}/{segment.descriptor}")


def segment_admin_path(segment: TopicName) -> str:
    parent, _, descriptor = segment.local_name.rpartition("/")
    return (f"/admin/v2/segments/{segment.tenant}/{segment.namespace_part}/{quote(parent, safe='')}/"
            f"{quote(descriptor, safe='')}")


class ScalableTopicController:
    def __init__(self, broker: BrokerContext, resources: ScalableTopicResources, settings: V5Settings) -> None:
        self.broker = broker
        self.resources = resources
        self.settings = settings
        self._ml_store = MlMetadataStore(broker.metadata)
        self._http: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=_OWNER_TIMEOUT_S))

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.close()

    @property
    def holder(self) -> str:
        return f"broker-{self.broker.broker_id}"

    # ---- create and delete --------------------------------------------------------------------

    async def namespace_exists(self, namespace: str) -> bool:
        return await self.broker.metadata.get_or_none(f"/admin/policies/{namespace}") is not None

    async def create(self, topic: TopicName, segments: int, properties: dict[str, str] | None = None
                     ) -> SegmentLayout:
        if not await self.namespace_exists(topic.namespace):
            raise ScalableTopicNotFound(f"namespace {topic.namespace} does not exist; create it first")
        layout = SegmentLayout.initial(segments, int(time.time() * 1000), properties)
        await self.resources.create(topic, layout)
        for segment in layout.active:
            await self.create_ledger(segment_topic(topic, segment))
        log.info("created %s with %d segments", topic, segments)
        return layout

    async def create_ledger(self, segment: TopicName) -> None:
        with contextlib.suppress(BadVersion):
            await self._ml_store.create(segment.persistence_name, MlInfo())

    async def delete(self, topic: TopicName) -> None:
        async with self.resources.operation_lock(topic, self.holder):
            layout = await self.resources.require(topic)
            await self.resources.delete(topic)
            for segment in layout.segments.values():
                name = segment_topic(topic, segment)
                try:
                    await self.on_owner(name, self._delete_local, "DELETE", "?force=true")
                except OwnerCallFailed as err:
                    log.warning("deleting %s: %s", name, err)

    # ---- split and merge ----------------------------------------------------------------------

    async def split(self, topic: TopicName, segment_id: int) -> SegmentLayout:
        async with self.resources.operation_lock(topic, self.holder):
            now = int(time.time() * 1000)
            layout = await self.resources.require(topic)
            planned = layout.split(segment_id, now)
            children = [planned.segments[i] for i in (planned.next_segment_id - 2, planned.next_segment_id - 1)]
            await self._reshape(topic, layout, [segment_id], children)
            updated = await self.resources.update(topic, lambda current: current.split(segment_id, now))
        log.info("split segment %d of %s into %s (epoch %d)", segment_id, topic,
                 [c.descriptor for c in children], updated.epoch)
        return updated

    async def merge(self, topic: TopicName, first_id: int, second_id: int) -> SegmentLayout:
        async with self.resources.operation_lock(topic, self.holder):
            now = int(time.time() * 1000)
            layout = await self.resources.require(topic)
            planned = layout.merge(first_id, second_id, now)
            child = planned.segments[planned.next_segment_id - 1]
            await self._reshape(topic, layout, [first_id, second_id], [child])
            updated = await self.resources.update(topic, lambda current: current.merge(first_id, second_id, now))
        log.info("merged segments %d and %d of %s into %s (epoch %d)", first_id, second_id, topic,
                 child.descriptor, updated.epoch)
        return updated

    async def _reshape(self, topic: TopicName, layout: SegmentLayout, parent_ids: Sequence[int],
                       children: Sequence[SegmentInfo]) -> None:
        parents = [segment_topic(topic, layout.get(p)) for p in parent_ids]
        subscriptions = await self.subscriptions_of(topic, parents)
        for child in children:
            name = segment_topic(topic, child)
            await self.create_ledger(name)
            await self.on_owner(name, functools.partial(self._create_local, subscriptions=subscriptions), "PUT",
                                "", body=subscriptions)
        for parent in parents:
            await self.on_owner(parent, self._terminate_local, "POST", "/terminate")

    async def subscriptions_of(self, topic: TopicName, segments: Sequence[TopicName]) -> list[str]:
        """The recorded subscriptions of `topic` plus the durable cursors of `segments`."""
        names = set(await self.resources.subscriptions(topic))
        for segment in segments:
            names.update(await self._ml_store.list_cursors(segment.persistence_name))
        return sorted(names)

    # ---- work on a segment, on its owner ------------------------------------------------------

    async def on_owner(self, segment: TopicName, local: Callable[[LoadedSegment], Awaitable[Any]], method: str,
                       suffix: str, *, body: Any = None) -> Any:
        """Run `local` on the loaded segment if we own it, else the same through the owner's admin REST."""
        try:
            owner = await self.broker.ownership.ensure_owner(segment)
        except TxnError as err:
            raise OwnerCallFailed(f"no broker serves {segment}: {err.message}") from None
        if owner.broker_id == self.broker.broker_id:
            topic = await self.broker.get_topic(segment)
            return await local(topic)   # type: ignore[arg-type]
        return await self._call_owner(owner.web_url, method, segment_admin_path(segment) + suffix, body)

    async def _call_owner(self, web_url: str, method: str, url_path: str, body: Any) -> Any:
        if self._http is None:
            raise OwnerCallFailed("the scalable-topic controller is not started")
        url = web_url.rstrip("/") + url_path
        try:
            async with self._http.request(method, url, json=body) as response:
                text = await response.text()
                if response.status >= 400:
                    raise OwnerCallFailed(f"{method} {url}: HTTP {response.status}: {text[:300]}", response.status)
                return await response.json() if text.strip() else None
        except (aiohttp.ClientError, TimeoutError) as err:
            raise OwnerCallFailed(f"{method} {url}: no answer ({err!r})") from None

    @staticmethod
    async def _create_local(topic: LoadedSegment, subscriptions: Sequence[str]) -> dict[str, Any]:
        ml = topic.ledger
        first = ml.first_position()
        before_first = Position(first.ledger_id, first.entry_id - 1)
        if planted_bugs.on(planted_bugs.V5_SPLIT_CHILD_SKIPS_FIRST):
            before_first = first   # DELIBERATE FAULT (txnbench self-test): at the first entry, not before it
        for name in subscriptions:
            await topic.get_or_create_subscription(name, durable=True, initial_position=before_first, start=None)
        return {"subscriptions": list(subscriptions)}

    @staticmethod
    async def _terminate_local(topic: LoadedSegment) -> dict[str, Any]:
        position = await topic.terminate()
        return {"ledgerId": position.ledger_id, "entryId": position.entry_id}

    async def _delete_local(self, topic: LoadedSegment) -> None:
        delete = getattr(self.broker, "delete_topic", None)
        if delete is None:
            raise TxnError(ServerError.NotAllowedError, "this broker cannot delete topics")
        await delete(topic.name)

    async def create_segment(self, topic: LoadedSegment, subscriptions: Sequence[str]) -> dict[str, Any]:
        return await self._create_local(topic, subscriptions)

    async def terminate_segment(self, topic: LoadedSegment) -> dict[str, Any]:
        return await self._terminate_local(topic)
