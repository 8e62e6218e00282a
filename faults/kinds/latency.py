"""latency: delay links by a latency toxic (with optional jitter)."""

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
    return {"latency": int(fault.params["latency_ms"]), "jitter": int(fault.params["jitter_ms"])}


KIND = Kind(
    "latency", "delay links (latency toxic, optional jitter)",
    base.NETWORK_TARGETS, lambda _p: "link:random", base.links,
    base.through_network(lambda network: ToxicAction(network, ToxicType.LATENCY, _toxic)),
    Draw(base.LINK_POOL + base.ISOLATED_POOL,
         params=lambda rng: {"latency_ms": rng.choice((20, 50, 100, 200, 500, 1000)),
                             "jitter_ms": rng.choice((0, 0, 20)),
                             "direction": rng.choice(("both", "inbound", "outbound"))}),
    MappingProxyType({"latency_ms": base.Param(200, "milliseconds added per chunk", 0, base.MAX_MS),
                      "jitter_ms": base.Param(0, "milliseconds of random variation", 0, base.MAX_MS),
                      "direction": base.direction(Direction.BOTH)}),
    needs=frozenset({Capability.NETWORK}), network=True)
