"""partition: cut links, both ways (the proxies disabled) or one way (one stream dropped)."""

from __future__ import annotations

from types import MappingProxyType

from faults.actions import PartitionAction
from faults.environment import Capability
from faults.kinds import base
from faults.kinds.base import Draw, Kind
from faults.resolution import Direction
from harness.history.schema import FaultEffect

KIND = Kind(
    "partition", "cut links: disable the proxies (both ways) or drop one stream (timeout 0)",
    base.NETWORK_TARGETS, lambda _p: "link:random", base.links, base.through_network(PartitionAction),
    Draw(base.LINK_POOL + base.ISOLATED_POOL,
         params=lambda rng: {"direction": rng.choice(("both", "both", "inbound", "outbound"))}),
    MappingProxyType({"direction": base.direction(Direction.BOTH)}), needs=frozenset({Capability.NETWORK}), network=True,
    effects=frozenset({FaultEffect.CUTS}))
