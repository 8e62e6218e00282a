"""Start one service of the reference cluster on its own, for the benchmarks and the cluster tests.

Why: a benchmark or a test often wants one store, one broker or the fault proxy without
the whole embedded cluster (`targets.embedded`) and its proxied links. Each
constructor here is a `ServiceProcess` (targets/processes.py), the launcher the
cluster target uses too, so start-up, readiness, stop by pid and the log tail in an
error are the cluster's. Each picks its loopback ports once and keeps them across
restarts, so clients reconnect to the same address after a kill -9; the config names
this process as `parent_pid`, so a service never outlives a killed test session.

Files of a service go under the folder it is given: `<name>.json` (its config),
`<name>.log`, and its data in `data/`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import requests

import embedded.broker as broker_package
import embedded.ledger as ledger_package
import embedded.metadata as metadata_package
import faultproxy as proxy_package
from faultproxy.service import ENDPOINTS_FILE
from targets.processes import (
    HOST,
    ProcessState,
    ServiceProcess,
    free_port,
    free_ports,
    module_argv,
    process_state,
)
from targets.pulsar.servers import OxiaStandalone
from targets.zookeeper import ZooKeeperServer, server_command, write_config


def _module_service(name: str, module: ModuleType, base_dir: Path, config: Mapping[str, Any], *,
                    http_port: int | None, ready_timeout_s: float) -> dict[str, Any]:
    """The `ServiceProcess` fields of `python -m <module>` with its files in `base_dir`."""
    config_path = base_dir / f"{name}.json"
    urls = {} if http_port is None else {"health_url": f"http://{HOST}:{http_port}/health",
                                          "metrics_url": f"http://{HOST}:{http_port}/metrics"}
    return {"name": name, "argv": module_argv(module, config_path), "log_path": base_dir / f"{name}.log",
            "config_path": config_path, "config": config, "ready_timeout_s": ready_timeout_s, **urls}


class LedgerProcess(ServiceProcess):
    """`python -m embedded.ledger` in `base_dir`; ready once its journal is replayed (/health)."""

    def __init__(self, base_dir: Path, *, name: str = "ledger", log_level: str = "INFO") -> None:
        self.base_dir = base_dir
        self.data_dir = base_dir / "data"
        self.rpc_port, self.http_port = free_ports(2)
        config = {"name": name, "host": HOST, "data_dir": str(self.data_dir), "log_level": log_level,
                  "parent_pid": os.getpid(), "rpc_port": self.rpc_port, "http_port": self.http_port}
        super().__init__(**_module_service(name, ledger_package, base_dir, config, http_port=self.http_port,
                                           ready_timeout_s=60.0))

    @property
    def address(self) -> str:
        return f"{HOST}:{self.rpc_port}"


class StoreProcess(ServiceProcess):
    """`python -m embedded.metadata` in `base_dir`; with `oxia`, Oxia's gRPC protocol beside ours."""

    def __init__(self, base_dir: Path, *, name: str = "metadata", extra_config: Mapping[str, Any] | None = None,
                 oxia: bool = False) -> None:
        self.base_dir = base_dir
        self.data_dir = base_dir / "data"
        ports = free_ports(3 if oxia else 2)
        self.rpc_port, self.http_port = ports[:2]
        self.oxia_port: int | None = ports[2] if oxia else None
        config = {"name": name, "host": HOST, "data_dir": str(self.data_dir), "log_level": "INFO",
                  "parent_pid": os.getpid(), "rpc_port": self.rpc_port, "http_port": self.http_port,
                  **({"oxia_port": self.oxia_port} if self.oxia_port is not None else {}), **(extra_config or {})}
        super().__init__(**_module_service(name, metadata_package, base_dir, config, http_port=self.http_port,
                                           ready_timeout_s=30.0))

    @property
    def address(self) -> str:
        return f"{HOST}:{self.rpc_port}"

    @property
    def oxia_address(self) -> str:
        if self.oxia_port is None:
            raise RuntimeError(f"{self.name} was started without the Oxia protocol (StoreProcess(..., oxia=True))")
        return f"{HOST}:{self.oxia_port}"


