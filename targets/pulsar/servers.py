"""The servers of a real Pulsar cluster (JVMs, and the Go servers Oxia and Toxiproxy) as supervised processes.

Each is a `ServiceProcess` (started in its own session, stopped by pid, its log in the
run's folder) that knows its own readiness: ZooKeeper answers `srvr`, a bookie serves
its Prometheus endpoint and accepts connections on its port, a broker answers
`GET /admin/v2/brokers/ready`, Oxia accepts connections on its public port and serves
its metrics, Toxiproxy answers `GET /version` and lists every link's proxy; each also holds its
own ports (`ServiceProcess.ports`), so another cluster's server answering on a port
taken before ours bound it is not taken for ours. A JVM or a Go server cannot watch its
parent as our Python services do, so every one gets a watchdog (`targets.zk_watchdog`) that kills it once the process
owning the cluster is gone: a run killed with -9 leaves no JVM behind.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import requests

from targets import zk_watchdog
from targets.processes import HOST, ServiceProcess
from targets.zookeeper import srvr_ok


def port_open(port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout_s):
            return True
    except OSError:
        return False


@dataclass
class JavaServer(ServiceProcess):
    """A server that does not watch its owner itself (the JVMs, Oxia, Toxiproxy); `kind` (zookeeper,
    bookie, broker, oxia, toxiproxy) decides how readiness is asked."""

    kind: str = ""
    port: int = 0                  # ZooKeeper's or Oxia's client port, the bookie's, the broker's binary port
    owner_pid: int | None = None
    env: dict[str, str] = field(default_factory=dict)   # its own environment, on every (re)start
    #: Toxiproxy: the proxies its `-config` must have created (a link port taken by another process
    #: leaves the rest uncreated, and the server running: "Failed to populate proxies from file")
    proxy_names: tuple[str, ...] = ()

    def spawn(self, env: dict[str, str] | None = None) -> None:
        super().spawn({**self.env, **(env or {})})
        if self.owner_pid and self.pid and self.start_time is not None:
            zk_watchdog.spawn(self.owner_pid, self.pid, self.start_time)

    def answers(self, session: requests.Session | None = None) -> bool:
        if self.kind == "zookeeper":
            return srvr_ok(HOST, self.port)
        if self.kind in ("bookie", "oxia"):
            return port_open(self.port) and super().answers(session)
        if self.kind == "broker":
            if self.health_url is None:
                return False
            try:
                response = (session or requests).get(self.health_url, timeout=3)
            except requests.RequestException:
                return False
            return response.status_code == 200 and port_open(self.port)
        if self.kind == "toxiproxy" and self.proxy_names:
            return super().answers(session) and self._has_every_proxy(session)
        return super().answers(session)

    def _has_every_proxy(self, session: requests.Session | None) -> bool:
        if self.health_url is None:
            return False
        try:
            response = (session or requests).get(self.health_url.rsplit("/", 1)[0] + "/proxies", timeout=3)
            names = set(response.json()) if response.status_code == 200 else set()
        except (requests.RequestException, ValueError, TypeError):
            return False
        return set(self.proxy_names) <= names
