"""A fault's resolved targets back to a fixed selector: the inverse of faults/selectors.py's resolution.

Why: a selector with a random part (`broker:random`, `coordinator`, `link:random`, `topic:random`,
`load:random`) is resolved at injection time with a generator seeded by the fault's id and the set
of resources busy with other faults, so a schedule with one fault fewer numbers its faults anew and
draws other targets. The shrink re-runs the faults the run really had, so it names what each one
hit: `broker-1` becomes `broker:1`, the proxy `client-broker-0` becomes `client-broker:0`, the topic
`persistent://.../<run>-ap-2` becomes `topic:<its index in the topology>` (a re-run's topics carry
its own run id, the index is stable).

Kept as written: selectors that are fixed already (`broker:0`, `metadata`, `clients`,
`coordinator:2`), and the aimed ones (`...:trigger`) of a fault that keeps its trigger: they name
what the transaction open at that moment touches, which is the point of the trigger, not chance.
A target that cannot be named back (a replacement load worker, a link every broker shares) keeps
its selector, and `pinned` says so; the re-run may then choose another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faults.resolution import parse_segment_name
from faults.selectors import (
    ClientsSelector,
    DefaultSelector,
    LinkSelector,
    LoadSelector,
    Pick,
    SegmentSelector,
    SelectorError,
    ServiceClass,
    ServiceSelector,
    TopicSelector,
    parse_selector,
    uses_trigger,
)
from harness.target import LinkKind

_BROKER = re.compile(r"broker-(\d+)")
_LINK_NAMES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"client-broker-(\d+)"), "client-broker:{0}"),
    (re.compile(r"broker-(\d+)-metadata"), "broker-metadata:{0}"),
    (re.compile(r"broker-(\d+)-ledger"), "broker-ledger:{0}"),
    (re.compile(r"broker-(\d+)-broker-(\d+)"), "broker-broker:{0}-{1}"),
)


@dataclass(frozen=True)
class Pinned:
    """The selector a re-run uses, and whether it names exactly what the run hit."""

    target: str
    pinned: bool
    note: str = ""


def pin_target(selector: str, targets: Sequence[str], *, network: bool, keeps_trigger: bool,
               topics: Sequence[str] = (), effect: Mapping[str, Any] | None = None) -> Pinned:
    """A fixed selector for a fault planned as `selector` that resolved to `targets`.

    Args:
        selector: the planned selector text (after `random` became the kind's default).
        targets: what it resolved to (the history's `extra.targets`).
        network: the kind acts on proxies (targets are proxy names, a service selector isolates it).
        keeps_trigger: the fault keeps its trigger in the re-run (aimed selectors stay aimed).
        topics: the run's topics in topology order (topic and segment targets become indexes).
        effect: the injection's `extra.effect` (client-kill: the worker it killed).
    """
    try:
        parsed = parse_selector(selector)
    except SelectorError:
        return Pinned(selector, False, "not a selector this txnbench parses; kept as written")
    if uses_trigger(parsed) and keeps_trigger:
        return Pinned(selector, True, "aimed at what its trigger saw")
    if isinstance(parsed, (ClientsSelector, DefaultSelector)):
        return Pinned(selector, True)
    if isinstance(parsed, ServiceSelector):
        return _service(parsed, targets, network)
    if isinstance(parsed, LinkSelector):
        return _link(parsed, targets)
    if isinstance(parsed, (TopicSelector, SegmentSelector)):
        return _topic(parsed, targets, topics)
    if isinstance(parsed, LoadSelector):
        if parsed.worker is not None:
            return Pinned(selector, True)
        writer = str((effect or {}).get("writer") or "")
        match = re.fullmatch(r"w(\d+)", writer)
        if match:
            return Pinned(f"load:{match.group(1)}", True)
        return Pinned(selector, False, f"the worker it killed ({writer or 'unknown'}) has no load:<i> name")
    return Pinned(selector, False, "kept as written")


def _fixed(selector: ServiceSelector) -> bool:
    """Names one service the same way in every run (a coordinator id counts: it is not drawn)."""
    if selector.service in (ServiceClass.METADATA, ServiceClass.LEDGER):
        return True
    return selector.service is ServiceClass.BROKER and (
        selector.broker.pick is Pick.FIXED or (selector.broker.pick is Pick.COORDINATOR
                                               and selector.broker.value is not None))


def _service(selector: ServiceSelector, targets: Sequence[str], network: bool) -> Pinned:
    if _fixed(selector):
        return Pinned(selector.text, True)
    if not network:   # a process fault's target is the service's name
        if len(targets) == 1:
            named = _service_selector(targets[0])
            if named is not None:
                return Pinned(named, True)
        return Pinned(selector.text, False, f"its target {list(targets)} is not one broker or store")
    # isolating a service (or slow-participant's one link): the proxies all name that service
    common = set.intersection(*({int(i) for i in _BROKER.findall(name)} for name in targets)) if targets else set()
    if len(common) == 1:
        return Pinned(f"broker:{common.pop()}", True)
    for store in ("metadata", "ledger"):
        if targets and all(store in name for name in targets) and not common:
            return Pinned(store, True)
    return Pinned(selector.text, False, f"the proxies {list(targets)} name no single service")


def _service_selector(name: str) -> str | None:
    match = re.fullmatch(r"broker-(\d+)", name)
    if match:
        return f"broker:{match.group(1)}"
    return name if name in ("metadata", "ledger") else None


def _link(selector: LinkSelector, targets: Sequence[str]) -> Pinned:
    fixed = selector.first.pick is Pick.FIXED and (selector.second is None or selector.second.pick is Pick.FIXED)
    if selector.kind is not None and fixed:
        return Pinned(selector.text, True)
    if selector.kind is LinkKind.BROKER_BROKER:
        brokers = sorted({int(i) for name in targets for i in _BROKER.findall(name)})
        if len(brokers) == 2:
            return Pinned(f"broker-broker:{brokers[0]}-{brokers[1]}", True)
        return Pinned(selector.text, False, f"the proxies {list(targets)} name no pair of brokers")
    if len(targets) == 1:
        for pattern, form in _LINK_NAMES:
            match = pattern.fullmatch(targets[0])
            if match and (selector.kind is None or form.startswith(selector.kind.value + ":")):
                return Pinned(form.format(*match.groups()), True)
    return Pinned(selector.text, False, f"the proxy {list(targets)} has no per-broker name (a link every "
                  "broker shares is the only one of its kind)")


def _topic(selector: TopicSelector | SegmentSelector, targets: Sequence[str], topics: Sequence[str]) -> Pinned:
    family = "segment" if isinstance(selector, SegmentSelector) else "topic"
    if selector.topic is not None and not selector.aimed:
        return Pinned(selector.text, True)
    indexes = {index for name in targets if (index := topic_index(name, topics)) is not None}
    if len(indexes) == 1:
        index = indexes.pop()
        exact = all(name == topics[index] for name in targets)
        return Pinned(f"{family}:{index}", True, "" if exact else
                      "the topic is fixed; which of its partitions or active segments is drawn again")
    return Pinned(selector.text, False, f"{list(targets)} is not one topic of the run's topology")


def topic_index(name: str, topics: Sequence[str]) -> int | None:
    """The index in `topics` of the topic `name` is, or is a partition or segment of."""
    segment = parse_segment_name(name)
    owner = segment.topic if segment is not None else re.sub(r"-partition-\d+$", "", name)
    for index, topic in enumerate(topics):
        if owner == topic or name == topic:
            return index
    return None
