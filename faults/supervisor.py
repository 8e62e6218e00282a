"""The supervisor: a server that exits on its own during the faults is recorded and started again.

Theory of operation. A real cluster runs its servers under a supervisor (systemd, Kubernetes)
that starts a crashed one again; some servers exit by design when a fault takes away what they
need. A BookKeeper bookie shuts itself down when it cannot register with ZooKeeper (seen on
Pulsar 4.0.8 after a metadata partition: "Couldn't register bookie with zookeeper, shutting
down"). Without a supervisor the rest of the run happens on a cluster without its bookie: no
write succeeds, the drain cannot read, and any anomaly that follows has no cause in the
history. So while the nemesis runs, every service it is not holding down itself is checked
every `CHECK_EVERY_S`; one seen down on `CONFIRM_CHECKS` checks in a row has exited on its own:

1. the exit is recorded as a `fault` op of kind `exit` (process `nemesis/supervisor`, the
   service as its target, `extra.source` "supervisor") so the checker and the report see a
   cause, as for a kill;
2. the service is started again with its original configuration (`ProcessControl.start`,
   which waits until it is ready), and the restart is recorded as the fault's `heal`;
3. at most `MAX_RESTARTS` restarts per service and run: a service that keeps exiting is
   broken, not faulted, and the nemesis then fails the run naming it.

A service held by a fault (a kill, a pause, a crash: its resource is busy) is never touched,
and while the supervisor restarts a service that service is busy for the nemesis too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from faults.resolution import ServiceTarget
from harness.history import HistoryRecorder, OpF
from harness.history.schema import FaultEffect
from harness.target import ProcessControl

CHECK_EVERY_S = 1.0
CONFIRM_CHECKS = 2          # seen down this many checks in a row: it exited (not a state in passing)
MAX_RESTARTS = 5            # per service and run
EXIT_KIND = "exit"          # the history `extra.kind` of a server's own exit
PROCESS = "nemesis/supervisor"


@dataclass
class SupervisorStats:
    """What the supervisor did in a run (the nemesis's report and manifest show it)."""

    exits: dict[str, int] = field(default_factory=dict)
    failed_restarts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"exits": dict(self.exits), "failed_restarts": list(self.failed_restarts)}


class Supervisor:
    """Checks the services, records each one's own exit and starts it again (module docstring).

    Args:
        control: the target's process control.
        services: the names of the services to watch.
        recorder: the nemesis's history writer.
        busy: the resources the nemesis's faults hold now (`service:<name>`: never touched).
        claim / release: mark a service's resource busy for the nemesis while it is restarted.
        say: one-line progress.
        fail: report a service that cannot be kept running (the nemesis fails the run).
    """

    def __init__(self, control: ProcessControl, services: Iterable[str], recorder: HistoryRecorder, *,
                 busy: Callable[[], frozenset[str]], claim: Callable[[str], bool],
                 release: Callable[[str], None], say: Callable[[str], None],
                 fail: Callable[[str], None]) -> None:
        self.control = control
        self.services = tuple(services)
        self.recorder = recorder
        self.busy = busy
        self.claim = claim
        self.release = release
        self.say = say
        self.fail = fail
        self.stats = SupervisorStats()
        self._down_checks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="supervisor", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Stop checking; waits (bounded) for a restart in progress to finish."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.wait(CHECK_EVERY_S):
            self.check_once()

    def check_once(self) -> list[str]:
        """One round over the services; the ones restarted (or tried) in it."""
        acted: list[str] = []
        busy = self.busy()
        for service in self.services:
            if self._stop.is_set():
                break
            resource = ServiceTarget(service).resource
            if resource in busy or self._running(service):
                self._down_checks.pop(service, None)
                continue
            seen = self._down_checks.get(service, 0) + 1
            self._down_checks[service] = seen
            if seen < CONFIRM_CHECKS or not self.claim(resource):
                continue
            try:
                self._restart(service)
            finally:
                self._down_checks.pop(service, None)
                self.release(resource)
            acted.append(service)
        return acted

    def _running(self, service: str) -> bool:
        try:
            return self.control.is_running(service)
        except Exception:   # a service the control does not know is nothing to supervise
            return True

    def _restart(self, service: str) -> None:
        count = self.stats.exits.get(service, 0) + 1
        self.stats.exits[service] = count
        extra: dict[str, Any] = {"kind": EXIT_KIND, "targets": [service], "params": {}, "selector": service,
                                 "fault_id": f"exit-{service}-{count}", "for_s": 0.0, "healable": True,
                                 "source": "supervisor", "effects": [FaultEffect.STOPS.value]}
        fault = self.recorder.invoke(PROCESS, OpF.FAULT, extra=extra)
        self.recorder.ok(fault)
        if count > MAX_RESTARTS:
            self.stats.failed_restarts.append(service)
            self.fail(f"{service} exited on its own {count} times; not started again (a service that keeps "
                      "exiting is broken, not faulted: see its log)")
            return
        self.say(f"supervisor: {service} exited on its own (not a fault of the scenario); starting it again")
        heal = self.recorder.invoke(PROCESS, OpF.HEAL, extra=extra)
        try:
            self.control.start(service)
        except Exception as err:
            self.stats.failed_restarts.append(service)
            self.recorder.info(heal, f"{type(err).__name__}: {err}")
            self.fail(f"{service} exited on its own and could not be started again: {type(err).__name__}: {err}")
            return
        self.recorder.ok(heal)
        self.say(f"supervisor: {service} started again")
