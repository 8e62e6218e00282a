"""client-isolate: every client cut off from every broker for longer than the transaction timeout, so
the open transactions are abandoned and the coordinators' timeout path runs."""

from __future__ import annotations

from types import MappingProxyType

from faults.actions import PartitionAction
from faults.environment import Capability
from faults.kinds.base import Draw, Kind, Refusal, direction, links, through_network
from faults.resolution import Direction
from faults.selectors import ClientsSelector
from harness.config import RunConfig
from harness.history.schema import FaultEffect

ISOLATE_OVER_S = (2.0, 6.0)
"""How much longer than the transaction timeout a drawn client-isolate is held (uniform)."""


def _check(for_s: float, config: RunConfig) -> None:
    """Held within the timeout, the clients would come back in time to end what they had open."""
    timeout = config.workload.txn_timeout_s
    if for_s <= timeout:
        raise Refusal("for_s", f"client-isolate is held {for_s:g} s, not longer than the transaction timeout "
                      f"({timeout:g} s): the clients would return before the coordinator has to abort "
                      "what they abandoned", f"raise for_s above {timeout:g} or lower workload.txn_timeout_s")


KIND = Kind(
    "client-isolate", "cut every client off from every broker (all client-broker links) for "
                      "longer than the transaction timeout: the open transactions are abandoned",
    (ClientsSelector,), lambda _p: "clients", links, through_network(PartitionAction),
    Draw(("clients",), duration=lambda _for_s, rng, timeout: round(timeout + rng.uniform(*ISOLATE_OVER_S), 2),
         cap=lambda spec: spec.isolations),
    MappingProxyType({"direction": direction(Direction.BOTH)}), needs=frozenset({Capability.NETWORK}),
    network=True, check_entry=_check, effects=frozenset({FaultEffect.ISOLATES_CLIENTS}))
