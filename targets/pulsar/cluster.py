"""The `pulsar` target: real Apache Pulsar from Maven Central jars as local processes.

Theory of operation. `up()` resolves the release's jars (`jars.ensure_jars`, cached),
finds a Java new enough for it, picks free ports on 127.0.0.1 and writes every config
under `<dir>/conf/`. It then starts, in order: the fault proxy (the real Toxiproxy, one
proxy per link; `TXNBENCH_PULSAR_PROXY=ours` runs our `faultproxy` instead), the
metadata store (ZooKeeper, or a real Oxia server with `--set metadataStoreUrl=oxia`: `conf.metadata_store`),
the one-shot cluster metadata set-up (with the v4 coordinators' assign topic), one
bookie, and the brokers together; the Go servers (Oxia, Toxiproxy) are built on first
use (`targets.gobuild`); each is waited for
by its own readiness (`servers.JavaServer`). Last, one real transaction round trip on
the run's path (`ready.transaction_round_trip`) shows the coordinators are assigned and
loaded: until then the cluster is not ready, whatever the processes say.

Links (see `conf.py` for how the servers are told): `client-broker-<i>` (clients to
broker i), `broker-<i>-metadata` (broker i to ZooKeeper or Oxia; Oxia standalone names the address
a client dialled as its shard leader, so each broker's Oxia traffic stays on its link), `brokers-broker-<j>` (every
broker to broker j: j's internal listener is that link's address) and `brokers-ledger`
(every broker to the bookie). The last two are shared by all brokers (source
`EVERY_BROKER`): a real broker dials the address its peer or the bookie registered, one
per server, so a link cannot be cut for one caller alone; cutting the link into broker j
also cuts j's connections to itself. A fault on one broker's link to the bookie is refused
when the scenario is validated (faults/validate.py).

With `PulsarSpec.coverage_dir` (`--coverage`), the brokers and the bookie start with JaCoCo's
agent and our dump server on a port of their own (`coverage_port`), and this class's process
control dumps a JVM's coverage before it kills or pauses it, before and during a graceful stop,
and every JVM's before the cluster goes down (`targets.pulsar.jacoco.CoverageCollector`): the
nemesis acts through it, so no fault loses what a JVM ran.

What every local cluster shares (ports planned by name, a server whose port was taken moved
and started again, `<dir>/state.json`, attach, stop by pid, every exit path of `up()` stopping
what it started) is `targets.local.LocalCluster`. A taken port reads here as a broker's
`Failed to bind Pulsar broker ... Address already in use`, or Toxiproxy's "Failed to populate
proxies from file".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faultproxy as proxy_package
from harness.errors import EnvironmentProblem
from harness.results import write_json_atomic
from harness.target import (
    EVERY_BROKER,
    LinkInfo,
    LinkKind,
    ServiceRole,
)
from harness.txn_paths import TxnPath
from targets import gobuild
from targets.local import LocalCluster
from targets.ports import PortKey, PortPlan
from targets.processes import (
    HOST,
    ProcessState,
    ServiceProcess,
    module_argv,
)
from targets.pulsar import conf
from targets.pulsar.bookie_endpoint import (
    dialled_around,
    empty_published_endpoint,
    resolves_published_endpoint,
)
from targets.pulsar.jacoco import (
    COVERED_KINDS,
    CoverageCollector,
    JacocoJars,
    agent_options,
    ensure_dump_agent,
    ensure_jacoco,
)
from targets.pulsar.jars import Classpath, ensure_jars
from targets.pulsar.java import find_java
from targets.pulsar.ready import transaction_round_trip
from targets.pulsar.servers import JavaServer
from targets.pulsar.versions import PulsarRelease, listed, path_needs, release
from targets.state import ServiceRecord

DEFAULT_DIR = Path(".txnbench/pulsar-cluster")
DIR_ENV = "TXNBENCH_PULSAR_CLUSTER_DIR"
SHARED_LEDGER_LINK = "brokers-ledger"
PEER_LINK = "brokers-broker-{}"
METADATA_LINK = "broker-{}-metadata"
SETUP_TIMEOUT_S = 180.0
PROXY_ENV = "TXNBENCH_PULSAR_PROXY"
#: The proxy in front of every link: the real Toxiproxy, or ours (`faultproxy`).
REAL_TOXIPROXY, OUR_PROXY = "toxiproxy", "ours"

MAIN_CLASS = {
    "zookeeper": "org.apache.zookeeper.server.quorum.QuorumPeerMain",
    "bookie": "org.apache.bookkeeper.server.Main",
    "broker": "org.apache.pulsar.PulsarBrokerStarter",
    "setup": "org.apache.pulsar.PulsarClusterMetadataSetup",
}
ROLE_OF_KIND = {"zookeeper": "metadata", "bookie": "ledger", "broker": "broker"}


def default_dir() -> Path:
    return Path(os.environ.get(DIR_ENV, str(DEFAULT_DIR)))


def default_proxy() -> str:
    """`toxiproxy` (the real one) unless `TXNBENCH_PULSAR_PROXY=ours`."""
    chosen = os.environ.get(PROXY_ENV, REAL_TOXIPROXY) or REAL_TOXIPROXY
    if chosen not in (REAL_TOXIPROXY, OUR_PROXY):
        raise EnvironmentProblem(f"{PROXY_ENV}={chosen}: choose `{REAL_TOXIPROXY}` (the real Toxiproxy, the "
                                 f"default) or `{OUR_PROXY}` (txnbench's faultproxy)")
    return chosen


@dataclass
class PulsarSpec:
    txn_path: TxnPath = TxnPath.V4
    version: str | None = None          # None: the default release (versions.DEFAULT_RELEASE)
    brokers: int = 2
    settings: Mapping[str, Any] = field(default_factory=dict)
    directory: Path = field(default_factory=default_dir)
    parent_pid: int | None = None       # JVMs are killed by their watchdog once this process is gone
    ready_timeout_s: float = 300.0
    say: Callable[[str], None] | None = None
    proxy: str = field(default_factory=default_proxy)
    #: any release of the table, also one not known to run (`txnbench releases --check`, and a
    #: cluster attached from its state.json, which some release was started as)
    trial: bool = False
    #: `--coverage`: JaCoCo on the brokers and the bookie, their dumps here (targets/pulsar/jacoco.py)
    coverage_dir: Path | None = None

    @property
    def release(self) -> PulsarRelease:
        return listed(self.version) if self.trial and self.version else release(self.version)


@dataclass(kw_only=True)
class PulsarRecord(ServiceRecord):
    """What state.json keeps of one process: the shared record, what it runs and its environment."""

    kind: str                   # proxy (ours), toxiproxy, zookeeper, oxia, bookie, broker
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)   # on top of ours (Oxia's GOMAXPROCS)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "kind": self.kind, "argv": self.argv, "env": self.env}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PulsarRecord:
        return cls(**cls.common_fields(data), kind=data["kind"], argv=list(data["argv"]),
                   env=dict(data.get("env") or {}))


def _own_ports(record: PulsarRecord) -> tuple[int, ...]:
    """The ports the service itself listens on (a broker's `internal_port` is its peer link's, the proxy's)."""
    return tuple(port for name, port in record.ports.items() if name != "internal_port")


class PulsarCluster(LocalCluster[PulsarRecord]):
    """Real Pulsar as local processes; a `ClusterTarget` and its own `ProcessControl` (targets/local.py)."""

    name = "pulsar"
    up_command = "txnbench cluster up --target pulsar"
    down_command = "txnbench cluster down --target pulsar"
    spec: PulsarSpec
    record_type = PulsarRecord
    listener_name = conf.EXTERNAL_LISTENER
    stop_timeout_s = 20.0
    poll_s = 0.25
    metrics_timeout_s = 10.0

    def __init__(self, spec: PulsarSpec) -> None:
        super().__init__(spec.directory, spec.say or (lambda text: print(text, flush=True)))
        self.spec = spec
        self.release = spec.release
        if not self.release.supports(spec.txn_path):
            raise EnvironmentProblem(f"the {spec.txn_path.value} path needs {path_needs(spec.txn_path)}, which "
                                     f"Pulsar {self.release.version} does not have; use --pulsar-version "
                                     f"{release(None).version}")
        self.store = conf.metadata_store(spec.txn_path, spec.settings)
        self.components: dict[str, str] = {}
        self.java: str = ""
        self.binaries: dict[str, str] = {}
        self._classpath: Classpath | None = None
        self._major = 0
        self.jacoco: JacocoJars | None = None
        self.dump_agent: Path | None = None
        self.coverage: CoverageCollector | None = None

    # ---- LocalCluster: what differs ----------------------------------------------------------------

    @classmethod
    def from_state(cls, state: Mapping[str, Any], directory: Path) -> PulsarCluster:
        cluster = cls(PulsarSpec(txn_path=TxnPath(state["path"]), version=state["pulsar_version"],
                                 brokers=state["brokers"], settings=state.get("settings", {}), directory=directory,
                                 parent_pid=state.get("parent_pid"), proxy=state.get("proxy", OUR_PROXY), trial=True))
        cluster.components = dict(state.get("components", {}))
        return cluster

    def _prepare(self) -> None:
        """The release's jars, a Java for it, the Go servers and JaCoCo when asked; fresh folders."""
        self._classpath = ensure_jars(self.release, self._say)
        java, self._major = find_java(self.release.min_java)
        if self.spec.coverage_dir is not None:
            self.jacoco = ensure_jacoco(self._say)
            self.dump_agent = ensure_dump_agent(self.jacoco, self._say)
            self.coverage = CoverageCollector(self.spec.coverage_dir, self._runs, say=self._say)
        self.java = str(java)
        self.binaries = {tool.name: str(gobuild.ensure_binary(tool, self._say)) for tool in self._go_tools()}
        self.components = {**self._classpath.component_versions(), "java": str(self._major),
                           **({"jacoco": self.jacoco.version} if self.jacoco else {}),
                           **{tool.name.removesuffix("-server"): tool.version for tool in self._go_tools()}}
        if self.store != conf.ZOOKEEPER:
            self.components.pop("zookeeper", None)
        for sub in ("data", "conf", "logs", "tmp"):
            shutil.rmtree(self.directory / sub, ignore_errors=True)
            (self.directory / sub).mkdir(parents=True, exist_ok=True)

    def _start_all(self, deadline: float, started: float) -> None:
        """The proxy, the store, the cluster metadata, the bookie, the brokers together; then a transaction."""
        store = "Oxia" if self.store == conf.OXIA else "ZooKeeper"
        proxy = "Toxiproxy" if self.spec.proxy == REAL_TOXIPROXY else "txnbench proxy"
        self._say(f"starting Pulsar {self.release.version} ({self.spec.txn_path.value}) on Java {self._major}: "
                  f"{proxy}, {store}, cluster metadata, bookie, {self.spec.brokers} brokers")
        for name in ("proxy", "metadata"):
            self._start_ready([name], deadline)
        self._setup_metadata()
        self._start_ready(["ledger"], deadline)
        self._start_ready([n for n in self.records if self.records[n].role is ServiceRole.BROKER], deadline)
        self._say(f"  brokers up after {time.monotonic() - started:.0f} s; opening a transaction")
        transaction_round_trip(self.info(), deadline)
        self._check_ledger_link()
        self._say(f"Pulsar {self.release.version} ready in {time.monotonic() - started:.0f} s "
                  f"({self.info().service_url})")

    def _state_extra(self) -> dict[str, Any]:
        return {"pulsar_version": self.release.version, "components": self.components, "store": self.store,
                "proxy": self.spec.proxy}

    def _internal_urls(self, record: PulsarRecord) -> tuple[str, ...]:
        """A broker's internal-listener URL (through its `brokers-broker-<i>` link): v5 coordinator
        assignments and segment layouts name it, so the `coordinator` fault selector must know it."""
        port = record.ports.get("internal_port")
        return (f"pulsar://{HOST}:{port}",) if port else ()

    def _info_settings(self) -> dict[str, Any]:
        return {**self.settings, "pulsarVersion": self.release.version, **self._store_setting()}

    def _before_down(self) -> list[str]:
        """What every JVM ran since its last dump, before it stops."""
        try:
            if self.coverage is not None:
                self.coverage.close()
        except Exception as err:
            return [f"coverage: {err}"]
        return []

    def collect_logs(self, dest: Path) -> None:
        super().collect_logs(dest)
        setup_log = self.directory / "logs" / "cluster-metadata-setup.log"
        if setup_log.is_file():
            shutil.copyfile(setup_log, dest / setup_log.name)

    def _store_setting(self) -> dict[str, str]:
        """The store as a report names it: its own address (brokers dial it through their links)."""
        store = self.records.get("metadata")
        return {"metadataStoreUrl": conf.store_url(self.store, f"{HOST}:{store.ports['client_port']}")} if store else {}

    def _go_tools(self) -> list[gobuild.GoTool]:
        """The Go servers this cluster runs (built on first use)."""
        return ([gobuild.OXIA] if self.store == conf.OXIA else []) + (
            [gobuild.TOXIPROXY] if self.spec.proxy == REAL_TOXIPROXY else [])

    def versions(self) -> dict[str, str]:
        """What a manifest records: the release and the jars' component versions."""
        return {"pulsar_release": self.release.version, **self.components}

    def kill(self, service: str) -> None:
        if self._covered(service):
            assert self.coverage is not None
            self.coverage.before_kill(service, lambda: super(PulsarCluster, self).kill(service))
            return
        super().kill(service)

    def stop(self, service: str) -> None:
        if self._covered(service):
            assert self.coverage is not None
            self.coverage.before_stop(service, lambda: super(PulsarCluster, self).stop(service))
            return
        super().stop(service)

    def pause(self, service: str) -> None:
        if self._covered(service):
            assert self.coverage is not None
            self.coverage.before_pause(service)
        super().pause(service)

    def _covered(self, service: str) -> bool:
        planned = self.records.get(service)
        return self.coverage is not None and planned is not None and "coverage_port" in planned.ports

    def _runs(self, service: str) -> bool:
        proc = self.processes.get(service)
        return proc is not None and proc.state == ProcessState.RUNNING

    def _start(self, name: str) -> None:
        super()._start(name)
        record = self.records[name]
        if self.coverage is not None and record.kind in COVERED_KINDS and "coverage_port" in record.ports:
            self.coverage.started(name, record.ports["coverage_port"])   # a new life of this JVM
        if record.kind == "bookie" and self._brokers_resolve_bookie_endpoint():
            # Before a broker reads the registration, and again after every restart of the bookie
            # (targets/pulsar/bookie_endpoint.py: else no fault on the link to the bookie reaches it).
            link = next(link for link in self.links if link.name == SHARED_LEDGER_LINK)
            empty_published_endpoint(f"{HOST}:{self.records['metadata'].ports['client_port']}", link.listen)

    def _check_ledger_link(self) -> None:
        """Refuses a cluster whose brokers dial the bookie around `brokers-ledger`: every fault on that
        link would be a no-op (targets/pulsar/bookie_endpoint.py)."""
        link = next(link for link in self.links if link.name == SHARED_LEDGER_LINK)
        for name, record in self.records.items():
            if record.role is not ServiceRole.BROKER or not record.log_path.is_file():
                continue
            line = dialled_around(record.log_path.read_text(errors="replace"), link.listen)
            if line is not None:
                raise EnvironmentProblem(
                    f"{name} dials the bookie around the {SHARED_LEDGER_LINK} link, so no fault on that link would "
                    f"reach it ({line[:200]}); Pulsar {self.release.version} ships BookKeeper "
                    f"{self.components.get('bookkeeper', '?')}: see targets/pulsar/bookie_endpoint.py")

    def _brokers_resolve_bookie_endpoint(self) -> bool:
        """The release's BookKeeper client dials the bookie's published endpoint (2.10: BookKeeper 4.14),
        on ZooKeeper, the only store such a release runs on."""
        return self.store == conf.ZOOKEEPER and resolves_published_endpoint(self.components.get("bookkeeper", ""))

    # ---- internals -------------------------------------------------------------------------------

    def _process(self, planned: PulsarRecord, config: Mapping[str, Any] | None = None) -> ServiceProcess:
        """Our proxy, or a server that does not watch its owner itself (`servers.JavaServer`); their
        configs are files the plan wrote, so `config` is none."""
        if planned.kind == "proxy":   # ours: a Python service that watches its parent itself
            return ServiceProcess(planned.name, planned.argv, planned.log_path, pid=planned.pid,
                                  start_time=planned.start_time, health_url=planned.health_url,
                                  metrics_url=planned.metrics_url, ports=_own_ports(planned))
        port = (planned.ports.get("client_port") or planned.ports.get("bookie_port") or planned.ports.get("api_port")
                or planned.ports["binary_port"])
        return JavaServer(planned.name, planned.argv, planned.log_path, pid=planned.pid,
                          start_time=planned.start_time, health_url=planned.health_url,
                          metrics_url=planned.metrics_url, kind=planned.kind, port=port,
                          owner_pid=self.spec.parent_pid, env=dict(planned.env), ports=_own_ports(planned),
                          proxy_names=tuple(link.name for link in self.links) if planned.kind == "toxiproxy" else ())

    def _java_argv(self, kind: str, *args: str, agent_port: int | None = None) -> list[str]:
        """A JVM of the release's jars (`_prepare` found them and a Java for them)."""
        if self._classpath is None:
            raise EnvironmentProblem("this cluster was attached, not planned here: it has no jars to run")
        role = ROLE_OF_KIND.get(kind, "tool")
        drivers = conf.bookkeeper_driver_props(self.store) if kind in ("bookie", "setup", "broker") else []
        agent = agent_options(self.jacoco.agent, self.dump_agent, agent_port, HOST) \
            if self.jacoco and self.dump_agent and agent_port else []
        return [self.java, *conf.jvm_args(role, self._major, self.directory / "conf" / "log4j2.xml",
                                          self.directory / "tmp"), *drivers, *agent,
                "-cp", self._classpath.java_classpath, MAIN_CLASS[kind], *args]

    def _coverage_port(self, plan: PortPlan, owner: str) -> dict[str, int]:
        """The JaCoCo agent's port of a covered JVM (none without --coverage)."""
        return {"coverage_port": plan[(owner, "coverage_port")]} if self.spec.coverage_dir is not None else {}

    def _link_names(self) -> list[str]:
        n = self.spec.brokers
        names = [f"client-broker-{i}" for i in range(n)] + [METADATA_LINK.format(i) for i in range(n)]
        return names + [PEER_LINK.format(i) for i in range(n)] + [SHARED_LEDGER_LINK]

    def _choose_ports(self) -> PortPlan:
        """Every port of the cluster, chosen free now, by owner and name (targets/ports.py)."""
        keys: list[PortKey] = [("proxy", "api_port"), *(("proxy", f"link:{n}") for n in self._link_names())]
        keys += [("metadata", "client_port"), ("metadata", "metrics_port"),
                 ("ledger", "bookie_port"), ("ledger", "metrics_port")]
        keys += [(f"broker-{i}", p) for i in range(self.spec.brokers) for p in ("binary_port", "http_port")]
        if self.spec.coverage_dir is not None:   # JaCoCo's tcpserver on every covered JVM
            keys += [("ledger", "coverage_port"), *((f"broker-{i}", "coverage_port") for i in range(self.spec.brokers))]
        return PortPlan.choose(keys)

    def _plan(self) -> None:
        """Links, configs and services from `port_plan`; planned again after a service's ports moved
        (`_move_ports`), when the processes still running are kept (their pids) with their ports."""
        n = self.spec.brokers
        if self.port_plan is None:
            self.port_plan = self._choose_ports()
        plan = self.port_plan
        conf_dir, data_dir, log_dir = (self.directory / d for d in ("conf", "data", "logs"))
        (conf_dir / "log4j2.xml").write_text(conf.LOG4J2)
        link_port = {name: plan[("proxy", f"link:{name}")] for name in self._link_names()}

        def addr(port: int) -> str:
            return f"{HOST}:{port}"

        api_port, zk_port = plan[("proxy", "api_port")], plan[("metadata", "client_port")]
        bookie_port, bookie_metrics = plan[("ledger", "bookie_port")], plan[("ledger", "metrics_port")]
        store_metrics = plan[("metadata", "metrics_port")]
        self.toxiproxy_url = f"http://{HOST}:{api_port}"
        self.settings = {**conf.path_settings(self.spec.txn_path), **dict(self.spec.settings)}

        self.links = []
        broker_ports = [(plan[(f"broker-{i}", "binary_port")], plan[(f"broker-{i}", "http_port")]) for i in range(n)]
        for i, (binary, _http) in enumerate(broker_ports):
            self.links.append(LinkInfo(f"client-broker-{i}", LinkKind.CLIENT_BROKER, "client", f"broker-{i}",
                                       addr(link_port[f"client-broker-{i}"]), addr(binary)))
            self.links.append(LinkInfo(METADATA_LINK.format(i), LinkKind.BROKER_METADATA, f"broker-{i}", "metadata",
                                       addr(link_port[METADATA_LINK.format(i)]), addr(zk_port)))
            self.links.append(LinkInfo(PEER_LINK.format(i), LinkKind.BROKER_BROKER, EVERY_BROKER, f"broker-{i}",
                                       addr(link_port[PEER_LINK.format(i)]), addr(binary)))
        self.links.append(LinkInfo(SHARED_LEDGER_LINK, LinkKind.BROKER_LEDGER, EVERY_BROKER, "ledger",
                                   addr(link_port[SHARED_LEDGER_LINK]), addr(bookie_port)))

        self._plan_proxy(conf_dir, data_dir, log_dir, api_port)
        self._plan_store(conf_dir, data_dir, log_dir, zk_port, store_metrics)

        bk_conf = conf_dir / "bookie.conf"
        bk_conf.write_text(conf.bookie_conf(bookie_port=bookie_port, advertised_id=addr(link_port[SHARED_LEDGER_LINK]),
                                            metrics_port=bookie_metrics, zk_address=addr(zk_port),
                                            data_dir=data_dir / "bookie", store=self.store))
        metrics = f"http://{HOST}:{bookie_metrics}/metrics"
        agent = self._coverage_port(plan, "ledger")
        self._add(PulsarRecord("ledger", ServiceRole.LEDGER,
                               {"bookie_port": bookie_port, "metrics_port": bookie_metrics, **agent},
                               log_dir / "ledger.log", health_url=metrics, metrics_url=metrics, kind="bookie",
                               argv=self._java_argv("bookie", "--conf", str(bk_conf),
                                                    agent_port=agent.get("coverage_port"))))

        for i, (binary, http) in enumerate(broker_ports):
            values = conf.broker_conf(binary_port=binary, http_port=http,
                                      advertised_client_port=link_port[f"client-broker-{i}"],
                                      advertised_internal_port=link_port[PEER_LINK.format(i)],
                                      zk_link=addr(link_port[METADATA_LINK.format(i)]), settings=self.settings,
                                      store=self.store)
            values = self.release.line.broker_settings(values)   # as the release's line knows them (versions.py)
            path = conf_dir / f"broker-{i}.conf"
            path.write_text(conf.properties(values))
            admin = f"http://{HOST}:{http}"
            agent = self._coverage_port(plan, f"broker-{i}")
            self._add(PulsarRecord(f"broker-{i}", ServiceRole.BROKER,
                                   {"binary_port": binary, "http_port": http,
                                    "internal_port": link_port[PEER_LINK.format(i)], **agent},
                                   log_dir / f"broker-{i}.log",
                                   service_url=f"pulsar://{addr(link_port[f'client-broker-{i}'])}",
                                   admin_url=admin, health_url=f"{admin}/admin/v2/brokers/ready",
                                   metrics_url=f"{admin}/metrics/", kind="broker",
                                   argv=self._java_argv("broker", "--broker-conf", str(path),
                                                        agent_port=agent.get("coverage_port"))))
        store_url = conf.store_url(self.store, addr(zk_port))
        self._setup_args = [
            "--cluster", conf.CLUSTER_NAME, "--metadata-store", store_url,
            "--configuration-metadata-store", store_url,
            "--web-service-url", f"http://{HOST}:{broker_ports[0][1]}",
            "--broker-service-url", f"pulsar://{HOST}:{broker_ports[0][0]}",
            "--initial-num-transaction-coordinators", str(conf.COORDINATORS)]

    def _plan_proxy(self, conf_dir: Path, data_dir: Path, log_dir: Path, api_port: int) -> None:
        """The proxy of every link: the real Toxiproxy (its `-config` creates the proxies), or ours."""
        proxies = [{"name": link.name, "listen": link.listen, "upstream": link.upstream, "enabled": True}
                   for link in self.links]
        health, metrics = f"{self.toxiproxy_url}/version", f"{self.toxiproxy_url}/metrics"
        if self.spec.proxy == REAL_TOXIPROXY:
            path = conf_dir / "toxiproxy.json"
            write_json_atomic(path, proxies)
            argv = [self.binaries[gobuild.TOXIPROXY.name], "-host", HOST, "-port", str(api_port),
                    "-config", str(path), "-proxy-metrics"]
            self._add(PulsarRecord("proxy", ServiceRole.PROXY, {"api_port": api_port}, log_dir / "proxy.log",
                                   health_url=health, metrics_url=metrics, kind="toxiproxy", argv=argv))
            return
        proxy_conf = conf_dir / "proxy.json"
        write_json_atomic(proxy_conf, {
            "name": "proxy", "host": HOST, "log_level": "INFO", "data_dir": str(data_dir / "proxy"),
            "api_port": api_port, **({"parent_pid": self.spec.parent_pid} if self.spec.parent_pid else {}),
            "proxies": proxies})
        (data_dir / "proxy").mkdir(parents=True, exist_ok=True)
        self._add(PulsarRecord("proxy", ServiceRole.PROXY, {"api_port": api_port}, log_dir / "proxy.log",
                               health_url=health, metrics_url=metrics, kind="proxy",
                               argv=module_argv(proxy_package, proxy_conf)))

    def _plan_store(self, conf_dir: Path, data_dir: Path, log_dir: Path, port: int, metrics_port: int) -> None:
        """The `metadata` service: ZooKeeper, or `oxia standalone` (its data and WAL in the data folder)."""
        if self.store == conf.OXIA:
            argv = conf.oxia_argv(self.binaries[gobuild.OXIA.name], port=port, metrics_port=metrics_port,
                                  data_dir=data_dir / "oxia")
            metrics = f"http://{HOST}:{metrics_port}/metrics"
            self._add(PulsarRecord("metadata", ServiceRole.METADATA, {"client_port": port, "metrics_port": metrics_port},
                                   log_dir / "metadata.log", health_url=metrics, metrics_url=metrics, kind="oxia",
                                   argv=argv, env=conf.oxia_env()))
            return
        zk_conf = conf_dir / "zookeeper.conf"
        zk_conf.write_text(conf.zookeeper_conf(port, data_dir / "zookeeper"))
        self._add(PulsarRecord("metadata", ServiceRole.METADATA, {"client_port": port}, log_dir / "metadata.log",
                               kind="zookeeper", argv=self._java_argv("zookeeper", str(zk_conf))))

    def _setup_metadata(self) -> None:
        """PulsarClusterMetadataSetup, once: the cluster, `public/default`, `pulsar/system` and
        the v4 coordinators' partitioned assign topic."""
        log = self.directory / "logs" / "cluster-metadata-setup.log"
        argv = self._java_argv("setup", *self._setup_args)
        with log.open("ab") as out:
            try:
                result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        timeout=SETUP_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise EnvironmentProblem(f"cluster metadata set-up took more than {SETUP_TIMEOUT_S:.0f} s; "
                                         f"see {log}") from None
        if result.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise EnvironmentProblem(f"cluster metadata set-up failed (exit {result.returncode}); see {log}:\n{tail}")
