"""Selector grammar, and resolution against a cluster's services and links."""

from __future__ import annotations

import random
from typing import Any

import pytest

from faults.resolution import (
    Direction,
    LinkEnd,
    ResolveContext,
    adjacent_pairs,
    isolation_ends,
    parse_segment_name,
    resolve_adjacent_pair,
    resolve_links,
    resolve_segment,
    resolve_service,
    resolve_topic,
)
from faults.selectors import (
    Index,
    LinkSelector,
    NoTarget,
    Pick,
    SegmentSelector,
    SelectorError,
    ServiceClass,
    ServiceSelector,
    TopicSelector,
    check_against_cluster,
    parse_selector,
)
from harness.target import LinkKind
from harness.toxiproxy.model import Stream
from tests.unit.faults.fakes import FakeLocator, cluster_info, v5_segments


def ctx(seed: int = 1, **kwargs: Any) -> ResolveContext:
    kwargs.setdefault("cluster", cluster_info(3))
    return ResolveContext(rng=random.Random(seed), **kwargs)


@pytest.mark.parametrize(("text", "expected"), [
    ("broker", ServiceSelector("broker", ServiceClass.BROKER)),
    ("broker:2", ServiceSelector("broker:2", ServiceClass.BROKER, Index(Pick.FIXED, 2))),
    ("metadata", ServiceSelector("metadata", ServiceClass.METADATA)),
    ("process:random", ServiceSelector("process:random", ServiceClass.ANY)),
    ("link:random", LinkSelector("link:random", None)),
    ("topic:3", TopicSelector("topic:3", 3)),
    ("segment:random", SegmentSelector("segment:random", None)),
])
def test_parse_forms(text: str, expected: object) -> None:
    assert parse_selector(text) == expected


def test_parse_indexes() -> None:
    assert parse_selector("broker:1").broker.value == 1  # type: ignore[union-attr]
    coordinator = parse_selector("coordinator")
    assert isinstance(coordinator, ServiceSelector) and coordinator.broker.pick is Pick.COORDINATOR
    assert parse_selector("coordinator:3").broker.value == 3  # type: ignore[union-attr]
    link = parse_selector("broker-metadata:coordinator")
    assert isinstance(link, LinkSelector) and link.kind is LinkKind.BROKER_METADATA
    assert link.first.pick is Pick.COORDINATOR
    pair = parse_selector("broker-broker:0-2")
    assert isinstance(pair, LinkSelector) and (pair.first.value, pair.second.value) == (0, 2)  # type: ignore[union-attr]
    every_peer = parse_selector("broker-broker:1")
    assert isinstance(every_peer, LinkSelector) and every_peer.second is None


@pytest.mark.parametrize(("text", "words"), [
    ("", "empty"),
    ("brokr:1", "not a target"),
    ("broker:", "ends with ':'"),
    ("broker:x", "not a broker number"),
    ("metadata:0", "there is one metadata store"),
    ("process:1", "process:random"),
    ("broker-broker:1-1", "no link to itself"),
    ("broker-broker:random-1", "broker-broker:random"),
    ("broker-broker:coordinator", "not a broker number, random"),
    ("coordinator:x", "coordinator id"),
    ("topic:first", "topic number"),
])
def test_parse_errors_say_what_is_accepted(text: str, words: str) -> None:
    with pytest.raises(SelectorError, match=words):
        parse_selector(text)


def test_check_against_cluster() -> None:
    check_against_cluster(parse_selector("broker:1"), brokers=2, topics=4)
    with pytest.raises(SelectorError, match="no broker 2; the cluster has brokers 0-1"):
        check_against_cluster(parse_selector("client-broker:2"), brokers=2, topics=4)
    with pytest.raises(SelectorError, match="need 2 or more brokers"):
        check_against_cluster(parse_selector("broker-broker:random"), brokers=1, topics=4)
    with pytest.raises(SelectorError, match="no topic 4"):
        check_against_cluster(parse_selector("topic:4"), brokers=2, topics=4)


