"""The embedded target: our reference cluster as local processes on 127.0.0.1.

Theory of operation. `up()` picks free ports, writes one JSON config per service
under `<dir>/conf/`, and starts, in order: the fault proxy (which listens on every
link's port and forwards to the real one), the metadata store, the ledger store and
the brokers. Brokers reach their dependencies and peers only through the proxy, and
advertise their `client-broker-<i>` proxy address, so every link can be cut.
Each is ready once its `/health` answers (ZooKeeper: `srvr`) while it holds its ports.
What every local cluster shares (start-up within one deadline, a service whose port was
taken moved and started again, `<dir>/state.json`, attach, stop by pid) is
`targets.local.LocalCluster`; killing and restarting a service keeps its ports, data
and config, so the cluster sees the same service come back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import embedded.broker as broker_package
import embedded.ledger as ledger_package
import embedded.metadata as metadata_package
import faultproxy as proxy_package
from harness.errors import EnvironmentProblem
from harness.metadata_stores import OUR_STORE, default_store_url, is_our_store
from harness.sync_mark import read_mark
from harness.target import (
    CrashAim,
    DamagedFile,
    LinkInfo,
    LinkKind,
    NothingToDamage,
    ServiceRole,
)
from harness.txn_paths import PIP_160_BATCHED_WRITES, TxnPath
from targets.corruption import Damage, candidates, flip_bit, newest_snapshots, plan_damage
from targets.file_births import FileBirthWatch, quick_thread_switches
from targets.local import LocalCluster
from targets.ports import PortKey, PortPlan
from targets.power_loss import crash_store_files, is_new_log_file, mark_directories, unsynced_bytes
from targets.processes import (
    HOST,
    ProcessState,
    ServiceProcess,
    module_argv,
)
from targets.state import ServiceRecord
from targets.zookeeper import (
    ZooKeeperServer,
    ZooKeeperUnavailable,
    server_command,
    write_config,
)

ZOOKEEPER = "zookeeper"
DEFAULT_DIR = Path(".txnbench/cluster")
DIR_ENV = "TXNBENCH_CLUSTER_DIR"
CLUSTER_NAME = "txnbench"

MODULES: dict[ServiceRole, ModuleType] = {
    ServiceRole.PROXY: proxy_package,
    ServiceRole.METADATA: metadata_package,
    ServiceRole.LEDGER: ledger_package,
    ServiceRole.BROKER: broker_package,
}
"""The package each of our services runs (`python -m <package>`, its `__main__`).

