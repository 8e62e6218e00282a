"""A cluster whose every server is a local process we started: the embedded and the pulsar targets.

Why one class: both start their services in order on ports planned by name, wait for each
within one bounded start-up, move a service whose port another process took
(targets/ports.py), record every pid in state.json (targets/state.py), attach to that record
from another process, fault a service by signals to its pid (kill, stop, pause, resume,
restart) and stop every one by pid. Only what runs differs: which services, their argv,
configs and readiness, and their order; each target says that in the hooks of `LocalCluster`.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeVar

import requests

from harness.errors import EnvironmentProblem
from harness.target import ClusterInfo, LinkInfo, ServiceInfo, ServiceRole, multi_host_service_url
from harness.txn_paths import TxnPath
from targets.ports import PortMove, PortPlan, PortsTaken, follow_links, start_services
from targets.processes import (
    ProcessState,
    ServiceExited,
    ServiceNotReady,
    ServiceProcess,
    wait_ready,
)
from targets.state import (
    STATE_FILE,
    ServiceRecord,
    link_from_json,
    link_to_json,
    read_state,
    write_state,
)

R = TypeVar("R", bound=ServiceRecord)

#: The order `down` stops services in: nothing stops under a service still using it.
DOWN_ORDER = {ServiceRole.BROKER: 0, ServiceRole.LEDGER: 1, ServiceRole.METADATA: 2, ServiceRole.PROXY: 3}


class LocalSpec(Protocol):
    """What the shared lifecycle reads of a target's spec."""

    txn_path: TxnPath
    brokers: int
    parent_pid: int | None
    ready_timeout_s: float


