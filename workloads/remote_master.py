"""The master's side of remote load workers: welcome hosts, answer clock probes, gather histories.

Runs inside the master load process (workloads.runner, gevent), on the Locust master's
message channel. The messages and their order are in workloads.remote. What it knows
ends up in `locust/workers.json` (the orchestrator copies it into the manifest as
`load_workers`): each host, its writers, clock offsets at start and end, and which
writers were lost and how much of their history arrived.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent

from harness import __version__
from harness.history import RunClock
from harness.results import write_json_atomic
from workloads import remote
from workloads.loadspec import LoadSpec

log = logging.getLogger(__name__)

HOST_SILENT_S = 15.0      # a host that sent nothing for this long while its writers are pending is gone


@dataclass
class RemoteHost:
    ident: str
    hello: remote.Hello
    writers: list[str]
    joined_wall_ms: float
    last_seen: float
    clock_start: dict[str, Any] | None = None
    clock_end: dict[str, Any] | None = None
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    gone: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.hello.host, "pid": self.hello.pid, "processes": self.hello.processes,
                "writers": self.writers, "joined_wall_ms": self.joined_wall_ms, "version": self.hello.version,
                "clock_start": self.clock_start, "clock_end": self.clock_end, "exit_codes": self.exit_codes,
                "gone": self.gone}


class RemoteHub:
    """Remote hosts joining one run's Locust master."""

    def __init__(self, spec: LoadSpec, clock: RunClock, expected: int, digest: str,
                 send: Callable[[str, dict[str, Any], str], None]) -> None:
        self.spec = spec
        self.clock = clock
        self.expected = expected
        self.digest = digest
        self._send = send
        self.hosts: dict[str, RemoteHost] = {}
        self.refused: list[str] = []
        self.gatherer = remote.HistoryGatherer(spec.run_dir.history_dir)
        self.finishing = False
        self.address = f"{spec.config.load.master_bind}:{spec.config.load.master_port}"

    # ---- wiring -------------------------------------------------------------------------------

    def register(self, runner: Any) -> None:
        handlers: Mapping[str, Callable[[Any], None]] = {
            remote.HELLO: self._on_hello, remote.CLOCK: self._on_clock, remote.HISTORY: self._on_history,
            remote.HISTORY_DONE: self._on_done, remote.WORKER_LOST: self._on_lost, remote.BYE: self._on_bye,
        }
        for kind, handler in handlers.items():
            runner.register_message(kind, lambda environment, msg, h=handler: h(msg))

    @property
    def joined(self) -> int:
        return sum(len(h.writers) for h in self.hosts.values())

    def describe_joined(self) -> str:
        if not self.hosts:
            return "none joined"
        return "; ".join(f"{', '.join(h.writers)} from {h.hello.host} (pid {h.hello.pid})"
                         for h in self.hosts.values())

    def writer_hosts(self) -> dict[str, str]:
        return {w: h.hello.host for h in self.hosts.values() for w in h.writers}

    # ---- handlers -----------------------------------------------------------------------------

    def _seen(self, ident: str) -> RemoteHost | None:
        host = self.hosts.get(ident)
        if host is not None:
            host.last_seen = time.monotonic()
        return host

    def _on_hello(self, msg: Any) -> None:
        ident = msg.node_id
        known = self._seen(ident)
        if known is not None:      # a repeated hello (sent again while the master was starting)
            self._welcome(ident, known)
            return
        hello = remote.Hello.from_dict(msg.data or {})
        config = self.spec.config
        reason = remote.mismatch(hello, version=__version__, digest=self.digest, scenario=config.name,
                                 workload=config.to_dict()["workload"])
        if reason is None and self.joined + hello.processes > self.expected:
            reason = (f"load host {hello.host} (pid {hello.pid}) brings {hello.processes} worker(s), but the run "
                      f"waits for {self.expected} remote worker(s) and {self.joined} joined already "
                      f"({self.describe_joined()}); raise load.remote_workers or start fewer")
        if reason is None and self.finishing:
            reason = f"load host {hello.host} (pid {hello.pid}) came after the run's load ended"
        if reason is not None:
            log.error("refused %s: %s", ident, reason)
            self.refused.append(reason)
            self._send(remote.REFUSED, {"reason": reason}, ident)
            return
        first = self.joined
        writers = [f"r{first + i}" for i in range(hello.processes)]
        host = RemoteHost(ident, hello, writers, joined_wall_ms=RunClock.wall_ms(), last_seen=time.monotonic())
        self.hosts[ident] = host
        for writer in writers:
            self.gatherer.expect(writer, hello.host)
        log.info("load host %s (pid %d) joined with %s", hello.host, hello.pid, ", ".join(writers))
        self._welcome(ident, host)

    def _welcome(self, ident: str, host: RemoteHost) -> None:
        self._send(remote.WELCOME, {"spec": self.spec.to_dict(), "writers": host.writers}, ident)

    def _on_clock(self, msg: Any) -> None:
        self._seen(msg.node_id)
        data = dict(msg.data or {})
        data["master_ns"] = self.clock.now_ns()
        self._send(remote.CLOCK_REPLY, data, msg.node_id)

    def _on_history(self, msg: Any) -> None:
        self._seen(msg.node_id)
        try:
            chunk = remote.Chunk.from_dict(msg.data)
        except (KeyError, TypeError, ValueError) as err:
            log.warning("a malformed history chunk from %s: %s", msg.node_id, err)
            return
        size, problem = self.gatherer.accept(chunk)
        if problem:
            log.warning("history chunk from %s: %s", msg.node_id, problem)
        self._send(remote.HISTORY_ACK, {"writer": chunk.writer, "size": size, "problem": problem}, msg.node_id)

    def _on_done(self, msg: Any) -> None:
        self._seen(msg.node_id)
        data = msg.data or {}
        writer = str(data.get("writer"))
        problem = self.gatherer.finish(writer, int(data.get("size") or 0), str(data.get("sha256")))
        host = self.hosts.get(msg.node_id)
        if host is not None:
            host.exit_codes[writer] = data.get("exit_code")
        if problem:
            log.warning("history of %s: %s", writer, problem)
        self._send(remote.HISTORY_ACK, {"writer": writer, "size": self.gatherer.writers[writer].size
                                        if writer in self.gatherer.writers else 0,
                                        "problem": problem, "done": problem is None}, msg.node_id)

    def _on_lost(self, msg: Any) -> None:
        self._seen(msg.node_id)
        data = msg.data or {}
        writer = str(data.get("writer"))
        reason = str(data.get("reason") or "its process exited")
        log.error("remote load worker %s lost: %s", writer, reason)
        self.gatherer.lose(writer, reason)

    def _on_bye(self, msg: Any) -> None:
        host = self._seen(msg.node_id)
        if host is not None:
            host.clock_start = (msg.data or {}).get("clock_start") or host.clock_start
            host.clock_end = (msg.data or {}).get("clock_end")
        self._send(remote.BYE_ACK, {}, msg.node_id)

    # ---- the run --------------------------------------------------------------------------------

    def wait_joined(self, timeout_s: float, locust_workers: Callable[[], int], local_workers: int,
                    failed: Callable[[], str | None]) -> str | None:
        """Wait until every remote worker joined and connected as a Locust worker; None, or what is missing."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            problem = failed()
            if problem:
                return problem
            if self.joined >= self.expected and locust_workers() >= local_workers + self.expected:
                return None
            gevent.sleep(0.1)
        connected = max(0, locust_workers() - local_workers)
        missing = self.expected - self.joined
        refused = f"; refused: {' | '.join(self.refused)}" if self.refused else ""
        return (f"waited {timeout_s:.0f}s (load.remote_wait_s) for {self.expected} remote load worker(s) on "
                f"{self.address}: {self.joined} joined ({self.describe_joined()}), {connected} connected to "
                f"Locust, {missing} missing{refused}. Start `txnbench worker --master {self.address} "
                f"--processes N` on the load hosts (N workers each, {self.expected} in all)")

    def note_missing_locust_clients(self, lost_writers: list[tuple[str, str]]) -> None:
        """Writers whose Locust worker went missing (no heartbeats) while the run went on."""
        for writer, why in lost_writers:
            self.gatherer.lose(writer, why)

    def check_hosts(self) -> None:
        """A host silent for HOST_SILENT_S while its writers are pending is gone (machine down, cut off)."""
        now = time.monotonic()
        pending = set(self.gatherer.pending())
        for host in self.hosts.values():
            if host.gone is None and now - host.last_seen > HOST_SILENT_S and pending & set(host.writers):
                host.gone = f"silent for {now - host.last_seen:.0f}s"
                log.error("load host %s (pid %d) is gone: %s", host.hello.host, host.hello.pid, host.gone)
                for writer in host.writers:
                    self.gatherer.lose(writer, f"its host {host.hello.host} went silent mid-run", host_gone=True)

    def finish(self, timeout_s: float) -> None:
        """Ask every host to stop its workers and ship the rest; wait (bounded) for the histories."""
        self.finishing = True
        for ident in self.hosts:
            self._send(remote.FINISH, {}, ident)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_hosts()
            if not self.gatherer.pending() and all(h.clock_end is not None or h.gone for h in self.hosts.values()):
                return
            gevent.sleep(0.1)
        for writer in self.gatherer.pending():
            self.gatherer.lose(writer, f"its history was not complete {timeout_s:.0f}s after the load stopped",
                               host_gone=True)

    def to_dict(self) -> dict[str, Any]:
        return {"remote_workers": self.expected, "master": self.address,
                "hosts": [h.to_dict() for h in self.hosts.values()],
                "writers": [w.to_dict() for w in self.gatherer.writers.values()],
                "lost": [{"writer": w.writer, "host": w.host, "reason": w.lost, "bytes": w.size,
                          "complete": w.complete} for w in self.gatherer.writers.values() if w.lost],
                "refused": self.refused}

    def write(self, path: Path) -> None:
        write_json_atomic(path, self.to_dict())
