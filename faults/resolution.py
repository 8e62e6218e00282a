"""Selectors resolved to targets: the services, proxies (with their streams), topics, segments
and load workers a fault acts on (the grammar is faults.selectors).

Resolution happens at injection time, with the run's seeded random generator and
a set of resources busy with other faults, so two faults never hold the same
process, proxy or topic. Network selectors resolve to `LinkEnd`s: a Toxiproxy
proxy plus the stream that carries traffic *away from* the selected side (for a
link selector, from the link's source to its dest; for a service, out of that
service), which is how one-way faults know which stream to cut.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from faults.selectors import (
    RANDOM,
    ClientsSelector,
    Index,
    LinkSelector,
    LoadSelector,
    NoTarget,
    Pick,
    SegmentSelector,
    SelectorError,
    ServiceClass,
    ServiceSelector,
    TopicSelector,
)
from harness.target import EVERY_BROKER, ClusterInfo, LinkInfo, LinkKind, ServiceInfo, ServiceRole
from harness.toxiproxy.model import Stream

CLIENT_SIDE = "client"        # the source of every client-broker link (harness.target LinkInfo)


# ---- resolved targets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceTarget:
    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def resource(self) -> str:
        return f"service:{self.name}"


@dataclass(frozen=True)
class LinkEnd:
    """A proxy and the stream that carries traffic away from the selected side."""

    proxy: str
    outbound: Stream

    def __str__(self) -> str:
        return self.proxy

    @property
    def resource(self) -> str:
        return f"link:{self.proxy}"

    def streams(self, direction: Direction) -> tuple[Stream, ...]:
        if direction is Direction.BOTH:
            return (Stream.UPSTREAM, Stream.DOWNSTREAM)
        inbound = Stream.DOWNSTREAM if self.outbound is Stream.UPSTREAM else Stream.UPSTREAM
        return (self.outbound,) if direction is Direction.OUTBOUND else (inbound,)


@dataclass(frozen=True)
class LoadTarget:
    """A Locust worker of the load: `w<i>`, or `random` for the load process to choose."""

    worker: str

    def __str__(self) -> str:
        return f"load:{self.worker}"

    @property
    def resource(self) -> str:
        return "load"      # one client kill at a time


@dataclass(frozen=True)
class TopicTarget:
    topic: str

    def __str__(self) -> str:
        return self.topic

    @property
    def resource(self) -> str:
        return f"topic:{self.topic}"


@dataclass(frozen=True)
class SegmentTarget:
    """A v5 segment (or a v4 partition, or a non-partitioned v4 topic) of `topic`."""

    topic: str
    segment: str

    def __str__(self) -> str:
        return self.segment

    @property
    def resource(self) -> str:
        return f"topic:{self.topic}"

    @property
    def segment_id(self) -> int | None:
        info = parse_segment_name(self.segment)
        return info.segment_id if info else None


Target = ServiceTarget | LinkEnd | TopicTarget | SegmentTarget | LoadTarget


class Direction(StrEnum):
    """Which way a network fault applies, seen from the selected side."""

    BOTH = "both"
    OUTBOUND = "outbound"   # from the selected side (a link's source, or the named service) out
    INBOUND = "inbound"     # towards the selected side


@dataclass(frozen=True)
class SegmentName:
    """`segment://t/ns/topic/<hashStart>-<hashEnd>-<segmentId>` (hex bounds, decimal id)."""

    topic: str
    hash_start: int
    hash_end: int
    segment_id: int


_SEGMENT_RE = re.compile(r"segment://([^/]+)/([^/]+)/([^/]+)/([0-9a-fA-F]+)-([0-9a-fA-F]+)-(\d+)")


def parse_segment_name(name: str) -> SegmentName | None:
    match = _SEGMENT_RE.fullmatch(name)
    if not match:
        return None
    tenant, ns, local, start, end, seg = match.groups()
    return SegmentName(f"topic://{tenant}/{ns}/{local}", int(start, 16), int(end, 16), int(seg))


def adjacent_pairs(segments: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of active segments whose hash ranges touch (what a merge needs), in hash order."""
    parsed = sorted((s for s in (parse_segment_name(n) for n in segments) if s is not None),
                    key=lambda s: s.hash_start)
    names = {(s.hash_start, s.segment_id): n for n in segments if (s := parse_segment_name(n))}
    pairs = []
    for a, b in itertools.pairwise(parsed):
        if b.hash_start in (a.hash_end, a.hash_end + 1):
            pairs.append((names[(a.hash_start, a.segment_id)], names[(b.hash_start, b.segment_id)]))
    return pairs