class LocalCluster(Generic[R]):
    """The lifecycle both local targets share, over one `ServiceRecord` per service.

    Theory of operation. `up()` refuses a directory whose recorded cluster still runs, lets
    the target prepare (`_prepare`), plans every port by name (`_choose_ports`) and the
    services from it (`_plan`, which `_add`s each record), writes state.json and starts the
    services in the target's order (`_start_all`, by `_start_ready`: a service whose port was
    taken is moved and started again, targets/ports.py), all within `spec.ready_timeout_s`;
    a failure stops what started. `attach` rebuilds the cluster from state.json in another
    process; `down` stops brokers, stores, proxy, each by pid. A target says what differs:
    its services, their argv and config (`_plan`, `_process`), its order and readiness.
    """

    name: str                           # ClusterInfo.target and state.json's `target`
    up_command: str                     # how a user starts one (said when none is recorded)
    down_command: str
    spec: LocalSpec
    record_type: type[R]                # its ServiceRecord, as state.json keeps it
    listener_name: str | None = None    # the advertised listener clients ask for in lookups
    poll_s: float = 0.1                 # how often a start-up asks for readiness
    metrics_timeout_s: float = 5.0
    #: How long a graceful stop may take before SIGKILL (a JVM broker closing its topics needs more).
    stop_timeout_s: float = 10.0

    def __init__(self, directory: Path, say: Callable[[str], None]) -> None:
        self.directory = directory.resolve()
        self.records: dict[str, R] = {}
        self.processes: dict[str, ServiceProcess] = {}
        self.links: list[LinkInfo] = []
        self.toxiproxy_url: str | None = None
        self.settings: dict[str, Any] = {}
        self.port_plan: PortPlan | None = None   # set by up(); an attached cluster has none
        self._say = say                           # progress, and a port moved at start-up

    # ---- what a target says ----------------------------------------------------------------------

    @classmethod
    def from_state(cls, state: Mapping[str, Any], directory: Path) -> Self:
        """The cluster (its spec, its own keys) a state.json recorded; the services are added after."""
        raise NotImplementedError

    def _process(self, record: R, config: Mapping[str, Any] | None = None) -> ServiceProcess:
        """The process of one service (its pid when attached); `config` is written before each start."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """What must exist before anything is planned (folders, binaries)."""

    def _choose_ports(self) -> PortPlan:
        raise NotImplementedError

    def _plan(self) -> None:
        """Links, configs and records from `port_plan`; again after a service's ports moved."""
        raise NotImplementedError

    def _start_all(self, deadline: float, started: float) -> None:
        """Start every service in the target's order (`_start_ready`) until the cluster is ready."""
        raise NotImplementedError

    def _state_extra(self) -> dict[str, Any]:
        """The target's own top-level keys of state.json."""
        return {}

    def _internal_urls(self, record: R) -> tuple[str, ...]:
        return ()

    def _info_settings(self) -> dict[str, Any]:
        return dict(self.settings)

    def _before_down(self) -> list[str]:
        """What must happen before the services stop; the errors, said after the stop."""
        return []

    # ---- attach ----------------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.directory / STATE_FILE

    @classmethod
    def attach(cls, directory: Path) -> Self:
        """The cluster a previous `up()` (maybe in another process) recorded in `directory`."""
        directory = directory.resolve()
        state = read_state(directory, f"no {cls.name} cluster recorded in {directory}; "
                                      f"start one with `{cls.up_command}`")
        cluster = cls.from_state(state, directory)
        cluster.settings = dict(state.get("settings", {}))
        cluster.toxiproxy_url = state.get("toxiproxy_url")
        cluster.links = [link_from_json(link) for link in state.get("links", [])]
        for data in state["services"]:   # after the links: Toxiproxy is ready once it has each link's proxy
            record = cluster.record_type.from_json(data)
            cluster.records[record.name] = record
            cluster.processes[record.name] = cluster._process(record)
        return cluster

    def any_running(self) -> bool:
        return any(p.state != ProcessState.STOPPED for p in self.processes.values())

    # ---- ClusterTarget ---------------------------------------------------------------------------

    def up(self) -> ClusterInfo:
        if self.state_path.is_file():
            running = [f"{n} (pid {p.pid})" for n, p in type(self).attach(self.directory).processes.items()
                       if p.state != ProcessState.STOPPED]
            if running:
                raise EnvironmentProblem(f"the {self.name} cluster in {self.directory} is already running: "
                                         f"{', '.join(running)}; stop it with `{self.down_command}`")
        self._prepare()
        started = time.monotonic()
        self.port_plan = self._choose_ports()
        self._plan()
        self.save_state()
        try:
            self._start_all(started + self.spec.ready_timeout_s, started)
        except BaseException:
            self.down()
            raise
        return self.info()

    def down(self) -> None:
        """Brokers first, then the ledger store, the metadata store and the proxy; each by pid."""
        errors = self._before_down()
        for name in sorted(self.processes, key=lambda n: (DOWN_ORDER[self.records[n].role], n)):
            try:
                self.processes[name].stop(timeout_s=self.stop_timeout_s)
            except Exception as err:   # keep stopping the others
                errors.append(f"{name}: {err}")
        if self.records:
            self.save_state(stopped=True)
        if errors:
            raise EnvironmentProblem("could not stop every service: " + "; ".join(errors))

    def info(self) -> ClusterInfo:
        services = []
        for name, record in self.records.items():
            proc = self.processes.get(name)
            services.append(ServiceInfo(name=name, role=record.role, state=proc.state if proc else "unknown",
                                        pid=proc.pid if proc else None, service_url=record.service_url,
                                        internal_urls=self._internal_urls(record), admin_url=record.admin_url,
                                        metrics_url=record.metrics_url, log_path=record.log_path))
        brokers = [r for r in self.records.values() if r.role is ServiceRole.BROKER]
        return ClusterInfo(
            target=self.name, txn_path=self.spec.txn_path,
            service_url=multi_host_service_url(b.service_url for b in brokers),
            admin_url=(brokers[0].admin_url or "") if brokers else "", toxiproxy_url=self.toxiproxy_url,
            listener_name=self.listener_name, services=tuple(services), links=tuple(self.links),
            settings=self._info_settings(),
        )

    def scrape_metrics(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, record in self.records.items():
            proc = self.processes[name]
            if not record.metrics_url or proc.state != ProcessState.RUNNING:
                continue
            with contextlib.suppress(requests.RequestException):
                out[name] = proc.metrics_text(timeout_s=self.metrics_timeout_s)
        return out

    def collect_logs(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        for name, record in self.records.items():
            if record.log_path.is_file():
                shutil.copyfile(record.log_path, dest / f"{name}.log")

    def process_control(self) -> Self:
        return self

    def restart_service(self, service: str) -> None:
        """Start a stopped service with its original config and wait until it is ready."""
        self._start(service)
        self._wait_ready([service], time.monotonic() + self.spec.ready_timeout_s)

    # ---- ProcessControl: signals by pid, waiting until the state is reached -----------------------

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

    # ---- start-up --------------------------------------------------------------------------------

    def _add(self, record: R, config: Mapping[str, Any] | None = None) -> None:
        """Plan a service; one still running (planned again after another's ports moved) keeps its
        process and pid, and gets the config its next start writes."""
        self.records[record.name] = record
        proc = self.processes.get(record.name)
        if proc is None or proc.state == ProcessState.STOPPED:
            proc = self.processes[record.name] = self._process(record, config)
        proc.config = config
        if config is not None:
            proc.write_config()

    def _start(self, name: str) -> None:
        """Start one service without waiting (the caller waits, for several at once when it can)."""
        self.processes[name].start()
        self.save_state()

    def _start_ready(self, names: list[str], deadline: float) -> None:
        """Start `names` and wait until they are ready; one whose port another process took before
        it bound it is moved to new ports and started again (targets/ports.py)."""
        with self._start_up_errors():
            start_services(names, deadline, process=self._proc, start=self._start, move=self._move_ports,
                           say=self._say, poll_s=self.poll_s)

    def _wait_ready(self, names: list[str], deadline: float) -> None:
        with self._start_up_errors():
            wait_ready([self.processes[n] for n in names], deadline, poll_s=self.poll_s)

    def _move_ports(self, name: str, start: int) -> PortMove:
        """New ports for `name`: configs, links and records planned again, the running proxy's links
        pointed at the new upstreams."""
        if self.port_plan is None:
            raise EnvironmentProblem(f"{name}'s ports cannot move: this cluster was attached, not planned here")
        others = [n for n, p in self.processes.items() if n != name and p.state != ProcessState.STOPPED]
        if name == "proxy" and others:
            raise EnvironmentProblem(f"the proxy's ports cannot move under running services ({', '.join(others)})")
        before = {link.name: link.upstream for link in self.links}
        moved = self.port_plan.move(name, start)
        self._plan()
        follow_links(self.toxiproxy_url, self.processes.get("proxy"), before,
                     {link.name: link.upstream for link in self.links})
        self.save_state()
        return moved

    @contextlib.contextmanager
    def _start_up_errors(self) -> Iterator[None]:
        """A service that exited or was not ready in time, as an EnvironmentProblem quoting its log."""
        try:
            yield
        except ServiceExited as err:
            proc = err.pending[0]
            why = f"{err}; " if isinstance(err, PortsTaken) else ""
            raise EnvironmentProblem(f"{proc.name} exited during start-up (code {proc.exit_code()}); {why}"
                                     f"see {proc.log_path}; last lines:\n{proc.tail()}") from None
        except ServiceNotReady as err:
            details = "; ".join(f"{p.name}: see {p.log_path}" for p in err.pending)
            raise EnvironmentProblem(
                f"{self.name} cluster not ready within {self.spec.ready_timeout_s:.0f} s ({details}); "
                f"last lines of {err.pending[0].name}:\n{err.pending[0].tail()}") from None

    def save_state(self, stopped: bool = False) -> None:
        """state.json with every service's pid and start time as of now (targets/state.py)."""
        for name, record in self.records.items():
            proc = self.processes.get(name)
            if proc is not None:
                record.pid, record.start_time = proc.pid, proc.start_time
        write_state(self.directory, {
            "target": self.name, "path": self.spec.txn_path.value, "brokers": self.spec.brokers,
            "parent_pid": self.spec.parent_pid, "toxiproxy_url": self.toxiproxy_url, "settings": self.settings,
            "stopped": stopped, **self._state_extra(), "services": [r.to_json() for r in self.records.values()],
            "links": [link_to_json(link) for link in self.links],
            "port_moves": [m.to_json() for m in self.port_plan.moves] if self.port_plan else [],
        })


def wait_state(proc: ServiceProcess, wanted: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.state == wanted:
            return
        time.sleep(0.01)
    raise RuntimeError(f"{proc.name} did not become {wanted} within {timeout_s}s (is {proc.state})")