Imported so the import contracts see what the target starts; the packages, not their
`__main__` modules, since those would load the whole broker and stores into the
process that only starts them (about a second)."""


def default_dir() -> Path:
    return Path(os.environ.get(DIR_ENV, str(DEFAULT_DIR)))


def embedded_oxia(settings: Mapping[str, Any]) -> bool:
    """`metadataStoreUrl` `oxia` (or `oxia://` without a host): brokers use Oxia's protocol on our store.

    A full `oxia://HOST:PORT` names an Oxia outside the cluster; the brokers get it unchanged.
    `txnbench` (or empty) is our store through our own protocol. Anything else is refused
    here, before anything starts.
    """
    url = settings.get("metadataStoreUrl")
    if is_our_store(url):
        return False
    if url in ("oxia", "oxia://"):
        return True
    if isinstance(url, str) and (url == "zk" or url.startswith("zk:")):
        return False
    if isinstance(url, str) and url.startswith("oxia://"):
        return False
    raise EnvironmentProblem(f"--set metadataStoreUrl={url}: the embedded cluster's store is our Oxia-like store "
                             f"by our protocol (`{OUR_STORE}`), by Oxia's (`oxia`, or oxia://HOST:PORT for an Oxia "
                             f"elsewhere), or a ZooKeeper (`zk`, or zk:HOST:PORT for one elsewhere)")


def embedded_zookeeper(settings: Mapping[str, Any]) -> bool:
    """`metadataStoreUrl` `zk` (or `zk:` without a host): the cluster's metadata service is a real ZooKeeper.

    Its service is still `metadata` (role METADATA), so the faults that hit the store (kill,
    pause, the broker-metadata links) hit ZooKeeper. A full `zk:HOST:PORT` names a ZooKeeper
    outside the cluster; the brokers get it unchanged.
    """
    return settings.get("metadataStoreUrl") in ("zk", "zk:", "zk://")


METADATA_SNAPSHOT_SETTING = "txnbenchMetadataSnapshotEveryRecords"
"""Cluster setting (ours): our metadata store snapshots its state every this many log records
(default 50,000, as ZooKeeper's snapCount is 100,000). A chaos run writes about 25,000 in two
minutes, so without it a store kill only ever replays the log and snapshot restore never runs
(as GC within the run needs its interval lowered). ZooKeeper (v4) and Oxia ignore it."""


def metadata_store_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """What of the cluster settings goes into our metadata store's config."""
    value = settings.get(METADATA_SNAPSHOT_SETTING)
    if value is None:
        return {}
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise EnvironmentProblem(f"{METADATA_SNAPSHOT_SETTING} must be a positive integer, got {value!r}")
    return {"snapshot_every_records": value}


LEDGER_SEGMENT_SETTING = "txnbenchLedgerJournalSegmentBytes"
"""Cluster setting (ours): the ledger store starts a new journal segment after this many bytes
(default 64 MiB, which a chaos run never fills; BookKeeper rolls its journal at 2 GB). Small
segments roll over and are reclaimed within a run, as they do over days in production, so a
restart replays a journal whose deleted ledgers lost their older segments, and a crash may
land on a segment being created."""


def ledger_store_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """What of the cluster settings goes into our ledger store's config."""
    value = settings.get(LEDGER_SEGMENT_SETTING)
    if value is None:
        return {}
    if isinstance(value, bool) or not isinstance(value, int) or value < 4096:
        raise EnvironmentProblem(f"{LEDGER_SEGMENT_SETTING} must be an integer of at least 4096 bytes, got {value!r}")
    return {"segment_bytes": value}


def path_settings(txn_path: TxnPath) -> dict[str, Any]:
    """Broker settings (Pulsar names) that select a transaction path, and its store as Pulsar ships it.

    `metadataStoreUrl`: `zk` (a real ZooKeeper, Pulsar 4.x) for v4 and v4-batched, our
    Oxia-like store (Pulsar 5.0 on Oxia) for v5 (harness.metadata_stores); a scenario's
    or `--set` value wins.
    """
    settings: dict[str, Any] = {
        "metadataStoreUrl": default_store_url(txn_path.value),
        "transactionCoordinatorEnabled": True,
        "systemTopicEnabled": True,
        "transactionCoordinatorCount": 4,   # partitions of transaction_coordinator_assign
        "transactionLogBatchedWriteEnabled": False,
        "transactionPendingAckBatchedWriteEnabled": False,
        "scalableTopicsEnabled": txn_path is TxnPath.V5,
        "transactionCoordinatorScalableTopicsEnabled": txn_path is TxnPath.V5,
    }
    if txn_path is TxnPath.V4_BATCHED:
        settings.update(PIP_160_BATCHED_WRITES)
    if txn_path is TxnPath.V5:
        settings.update({
            "transactionCoordinatorScalableTopicsParallelism": 4,
            "transactionCoordinatorScalableTopicsTimeoutSweepIntervalSeconds": 5,
            "transactionCoordinatorScalableTopicsGcIntervalSeconds": 30,
            "transactionCoordinatorScalableTopicsGcRetentionSeconds": 120,
        })
    return settings


@dataclass(kw_only=True)
class EmbeddedRecord(ServiceRecord):
    """What state.json keeps of one service: the shared record, its config file and program."""

    config_path: Path
    program: str | None = None   # "zookeeper": a Java server, not one of MODULES

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "config_path": str(self.config_path), "program": self.program}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EmbeddedRecord:
        return cls(**cls.common_fields(data), config_path=Path(data["config_path"]), program=data.get("program"))