# ---- resolution -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aim:
    """What a trigger saw, for the `...:trigger` selectors: the transaction whose operation
    set it off and the (topic, segment) pairs it is open on (segment None when not known)."""

    txn: str | None = None
    participants: tuple[tuple[str, str | None], ...] = ()
    written: tuple[str, ...] | None = None
    """The topics among them the transaction sent to; None when not known (then all count)."""

    def writes_only(self) -> Aim:
        """Only where the transaction wrote: what a seal, split or merge should hit (a topic it only
        acknowledged on holds no entry of it, and terminating an input topic only starves the load)."""
        if self.written is None:
            return self
        return Aim(self.txn, tuple(p for p in self.participants if p[0] in self.written), self.written)

    @property
    def tc_id(self) -> int | None:
        """The coordinator of the transaction: a TxnID's most significant bits (Pulsar's tc id)."""
        most, sep, _ = (self.txn or "").partition(":")
        return int(most) if sep and most.isdigit() else None

    @classmethod
    def from_seen(cls, seen: Mapping[str, object] | None) -> Aim | None:
        """From a trigger's `seen` record (faults.nemesis), or None when it saw nothing."""
        if not seen:
            return None
        raw = seen.get("participants")
        pairs: list[tuple[str, str | None]] = []
        if isinstance(raw, (list, tuple)):
            for item in raw:
                if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
                    pairs.append((item[0], item[1] if isinstance(item[1], str) else None))
        txn = seen.get("txn")
        written = seen.get("written")
        return cls(txn if isinstance(txn, str) else None, tuple(pairs),
                   tuple(str(t) for t in written) if isinstance(written, (list, tuple)) else None)


@dataclass(frozen=True)
class ResolveContext:
    """What resolution may look at. The callables are only called when a selector needs them.

    Args:
        cluster: services and links of the cluster.
        rng: the fault's own seeded generator.
        busy: resources held by faults in effect (`service:x`, `link:x`, `topic:x`).
        topics: the run's logical topics, in topology order.
        is_running: whether a service is up (killed and paused ones are not chosen at random).
        coordinator_brokers: tc id -> the service URL of the broker hosting it.
        owner_of: a topic's (partition's, segment's) owner: its broker's service URL.
        segments_of: a topic's active segments (v5), partitions (v4), or [topic] when not partitioned.
        aim: what the fault's trigger saw (for `...:trigger` selectors); None: nothing.
    """

    cluster: ClusterInfo
    rng: random.Random
    busy: frozenset[str] = frozenset()
    topics: tuple[str, ...] = ()
    is_running: Callable[[str], bool] | None = None
    coordinator_brokers: Callable[[], Mapping[int, str]] | None = None
    segments_of: Callable[[str], Sequence[str]] | None = None
    aim: Aim | None = None
    owner_of: Callable[[str], str] | None = None


def _brokers(cluster: ClusterInfo) -> list[ServiceInfo]:
    return sorted(cluster.by_role(ServiceRole.BROKER), key=lambda s: _broker_number(s.name))


def _broker_number(name: str) -> int:
    match = re.fullmatch(r"broker-(\d+)", name)
    return int(match.group(1)) if match else 1_000_000


def _choose(rng: random.Random, items: Sequence[str], what: str) -> str:
    if not items:
        raise NoTarget(f"no {what} is free right now")
    return items[rng.randrange(len(items))]


