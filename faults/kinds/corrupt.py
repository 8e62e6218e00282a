"""corrupt: a bit of a store's durable file flipped; its recovery must refuse it, naming the damage;
faults/README.md, "Disk corruption"."""

from __future__ import annotations

from types import MappingProxyType

from faults.actions import CorruptAction
from faults.environment import Capability
from faults.kinds.base import Draw, Kind, Param, one_service, through_processes
from faults.selectors import ServiceSelector
from harness.history.schema import FaultEffect
from harness.target import DamagedFile

KIND = Kind(
    "corrupt", "disk corruption: kill -9 a store, flip one bit of a durable file its recovery reads "
               "whole, start it: it must refuse, naming the damage; healed by flipping the bit back",
    (ServiceSelector,), lambda _p: "ledger", one_service, through_processes(CorruptAction),
    # not drawn unless named: it came after seeds were drawn for the shipped scenarios (in the pool it
    # would change every seed's draw, and what their self-test figures measured)
    Draw(("ledger", "metadata"), by_default=False),
    MappingProxyType({"file": Param(DamagedFile.LOG.value, "log (a sealed log file, not the newest) or "
                                    "snapshot (the metadata store's newest)",
                                    choices=tuple(f.value for f in DamagedFile))}),
    needs=frozenset({Capability.PROCESSES, Capability.STORE_FILES}), waits_healthy_on_heal=True, effects=frozenset({FaultEffect.STOPS}))
