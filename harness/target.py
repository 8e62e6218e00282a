"""What a run needs from a cluster, whatever starts it.

A target says how a cluster starts, stops, and which fault actions it supports;
workloads, faults, history and analysis are the same for every target. The
orchestrator (orchestrator.run) only talks to `ClusterTarget`; the nemesis
(faults/) uses `ClusterInfo` to name services and links, `ProcessControl` to
kill, restart, pause and resume processes, and the Toxiproxy HTTP API at
`ClusterInfo.toxiproxy_url` for network faults.

Names are shared by all targets so scenarios stay portable:

* services: `metadata`, `ledger`, `broker-<i>`, `proxy` (embedded); the compose
  target maps its containers (zookeeper/oxia, bookie-<i>, broker-<i>, toxiproxy)
  onto the same roles.
* links (Toxiproxy proxy names): `client-broker-<i>`, `broker-<i>-metadata`,
  `broker-<i>-ledger`, `broker-<i>-broker-<j>`. A target lists the links it has.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from harness.txn_paths import TxnPath


class ServiceRole(StrEnum):
    METADATA = "metadata"   # Oxia-like store (embedded), ZooKeeper or Oxia (compose)
    LEDGER = "ledger"       # ledger store (embedded), bookies (compose)
    BROKER = "broker"
    PROXY = "proxy"         # the Toxiproxy(-API) process


class LinkKind(StrEnum):
    CLIENT_BROKER = "client-broker"
    BROKER_BROKER = "broker-broker"
    BROKER_METADATA = "broker-metadata"
    BROKER_LEDGER = "broker-ledger"


@dataclass(frozen=True)
class ServiceInfo:
    """One process (embedded) or container (compose) of the cluster."""

    name: str                       # e.g. "broker-0"
    role: ServiceRole
    state: str = "unknown"          # running | stopped | paused | killed | unknown
    pid: int | None = None
    service_url: str | None = None  # brokers: the pulsar:// URL clients are given (through the proxy)
    internal_urls: tuple[str, ...] = ()  # brokers: other pulsar:// URLs the broker advertises (e.g. its
                                         # internal listener, which v5 coordinator assignments name)
    admin_url: str | None = None    # brokers: http:// admin and /metrics
    metrics_url: str | None = None  # Prometheus text endpoint
    log_path: Path | None = None


#: The `source` of a link every broker dials (a target that cannot give each broker its own
#: proxy for a destination, e.g. real Pulsar's one registered bookie address): cutting it
#: cuts every broker from that destination at once.
EVERY_BROKER = "brokers"


@dataclass(frozen=True)
class LinkInfo:
    """A proxied connection: Toxiproxy proxy `name` forwards `listen` to `upstream`."""

    name: str                       # e.g. "broker-0-metadata"
    kind: LinkKind
    source: str                     # service name, "client", or EVERY_BROKER (a link all brokers share)
    dest: str                       # service name
    listen: str                     # host:port
    upstream: str                   # host:port


@dataclass(frozen=True)
class ClusterInfo:
    target: str
    txn_path: TxnPath
    service_url: str                # pulsar:// URL a client starts from: every broker, `pulsar://h:p,h:p`
    admin_url: str                  # http:// admin URL of any broker
    toxiproxy_url: str | None = None
    listener_name: str | None = None   # the advertised listener clients must ask for in lookups
    services: tuple[ServiceInfo, ...] = ()
    links: tuple[LinkInfo, ...] = ()
    settings: dict[str, object] = field(default_factory=dict)

    def service(self, name: str) -> ServiceInfo:
        for svc in self.services:
            if svc.name == name:
                return svc
        raise KeyError(f"no service {name!r}; have {[s.name for s in self.services]}")

    def by_role(self, role: ServiceRole) -> list[ServiceInfo]:
        return [s for s in self.services if s.role is role]

    def broker_for_url(self, service_url: str) -> ServiceInfo | None:
        """The broker a lookup or coordinator assignment points at."""
        wanted = service_url.rstrip("/")
        for svc in self.by_role(ServiceRole.BROKER):
            urls = ((svc.service_url,) if svc.service_url else ()) + svc.internal_urls
            if any(url.rstrip("/") == wanted for url in urls):
                return svc
        return None


@runtime_checkable
class ProcessControl(Protocol):
    """Process-level fault actions. Every call returns once the action took effect."""

    def kill(self, service: str) -> None:
        """SIGKILL (kill -9) the service; returns when the process is gone."""

    def start(self, service: str) -> None:
        """Start a killed or stopped service again with its original configuration."""

    def stop(self, service: str) -> None:
        """Stop the service gracefully (SIGTERM: it closes its topics and releases what it owns);
        returns when the process is gone."""

    def pause(self, service: str) -> None:
        """SIGSTOP the service."""

    def resume(self, service: str) -> None:
        """SIGCONT the service."""

    def is_running(self, service: str) -> bool:
        """True when the process exists and is not paused."""


class CrashAim(StrEnum):
    """The moment a power-loss crash waits for (faults/README.md, "Power-loss crashes")."""

    WRITE = "write"            # any log write in flight (written, its fsync not returned)
    CRASH_LOOP = "crash-loop"  # crash now, start again, crash again as it creates its next log file


@runtime_checkable
class PowerLossControl(Protocol):
    """A crash that also loses what a store wrote but never fsynced (the `crash` fault kind).

    Only a target whose stores record their fsync marks (harness.sync_mark) can do it: the
    embedded cluster. A service without a mark is killed with nothing lost."""

    def crash(self, service: str, seed: int, aim_s: float, aim: CrashAim = CrashAim.WRITE) -> str:
        """Wait up to `aim_s` for the moment `aim` names, kill -9, then tear the store's unsynced
        bytes (drawn from `seed`); returns what was lost, in words. Start it again with `start`."""


class DamagedFile(StrEnum):
    """Which durable file of a store the `corrupt` fault damages."""

    LOG = "log"              # a sealed log file (one before the newest)
    SNAPSHOT = "snapshot"    # the metadata store's newest snapshot


class NothingToDamage(Exception):
    """The store keeps no file of the kind the `corrupt` fault would damage (yet)."""


@runtime_checkable
class CorruptionControl(Protocol):
    """Disk corruption of a store's durable files (the `corrupt` fault kind; targets/corruption.py).

    Only the embedded cluster's stores, whose file formats it knows."""

    def corrupt(self, service: str, seed: int, which: str) -> dict[str, object]:
        """kill -9 `service`, flip one bit (drawn from `seed`) of a `which` file (`log`: a sealed log
        file; `snapshot`: the newest snapshot) and start it again: returns what was damaged,
        whether the store refused to start (`refused`) and what it said. NothingToDamage when
        there is no such file. The damage stays until `repair`."""

    def repair(self, service: str) -> None:
        """Undo the damage (the process stopped first if it runs) and start the service."""