def coordinator_broker(ctx: ResolveContext, tc_id: int | None) -> str:
    """The broker (service name) hosting coordinator `tc_id`, or a random coordinator's."""
    if ctx.coordinator_brokers is None:
        raise SelectorError("the coordinator cannot be located here: no Pulsar client is available to "
                            "ask which broker hosts each transaction coordinator")
    assignments = dict(ctx.coordinator_brokers())
    if not assignments:
        raise NoTarget("no transaction coordinator is assigned to a broker right now")
    if tc_id is None:
        ids = sorted(assignments)
        tc_id = ids[ctx.rng.randrange(len(ids))]
    elif tc_id not in assignments:
        raise SelectorError(f"there is no transaction coordinator {tc_id}; the cluster has "
                            f"{sorted(assignments)}")
    url = assignments[tc_id]
    broker = ctx.cluster.broker_for_url(url)
    if broker is None:
        raise NoTarget(f"coordinator {tc_id} is on {url}, which is none of this cluster's brokers "
                       f"({', '.join(str(b.service_url) for b in _brokers(ctx.cluster))})")
    return broker.name


def _aimed_coordinator_broker(ctx: ResolveContext) -> str:
    """The broker hosting the triggering transaction's coordinator; a random coordinator's when
    the trigger saw no transaction or its coordinator is not assigned (moved, being elected)."""
    tc_id = ctx.aim.tc_id if ctx.aim is not None else None
    if tc_id is not None and ctx.coordinator_brokers is not None and tc_id in dict(ctx.coordinator_brokers()):
        return coordinator_broker(ctx, tc_id)
    return coordinator_broker(ctx, None)


def _participant_owner(ctx: ResolveContext, candidates: Iterable[str]) -> str:
    """The broker owning one of the triggering transaction's segments (v4: partitions), chosen at
    random among those whose owner is known and free; a random free broker when the trigger saw no
    transaction, or no owner could be found (moved, unreachable)."""
    free = sorted(candidates, key=_broker_number)
    owners: list[str] = []
    if ctx.aim is not None and ctx.owner_of is not None:
        names = dict.fromkeys(segment or topic for topic, segment in ctx.aim.participants)
        for name in names:
            try:
                broker = ctx.cluster.broker_for_url(ctx.owner_of(name))
            except Exception:   # a lookup that fails (its owner is moving): aim at another one
                continue
            if broker is not None and broker.name in free and broker.name not in owners:
                owners.append(broker.name)
    return _choose(ctx.rng, owners or free, "broker")


def _broker_name(ctx: ResolveContext, index: Index, candidates: Iterable[str]) -> str:
    if index.pick is Pick.FIXED:
        return f"broker-{index.value}"
    if index.pick is Pick.COORDINATOR:
        return coordinator_broker(ctx, index.value)
    if index.pick is Pick.TRIGGER:
        return _aimed_coordinator_broker(ctx)
    if index.pick is Pick.OWNER:
        return _participant_owner(ctx, candidates)
    return _choose(ctx.rng, sorted(candidates, key=_broker_number), "broker")


def _free_service(ctx: ResolveContext, name: str) -> bool:
    if f"service:{name}" in ctx.busy:
        return False
    return ctx.is_running is None or ctx.is_running(name)


def resolve_load(selector: LoadSelector) -> LoadTarget:
    """A Locust worker; `random` is left to the load process, which knows which are running."""
    return LoadTarget(RANDOM if selector.worker is None else f"w{selector.worker}")


def resolve_service(selector: ServiceSelector, ctx: ResolveContext) -> ServiceTarget:
    """One process: a broker, a store, or a random one of them (never the proxy)."""
    if selector.service is ServiceClass.METADATA:
        return ServiceTarget("metadata")
    if selector.service is ServiceClass.LEDGER:
        return ServiceTarget("ledger")
    brokers = [b.name for b in _brokers(ctx.cluster)]
    if selector.service is ServiceClass.ANY:
        names = [n for n in [*brokers, "metadata", "ledger"] if _free_service(ctx, n)]
        return ServiceTarget(_choose(ctx.rng, names, "process"))
    free = [n for n in brokers if _free_service(ctx, n)]
    return ServiceTarget(_broker_name(ctx, selector.broker, free))


def _links(cluster: ClusterInfo, kind: LinkKind | None = None) -> list[LinkInfo]:
    return sorted((link for link in cluster.links if kind is None or link.kind is kind), key=lambda link: link.name)


def _free_link(ctx: ResolveContext, link: LinkInfo) -> bool:
    return f"link:{link.name}" not in ctx.busy


def _all_free(ctx: ResolveContext, ends: Iterable[LinkEnd]) -> bool:
    return all(end.resource not in ctx.busy for end in ends)


