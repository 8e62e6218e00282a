"""PIP-460 scalable topics: the segment DAG watch, key routing, and per-segment fan-out.

Theory of operation
-------------------
A `topic://t/ns/x` name is resolved by a DAG watch session, as the Java v5 client's
`DagWatchClient` does: on any broker that announced `supports_scalable_topics`, send
SCALABLE_TOPIC_LOOKUP(session_id, topic); the broker answers SCALABLE_TOPIC_UPDATE
with the segment DAG (epoch, segments with inclusive 16-bit hash ranges, parent and
child ids, ACTIVE/SEALED) and pushes a new one on every split or merge. The watch is a
reconnecting handler: after a connection loss it resends the lookup on a new
connection.

Producing (`ScalableTargets`, like `ScalableTopicProducer`): one `TopicProducer` per
segment, created lazily on the segment's `segment://` name (a normal LOOKUP finds its
owner). A keyed message goes to the active segment whose range holds the high 16 bits
of the key's Murmur3 hash; unkeyed ones round robin over active segments. Producers of
segments that stop being active are closed.

Consuming (`SegmentTracker`, like the Java queue consumer): one `TopicConsumer` per
segment in the DAG, active and sealed alike (a sealed segment may still hold
unconsumed messages). Unlike the Java queue consumer, which reads all segments at once,
a child segment's consumer holds its FLOW until every parent segment still in the DAG
has reported REACHED_END_OF_TOPIC (the broker sends it once a terminated topic is
fully consumed and acknowledged), so a key's messages are received parents before
children. This needs the application to acknowledge what it receives; a parent with
unacknowledged messages holds its children back. We do not use
SCALABLE_TOPIC_SUBSCRIBE (the controller-assigned Stream/Checkpoint consumers); the
per-segment subscriptions make Exclusive/Shared/Failover work as on v4 topics.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.client.connection import ClientConnection, next_resource_id
from harness.client.consumer import ConsumerOptions, ReceiveQueue, TopicConsumer
from harness.client.errors import (
    FeatureNotSupportedError,
    NotReadyError,
    NotSentError,
    SetupError,
    setup_error,
)
from harness.client.futures import Future
from harness.client.handler import ClientContext, ReconnectingHandler
from harness.client.hashing import segment_hash
from harness.client.producer import ProducerOptions, TopicProducer, _Targets
from harness.client.timers import Deadline, spawn
from harness.client.topics import segment_name
from harness.errors import OperationError
from harness.wire import Command, CommandType, SegmentState, commands

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SegmentInfo:
    """One segment of a scalable topic."""

    segment_id: int
    hash_start: int
    hash_end: int
    active: bool
    parents: tuple[int, ...]
    children: tuple[int, ...]
    topic: str
    broker_url: str | None = None

    def covers(self, hash_value: int) -> bool:
        """Whether the inclusive range holds `hash_value`."""
        return self.hash_start <= hash_value <= self.hash_end


@dataclass(frozen=True)
class SegmentLayout:
    """A scalable topic's segment DAG at one epoch."""

    epoch: int
    topic: str
    segments: Mapping[int, SegmentInfo]

    @classmethod
    def from_proto(cls, dag: Any, topic: str) -> SegmentLayout:
        """Build from a `ScalableTopicDAG`; `topic` is the (resolved) `topic://` name."""
        brokers = {entry.segment_id: entry.broker_url for entry in dag.segment_brokers}
        segments = {}
        for info in dag.segments:
            segments[info.segment_id] = SegmentInfo(
                segment_id=info.segment_id, hash_start=info.hash_start, hash_end=info.hash_end,
                active=info.state == SegmentState.ACTIVE, parents=tuple(info.parent_ids),
                children=tuple(info.child_ids),
                topic=segment_name(topic, info.hash_start, info.hash_end, info.segment_id),
                broker_url=brokers.get(info.segment_id))
        return cls(dag.epoch, topic, segments)

    @property
    def active(self) -> list[SegmentInfo]:
        """Active segments by range start."""
        return sorted((s for s in self.segments.values() if s.active), key=lambda s: s.hash_start)

    def route(self, key: str) -> SegmentInfo:
        """The active segment covering `key`.

        Raises:
            SetupError: no active segment covers it (a malformed DAG).
        """
        value = segment_hash(key)
        for segment in self.active:
            if segment.covers(value):
                return segment
        raise SetupError(f"no active segment of {self.topic} covers hash {value:#06x} "
                         f"(epoch {self.epoch}); the segment DAG is malformed")

    def topological(self) -> list[SegmentInfo]:
        """All segments, every parent before its children (ties by segment id)."""
        done: set[int] = set()
        order: list[SegmentInfo] = []
        pending = sorted(self.segments)
        for _ in range(len(pending) + 1):
            progressed = False
            for segment_id in pending:
                if segment_id in done:
                    continue
                segment = self.segments[segment_id]
                if all(p in done or p not in self.segments for p in segment.parents):
                    done.add(segment_id)
                    order.append(segment)
                    progressed = True
            if not progressed:
                break
        order.extend(self.segments[s] for s in pending if s not in done)  # cycles: id order
        return order


