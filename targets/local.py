"""Process faults for a cluster whose every server is a local process we started.

Why one mixin: the embedded and the pulsar targets both keep their servers as
`ServiceProcess`es by name, and a kill, a graceful stop, a pause or a restart means
the same thing for each (signals by pid, waiting until the state is reached); only how a
stopped server starts again differs, which each target says in `restart_service`.
"""

from __future__ import annotations

import signal
import time

from targets.processes import ProcessState, ServiceProcess


class LocalProcessControl:
    """`ProcessControl` over `self.processes`; subclasses implement `restart_service`."""

    processes: dict[str, ServiceProcess]
    #: How long a graceful stop may take before SIGKILL (a JVM broker closing its topics needs more).
    stop_timeout_s: float = 10.0

    def restart_service(self, service: str) -> None:
        """Start a stopped service with its original configuration and wait until it is ready."""
        raise NotImplementedError

    def _proc(self, service: str) -> ServiceProcess:
        if service not in self.processes:
            raise KeyError(f"no service {service!r}; have {sorted(self.processes)}")
        return self.processes[service]

    def kill(self, service: str) -> None:
        self._proc(service).kill()

    def stop(self, service: str) -> None:
        """SIGTERM and wait until the process is gone (SIGKILL when it lingers)."""
        self._proc(service).stop(timeout_s=self.stop_timeout_s)

    def start(self, service: str) -> None:
        if self._proc(service).state == ProcessState.STOPPED:
            self.restart_service(service)

    def pause(self, service: str) -> None:
        proc = self._proc(service)
        if not proc.signal(signal.SIGSTOP):
            raise RuntimeError(f"{service} is not running; cannot pause it")
        wait_state(proc, ProcessState.PAUSED)

    def resume(self, service: str) -> None:
        proc = self._proc(service)
        if proc.state == ProcessState.PAUSED:
            proc.signal(signal.SIGCONT)
            wait_state(proc, ProcessState.RUNNING)

    def is_running(self, service: str) -> bool:
        return self._proc(service).state == ProcessState.RUNNING


def wait_state(proc: ServiceProcess, wanted: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.state == wanted:
            return
        time.sleep(0.01)
    raise RuntimeError(f"{proc.name} did not become {wanted} within {timeout_s}s (is {proc.state})")
