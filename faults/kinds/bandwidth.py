"""bandwidth: limit links' rate by a bandwidth toxic."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from faults.actions import ToxicAction
from faults.environment import Capability
from faults.kinds import base
from faults.kinds.base import Draw, Kind
from faults.model import Fault
from faults.resolution import Direction
from harness.toxiproxy.model import ToxicType


def _toxic(fault: Fault) -> Mapping[str, int]:
    return {"rate": int(fault.params["rate_kbps"])}


KIND = Kind(
    "bandwidth", "limit links' rate (bandwidth toxic)",
    base.NETWORK_TARGETS, lambda _p: "link:random", base.links,
    base.through_network(lambda network: ToxicAction(network, ToxicType.BANDWIDTH, _toxic)),
    Draw(base.LINK_POOL, params=lambda rng: {"rate_kbps": rng.choice((8, 32, 128, 512))}),
    MappingProxyType({"rate_kbps": base.Param(64, "KB per second (1 KB = 1000 bytes)", 0, 10_000_000),
                      "direction": base.direction(Direction.BOTH)}),
    needs=frozenset({Capability.NETWORK}), network=True)