class DagWatch(ReconnectingHandler):
    """A SCALABLE_TOPIC_LOOKUP session: the current layout and its pushed updates."""

    def __init__(self, ctx: ClientContext, topic: str) -> None:
        super().__init__(ctx, f"segment DAG watch of {topic}")
        self.topic = topic
        self.session_id = next_resource_id()
        self._layout: SegmentLayout | None = None
        self._layout_cond = threading.Condition()
        self._first: Future[SegmentLayout] | None = None
        self._listeners: list[Callable[[SegmentLayout], None]] = []

    def _attach(self, deadline: Deadline) -> ClientConnection:
        conn = self.ctx.pool.service_connection(deadline)
        if not conn.peer_supports("supports_scalable_topics"):
            raise FeatureNotSupportedError(
                f"{conn.physical_url} does not announce supports_scalable_topics, so it cannot "
                f"serve {self.topic}: use a Pulsar 5.0 broker with scalableTopicsEnabled=true")
        first: Future[SegmentLayout] = Future()
        self._first = first
        conn.register_session(CommandType.SCALABLE_TOPIC_UPDATE, self.session_id, self._on_update)
        conn.add_listener(self)
        try:
            conn.send(commands.scalable_topic_lookup(self.session_id, self.topic))
            if not first.wait(max(0.001, deadline.remaining())):
                raise SetupError(f"{self.description}: no SCALABLE_TOPIC_UPDATE within the timeout",
                                 retriable=True)
            first.result(0)
        except BaseException:
            conn.unregister_session(CommandType.SCALABLE_TOPIC_UPDATE, self.session_id)
            conn.remove_listener(self)
            raise
        return conn

    def _release(self, conn: ClientConnection) -> None:
        conn.unregister_session(CommandType.SCALABLE_TOPIC_UPDATE, self.session_id)
        conn.remove_listener(self)

    def _detached(self, conn: ClientConnection, reason: str) -> None:
        first = self._first
        if first is not None:
            first.set_exception(SetupError(f"{self.description}: {reason}", retriable=True))

    def _on_update(self, event: Command) -> None:
        body = event.body
        error = commands.error_of(event)
        first = self._first
        if error is not None:
            failure = setup_error(f"scalable topic lookup of {self.topic}", error[0], error[1])
            if first is not None and not first.done():
                first.set_exception(failure)
            else:
                log.warning("%s: broker reported %s", self.description, failure)
            return
        if not body.HasField("dag"):
            return
        topic = body.resolved_topic_name if body.HasField("resolved_topic_name") else self.topic
        layout = SegmentLayout.from_proto(body.dag, topic or self.topic)
        with self._layout_cond:
            current = self._layout
            if current is not None and layout.epoch < current.epoch:
                return  # an older push overtaken by a newer one
            self._layout = layout
            listeners = list(self._listeners)
            self._layout_cond.notify_all()
        if first is not None:
            first.set_result(layout)
        for listener in listeners:
            try:
                listener(layout)
            except Exception:
                log.exception("%s: layout listener failed", self.description)

    @property
    def layout(self) -> SegmentLayout:
        """The latest layout (`start` must have succeeded)."""
        layout = self._layout
        if layout is None:
            raise NotReadyError(f"{self.description} has no layout yet")
        return layout

    @property
    def epoch(self) -> int:
        """The latest layout's epoch (-1 before the first)."""
        layout = self._layout
        return layout.epoch if layout is not None else -1

    def add_listener(self, listener: Callable[[SegmentLayout], None]) -> None:
        """Call `listener(layout)` on every new layout (from a reader thread: must not block)."""
        with self._layout_cond:
            self._listeners.append(listener)

    def wait_for_epoch_after(self, epoch: int, deadline: Deadline) -> bool:
        """Wait until a layout newer than `epoch` arrives; returns whether one did."""
        try:
            self.ready(deadline)  # revives a watch that gave up reconnecting
        except OperationError:
            return False
        with self._layout_cond:
            while self.epoch <= epoch:
                remaining = deadline.remaining()
                if remaining <= 0:
                    return False
                self._layout_cond.wait(remaining)
        return True

    def close(self) -> None:
        """End the session (SCALABLE_TOPIC_CLOSE)."""
        conn = self._mark_closed()
        if conn is not None:
            self._release(conn)
            with contextlib.suppress(NotReadyError, NotSentError):
                conn.send(commands.scalable_topic_close(self.session_id))


