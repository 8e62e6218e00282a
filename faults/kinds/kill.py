"""kill: kill -9 a process; its heal starts it again and waits until it is healthy."""

from __future__ import annotations

from faults.actions import KillAction
from faults.environment import Capability
from faults.kinds.base import PROCESS_POOL, Draw, Kind, one_service, through_processes
from faults.selectors import ServiceSelector
from harness.history.schema import FaultEffect

KIND = Kind(
    "kill", "kill -9 a process; start it again when healed",
    (ServiceSelector,), lambda _p: "process:random", one_service, through_processes(KillAction),
    Draw(PROCESS_POOL, aimed=("coordinator:trigger", "broker:trigger")),
    needs=frozenset({Capability.PROCESSES}), waits_healthy_on_heal=True, effects=frozenset({FaultEffect.STOPS}))