def test_random_service_is_seeded_and_skips_busy_and_stopped() -> None:
    sel = parse_selector("process:random")
    assert isinstance(sel, ServiceSelector)
    picks = {resolve_service(sel, ctx(seed)).name for seed in range(40)}
    assert picks == {"broker-0", "broker-1", "broker-2", "metadata", "ledger"}
    assert resolve_service(sel, ctx(7)) == resolve_service(sel, ctx(7))
    busy = frozenset({"service:broker-0", "service:metadata"})
    picks = {resolve_service(sel, ctx(s, busy=busy, is_running=lambda n: n != "ledger")).name
             for s in range(40)}
    assert picks == {"broker-1", "broker-2"}


def test_coordinator_resolves_through_the_locator() -> None:
    locator = FakeLocator({0: "pulsar://127.0.0.1:10002", 1: "pulsar://127.0.0.1:10001/"})
    sel = parse_selector("coordinator:0")
    assert isinstance(sel, ServiceSelector)
    target = resolve_service(sel, ctx(coordinator_brokers=locator.coordinator_brokers))
    assert target.name == "broker-2"
    sel = parse_selector("coordinator:1")
    assert resolve_service(sel, ctx(coordinator_brokers=locator.coordinator_brokers)).name == "broker-1"  # type: ignore[arg-type]
    with pytest.raises(SelectorError, match="no transaction coordinator 5"):
        resolve_service(parse_selector("coordinator:5"), ctx(coordinator_brokers=locator.coordinator_brokers))  # type: ignore[arg-type]
    stray = FakeLocator({0: "pulsar://10.0.0.1:6650"})
    with pytest.raises(NoTarget, match="none of this cluster's brokers"):
        resolve_service(parse_selector("coordinator"), ctx(coordinator_brokers=stray.coordinator_brokers))  # type: ignore[arg-type]
    with pytest.raises(SelectorError, match="cannot be located"):
        resolve_service(parse_selector("coordinator"), ctx())  # type: ignore[arg-type]


def test_link_selectors_resolve_to_proxies_with_their_outbound_stream() -> None:
    def links(text: str, **kw: Any) -> tuple[LinkEnd, ...]:
        sel = parse_selector(text)
        assert isinstance(sel, (LinkSelector, ServiceSelector))
        return resolve_links(sel, ctx(**kw))

    assert links("client-broker:1") == (LinkEnd("client-broker-1", Stream.UPSTREAM),)
    assert links("broker-ledger:2") == (LinkEnd("broker-2-ledger", Stream.UPSTREAM),)
    assert links("broker-broker:0-1") == (LinkEnd("broker-0-broker-1", Stream.UPSTREAM),
                                          LinkEnd("broker-1-broker-0", Stream.DOWNSTREAM))
    assert {e.proxy for e in links("broker-broker:2")} == {
        "broker-2-broker-0", "broker-0-broker-2", "broker-2-broker-1", "broker-1-broker-2"}
    assert len(links("broker-broker:random")) == 2
    locator = FakeLocator({0: "pulsar://127.0.0.1:10001"})
    assert links("broker-metadata:coordinator", coordinator_brokers=locator.coordinator_brokers) == (
        LinkEnd("broker-1-metadata", Stream.UPSTREAM),)
    one = links("link:random")
    assert len(one) == 1 and one[0].outbound is Stream.UPSTREAM


def test_a_service_selector_isolates_the_service() -> None:
    ends = resolve_links(parse_selector("broker:1"), ctx())  # type: ignore[arg-type]
    by_proxy = {e.proxy: e.outbound for e in ends}
    assert by_proxy["client-broker-1"] is Stream.DOWNSTREAM      # clients -> broker-1: out of it is downstream
    assert by_proxy["broker-1-metadata"] is Stream.UPSTREAM
    assert by_proxy["broker-0-broker-1"] is Stream.DOWNSTREAM
    assert by_proxy["broker-1-broker-2"] is Stream.UPSTREAM
    assert len(ends) == 1 + 2 + 4
    metadata = isolation_ends(cluster_info(3), "metadata")
    assert {e.proxy for e in metadata} == {"broker-0-metadata", "broker-1-metadata", "broker-2-metadata"}
    assert {e.outbound for e in metadata} == {Stream.DOWNSTREAM}


