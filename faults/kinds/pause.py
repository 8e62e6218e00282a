"""pause: SIGSTOP a process (it holds its connections and sessions, and answers nothing); SIGCONT heals."""

from __future__ import annotations

from faults.actions import PauseAction
from faults.environment import Capability
from faults.kinds.base import PROCESS_POOL, Draw, Kind, one_service, through_processes
from faults.selectors import ServiceSelector
from harness.history.schema import FaultEffect

KIND = Kind(
    "pause", "SIGSTOP a process; SIGCONT when healed",
    (ServiceSelector,), lambda _p: "process:random", one_service, through_processes(PauseAction),
    Draw(PROCESS_POOL, aimed=("broker:trigger",)),
    needs=frozenset({Capability.PROCESSES}), effects=frozenset({FaultEffect.STOPS}))
