"""The external target: a cluster someone else started, given by its URLs.

The harness never starts, stops or signals an external cluster, so there is no
process control. When the URLs belong to an embedded cluster started by
`txnbench cluster up` (its state.json names the same service URL), the metrics of
every service of that cluster are scraped, so I/O per transaction is still known.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import requests

from harness.errors import EnvironmentProblem
from harness.target import ClusterInfo, ServiceInfo, ServiceRole, service_hosts
from harness.txn_paths import TxnPath
from targets.embedded import EmbeddedCluster, default_dir


class ExternalCluster:
    name = "external"

    def __init__(self, service_url: str, admin_url: str | None, txn_path: TxnPath,
                 toxiproxy_url: str | None = None, embedded_dir: Path | None = None) -> None:
        self.service_url = service_url
        self.admin_url = (admin_url or "").rstrip("/")
        self.txn_path = txn_path
        self.toxiproxy_url = toxiproxy_url
        self._embedded = self._find_embedded(embedded_dir or default_dir())

    def _find_embedded(self, directory: Path) -> EmbeddedCluster | None:
        """The `txnbench cluster up` cluster these URLs belong to: every host given is one of its brokers."""
        with contextlib.suppress(Exception):
            cluster = EmbeddedCluster.attach(directory)
            known = {h for s in cluster.info().services if s.service_url for h in service_hosts(s.service_url)}
            if set(service_hosts(self.service_url)) <= known:
                return cluster
        return None

    def up(self) -> ClusterInfo:
        try:
            hosts = service_hosts(self.service_url)
        except ValueError as err:
            raise EnvironmentProblem(str(err)) from None
        failures: list[str] = []
        for host, port in hosts:   # one broker answering is enough: clients try each in turn
            try:
                with socket.create_connection((host, port), timeout=5):
                    break
            except OSError as err:
                failures.append(f"{host}:{port}: {err}")
        else:
            raise EnvironmentProblem(f"cannot reach {self.service_url} ({'; '.join(failures)}); "
                                     "is the cluster running?")
        if self.admin_url:
            try:
                requests.get(f"{self.admin_url}/metrics", timeout=5)
            except requests.RequestException as err:
                raise EnvironmentProblem(f"cannot reach the admin URL {self.admin_url}: {err}") from None
        return self.info()

    def down(self) -> None:
        """An external cluster is left running."""

    def info(self) -> ClusterInfo:
        if self._embedded is not None:
            inner = self._embedded.info()
            return ClusterInfo(target=self.name, txn_path=self.txn_path, service_url=self.service_url,
                               admin_url=self.admin_url or inner.admin_url,
                               toxiproxy_url=self.toxiproxy_url or inner.toxiproxy_url,
                               services=inner.services, links=inner.links, settings=inner.settings)
        broker = ServiceInfo(name="broker", role=ServiceRole.BROKER, state="unknown",
                             service_url=self.service_url, admin_url=self.admin_url or None,
                             metrics_url=f"{self.admin_url}/metrics" if self.admin_url else None)
        return ClusterInfo(target=self.name, txn_path=self.txn_path, service_url=self.service_url,
                           admin_url=self.admin_url, toxiproxy_url=self.toxiproxy_url, services=(broker,))

    def scrape_metrics(self) -> dict[str, str]:
        if self._embedded is not None:
            return self._embedded.scrape_metrics()
        out: dict[str, str] = {}
        if self.admin_url:
            with contextlib.suppress(requests.RequestException):
                response = requests.get(f"{self.admin_url}/metrics", timeout=5)
                if response.ok:
                    out["broker"] = response.text
        return out

    def collect_logs(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        if self._embedded is not None:
            self._embedded.collect_logs(dest)

    def process_control(self) -> None:
        return None