def test_directions_pick_streams() -> None:
    end = LinkEnd("client-broker-0", Stream.DOWNSTREAM)
    assert end.streams(Direction.BOTH) == (Stream.UPSTREAM, Stream.DOWNSTREAM)
    assert end.streams(Direction.OUTBOUND) == (Stream.DOWNSTREAM,)
    assert end.streams(Direction.INBOUND) == (Stream.UPSTREAM,)


def test_busy_links_are_not_chosen_and_fixed_busy_ones_refused() -> None:
    busy = frozenset(f"link:client-broker-{i}" for i in (0, 1))
    for seed in range(20):
        assert resolve_links(parse_selector("client-broker:random"), ctx(seed, busy=busy)) == (  # type: ignore[arg-type]
            LinkEnd("client-broker-2", Stream.UPSTREAM),)
    with pytest.raises(NoTarget, match="held by another fault"):
        resolve_links(parse_selector("client-broker:0"), ctx(busy=busy))  # type: ignore[arg-type]
    all_busy = frozenset(f"link:client-broker-{i}" for i in range(3))
    with pytest.raises(NoTarget):
        resolve_links(parse_selector("client-broker:random"), ctx(busy=all_busy))  # type: ignore[arg-type]


def test_topics_and_segments() -> None:
    topics = ("persistent://public/txnbench/t0", "persistent://public/txnbench/t1")
    assert resolve_topic(parse_selector("topic:1"), ctx(topics=topics)).topic == topics[1]  # type: ignore[arg-type]
    with pytest.raises(SelectorError, match="no topics"):
        resolve_topic(parse_selector("topic:random"), ctx())  # type: ignore[arg-type]
    segments = {"topic://public/txnbench/a": v5_segments("a", 4)}
    seg = resolve_segment(parse_selector("segment:0"),  # type: ignore[arg-type]
                          ctx(topics=("topic://public/txnbench/a",), segments_of=lambda t: segments[t]))
    assert seg.topic == "topic://public/txnbench/a" and seg.segment in segments[seg.topic]
    assert seg.segment_id is not None
    first, second = resolve_adjacent_pair(parse_selector("topic:0"),  # type: ignore[arg-type]
                                          ctx(topics=("topic://public/txnbench/a",),
                                              segments_of=lambda t: segments[t]))
    a, b = parse_segment_name(first.segment), parse_segment_name(second.segment)
    assert a is not None and b is not None and b.hash_start == a.hash_end + 1


def test_segment_names_and_adjacency() -> None:
    name = parse_segment_name("segment://public/ns/x/0000-7fff-3")
    assert name is not None and (name.topic, name.hash_start, name.hash_end, name.segment_id) == (
        "topic://public/ns/x", 0, 0x7FFF, 3)
    assert parse_segment_name("persistent://public/ns/x") is None
    segs = ["segment://p/n/x/8000-ffff-2", "segment://p/n/x/0000-3fff-3", "segment://p/n/x/4000-7fff-4"]
    assert adjacent_pairs(segs) == [(segs[1], segs[2]), (segs[2], segs[0])]
    assert adjacent_pairs(["segment://p/n/x/0000-3fff-3", "segment://p/n/x/8000-ffff-2"]) == []


