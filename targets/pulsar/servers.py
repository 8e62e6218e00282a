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

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import requests

from targets import gobuild, zk_watchdog
from targets.processes import HOST, ServiceProcess, free_ports
from targets.pulsar import conf
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


class OxiaStandalone(JavaServer):
    """The real Oxia server alone, `oxia standalone` (targets/gobuild.py builds the pinned release on
    first use), as the `pulsar` target runs it (`conf.oxia_argv`, `conf.oxia_env`): 127.0.0.1,
    one shard, data and WAL in `base_dir`, a watchdog that kills it when this process dies.
    Why here and not only inside a cluster: the Oxia finding (`targets/pulsar/oxia_race.py`) and
    the Oxia client tests run it without Pulsar.

    `env` replaces the target's environment (e.g. `{}` to run Oxia on every core, where its
    v0.14.0 WAL offset race shows: docs/findings/oxia-v0.14.0-wal-offset-race.md)."""

    def __init__(self, base_dir: Path, *, name: str = "oxia", env: Mapping[str, str] | None = None) -> None:
        self.base_dir = base_dir
        self.oxia_port, self.metrics_port = free_ports(2)
        metrics = f"http://{HOST}:{self.metrics_port}/metrics"
        argv = conf.oxia_argv(str(gobuild.ensure_binary(gobuild.OXIA)), port=self.oxia_port,
                              metrics_port=self.metrics_port, data_dir=base_dir / "data")
        super().__init__(name, argv, base_dir / f"{name}.log", health_url=metrics, metrics_url=metrics,
                         ready_timeout_s=30.0, kind="oxia", port=self.oxia_port, owner_pid=os.getpid(),
                         env=dict(conf.oxia_env() if env is None else env))

    @property
    def oxia_address(self) -> str:
        return f"{HOST}:{self.oxia_port}"
