"""From a planned fault to a `Fault`: its targets chosen now, its parameters completed.

Resolution runs at injection time, because what a selector means changes during a
run: which broker hosts a coordinator, which segments are active, which processes
are up and which links other faults hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from faults import kinds
from faults.kinds import FaultKind
from faults.model import Fault
from faults.schedule import PlannedFault
from faults.selectors import (
    ClientsSelector,
    LinkEnd,
    LinkSelector,
    LoadSelector,
    NoTarget,
    ResolveContext,
    SegmentSelector,
    ServiceSelector,
    Target,
    TopicSelector,
    TopicTarget,
    resolve_adjacent_pair,
    resolve_links,
    resolve_load,
    resolve_segment,
    resolve_service,
    resolve_topic,
)
from harness.toxiproxy.model import Stream
from harness.txn_paths import TxnPath


def resolve_fault(planned: PlannedFault, ctx: ResolveContext, *, txn_path: TxnPath, for_s: float,
                  settings: Mapping[str, Any]) -> Fault:
    """Choose the targets. Raises SelectorError (NoTarget when nothing is free right now)."""
    targets = _targets(planned, ctx, txn_path)
    params = dict(planned.params)
    if planned.kind is FaultKind.SLOW_PARTICIPANT and params.get("latency_ms") is None:
        params["latency_ms"] = kinds.slow_participant_latency_ms(settings)
    busy = [t for t in targets if t.resource in ctx.busy]
    if busy:
        raise NoTarget(f"{', '.join(map(str, busy))} is held by another fault")
    return Fault(fault_id=planned.fault_id, kind=planned.kind, selector=planned.target, targets=targets,
                 params=MappingProxyType(params), for_s=for_s, healable=planned.healable,
                 source=planned.source)


def _targets(planned: PlannedFault, ctx: ResolveContext, txn_path: TxnPath) -> tuple[Target, ...]:
    selector = planned.selector
    kind = planned.kind
    if ctx.aim is not None and kind in (FaultKind.TERMINATE, FaultKind.SPLIT, FaultKind.MERGE):
        ctx = dataclasses.replace(ctx, aim=ctx.aim.writes_only())
    spec = kinds.spec(kind)
    if spec.network:
        assert isinstance(selector, (ServiceSelector, LinkSelector, ClientsSelector))
        return resolve_links(selector, ctx)
    if kind is FaultKind.CLIENT_KILL:
        assert isinstance(selector, LoadSelector)
        return (resolve_load(selector),)
    if spec.process_fault:
        assert isinstance(selector, ServiceSelector)
        return (resolve_service(selector, ctx),)
    if kind is FaultKind.SLOW_PARTICIPANT:
        assert isinstance(selector, ServiceSelector)
        broker = resolve_service(selector, ctx).name
        link = next((link for link in ctx.cluster.links if link.source == broker and link.dest == "metadata"), None)
        if link is None:
            raise NoTarget(f"{broker} has no proxied link to the metadata store")
        return (LinkEnd(link.name, Stream.UPSTREAM),)
    assert isinstance(selector, (TopicSelector, SegmentSelector))
    if kind is FaultKind.MERGE:
        return resolve_adjacent_pair(selector, ctx)
    if kind is FaultKind.UNLOAD and isinstance(selector, TopicSelector):
        return (resolve_topic(selector, ctx),)     # the whole topic: every partition or segment
    if kind is FaultKind.TERMINATE and txn_path is not TxnPath.V5 and isinstance(selector, TopicSelector):
        topic: TopicTarget = resolve_topic(selector, ctx)
        return (topic,)
    return (resolve_segment(selector, ctx),)