def test_trigger_selectors_aim_at_the_triggering_transaction() -> None:
    from faults.resolution import Aim
    from faults.selectors import uses_trigger

    for text in ("coordinator:trigger", "topic:trigger", "segment:trigger"):
        assert uses_trigger(parse_selector(text))
    assert not uses_trigger(parse_selector("coordinator")) and not uses_trigger(parse_selector("topic:1"))
    a, b = "topic://public/txnbench/a", "topic://public/txnbench/b"
    segments = {a: v5_segments("a", 4), b: v5_segments("b", 2)}
    mine = segments[a][2]
    aim = Aim("1:42", ((a, mine), (b, None)))
    assert aim.tc_id == 1 and Aim("x", ()).tc_id is None
    assert Aim.from_seen({"txn": "1:42", "participants": [[a, mine], [b, None]]}) == aim
    assert Aim.from_seen(None) is None
    locator = FakeLocator({0: "pulsar://127.0.0.1:10000", 1: "pulsar://127.0.0.1:10002"})
    for seed in range(10):
        c = ctx(seed, topics=(a, b, "topic://public/txnbench/c"), segments_of=lambda t: segments[t], aim=aim,
                coordinator_brokers=locator.coordinator_brokers)
        assert resolve_topic(parse_selector("topic:trigger"), c).topic in (a, b)  # type: ignore[arg-type]
        seg = resolve_segment(parse_selector("segment:trigger"), c)  # type: ignore[arg-type]
        assert seg.segment == mine or seg.topic == b
        assert resolve_service(parse_selector("coordinator:trigger"), c).name == "broker-2"  # type: ignore[arg-type]
        pair = resolve_adjacent_pair(parse_selector("topic:trigger"),  # type: ignore[arg-type]
                                     ctx(seed, topics=(a,), segments_of=lambda t: segments[t], aim=aim))
        assert mine in (pair[0].segment, pair[1].segment)
    # nothing seen (the trigger timed out): random ones, as without a trigger
    c = ctx(3, topics=(a,), segments_of=lambda t: segments[t], coordinator_brokers=locator.coordinator_brokers)
    assert resolve_segment(parse_selector("segment:trigger"), c).segment in segments[a]  # type: ignore[arg-type]
    assert resolve_service(parse_selector("coordinator:trigger"), c).name in ("broker-0", "broker-2")  # type: ignore[arg-type]
    # a busy topic of the transaction is not taken
    c = ctx(3, topics=(a, b), segments_of=lambda t: segments[t], aim=aim, busy=frozenset({f"topic:{a}"}))
    assert resolve_topic(parse_selector("topic:trigger"), c).topic == b  # type: ignore[arg-type]


def test_client_broker_trigger_cuts_the_clients_link_to_the_committing_transactions_coordinator() -> None:
    """`client-broker:trigger` with a `txn-commit` trigger: the link the commit's END_TXN is on, so the
    client resends it after the cut (issue #43, END_TXN retried after a lost connection)."""
    from faults.resolution import Aim
    from faults.selectors import uses_coordinator, uses_trigger

    selector = parse_selector("client-broker:trigger")
    assert selector == LinkSelector("client-broker:trigger", LinkKind.CLIENT_BROKER, Index(Pick.TRIGGER))
    assert uses_trigger(selector) and uses_coordinator(selector)
    assert not uses_trigger(parse_selector("client-broker:coordinator"))
    assert isinstance(parse_selector("broker-ledger:trigger"), LinkSelector)
    with pytest.raises(SelectorError, match="random, coordinator or trigger"):
        parse_selector("client-broker:nope")
    with pytest.raises(SelectorError):
        parse_selector("broker-broker:trigger")
    locator = FakeLocator({0: "pulsar://127.0.0.1:10000", 1: "pulsar://127.0.0.1:10002"})
    for seed in range(5):
        c = ctx(seed, aim=Aim("1:42", ()), coordinator_brokers=locator.coordinator_brokers)
        assert resolve_links(selector, c) == (LinkEnd("client-broker-2", Stream.UPSTREAM),)
    # nothing seen: a random coordinator's
    c = ctx(3, coordinator_brokers=locator.coordinator_brokers)
    assert resolve_links(selector, c)[0].proxy in ("client-broker-0", "client-broker-2")


