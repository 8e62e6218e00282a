"""Target selectors: the grammar of a scenario's `target` strings, parsed and checked.

Theory of operation. A selector is parsed once, when the timeline is planned, into a
frozen value (`ServiceSelector`, `LinkSelector`, `TopicSelector`, `SegmentSelector`);
a syntax error is a `SelectorError` whose message says what is accepted. Which
selectors a fault kind takes is decided by `faults.kinds`; how one resolves against the
cluster, by `faults.resolution`; this module only knows the grammar:

    random                        the kind's default (see faults.kinds)
    broker | broker:random        a random broker
    broker:<i>                    broker i
    broker:coordinator            the broker hosting a random transaction coordinator
    coordinator | coordinator:<n> the same; coordinator n (v4: assign partition n, v5: tc n)
    metadata | ledger             the metadata store, the ledger store
    process:random                a random broker or store
    client-broker:<b>             the link from clients to broker b
    broker-metadata:<b>           broker b's link to the metadata store
    broker-ledger:<b>             broker b's link to the ledger store
        <b> is <i>, random, coordinator or trigger (the broker hosting the coordinator
        of the transaction whose operation set off the fault's trigger: with
        `client-broker:trigger` and a `txn-commit` trigger, the link its END_TXN is on)
    broker-broker:<i>-<j>         the links between brokers i and j (both proxies)
    broker-broker:<i>             every link between broker i and its peers
    broker-broker:random          the links between a random pair of brokers
    link:random                   one random link of any kind
    topic:random | topic:<k>      a topic of the run's topology (k: index in it)
    segment:random | segment:<k>  a v5 segment (v4: a partition, or the topic) of a
                                  random topic or of topic k, chosen among the active ones
    clients                       the client side of every client-broker link: isolating it
                                  cuts every client off from every broker
    load:random | load:<i>        a Locust worker of the load (w<i>), killed by client-kill
    coordinator:trigger           the broker hosting the coordinator of the transaction
    topic:trigger                 whose operation set off the fault's trigger; a topic, a
    segment:trigger               segment (v4: partition) that transaction is open on
                                  (faults/triggers.py); random ones when the trigger
                                  saw none
    broker:trigger                the broker owning a segment (v4: partition) that
                                  transaction is open on: where its commit's markers, or its
                                  acks' commit, land; a random broker when the trigger saw none
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum

from harness.target import LinkKind

RANDOM = "random"
COORDINATOR = "coordinator"
TRIGGER = "trigger"


class SelectorError(ValueError):
    """A selector that cannot be parsed or resolved; the message names the fix."""


class NoTarget(SelectorError):
    """A well-formed selector that matches nothing right now (all busy, none running)."""


# ---- parsed selectors ---------------------------------------------------------------------------


class Pick(Enum):
    """How one index of a selector is chosen."""

    FIXED = "fixed"
    RANDOM = "random"
    COORDINATOR = "coordinator"
    TRIGGER = "trigger"           # the coordinator of the transaction that set off the trigger
    OWNER = "owner"               # the owner of a segment or partition that transaction is open on


@dataclass(frozen=True)
class Index:
    pick: Pick
    value: int | None = None      # the broker index (FIXED) or the coordinator id (COORDINATOR)

    def __str__(self) -> str:
        if self.pick is Pick.FIXED:
            return str(self.value)
        if self.pick is Pick.COORDINATOR and self.value is not None:
            return f"{COORDINATOR}:{self.value}"
        if self.pick is Pick.TRIGGER:
            return f"{COORDINATOR}:{TRIGGER}"
        if self.pick is Pick.OWNER:
            return TRIGGER
        return self.pick.value


ANY = Index(Pick.RANDOM)


class ServiceClass(StrEnum):
    BROKER = "broker"
    METADATA = "metadata"
    LEDGER = "ledger"
    ANY = "process"


@dataclass(frozen=True)
class DefaultSelector:
    """`random`: the fault kind decides (`Kind.default_target`, faults/kinds/)."""

    text: str = RANDOM


@dataclass(frozen=True)
class ServiceSelector:
    text: str
    service: ServiceClass
    broker: Index = ANY           # used when service is BROKER


@dataclass(frozen=True)
class LinkSelector:
    text: str
    kind: LinkKind | None         # None: any link (`link:random`)
    first: Index = ANY            # the broker of the link (broker-broker: the first broker)
    second: Index | None = None   # broker-broker: the peer; None = every peer (or random pair)


@dataclass(frozen=True)
class TopicSelector:
    text: str
    topic: int | None = None      # index in the topology; None = random
    aimed: bool = False           # `topic:trigger`: a topic the triggering transaction is open on


@dataclass(frozen=True)
class SegmentSelector:
    text: str
    topic: int | None = None
    aimed: bool = False           # `segment:trigger`: a segment the triggering transaction is open on


@dataclass(frozen=True)
class ClientsSelector:
    """`clients`: the client side of every client-broker link (a network fault isolates it)."""

    text: str = "clients"


@dataclass(frozen=True)
class LoadSelector:
    """`load:random` / `load:<i>`: one Locust worker of the load (writer w<i>)."""

    text: str
    worker: int | None = None     # None: random, chosen by the load process among the running ones


Selector = (DefaultSelector | ServiceSelector | LinkSelector | TopicSelector | SegmentSelector
            | ClientsSelector | LoadSelector)

_LINK_PREFIXES: Mapping[str, LinkKind] = {
    "client-broker": LinkKind.CLIENT_BROKER,
    "broker-metadata": LinkKind.BROKER_METADATA,
    "broker-ledger": LinkKind.BROKER_LEDGER,
    "broker-broker": LinkKind.BROKER_BROKER,
}
SYNTAX_HELP = ("use e.g. broker:random, broker:0, coordinator, metadata, ledger, process:random, "
               "client-broker:random, broker-metadata:1, broker-ledger:coordinator, broker-broker:0-1, "
               "link:random, topic:random, segment:random, coordinator:trigger, client-broker:trigger, topic:trigger, "
               "segment:trigger, broker:trigger, clients, load:random")


def _index(text: str, whole: str, *, coordinator: bool = True, trigger: bool = False) -> Index:
    if text == RANDOM:
        return ANY
    if text == COORDINATOR and coordinator:
        return Index(Pick.COORDINATOR)
    if text == TRIGGER and trigger:
        return Index(Pick.TRIGGER)
    if re.fullmatch(r"\d{1,3}", text):
        return Index(Pick.FIXED, int(text))
    allowed = ("a broker number, random, coordinator or trigger" if trigger else
               "a broker number, random" + (" or coordinator" if coordinator else ""))
    raise SelectorError(f"{whole!r}: {text!r} is not {allowed}")


def _topic_index(text: str, whole: str) -> int | None:
    if text == RANDOM:
        return None
    if re.fullmatch(r"\d{1,4}", text):
        return int(text)
    raise SelectorError(f"{whole!r}: {text!r} is not random or a topic number (0, 1, ...)")


def parse_selector(text: str) -> Selector:
    """Parse a `target` string; raises SelectorError naming what is accepted."""
    if not isinstance(text, str) or not text.strip():
        raise SelectorError(f"an empty target; {SYNTAX_HELP}")
    whole = text.strip()
    head, sep, tail = whole.partition(":")
    if sep and not tail:
        raise SelectorError(f"{whole!r} ends with ':'; {SYNTAX_HELP}")
    if whole == RANDOM:
        return DefaultSelector()
    if head == "broker":
        if tail == TRIGGER:
            return ServiceSelector(whole, ServiceClass.BROKER, Index(Pick.OWNER))
        return ServiceSelector(whole, ServiceClass.BROKER, _index(tail, whole) if sep else ANY)
    if head == COORDINATOR:
        if not sep:
            return ServiceSelector(whole, ServiceClass.BROKER, Index(Pick.COORDINATOR))
        if re.fullmatch(r"\d{1,4}", tail):
            return ServiceSelector(whole, ServiceClass.BROKER, Index(Pick.COORDINATOR, int(tail)))
        if tail == RANDOM:
            return ServiceSelector(whole, ServiceClass.BROKER, Index(Pick.COORDINATOR))
        if tail == TRIGGER:
            return ServiceSelector(whole, ServiceClass.BROKER, Index(Pick.TRIGGER))
        raise SelectorError(f"{whole!r}: after 'coordinator:' give a coordinator id (0, 1, ...), random "
                            "or trigger")
    if head in ("metadata", "ledger"):
        if sep:
            raise SelectorError(f"{whole!r}: there is one {head} store; write just {head!r}")
        return ServiceSelector(whole, ServiceClass(head))
    if head == "process":
        if tail != RANDOM:
            raise SelectorError(f"{whole!r}: write process:random, or name the service (broker:0, metadata, ledger)")
        return ServiceSelector(whole, ServiceClass.ANY)
    if head == "link":
        if tail != RANDOM:
            raise SelectorError(f"{whole!r}: write link:random, or name the link kind "
                                "(client-broker:0, broker-metadata:1, broker-ledger:0, broker-broker:0-1)")
        return LinkSelector(whole, None)
    if head in _LINK_PREFIXES:
        kind = _LINK_PREFIXES[head]
        if not sep:
            return LinkSelector(whole, kind)
        if kind is LinkKind.BROKER_BROKER:
            first_text, dash, second_text = tail.partition("-")
            first = _index(first_text, whole, coordinator=False)
            if not dash:
                return LinkSelector(whole, kind, first, None)
            if first.pick is Pick.RANDOM:
                raise SelectorError(f"{whole!r}: write broker-broker:random or broker-broker:<i>-<j>")
            second = _index(second_text, whole, coordinator=False)
            if second.pick is Pick.FIXED and second.value == first.value:
                raise SelectorError(f"{whole!r}: a broker has no link to itself; name two brokers")
            return LinkSelector(whole, kind, first, second)
        return LinkSelector(whole, kind, _index(tail, whole, trigger=True))
    if head == "topic":
        if tail == TRIGGER:
            return TopicSelector(whole, None, aimed=True)
        return TopicSelector(whole, _topic_index(tail, whole) if sep else None)
    if head == "clients":
        if sep:
            raise SelectorError(f"{whole!r}: write just 'clients' (every client-broker link)")
        return ClientsSelector(whole)
    if head == "load":
        if not sep or tail == RANDOM:
            return LoadSelector(whole)
        if re.fullmatch(r"\d{1,3}", tail):
            return LoadSelector(whole, int(tail))
        raise SelectorError(f"{whole!r}: write load:random or load:<i> (the Locust worker w<i>)")
    if head == "segment":
        if tail == TRIGGER:
            return SegmentSelector(whole, None, aimed=True)
        return SegmentSelector(whole, _topic_index(tail, whole) if sep else None)
    raise SelectorError(f"{whole!r} is not a target; {SYNTAX_HELP}")


def uses_trigger(selector: Selector) -> bool:
    """Whether the selector aims at what the fault's trigger saw (`...:trigger`), so the
    fault needs a trigger."""
    if isinstance(selector, ServiceSelector):
        return selector.broker.pick in (Pick.TRIGGER, Pick.OWNER)
    if isinstance(selector, LinkSelector):
        return selector.first.pick is Pick.TRIGGER
    return isinstance(selector, (TopicSelector, SegmentSelector)) and selector.aimed


def uses_coordinator(selector: Selector) -> bool:
    if isinstance(selector, ServiceSelector):
        return selector.broker.pick in (Pick.COORDINATOR, Pick.TRIGGER, Pick.OWNER) \
            and selector.service is ServiceClass.BROKER
    if isinstance(selector, LinkSelector):
        return selector.first.pick in (Pick.COORDINATOR, Pick.TRIGGER)
    return False


def check_against_cluster(selector: Selector, brokers: int, topics: int | None) -> None:
    """Fixed indexes must exist: broker numbers below `brokers`, topic numbers below `topics`."""
    indexes: list[Index] = []
    if isinstance(selector, ServiceSelector) and selector.service is ServiceClass.BROKER:
        indexes.append(selector.broker)
    if isinstance(selector, LinkSelector):
        indexes.append(selector.first)
        if selector.second is not None:
            indexes.append(selector.second)
        if selector.kind is LinkKind.BROKER_BROKER and brokers < 2:
            raise SelectorError(f"{selector.text!r}: broker-to-broker links need 2 or more brokers "
                                f"and the cluster has {brokers}; raise cluster.brokers")
    for index in indexes:
        if index.pick is Pick.FIXED and index.value is not None and index.value >= brokers:
            raise SelectorError(f"{selector.text!r}: there is no broker {index.value}; the cluster has "
                                f"broker{'s 0-' + str(brokers - 1) if brokers > 1 else ' 0'}")
    if isinstance(selector, (TopicSelector, SegmentSelector)) and selector.topic is not None \
            and topics is not None and selector.topic >= topics:
        raise SelectorError(f"{selector.text!r}: there is no topic {selector.topic}; the run has "
                            f"{topics} topic(s), numbered from 0")
