"""Clients following scalable topics: DAG watch sessions and namespace watches (PIP-460).

Theory of operation (Pulsar's `DagWatchSession`, `ScalableTopicsWatcherSession`). Any
broker serves them, since the layout lives in the metadata store:

* SCALABLE_TOPIC_LOOKUP(session_id, topic): answer SCALABLE_TOPIC_UPDATE with the DAG
  (every segment with its range, state, parents and children, plus the owners of the
  active segments that have one), creating the topic first when asked to and allowed.
  The broker watches the layout key (one metadata watch per topic, shared by all
  sessions on this broker) and pushes the new DAG to every session on each change
  (never an older epoch than one already sent). SCALABLE_TOPIC_CLOSE or the
  connection's end closes a session.
* WATCH_SCALABLE_TOPICS(watch_id, namespace, property filters): a snapshot of the
  namespace's scalable topics, then diffs (added/removed) as topics come and go.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from embedded.broker.tasks import spawn
from embedded.broker.topic_name import InvalidTopicName, TopicDomain, TopicName
from embedded.broker.txn_api import BrokerContext, ClientChannel
from embedded.broker.v5.scalable.controller import ScalableTopicController, segment_topic
from embedded.broker.v5.scalable.layout import LayoutError, SegmentLayout
from embedded.broker.v5.scalable.resources import (
    ScalableTopicExists,
    ScalableTopicNotFound,
    ScalableTopicResources,
    namespace_prefix,
    topic_key,
    topic_of_key,
)
from embedded.metadata.model import EventType, MetadataError, MetadataUnavailable, Notification
from harness.wire import Command, ServerError, commands

if TYPE_CHECKING:
    from embedded.broker.v5.settings import V5Settings
    from embedded.metadata.backend import WatchHandle as Watch

log = logging.getLogger(__name__)


def parse_scalable(text: str) -> TopicName:
    """A `topic://` name (short forms are read as `topic://`)."""
    if "://" not in text:
        parts = text.split("/")
        text = f"topic://{text}" if len(parts) == 3 else f"topic://public/default/{text}"
    topic = TopicName.parse(text)
    if topic.domain is not TopicDomain.TOPIC:
        raise InvalidTopicName(f"{text} is not a scalable topic; scalable topics are topic://tenant/namespace/name")
    return topic


async def dag_of(broker: BrokerContext, topic: TopicName, layout: SegmentLayout) -> Any:
    """The `ScalableTopicDAG` of a layout, with the owners of its active segments."""
    infos = [commands.segment_info(
        s.segment_id, s.hash_range.start, s.hash_range.end, sealed=not s.active, parent_ids=s.parent_ids,
        child_ids=s.child_ids, created_at_epoch=s.created_at_epoch, created_at_ms=s.created_at_ms,
        sealed_at_epoch=s.sealed_at_epoch if s.sealed_at_epoch >= 0 else None,
        sealed_at_ms=s.sealed_at_ms if s.sealed_at_ms >= 0 else None)
        for s in sorted(layout.segments.values(), key=lambda s: s.segment_id)]
    owners: dict[int, str] = {}
    for segment in layout.active:
        with contextlib.suppress(MetadataUnavailable, MetadataError):
            owner = await broker.ownership.owner_of(segment_topic(topic, segment))
            if owner is not None:
                owners[segment.segment_id] = owner.service_url
    return commands.segment_dag(layout.epoch, infos, segment_brokers=owners)


@dataclass(eq=False)
class _Session:
    channel: ClientChannel
    session_id: int
    topic: TopicName
    sent_epoch: int = -1


@dataclass
class _TopicWatch:
    watch: Watch | None = None
    sessions: set[_Session] = field(default_factory=set)


class DagWatchSessions:
    def __init__(self, broker: BrokerContext, resources: ScalableTopicResources, controller: ScalableTopicController,
                 settings: V5Settings) -> None:
        self.broker = broker
        self.resources = resources
        self.controller = controller
        self.settings = settings
        self._topics: dict[TopicName, _TopicWatch] = {}
        self._by_channel: dict[int, dict[int, _Session]] = {}

    async def lookup(self, channel: ClientChannel, command: Command) -> None:
        body = command.body
        session_id = body.session_id

        def fail(error: ServerError, message: str) -> None:
            channel.send(commands.scalable_topic_update(session_id, error=error, message=message))

        try:
            topic = parse_scalable(body.topic)
        except InvalidTopicName as err:
            fail(ServerError.InvalidTopicName, str(err))
            return
        try:
            found = await self.resources.get(topic)
            if found is None:
                create = body.create_if_missing if body.HasField("create_if_missing") else True
                if not (create and self.settings.allow_auto_create):
                    fail(ServerError.TopicNotFound, f"scalable topic {topic} does not exist")
                    return
                with contextlib.suppress(ScalableTopicExists):
                    await self.controller.create(topic, self.settings.default_segments)
                found = await self.resources.get(topic)
                if found is None:
                    fail(ServerError.TopicNotFound, f"scalable topic {topic} was deleted while being looked up")
                    return
            layout = found[0]
        except ScalableTopicNotFound as err:
            fail(ServerError.TopicNotFound, str(err))
            return
        except (MetadataUnavailable, MetadataError, LayoutError) as err:
            fail(ServerError.MetadataError, f"reading the layout of {topic} failed: {err}")
            return
        if channel.closed:
            return
        session = _Session(channel, session_id, topic)
        channel_key = id(channel)
        sessions = self._by_channel.get(channel_key)
        if sessions is None:
            sessions = self._by_channel[channel_key] = {}
            channel.add_close_listener(lambda: self._channel_closed(channel_key))
        old = sessions.pop(session_id, None)
        if old is not None:
            self._drop(old)
        sessions[session_id] = session
        watched = self._topics.get(topic)
        if watched is None:
            watched = self._topics[topic] = _TopicWatch()
            watched.sessions.add(session)
            try:
                watched.watch = await self.broker.metadata.watch(
                    topic_key(topic), functools.partial(self._on_events, topic),
                    on_resync=functools.partial(self._refresh, topic))
            except (MetadataUnavailable, MetadataError) as err:
                log.warning("cannot watch the layout of %s (%s); its clients get no pushes", topic, err)
        else:
            watched.sessions.add(session)
        await self._send(session, topic, layout)

    async def close(self, channel: ClientChannel, command: Command) -> None:
        session = self._by_channel.get(id(channel), {}).pop(command.body.session_id, None)
        if session is not None:
            self._drop(session)

    def _channel_closed(self, key: int) -> None:
        for session in self._by_channel.pop(key, {}).values():
            self._drop(session)

    def _drop(self, session: _Session) -> None:
        watched = self._topics.get(session.topic)
        if watched is None:
            return
        watched.sessions.discard(session)
        if not watched.sessions:
            del self._topics[session.topic]
            if watched.watch is not None:
                spawn(watched.watch.cancel(), f"unwatching {session.topic}")

    def _on_events(self, topic: TopicName, events: list[Notification]) -> None:
        key = topic_key(topic)
        if any(e.key == key and e.type is not EventType.DELETED for e in events):
            self._refresh(topic)

    def _refresh(self, topic: TopicName) -> None:
        spawn(self._push(topic), f"pushing the layout of {topic}")

    async def _push(self, topic: TopicName) -> None:
        watched = self._topics.get(topic)
        if watched is None:
            return
        try:
            found = await self.resources.get(topic)
        except (MetadataUnavailable, MetadataError, LayoutError) as err:
            log.warning("re-reading the layout of %s failed (%s)", topic, err)
            return
        if found is None:
            return
        layout = found[0]
        dag = await dag_of(self.broker, topic, layout)
        for session in list(watched.sessions):
            if layout.epoch > session.sent_epoch and not session.channel.closed:
                session.sent_epoch = layout.epoch
                session.channel.send(commands.scalable_topic_update(session.session_id, dag=dag,
                                                                    resolved_topic_name=str(topic)))

    async def _send(self, session: _Session, topic: TopicName, layout: SegmentLayout) -> None:
        dag = await dag_of(self.broker, topic, layout)
        if layout.epoch >= session.sent_epoch and not session.channel.closed:
            session.sent_epoch = layout.epoch
            session.channel.send(commands.scalable_topic_update(session.session_id, dag=dag,
                                                                resolved_topic_name=str(topic)))

    async def stop(self) -> None:
        for watched in list(self._topics.values()):
            if watched.watch is not None:
                with contextlib.suppress(Exception):
                    await watched.watch.cancel()
        self._topics.clear()


@dataclass(eq=False)
class _NamespaceWatch:
    channel: ClientChannel
    watch_id: int
    namespace: str
    filters: dict[str, str]
    known: set[str] = field(default_factory=set)
    watch: Watch | None = None


class NamespaceWatches:
    """WATCH_SCALABLE_TOPICS: the scalable topics of a namespace, as a snapshot then diffs."""

    def __init__(self, broker: BrokerContext, resources: ScalableTopicResources) -> None:
        self.broker = broker
        self.resources = resources
        self._watches: dict[tuple[int, int], _NamespaceWatch] = {}

    async def watch(self, channel: ClientChannel, command: Command) -> None:
        body = command.body
        filters = {kv.key: kv.value for kv in body.property_filters}
        state = _NamespaceWatch(channel, body.watch_id, body.namespace, filters)
        key = (id(channel), body.watch_id)
        try:
            state.known = set(await self._matching(state))
            state.watch = await self.broker.metadata.watch(
                namespace_prefix(body.namespace), functools.partial(self._changed, state),
                on_resync=functools.partial(self._resync, state))
        except (MetadataUnavailable, MetadataError) as err:
            channel.send(commands.watch_scalable_topics_update(body.watch_id, error=ServerError.MetadataError,
                                                               message=f"listing {body.namespace}: {err}"))
            return
        self._watches[key] = state
        channel.add_close_listener(functools.partial(self._forget, key))
        channel.send(commands.watch_scalable_topics_update(body.watch_id, snapshot=sorted(state.known)))

    async def close(self, channel: ClientChannel, command: Command) -> None:
        self._forget((id(channel), command.body.watch_id))

    def _forget(self, key: tuple[int, int]) -> None:
        state = self._watches.pop(key, None)
        if state is not None and state.watch is not None:
            spawn(state.watch.cancel(), "unwatching a namespace")

    async def _matching(self, state: _NamespaceWatch) -> Iterable[str]:
        topics = await self.resources.topics(state.namespace)
        if not state.filters:
            return [str(t) for t in topics]
        out = []
        for topic in topics:
            found = await self.resources.get(topic)
            if found is not None and all(found[0].properties.get(k) == v for k, v in state.filters.items()):
                out.append(str(topic))
        return out

    def _resync(self, state: _NamespaceWatch) -> None:
        spawn(self._diff(state), "scalable topics diff")

    def _changed(self, state: _NamespaceWatch, events: list[Notification]) -> None:
        if any(topic_of_key(e.key) is not None for e in events):
            spawn(self._diff(state), "scalable topics diff")

    async def _diff(self, state: _NamespaceWatch) -> None:
        if state.channel.closed:
            return
        try:
            now = set(await self._matching(state))
        except (MetadataUnavailable, MetadataError) as err:
            log.info("listing %s failed (%s)", state.namespace, err)
            return
        added, removed = sorted(now - state.known), sorted(state.known - now)
        state.known = now
        if added or removed:
            state.channel.send(commands.watch_scalable_topics_update(state.watch_id, added=added, removed=removed))