def isolation_ends(cluster: ClusterInfo, service: str) -> tuple[LinkEnd, ...]:
    """Every link to or from `service`, oriented so `outbound` leaves the service."""
    ends = []
    for link in _links(cluster):
        if link.source == service:
            ends.append(LinkEnd(link.name, Stream.UPSTREAM))
        elif link.dest == service:
            ends.append(LinkEnd(link.name, Stream.DOWNSTREAM))
    if not ends:
        raise NoTarget(f"{service} has no proxied links in this cluster")
    return tuple(ends)


def _from(link: LinkInfo, source: str) -> bool:
    """`source` dials through `link`: its own link, or one every broker shares (EVERY_BROKER)."""
    return link.source == source or (link.source == EVERY_BROKER and source.startswith("broker-"))


def _pair_ends(cluster: ClusterInfo, a: str, b: str) -> tuple[LinkEnd, ...]:
    """The links between brokers a and b, oriented so `outbound` leaves a. Where every broker shares
    the link into b (the pulsar target), cutting it also cuts b's other callers, b's own included."""
    ends = []
    for link in _links(cluster, LinkKind.BROKER_BROKER):
        if link.dest == b and _from(link, a):
            ends.append(LinkEnd(link.name, Stream.UPSTREAM))
        elif link.dest == a and _from(link, b):
            ends.append(LinkEnd(link.name, Stream.DOWNSTREAM))
    if not ends:
        raise NoTarget(f"no link between {a} and {b}")
    return tuple(ends)


def resolve_links(selector: ServiceSelector | LinkSelector | ClientsSelector,
                  ctx: ResolveContext) -> tuple[LinkEnd, ...]:
    """The proxies a network fault acts on. A service selector isolates that service; `clients`
    isolates the client side (every client-broker link, `outbound` from the clients)."""
    if isinstance(selector, ClientsSelector):
        ends = isolation_ends(ctx.cluster, CLIENT_SIDE)
        _require_free(ctx, ends)
        return ends
    if isinstance(selector, ServiceSelector):
        if selector.service is ServiceClass.ANY:
            candidates = [s for s in [*(b.name for b in _brokers(ctx.cluster)), "metadata", "ledger"]
                          if _all_free(ctx, isolation_ends(ctx.cluster, s))]
            return isolation_ends(ctx.cluster, _choose(ctx.rng, candidates, "service"))
        service = resolve_service(selector, dataclasses.replace(ctx, is_running=None))
        ends = isolation_ends(ctx.cluster, service.name)
        _require_free(ctx, ends)
        return ends
    if selector.kind is None:
        link = _choose_link(ctx, _links(ctx.cluster))
        return (LinkEnd(link.name, Stream.UPSTREAM),)
    if selector.kind is LinkKind.BROKER_BROKER:
        return _resolve_broker_pairs(selector, ctx)
    links = _links(ctx.cluster, selector.kind)
    if selector.first.pick is Pick.RANDOM:
        link = _choose_link(ctx, links)
    else:
        broker = _broker_name(ctx, selector.first, ())
        source, dest = ("client", broker) if selector.kind is LinkKind.CLIENT_BROKER else \
            (broker, "metadata" if selector.kind is LinkKind.BROKER_METADATA else "ledger")
        matches = [link for link in links if (link.source, link.dest) == (source, dest)]
        if not matches:
            raise NoTarget(f"{selector.text!r}: the cluster has no {selector.kind.value} link of {broker}")
        link = matches[0]
    end = (LinkEnd(link.name, Stream.UPSTREAM),)
    _require_free(ctx, end)
    return end


def _resolve_broker_pairs(selector: LinkSelector, ctx: ResolveContext) -> tuple[LinkEnd, ...]:
    brokers = [b.name for b in _brokers(ctx.cluster)]
    if selector.first.pick is Pick.RANDOM:
        pairs = [(a, b) for i, a in enumerate(brokers) for b in brokers[i + 1:]]
        free = [p for p in pairs if _all_free(ctx, _pair_ends(ctx.cluster, *p))]
        if not free:
            raise NoTarget("no pair of brokers has free links right now")
        a, b = free[ctx.rng.randrange(len(free))]
        return _pair_ends(ctx.cluster, a, b)
    first = _broker_name(ctx, selector.first, ())
    if selector.second is None:
        ends = tuple(e for peer in brokers if peer != first for e in _pair_ends(ctx.cluster, first, peer))
    else:
        ends = _pair_ends(ctx.cluster, first, _broker_name(ctx, selector.second, ()))
    _require_free(ctx, ends)
    return ends


