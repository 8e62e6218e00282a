"""restart: a graceful stop (SIGTERM: the broker unloads its topics), started again when healed."""

from __future__ import annotations

from faults.actions import RestartAction
from faults.environment import Capability
from faults.kinds.base import PROCESS_POOL, Draw, Kind, one_service, through_processes
from faults.selectors import ServiceSelector
from harness.history.schema import FaultEffect

KIND = Kind(
    "restart", "stop a process gracefully (SIGTERM: it unloads its topics); start it when healed",
    (ServiceSelector,), lambda _p: "broker:random", one_service, through_processes(RestartAction),
    # half of the drawn restarts start again at once: only the graceful hand-over
    Draw(PROCESS_POOL, aimed=("coordinator:trigger", "broker:trigger"),
         duration=lambda for_s, rng, _timeout: 0.0 if rng.random() < 0.5 else for_s),
    needs=frozenset({Capability.PROCESSES}), waits_healthy_on_heal=True, effects=frozenset({FaultEffect.STOPS}))
