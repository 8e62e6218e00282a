"""partition: cut links, both ways (the proxies disabled) or one way (one stream dropped)."""

from __future__ import annotations

from types import MappingProxyType

from faults.actions import PartitionAction
from faults.environment import Capability
from faults.kinds.base import (
    ISOLATED_POOL,
    LINK_POOL,
    NETWORK_TARGETS,
    Draw,
    Kind,
    direction,
    links,
    through_network,
)
from faults.selectors import Direction

KIND = Kind(
    "partition", "cut links: disable the proxies (both ways) or drop one stream (timeout 0)",
    NETWORK_TARGETS, lambda _p: "link:random", links, through_network(PartitionAction),
    Draw(LINK_POOL + ISOLATED_POOL,
         params=lambda rng: {"direction": rng.choice(("both", "both", "inbound", "outbound"))}),
    MappingProxyType({"direction": direction(Direction.BOTH)}), needs=frozenset({Capability.NETWORK}), network=True)