class BrokerProcess(ServiceProcess):
    """`python -m embedded.broker` in `base_dir` on the given stores (no fault proxy, no peers)."""

    def __init__(self, base_dir: Path, metadata: str, ledger: str, settings: Mapping[str, Any], *,
                 txn_path: str = "v4", name: str = "broker-0", log_level: str = "WARNING") -> None:
        self.base_dir = base_dir
        self.binary_port, self.http_port = free_ports(2)
        config = {
            "name": name, "host": HOST, "data_dir": str(base_dir / "data"), "log_level": log_level,
            "broker_id": 0, "binary_port": self.binary_port, "http_port": self.http_port,
            "advertised_service_url": self.service_url, "advertised_web_url": f"http://{HOST}:{self.http_port}",
            "metadata_address": metadata, "ledger_address": ledger, "peers": {}, "txn_path": txn_path,
            "cluster_name": "bench", "settings": dict(settings), "parent_pid": os.getpid(),
        }
        super().__init__(**_module_service(name, broker_package, base_dir, config, http_port=self.http_port,
                                           ready_timeout_s=60.0))

    @property
    def service_url(self) -> str:
        return f"pulsar://{HOST}:{self.binary_port}"


@contextlib.contextmanager
def one_broker(settings: Mapping[str, Any], *, txn_path: str = "v4",
               prefix: str = "txnbench-broker-") -> Iterator[tuple[StoreProcess, LedgerProcess, BrokerProcess]]:
    """A metadata store, a ledger store and one broker on them in a temporary folder; all stopped by pid after."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        base = Path(tmp)
        meta = StoreProcess(base / "metadata")
        ledger = LedgerProcess(base / "ledger", log_level="WARNING")
        broker: BrokerProcess | None = None
        try:
            meta.start()
            ledger.start()
            broker = BrokerProcess(base / "broker", meta.address, ledger.address, settings, txn_path=txn_path)
            broker.start()
            yield meta, ledger, broker
        finally:
            if broker is not None:
                broker.stop()
            ledger.stop()
            meta.stop()


class ProxyProcess(ServiceProcess):
    """`python -m faultproxy` in `directory`; ready once `endpoints.json` names this pid and the API answers.

    `api_port` 0 (the default) lets the proxy pick its port: `url` and `listen(name)` read
    what it chose from its endpoints file."""

    def __init__(self, directory: Path, proxies: Sequence[Mapping[str, Any]] = (), *, api_port: int = 0,
                 parent_pid: int | None = None, log_level: str = "INFO") -> None:
        self.directory = directory
        self.data_dir = directory / "data"
        self.endpoints: dict[str, Any] = {}
        config: dict[str, Any] = {"name": "proxy", "host": HOST, "data_dir": str(self.data_dir),
                                  "log_level": log_level, "api_port": api_port, "proxies": [dict(p) for p in proxies]}
        if parent_pid is not None:
            config["parent_pid"] = parent_pid
        super().__init__(**_module_service("proxy", proxy_package, directory, config, http_port=None,
                                           ready_timeout_s=30.0))

    @property
    def url(self) -> str:
        return str(self.endpoints["api_url"])

    def listen(self, name: str) -> str:
        return str(self.endpoints["proxies"][name])

    def prepare(self) -> None:
        super().prepare()
        (self.data_dir / ENDPOINTS_FILE).unlink(missing_ok=True)   # a stale file names an old pid

    def healthy(self, session: requests.Session | None = None) -> bool:
        try:
            endpoints = json.loads((self.data_dir / ENDPOINTS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if endpoints.get("pid") != self.pid:
            return False
        try:
            (session or requests).get(f"{endpoints['api_url']}/version", timeout=2).raise_for_status()
        except requests.RequestException:
            return False
        self.endpoints = endpoints
        return True


class ZooKeeperProcess(ZooKeeperServer):
    """A standalone ZooKeeper (PySpark's jars) in `base_dir`: zoo.cfg, data, txnlog, `<name>.log`.

    Java and the jars are checked when it starts (`ZooKeeperUnavailable`); a watchdog kills
    it when this process dies."""

    def __init__(self, base_dir: Path, *, name: str = "zookeeper", port: int | None = None, tick_ms: int = 500,
                 max_session_ms: int = 60_000) -> None:
        self.base_dir = base_dir
        self.data_dir = base_dir / "data"
        self.txn_log_dir = base_dir / "txnlog"
        self.tick_ms = tick_ms
        self.max_session_ms = max_session_ms
        super().__init__(name, [], base_dir / f"{name}.log", config_path=base_dir / "zoo.cfg",
                         port=port or free_port(), owner_pid=os.getpid(), ready_timeout_s=60.0)

    def prepare(self) -> None:
        write_config(self.base_dir, self.port, self.data_dir, self.txn_log_dir, self.tick_ms, self.max_session_ms)
        self.argv = server_command(self.base_dir / "zoo.cfg")


#: The real Oxia server alone; it lives in the target (the Oxia finding runs it too).
RealOxiaProcess = OxiaStandalone


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (absent, or a zombie nobody reaped yet)."""
    return process_state(pid, None) == ProcessState.STOPPED
