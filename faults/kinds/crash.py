"""crash: a power loss of a store (kill -9 with a write in flight, what it never fsynced lost or torn),
started again when healed; faults/README.md, "Power-loss crashes"."""

from __future__ import annotations

from types import MappingProxyType

from faults.actions import CrashAction
from faults.environment import Capability
from faults.kinds.base import Draw, Kind, Param, one_service, through_processes
from faults.selectors import ServiceSelector
from harness.history.schema import FaultEffect
from harness.target import CrashAim

KIND = Kind(
    "crash", "power-loss crash (LazyFS-like): kill -9 while the store has a write in flight, lose or "
             "tear what it never fsynced (never what it acknowledged); start it again when healed",
    (ServiceSelector,), lambda _p: "ledger", one_service, through_processes(CrashAction),
    # a power loss matters where a process keeps a log: the two stores (a broker loses nothing)
    Draw(("ledger", "metadata")),
    MappingProxyType({"aim_ms": Param(2000, "how long to wait for the moment `aim` names before the kill", 0,
                                      10_000),
                      "aim": Param(CrashAim.WRITE.value, "write: at a log write in flight; crash-loop: that, "
                                   "then start the store and crash it again as it creates its next log "
                                   "file (its first write after the start), before that file's header is "
                                   "durable",
                                   choices=tuple(a.value for a in CrashAim))}),
    # a crash-loop starts the store once between its two crashes
    needs=frozenset({Capability.PROCESSES, Capability.STORE_FILES}), waits_healthy_on_heal=True, waits_healthy_on_inject=True,
    effects=frozenset({FaultEffect.STOPS}))