@runtime_checkable
class ClusterTarget(Protocol):
    """How a run gets a cluster. `up()` returns once the cluster serves clients."""

    name: str

    def up(self) -> ClusterInfo:
        """Start (or attach to) the cluster and wait until it is ready."""

    def down(self) -> None:
        """Stop everything `up()` started; an external cluster is left running."""

    def info(self) -> ClusterInfo:
        """Current URLs, services and their states."""

    def scrape_metrics(self) -> dict[str, str]:
        """Prometheus text per service name (services that do not answer are left out)."""

    def collect_logs(self, dest: Path) -> None:
        """Copy each service's log to `dest/<service>.log`."""

    def process_control(self) -> ProcessControl | None:
        """Kill/restart/pause/resume, or None when the target cannot (external)."""


def multi_host_service_url(urls: Iterable[str | None]) -> str:
    """`pulsar://h:p,h:p` from the brokers' own `pulsar://h:p` URLs, in order ('' when none).

    A cluster's service URL names every broker, as Pulsar's clients accept: a
    client whose first host is dead tries the next for lookups and discovery.
    With only the first broker's URL, killing that broker cut every client off
    from the whole cluster until it came back, which a chaos run would then blame
    on the transaction path.
    """
    hosts = [u.removeprefix("pulsar://").rstrip("/") for u in urls if u and u.startswith("pulsar://")]
    return f"pulsar://{','.join(hosts)}" if hosts else ""


def service_hosts(service_url: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of `pulsar://h:p[,h:p...]` (also `pulsar+ssl://`), in order.

    Raises ValueError naming what is wrong, for a one-line error at the command line.
    """
    scheme, sep, rest = service_url.partition("://")
    if not sep or scheme not in ("pulsar", "pulsar+ssl"):
        raise ValueError(f"service URL {service_url!r} is not pulsar://host:port[,host:port...]")
    hosts: list[tuple[str, int]] = []
    for part in rest.rstrip("/").split(","):
        host, colon, port = part.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"service URL {service_url!r}: {part!r} is not host:port")
        hosts.append((host.strip("[]"), int(port)))
    return hosts