def test_links_every_broker_shares_resolve_for_each_broker() -> None:
    """The pulsar target: one link into each broker and one into the bookie, shared by every broker."""
    import dataclasses

    from harness.target import EVERY_BROKER, LinkInfo

    base = cluster_info(2)
    own = [link for link in base.links if link.kind in (LinkKind.CLIENT_BROKER, LinkKind.BROKER_METADATA)]
    shared = [LinkInfo("brokers-broker-0", LinkKind.BROKER_BROKER, EVERY_BROKER, "broker-0", "a:1", "b:1"),
              LinkInfo("brokers-broker-1", LinkKind.BROKER_BROKER, EVERY_BROKER, "broker-1", "a:2", "b:2"),
              LinkInfo("brokers-ledger", LinkKind.BROKER_LEDGER, EVERY_BROKER, "ledger", "a:3", "b:3")]
    pulsar = dataclasses.replace(base, links=(*own, *shared))

    def links(text: str) -> tuple[LinkEnd, ...]:
        sel = parse_selector(text)
        assert isinstance(sel, (LinkSelector, ServiceSelector))
        return resolve_links(sel, ctx(cluster=pulsar))

    assert set(links("broker-broker:0-1")) == {LinkEnd("brokers-broker-1", Stream.UPSTREAM),
                                               LinkEnd("brokers-broker-0", Stream.DOWNSTREAM)}
    assert {e.proxy for e in links("broker-broker:random")} == {"brokers-broker-0", "brokers-broker-1"}
    assert links("broker-ledger:random") == (LinkEnd("brokers-ledger", Stream.UPSTREAM),)
    assert {e.proxy for e in isolation_ends(pulsar, "broker-1")} == {
        "client-broker-1", "broker-1-metadata", "brokers-broker-1"}


def test_broker_trigger_is_the_owner_of_a_segment_the_triggering_transaction_is_open_on() -> None:
    """`broker:trigger`: where the transaction's commit lands (its markers, its acks' commit)."""
    from faults.resolution import Aim
    from faults.selectors import uses_coordinator, uses_trigger

    selector = parse_selector("broker:trigger")
    assert selector == ServiceSelector("broker:trigger", ServiceClass.BROKER, Index(Pick.OWNER))
    assert uses_trigger(selector) and uses_coordinator(selector)
    a, b = "persistent://public/txnbench/a", "persistent://public/txnbench/b"
    aim = Aim("1:42", ((a, f"{a}-partition-1"), (b, None)))
    locator = FakeLocator({}, owners={f"{a}-partition-1": "pulsar://127.0.0.1:10002",
                                      b: "pulsar://127.0.0.1:10001"})
    chosen = {resolve_service(selector, ctx(seed, aim=aim, owner_of=locator.owner_broker)).name
              for seed in range(20)}
    assert chosen == {"broker-1", "broker-2"}, "the owners of the partition and of the topic, and only those"
    # a busy owner is not taken; an owner that cannot be looked up is skipped
    assert {resolve_service(selector, ctx(seed, aim=aim, owner_of=locator.owner_broker,
                                          busy=frozenset({"service:broker-2"}))).name
            for seed in range(10)} == {"broker-1"}
    gone = FakeLocator({}, owners={b: "pulsar://127.0.0.1:10001"})
    assert {resolve_service(selector, ctx(seed, aim=aim, owner_of=gone.owner_broker)).name
            for seed in range(10)} == {"broker-1"}
    # the trigger saw nothing, or no owner answered: a random free broker, as `broker:random`
    assert {resolve_service(selector, ctx(seed, owner_of=locator.owner_broker)).name
            for seed in range(30)} == {"broker-0", "broker-1", "broker-2"}
    assert resolve_service(selector, ctx(1, aim=aim, owner_of=FakeLocator({}).owner_broker,
                                         busy=frozenset({"service:broker-0", "service:broker-1"}))).name \
        == "broker-2"