def _choose_link(ctx: ResolveContext, links: list[LinkInfo]) -> LinkInfo:
    free = [link for link in links if _free_link(ctx, link)]
    if not free:
        raise NoTarget("every matching link is busy with another fault")
    return free[ctx.rng.randrange(len(free))]


def _require_free(ctx: ResolveContext, ends: Iterable[LinkEnd]) -> None:
    busy = [e.proxy for e in ends if e.resource in ctx.busy]
    if busy:
        raise NoTarget(f"link(s) {', '.join(busy)} are held by another fault")


def _aimed_topics(ctx: ResolveContext) -> list[str]:
    """The run's topics the triggering transaction is open on and no other fault holds."""
    if ctx.aim is None:
        return []
    mine = dict.fromkeys(topic for topic, _ in ctx.aim.participants)
    return [t for t in mine if t in ctx.topics and f"topic:{t}" not in ctx.busy]


def resolve_topic(selector: TopicSelector | SegmentSelector, ctx: ResolveContext) -> TopicTarget:
    if not ctx.topics:
        raise SelectorError(f"{selector.text!r}: the run has no topics to choose from")
    if selector.aimed:
        aimed = _aimed_topics(ctx)
        if aimed:
            return TopicTarget(aimed[ctx.rng.randrange(len(aimed))])
    if selector.topic is not None:
        if selector.topic >= len(ctx.topics):
            raise SelectorError(f"{selector.text!r}: there is no topic {selector.topic}; the run has "
                                f"{len(ctx.topics)}")
        target = TopicTarget(ctx.topics[selector.topic])
        if target.resource in ctx.busy:
            raise NoTarget(f"{target.topic} is held by another fault")
        return target
    free = [t for t in ctx.topics if f"topic:{t}" not in ctx.busy]
    return TopicTarget(_choose(ctx.rng, free, "topic"))


def active_segments(topic: str, ctx: ResolveContext) -> list[str]:
    if ctx.segments_of is None:
        raise SelectorError("segments cannot be listed here: no admin client is available")
    segments = list(ctx.segments_of(topic))
    if not segments:
        raise NoTarget(f"{topic} has no active segment")
    return segments


def _aimed_segments(topic: str, segments: Sequence[str], ctx: ResolveContext) -> list[str]:
    """Of `segments` (active now), those the triggering transaction is open on."""
    if ctx.aim is None:
        return []
    mine = {segment for t, segment in ctx.aim.participants if t == topic and segment is not None}
    return [s for s in segments if s in mine]


def resolve_segment(selector: TopicSelector | SegmentSelector, ctx: ResolveContext) -> SegmentTarget:
    topic = resolve_topic(selector, ctx).topic
    segments = active_segments(topic, ctx)
    if selector.aimed:
        aimed = _aimed_segments(topic, segments, ctx)
        if aimed:
            return SegmentTarget(topic, aimed[ctx.rng.randrange(len(aimed))])
    return SegmentTarget(topic, segments[ctx.rng.randrange(len(segments))])


def resolve_adjacent_pair(selector: TopicSelector | SegmentSelector,
                          ctx: ResolveContext) -> tuple[SegmentTarget, SegmentTarget]:
    """Two active segments with touching hash ranges (merge's operands), of one topic."""
    topic = resolve_topic(selector, ctx).topic
    segments = active_segments(topic, ctx)
    pairs = adjacent_pairs(segments)
    if not pairs:
        raise NoTarget(f"{topic} has no two adjacent active segments to merge")
    if selector.aimed:
        aimed = set(_aimed_segments(topic, segments, ctx))
        pairs = [p for p in pairs if aimed & set(p)] or pairs
    a, b = pairs[ctx.rng.randrange(len(pairs))]
    return SegmentTarget(topic, a), SegmentTarget(topic, b)