@dataclass
class EmbeddedSpec:
    txn_path: TxnPath = TxnPath.V4
    brokers: int = 2
    settings: Mapping[str, Any] = field(default_factory=dict)
    directory: Path = field(default_factory=default_dir)
    parent_pid: int | None = None      # services exit when this process dies (run-managed clusters)
    ready_timeout_s: float = 90.0
    log_level: str = "INFO"
    #: The planted bugs the caller allowed (ids of embedded/planted_bugs.py, catalogue order). The
    #: brokers read theirs from `settings`; the stores get these in their config. The orchestrator
    #: computes and guards them (it refuses them unless allowed), so the target needs no catalogue.
    planted_bugs: tuple[str, ...] = ()
    #: Run every service of ours under coverage.py, data files here (`txnbench chaos --coverage`).
    coverage_dir: Path | None = None


class EmbeddedCluster(LocalCluster[EmbeddedRecord]):
    """The reference cluster; a `ClusterTarget` and its own `ProcessControl` (targets/local.py)."""

    name = "embedded"
    up_command = "txnbench cluster up"
    down_command = "txnbench cluster down"
    spec: EmbeddedSpec
    record_type = EmbeddedRecord

    def __init__(self, spec: EmbeddedSpec) -> None:
        super().__init__(spec.directory, logging.getLogger("targets.embedded").warning)
        self.spec = spec
        self._damage: dict[str, Damage] = {}   # the `corrupt` fault's flipped bits, until repaired

    # ---- LocalCluster: what differs ----------------------------------------------------------

    @classmethod
    def from_state(cls, state: Mapping[str, Any], directory: Path) -> EmbeddedCluster:
        return cls(EmbeddedSpec(txn_path=TxnPath(state["path"]), brokers=state["brokers"],
                                settings=state.get("settings", {}), directory=directory,
                                parent_pid=state.get("parent_pid")))

    def _prepare(self) -> None:
        for sub in ("data", "conf"):
            shutil.rmtree(self.directory / sub, ignore_errors=True)
        (self.directory / "logs").mkdir(parents=True, exist_ok=True)

    def _start_all(self, deadline: float, started: float) -> None:
        """The proxy, the metadata store and the ledger store one by one, then the brokers together."""
        for name in ("proxy", "metadata", "ledger"):
            self._start_ready([name], deadline)
        self._start_ready([f"broker-{i}" for i in range(self.spec.brokers)], deadline)

    def _state_extra(self) -> dict[str, Any]:
        return {"directory": str(self.directory)}

    # ---- PowerLossControl (the `crash` fault kind: targets/power_loss.py) ----------------------

    def crash(self, service: str, seed: int, aim_s: float, aim: CrashAim = CrashAim.WRITE) -> str:
        """kill -9 `service` at a moment its store has a write in flight when one comes within
        `aim_s` (a crash between whole fsyncs tears nothing), then lose what it never fsynced.
        `crash-loop`: that, then start it and crash it again as it creates its next log file."""
        data_dir = self.directory / "data" / service
        stores = mark_directories(data_dir)
        deadline = time.monotonic() + aim_s
        while stores and time.monotonic() < deadline and not any(unsynced_bytes(d) for d in stores):
            time.sleep(0.0005)
        if aim is CrashAim.CRASH_LOOP:
            return self._crash_loop(service, data_dir, seed, aim_s)
        return self._power_loss(service, data_dir, seed)

    def _power_loss(self, service: str, data_dir: Path, seed: int) -> str:
        self._proc(service).kill()
        lost = crash_store_files(data_dir, random.Random(seed))
        what = "; ".join(lost) if lost else "nothing unsynced to lose"
        logging.getLogger("targets.embedded").info("power-loss crash of %s: %s", service, what)
        return what

    def _crash_loop(self, service: str, data_dir: Path, seed: int, aim_s: float) -> str:
        """A power loss now, the power back, and another loss as the store opens its next log file: at
        its first write after the start (the ledger store), or in its recovery (the metadata store's
        log). That file exists before its header is durable for a fraction of a millisecond
        (targets/file_births.py); the second crash kills the store in it, so its header is torn."""
        first = self._power_loss(service, data_dir, seed)
        stores = mark_directories(data_dir)
        marks = {d: read_mark(d) for d in stores}   # read while it is down: the wake-up must be quick

        def start() -> None:
            with contextlib.suppress(Exception):   # killed again while it started: the crash meant that
                self.start(service)

        with FileBirthWatch(stores, lambda d, name: is_new_log_file(marks[d], name)) as watch, \
                quick_thread_switches():
            starter = threading.Thread(target=start, name=f"crash-loop start of {service}", daemon=True)
            starter.start()
            born = watch.wait(aim_s) if stores else None
            pid = self._proc(service).pid
            if born is not None and pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)   # at once: inside the new file's first fsync
        if born is None:   # no log to watch (ZooKeeper), or no new file in time: crash it once started
            starter.join(self.spec.ready_timeout_s + 10)
        second = self._power_loss(service, data_dir, seed + 1)
        starter.join(self.spec.ready_timeout_s + 10)
        moment = f"as it created {born[1]}" if born is not None else f"no new log file within {aim_s:g} s"
        return f"{first}; started and crashed again ({moment}): {second}"

    # ---- CorruptionControl (the `corrupt` fault kind: targets/corruption.py) ---------------------

    def corrupt(self, service: str, seed: int, which: str) -> dict[str, object]:
        """kill -9 `service`, flip one bit of a durable `which` file its recovery reads whole, and
        start it again: its recovery should refuse to start, naming the damage."""
        kind = DamagedFile(which)
        data_dir = self.directory / "data" / service
        if not mark_directories(data_dir) and not newest_snapshots(data_dir):
            raise NothingToDamage(f"{service} keeps no log or snapshot in a format txnbench knows "
                                  f"(ZooKeeper's files are its own)")
        if not candidates(data_dir, kind):
            raise NothingToDamage(f"{service} has no {kind.value} file its recovery reads whole (yet): "
                                  + ("only its newest log file" if kind is DamagedFile.LOG else "no snapshot"))
        self._proc(service).kill()
        files = [(path, path.stat().st_size) for path in candidates(data_dir, kind)]   # chosen once it is dead
        damage = plan_damage(files, random.Random(seed))
        if damage is None:
            raise NothingToDamage(f"{service}'s {kind.value} files are empty")
        flip_bit(damage)
        self._damage[service] = damage
        try:
            self.restart_service(service)
        except EnvironmentProblem as err:
            said = [line for line in str(err).splitlines() if line.strip()]
            return {"damaged": damage.describe(), "refused": True, "said": said[-1] if said else ""}
        logging.getLogger("targets.embedded").warning("%s started on a damaged file (%s)", service, damage.describe())
        return {"damaged": damage.describe(), "refused": False, "said": ""}

    def repair(self, service: str) -> None:
        damage = self._damage.pop(service, None)
        proc = self._proc(service)
        if proc.state != ProcessState.STOPPED:
            proc.kill()
        if damage is not None:
            flip_bit(damage)
        self.restart_service(service)

    # ---- internals ----------------------------------------------------------------------------

    def _argv(self, record: EmbeddedRecord) -> list[str]:
        if record.program == ZOOKEEPER:
            try:
                return server_command(record.config_path)
            except ZooKeeperUnavailable as err:
                raise EnvironmentProblem(str(err)) from None
        return module_argv(MODULES[record.role], record.config_path, self.spec.coverage_dir)


    def _process(self, record: EmbeddedRecord, config: Mapping[str, Any] | None = None) -> ServiceProcess:
        """The process of one service: ours by module and /health, or ZooKeeper (ready by `srvr`).

        `config` is what the plan wrote (it is written again before each start); an attached
        process has none and starts with the file already there."""
        own = tuple(record.ports.values())   # ready only while it listens on them itself
        if record.program == ZOOKEEPER:
            return ZooKeeperServer(record.name, self._argv(record), record.log_path, pid=record.pid,
                                   start_time=record.start_time, config_path=record.config_path,
                                   port=record.ports["client_port"], owner_pid=self.spec.parent_pid, ports=own)
        return ServiceProcess(record.name, self._argv(record), record.log_path, pid=record.pid,
                              start_time=record.start_time, config_path=record.config_path, config=config,
                              health_url=record.health_url, metrics_url=record.metrics_url, ports=own)

    def _link_names(self) -> list[str]:
        n = self.spec.brokers
        names = [f"client-broker-{i}" for i in range(n)]
        names += [f"broker-{i}-{dest}" for i in range(n) for dest in ("metadata", "ledger")]
        return names + [f"broker-{i}-broker-{j}" for i in range(n) for j in range(n) if i != j]

    def _choose_ports(self) -> PortPlan:
        """Every port of the cluster, chosen free now, by owner and name (targets/ports.py)."""
        settings = {**path_settings(self.spec.txn_path), **dict(self.spec.settings)}
        metadata = ("client_port",) if embedded_zookeeper(settings) else ("rpc_port", "http_port")
        # `metadataStoreUrl=oxia`: every broker speaks Oxia's protocol to the store, through its own
        # proxy link, so the store listens once per link and advertises the link as the shard leader.
        oxia = tuple(f"oxia_port_{i}" for i in range(self.spec.brokers)) if embedded_oxia(settings) else ()
        keys: list[PortKey] = [("proxy", "api_port"), *(("proxy", f"link:{n}") for n in self._link_names())]
        keys += [("metadata", p) for p in (*metadata, *oxia)] + [("ledger", "rpc_port"), ("ledger", "http_port")]
        keys += [(f"broker-{i}", p) for i in range(self.spec.brokers) for p in ("binary_port", "http_port")]
        return PortPlan.choose(keys)

    def _plan(self) -> None:
        """Links, records and per-service configs from `port_plan`; write the configs.

        Planned again after a service's ports moved (`_move_ports`): the processes still
        running keep their pid (their config is the same but for the proxy's upstreams)."""
        n = self.spec.brokers
        if self.port_plan is None:
            self.port_plan = self._choose_ports()
        plan = self.port_plan
        conf_dir, data_dir, log_dir = (self.directory / d for d in ("conf", "data", "logs"))
        link_names = self._link_names()
        settings = {**path_settings(self.spec.txn_path), **dict(self.spec.settings)}
        oxia = embedded_oxia(settings)
        zookeeper = embedded_zookeeper(settings)
        link_port = {name: plan[("proxy", f"link:{name}")] for name in link_names}
        self.records = {}

        def record(name: str, role: ServiceRole, port_names: tuple[str, ...]) -> EmbeddedRecord:
            rec = EmbeddedRecord(name=name, role=role, ports={p: plan[(name, p)] for p in port_names},
                                 config_path=conf_dir / f"{name}.json", log_path=log_dir / f"{name}.log")
            self.records[name] = rec
            return rec

        proxy = record("proxy", ServiceRole.PROXY, ("api_port",))
        meta = record("metadata", ServiceRole.METADATA, ("client_port",) if zookeeper else ("rpc_port", "http_port"))
        ledger = record("ledger", ServiceRole.LEDGER, ("rpc_port", "http_port"))
        brokers = [record(f"broker-{i}", ServiceRole.BROKER, ("binary_port", "http_port")) for i in range(n)]
        oxia_ports = [plan[("metadata", f"oxia_port_{i}")] for i in range(n)] if oxia else []

        self.toxiproxy_url = f"http://{HOST}:{proxy.ports['api_port']}"
        proxy.health_url = f"{self.toxiproxy_url}/version"
        proxy.metrics_url = f"{self.toxiproxy_url}/metrics"
        if zookeeper:   # its config is zoo.cfg; its readiness is `srvr` (no admin HTTP server)
            meta.program, meta.config_path = ZOOKEEPER, conf_dir / "metadata" / "zoo.cfg"
        for rec in (meta, ledger) if not zookeeper else (ledger,):
            rec.health_url = f"http://{HOST}:{rec.ports['http_port']}/health"
            rec.metrics_url = f"http://{HOST}:{rec.ports['http_port']}/metrics"

        def addr(port: int) -> str:
            return f"{HOST}:{port}"

        def broker_store_url(i: int) -> str:
            """What broker i is told: its own proxy link to the store, in the store's URL form."""
            link = addr(link_port[f"broker-{i}-metadata"])
            if oxia:
                return f"oxia://{link}"
            if zookeeper:
                return f"zk:{link}"
            url = str(settings.get("metadataStoreUrl") or "")
            return link if is_our_store(url) else url   # our protocol by address; a store elsewhere unchanged

        self.links = []
        for i, b in enumerate(brokers):
            self.links.append(LinkInfo(f"client-broker-{i}", LinkKind.CLIENT_BROKER, "client", b.name,
                                       addr(link_port[f"client-broker-{i}"]), addr(b.ports["binary_port"])))
            store_port = oxia_ports[i] if oxia else meta.ports["client_port" if zookeeper else "rpc_port"]
            self.links.append(LinkInfo(f"broker-{i}-metadata", LinkKind.BROKER_METADATA, b.name, "metadata",
                                       addr(link_port[f"broker-{i}-metadata"]), addr(store_port)))
            self.links.append(LinkInfo(f"broker-{i}-ledger", LinkKind.BROKER_LEDGER, b.name, "ledger",
                                       addr(link_port[f"broker-{i}-ledger"]), addr(ledger.ports["rpc_port"])))
            for j, peer in enumerate(brokers):
                if i != j:
                    self.links.append(LinkInfo(f"broker-{i}-broker-{j}", LinkKind.BROKER_BROKER, b.name,
                                               peer.name, addr(link_port[f"broker-{i}-broker-{j}"]),
                                               addr(peer.ports["binary_port"])))

        self.settings = settings
        common: dict[str, Any] = {"host": HOST, "log_level": self.spec.log_level}
        planted = list(self.spec.planted_bugs)   # the stores get theirs in their config
        if self.spec.parent_pid:
            common["parent_pid"] = self.spec.parent_pid
        configs: dict[str, dict[str, Any]] = {
            "proxy": {**common, "name": "proxy", "data_dir": str(data_dir / "proxy"), **proxy.ports,
                      "proxies": [{"name": link.name, "listen": link.listen, "upstream": link.upstream,
                                   "enabled": True} for link in self.links]},
            "metadata": {**common, "name": "metadata", "data_dir": str(data_dir / "metadata"), **meta.ports,
                         "planted_bugs": planted, **metadata_store_settings(settings)},
            "ledger": {**common, "name": "ledger", "data_dir": str(data_dir / "ledger"), **ledger.ports,
                       **ledger_store_settings(settings),
                       "planted_bugs": planted},
        }
        if oxia:
            configs["metadata"]["oxia_listeners"] = [
                {"port": oxia_ports[i], "advertised": addr(link_port[f"broker-{i}-metadata"])} for i in range(n)]
        for i, b in enumerate(brokers):
            b.service_url = f"pulsar://{addr(link_port[f'client-broker-{i}'])}"
            b.admin_url = f"http://{addr(b.ports['http_port'])}"
            b.health_url = f"{b.admin_url}/health"
            b.metrics_url = f"{b.admin_url}/metrics"
            configs[b.name] = {
                **common, "name": b.name, "data_dir": str(data_dir / b.name), **b.ports,
                "broker_id": i, "cluster_name": CLUSTER_NAME, "txn_path": self.spec.txn_path.value,
                "advertised_service_url": b.service_url, "advertised_web_url": b.admin_url,
                "metadata_address": addr(link_port[f"broker-{i}-metadata"]),
                "ledger_address": addr(link_port[f"broker-{i}-ledger"]),
                "peers": {str(j): addr(link_port[f"broker-{i}-broker-{j}"]) for j in range(n) if j != i},
                "settings": {**self.settings, "metadataStoreUrl": broker_store_url(i)},
            }
        conf_dir.mkdir(parents=True, exist_ok=True)
        if zookeeper:
            del configs["metadata"]
            write_config(meta.config_path.parent, meta.ports["client_port"], data_dir / "metadata" / "data",
                         data_dir / "metadata" / "txnlog")
        for config in configs.values():
            Path(config["data_dir"]).mkdir(parents=True, exist_ok=True)
        for name, rec in list(self.records.items()):   # a running one keeps its pid: its ports did not move
            self._add(rec, configs.get(name))