class ScalableTargets(_Targets):
    """Routes each message to the producer of the active segment covering its key."""

    def __init__(self, ctx: ClientContext, topic: str, dag: DagWatch,
                 options: ProducerOptions) -> None:
        super().__init__([])
        self._ctx = ctx
        self.topic = topic
        self._dag = dag
        self._options = options
        self._lock = threading.Lock()
        self._by_segment: dict[int, TopicProducer] = {}
        self._round_robin = itertools.count()
        dag.add_listener(self._layout_changed)

    def pick(self, key: str | None, deadline: Deadline) -> TopicProducer:
        layout = self._dag.layout
        if key is not None:
            segment = layout.route(key)
        else:
            active = layout.active
            if not active:
                raise SetupError(f"{self.topic} has no active segment (epoch {layout.epoch})")
            segment = active[next(self._round_robin) % len(active)]
        with self._lock:
            producer = self._by_segment.get(segment.segment_id)
            if producer is None:
                producer = TopicProducer(self._ctx, segment.topic, logical_topic=self.topic,
                                         segment=segment.topic, partition=-1,
                                         options=self._options)
                self._by_segment[segment.segment_id] = producer
        return producer

    def all(self) -> list[TopicProducer]:
        with self._lock:
            return list(self._by_segment.values())

    def _layout_changed(self, layout: SegmentLayout) -> None:
        active = {s.segment_id for s in layout.segments.values() if s.active}
        with self._lock:
            gone = [sid for sid in self._by_segment if sid not in active]
            retired = [self._by_segment.pop(sid) for sid in gone]
        for producer in retired:
            spawn(_closer(producer.close), f"retire-{producer.topic}")

    def close(self) -> None:
        self._dag.close()


class SegmentTracker:
    """Keeps one consumer per segment of the DAG, children held until their parents end."""

    def __init__(self, ctx: ClientContext, topic: str, subscription: str, dag: DagWatch,
                 options: ConsumerOptions, queue: ReceiveQueue, *, ordered: bool = True) -> None:
        self._ctx = ctx
        self.topic = topic
        self.subscription = subscription
        self._dag = dag
        self._options = options
        self._queue = queue
        self._ordered = ordered
        self._lock = threading.RLock()
        self._by_segment: dict[int, TopicConsumer] = {}
        self._watching: set[tuple[int, int]] = set()
        self._closed = False

    def start(self, deadline: Deadline) -> None:
        """Subscribe to every segment of the current layout (connected now) and follow updates.

        Raises:
            SetupError, NotReadyError: a segment subscription failed.
        """
        created = self._apply(self._dag.layout)
        for consumer in created:
            consumer.start(deadline)
        self._dag.add_listener(self._on_layout)

    def _on_layout(self, layout: SegmentLayout) -> None:
        for consumer in self._apply(layout):
            consumer.connect_in_background()

    def _apply(self, layout: SegmentLayout) -> list[TopicConsumer]:
        created: list[TopicConsumer] = []
        with self._lock:
            if self._closed:
                return []
            for segment in layout.topological():
                if segment.segment_id in self._by_segment:
                    continue
                hold = self._ordered and any(p in layout.segments for p in segment.parents)
                consumer = TopicConsumer(
                    self._ctx, segment.topic, self.subscription, logical_topic=self.topic,
                    segment=segment.topic, partition=-1, options=self._options,
                    queue=self._queue, hold_flow=hold)
                self._by_segment[segment.segment_id] = consumer
                created.append(consumer)
            gone = [sid for sid in self._by_segment if sid not in layout.segments]
            retired = [self._by_segment.pop(sid) for sid in gone]
            for segment in layout.segments.values():
                consumer = self._by_segment[segment.segment_id]
                if consumer.flow_held:
                    parents = [p for p in segment.parents if p in self._by_segment]
                    if not parents:
                        consumer.release_flow()
                    else:
                        for parent in parents:
                            if (parent, segment.segment_id) in self._watching:
                                continue
                            self._watching.add((parent, segment.segment_id))
                            self._by_segment[parent].on_end_of_topic(
                                self._parent_listener(consumer, segment))
        for consumer in retired:
            spawn(_closer(consumer.close), f"retire-{consumer.topic}")
        return created

    def _parent_listener(self, consumer: TopicConsumer,
                         segment: SegmentInfo) -> Callable[[TopicConsumer], None]:
        return lambda _parent: self._parent_ended(consumer, segment)

    def _parent_ended(self, consumer: TopicConsumer, segment: SegmentInfo) -> None:
        with self._lock:
            parents = [self._by_segment.get(p) for p in segment.parents]
        if all(p is None or p.reached_end for p in parents):
            consumer.release_flow()

    def consumers(self) -> list[TopicConsumer]:
        """The segment consumers, parents before children."""
        with self._lock:
            try:
                order = [s.segment_id for s in self._dag.layout.topological()]
            except NotReadyError:
                order = []
            known = [self._by_segment[s] for s in order if s in self._by_segment]
            rest = [c for sid, c in sorted(self._by_segment.items()) if c not in known]
            return known + rest

    def close(self) -> None:
        """Stop following the DAG (the consumers are closed by their `Consumer`)."""
        with self._lock:
            self._closed = True
        self._dag.close()


def _closer(close: Callable[[Deadline], None]) -> Callable[[], None]:
    return lambda: close(Deadline.after(5.0))


def describe_layout(layout: SegmentLayout) -> list[dict[str, Any]]:
    """A compact view of a layout for logs and errors."""
    return [{"id": s.segment_id, "range": f"{s.hash_start:04x}-{s.hash_end:04x}",
             "active": s.active, "parents": list(s.parents)} for s in layout.topological()]


__all__ = [
    "DagWatch",
    "ScalableTargets",
    "SegmentInfo",
    "SegmentLayout",
    "SegmentTracker",
    "describe_layout",
]
