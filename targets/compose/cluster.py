"""The compose target: a Docker Compose cluster of real Pulsar, one project per run.

Theory of operation. `up()` checks the Docker CLI, Compose v2 and the engine, reads
and validates the compose file (targets.compose.validate), then plans the
run: a free 127.0.0.1 port for every published port variable, a subnet prefix no
Docker network uses yet, and the Toxiproxy config for exactly those addresses
(written to `<run>/compose/toxiproxy.json` and mounted into Toxiproxy). Broker
settings from the scenario (`cluster.settings`) go into an override file as
`PULSAR_PREFIX_<key>` variables. It runs `docker compose up --detach` under a
project name unique to the run, waits until every long-running container is
healthy and the init one-shot has exited 0, and checks through the Toxiproxy API
that every link exists. Whatever fails, the project is taken down again.

`down()` always runs `docker compose down --volumes --remove-orphans` once `up()`
has started anything, after resuming paused containers (a paused container cannot
be stopped). Kill (SIGKILL), start, pause and resume act on single containers
through the Docker SDK and return once Docker reports the new state; a started
container is waited on until its health check passes again. No service has a
restart policy, so a killed container stays down until the nemesis starts it.

Names follow harness.target: services `metadata`, `ledger`, `broker-<i>`,
`proxy`; links as targets.compose.links lists them. Compose service names
(`zookeeper`, `oxia`, `bookie`, `toxiproxy`) are accepted wherever a name is taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from harness.errors import ConfigError, EnvironmentProblem
from harness.results import write_json_atomic
from harness.target import ClusterInfo, ServiceInfo, ServiceRole, multi_host_service_url
from harness.toxiproxy.client import ProxySpec, ToxiproxyClient, ToxiproxyError
from harness.txn_paths import TxnPath
from targets.compose.admin import ComposeAdmin
from targets.compose.engine import (
    CommandResult,
    CommandRunner,
    DockerVersions,
    SubprocessRunner,
    check_docker,
    compose_argv,
)
from targets.compose.layout import (
    LABEL_API_PORT,
    LABEL_HTTP_PORT,
    LABEL_METRICS_PORT,
    PROXY,
    ComposeFileError,
    ComposeLayout,
    ServiceSpec,
    interpolate,
    interpolate_tree,
    load_layout,
    setting_keys,
)
from targets.compose.links import HOST, ProxyLink, plan_links, toxiproxy_config_text
from targets.compose.txn_files import COMPOSE_DIR, default_compose_file
from targets.compose.validate import validate_layout
from targets.processes import free_ports

# The listener brokers advertise through Toxiproxy for clients on the host (compose/*.yaml:
# advertisedListeners internal:...,external:pulsar://127.0.0.1:<port>).
EXTERNAL_LISTENER = "external"

NET_PREFIX_VAR = "TXNBENCH_NET_PREFIX"
TOXIPROXY_CONFIG_VAR = "TXNBENCH_TOXIPROXY_CONFIG"
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
READY_FLOOR_S = 300.0          # real brokers need minutes on a cold CI runner
UP_TIMEOUT_S = 1500.0          # `docker compose up` includes pulling the images
DOWN_TIMEOUT_S = 240.0
STATE_TIMEOUT_S = 30.0
POLL_S = 1.0
PLAIN_SETTINGS = ("clusterName", "metadataStoreUrl", "configurationMetadataStoreUrl",
                  "advertisedAddress", "advertisedListeners", "internalListenerName", "brokerServicePort",
                  "webServicePort", "managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
                  "managedLedgerDefaultAckQuorum")
PREFIX_CANDIDATES = tuple(f"10.{n}" for n in range(213, 254))


@dataclass(frozen=True)
class ComposeSpec:
    """What one compose cluster runs. `project` is unique per run."""

    compose_file: Path
    txn_path: TxnPath
    project: str
    work_dir: Path
    settings: Mapping[str, Any] = field(default_factory=dict)
    brokers: int | None = None           # the scenario's broker count, checked against the file
    ready_timeout_s: float = READY_FLOOR_S
    up_timeout_s: float = UP_TIMEOUT_S
    docker: str = "docker"
    docker_base_url: str | None = None   # Docker SDK endpoint; None: the environment's (DOCKER_HOST)
    poll_s: float = POLL_S               # how often start-up and restarts are polled


@dataclass(frozen=True)
class ContainerState:
    status: str                  # created, running, paused, restarting, exited, dead
    health: str | None           # starting, healthy, unhealthy, or None without a health check
    exit_code: int | None
    pid: int | None


def project_name(run_id: str, run_path: Path) -> str:
    """A Compose project name unique to the run folder: [a-z0-9][a-z0-9_-]*."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", run_id.lower()).strip("-_") or "run"
    digest = hashlib.sha1(str(run_path.resolve()).encode()).hexdigest()[:8]
    return f"txnbench-{slug[:40]}-{digest}"


def resolve_compose_file(name: str | None, txn_path: TxnPath) -> Path:
    """cluster.compose_file (a path, or a name in compose/) or the path's default file."""
    if not name:
        return default_compose_file(txn_path)
    candidate = Path(name)
    for option in (candidate, COMPOSE_DIR / name, COMPOSE_DIR / f"{name}.yaml"):
        if option.is_file():
            return option.resolve()
    known = ", ".join(sorted(p.name for p in COMPOSE_DIR.glob("*.yaml")))
    raise ConfigError("cluster.compose_file", "", f"{name!r} is not a file",
                      f"give a path or one of compose/: {known}")


def _state_of(attrs: Mapping[str, Any]) -> ContainerState:
    state = attrs.get("State") or {}
    health = (state.get("Health") or {}).get("Status")
    return ContainerState(status=str(state.get("Status", "unknown")), health=health,
                          exit_code=state.get("ExitCode"), pid=state.get("Pid") or None)


def _setting_value(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"-?\d+", text.strip()):
        return int(text)
    return text


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class ComposeCluster:
    """A `ClusterTarget` and its own `ProcessControl` over Docker Compose."""

    name = "compose"

    def __init__(self, spec: ComposeSpec, *, runner: CommandRunner | None = None,
                 docker_client: Any = None, environ: Mapping[str, str] | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.spec = spec
        self.runner: CommandRunner = runner or SubprocessRunner()
        self.environ = dict(os.environ if environ is None else environ)
        self.say = progress or _say
        self._docker = docker_client
        self.layout: ComposeLayout = load_layout(spec.compose_file)
        problems = validate_layout(self.layout, check_default_config=False)
        if problems:
            listed = "\n  ".join(str(p) for p in problems[:12])
            raise ComposeFileError(f"{spec.compose_file} does not follow txnbench's compose conventions "
                                   f"({len(problems)} problem(s)); fix them (see compose/README.md):\n  {listed}")
        if self.layout.txn_path is not None and self.layout.txn_path is not spec.txn_path:
            raise ConfigError("cluster.compose_file", "", f"{spec.compose_file.name} runs path "
                              f"{self.layout.txn_path.value}, but this run is on {spec.txn_path.value}",
                              f"use a compose file for {spec.txn_path.value} (default "
                              f"{default_compose_file(spec.txn_path).name})")
        if spec.brokers is not None and spec.brokers != len(self.layout.brokers):
            raise ConfigError("cluster.brokers", "", f"is {spec.brokers}, but {spec.compose_file.name} "
                              f"defines {len(self.layout.brokers)} brokers",
                              f"set cluster.brokers: {len(self.layout.brokers)} or use a compose file "
                              f"with {spec.brokers} brokers")
        self.env: dict[str, str] = {}          # the variables this run sets
        self.files: list[Path] = [spec.compose_file]
        self.links: tuple[ProxyLink, ...] = plan_links(self.layout, self._interpolation_env())
        self.versions: DockerVersions | None = None
        self._up_attempted = False
        self._killed: set[str] = set()

    # ---- construction from a run ---------------------------------------------------------------

    @classmethod
    def from_config(cls, config: Any, run_dir: Any, **kwargs: Any) -> ComposeCluster:
        """The cluster for one run (`run_dir` is a harness.results.RunDir or a folder)."""
        run_path = Path(getattr(run_dir, "path", run_dir))
        run_id = getattr(run_dir, "run_id", run_path.name)
        cluster = config.cluster
        spec = ComposeSpec(
            compose_file=resolve_compose_file(cluster.compose_file, config.path), txn_path=config.path,
            project=project_name(run_id, run_path), work_dir=run_path / "compose",
            settings=dict(cluster.settings), brokers=cluster.brokers,
            ready_timeout_s=max(float(cluster.ready_timeout_s), READY_FLOOR_S))
        return cls(spec, **kwargs)

    # ---- ClusterTarget ------------------------------------------------------------------------

    def up(self) -> ClusterInfo:
        self.versions = check_docker(self.runner, self.spec.docker, self.environ)
        self._plan()
        self.say(f"compose: project {self.spec.project} from {self.spec.compose_file} "
                 f"(Docker {self.versions.engine}, Compose {self.versions.compose}); "
                 "the first run pulls the images")
        self._up_attempted = True
        try:
            result = self._compose("up", "--detach", "--quiet-pull", timeout_s=self.spec.up_timeout_s)
            log = self.spec.work_dir / "compose-up.log"
            log.write_text(result.output + "\n", encoding="utf-8")
            if result.returncode != 0:
                raise EnvironmentProblem(
                    f"`docker compose up` failed for {self.spec.compose_file.name} (exit {result.returncode}); "
                    f"see {log}; if an image could not be pulled, check registry access or point "
                    f"PULSAR4_IMAGE / PULSAR5_IMAGE / OXIA_IMAGE / TOXIPROXY_IMAGE at a local image. "
                    f"Last lines:\n{result.tail()}")
            self._wait_ready(time.monotonic() + self.spec.ready_timeout_s)
            self._ensure_links()
        except BaseException:
            with contextlib.suppress(Exception):
                self.down()
            raise
        return self.info()

    def down(self) -> None:
        """Remove the project's containers, networks and volumes (`down -v`)."""
        if not self._up_attempted:
            return
        with contextlib.suppress(Exception):
            for container in self._containers():
                if _state_of(container.attrs).status == "paused":
                    container.unpause()
        result = self._compose("down", "--volumes", "--remove-orphans", "--timeout", "10",
                               timeout_s=DOWN_TIMEOUT_S)
        with contextlib.suppress(OSError):
            (self.spec.work_dir / "compose-down.log").write_text(result.output + "\n", encoding="utf-8")
        if result.returncode != 0:
            raise EnvironmentProblem(
                f"`docker compose down` failed (exit {result.returncode}); containers of project "
                f"{self.spec.project} may be left: remove them with `docker compose -p {self.spec.project} "
                f"down -v`. Last lines:\n{result.tail()}")
        self._up_attempted = False
        self._killed.clear()

    def info(self) -> ClusterInfo:
        states = self._states_or_empty()
        services: list[ServiceInfo] = []
        for svc in self.layout.long_running:
            state = states.get(svc.name)
            services.append(ServiceInfo(
                name=svc.name, role=svc.role or ServiceRole.PROXY, state=self._state_word(svc.name, state),
                pid=state.pid if state else None, service_url=self._service_url(svc),
                admin_url=self._admin_url(svc), metrics_url=self._metrics_url(svc)))
        broker0 = self.layout.brokers[0]
        return ClusterInfo(
            target=self.name, txn_path=self.spec.txn_path,
            service_url=multi_host_service_url(self._service_url(b) for b in self.layout.brokers),
            admin_url=self._admin_url(broker0) or "", toxiproxy_url=self.toxiproxy_url,
            services=tuple(services), links=tuple(link.info() for link in self.links),
            settings=self.settings(), listener_name=EXTERNAL_LISTENER)

    def scrape_metrics(self) -> dict[str, str]:
        states = self._states_or_empty()
        out: dict[str, str] = {}
        for svc in self.layout.long_running:
            url = self._metrics_url(svc)
            state = states.get(svc.name)
            if url is None or (state is not None and state.status != "running"):
                continue
            with contextlib.suppress(requests.RequestException):
                response = requests.get(url, timeout=5)
                if response.ok:
                    out[svc.name] = response.text
        return out

    def collect_logs(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("compose-up.log", "compose-down.log"):
            source = self.spec.work_dir / name
            if source.is_file():
                (dest / name).write_bytes(source.read_bytes())
        if not self._up_attempted:
            return
        try:
            for container in self._containers():
                labels = container.labels or {}
                name = labels.get("txnbench.service") or labels.get(SERVICE_LABEL) or container.name
                (dest / f"{name}.log").write_bytes(container.logs(stdout=True, stderr=True, timestamps=True))
        except Exception as err:
            result = self._compose("logs", "--no-color", "--timestamps", timeout_s=120)
            (dest / "compose.log").write_text(result.output + "\n", encoding="utf-8")
            if result.returncode != 0:
                raise EnvironmentProblem(f"could not collect container logs ({err}; "
                                         f"`docker compose logs` exit {result.returncode})") from None

    def process_control(self) -> ComposeCluster:
        return self

    # ---- ProcessControl -----------------------------------------------------------------------

    def kill(self, service: str) -> None:
        """SIGKILL the container's main process; returns once Docker reports it exited."""
        svc = self._service(service)
        container = self._container(svc)
        status = _state_of(container.attrs).status
        if status in ("exited", "dead", "created"):
            return   # already down: nothing to kill
        if status == "paused":
            container.unpause()
        container.kill(signal="SIGKILL")
        self._killed.add(svc.name)
        self._wait_state(svc, lambda s: s.status in ("exited", "dead"), STATE_TIMEOUT_S, "exited")

    def stop(self, service: str) -> None:
        """`docker stop` (SIGTERM, SIGKILL after 10 s); returns once Docker reports it exited."""
        svc = self._service(service)
        container = self._container(svc)
        status = _state_of(container.attrs).status
        if status in ("exited", "dead", "created"):
            return
        if status == "paused":
            container.unpause()
        container.stop(timeout=10)
        self._killed.add(svc.name)
        self._wait_state(svc, lambda s: s.status in ("exited", "dead"), STATE_TIMEOUT_S, "exited")

    def start(self, service: str) -> None:
        """Start a killed or stopped container again and wait until its health check passes."""
        svc = self._service(service)
        container = self._container(svc)
        state = _state_of(container.attrs)
        if state.status == "paused":
            container.unpause()
        elif state.status != "running":
            container.start()
        self._wait_state(svc, lambda s: s.status == "running" and s.health in (None, "healthy"),
                         self.spec.ready_timeout_s, "running and healthy")
        self._killed.discard(svc.name)

    def pause(self, service: str) -> None:
        """Freeze every process of the container (the cgroup freezer, SIGSTOP's container form)."""
        svc = self._service(service)
        container = self._container(svc)
        if _state_of(container.attrs).status != "running":
            raise RuntimeError(f"{svc.name} is not running; cannot pause it")
        container.pause()
        self._wait_state(svc, lambda s: s.status == "paused", STATE_TIMEOUT_S, "paused")

    def resume(self, service: str) -> None:
        svc = self._service(service)
        container = self._container(svc)
        if _state_of(container.attrs).status == "paused":
            container.unpause()
            self._wait_state(svc, lambda s: s.status == "running", STATE_TIMEOUT_S, "running")

    def is_running(self, service: str) -> bool:
        svc = self._service(service)
        return _state_of(self._container(svc).attrs).status == "running"

    # ---- network, admin -----------------------------------------------------------------------

    @property
    def toxiproxy_url(self) -> str | None:
        proxy = self.layout.by_name(PROXY)
        port = self._host_port(proxy, proxy.label_int(LABEL_API_PORT)) if proxy else None
        return f"http://{HOST}:{port}" if port else None

    def toxiproxy(self) -> ToxiproxyClient:
        """A Toxiproxy API client for this cluster."""
        if self.toxiproxy_url is None:
            raise EnvironmentProblem(f"{self.spec.compose_file.name} publishes no Toxiproxy API port")
        return ToxiproxyClient(self.toxiproxy_url)

    def heal_network(self) -> None:
        """Enable every proxy and remove every toxic (Toxiproxy's POST /reset)."""
        with self.toxiproxy() as client:
            client.reset()

    def admin(self) -> ComposeAdmin:
        """Admin REST that follows broker redirects to the brokers' published ports."""
        published: dict[str, str] = {}
        for broker in self.layout.brokers:
            url = self._admin_url(broker)
            http = broker.label_int(LABEL_HTTP_PORT)
            if url and http:
                published[f"{broker.compose_name}:{http}"] = url
        return ComposeAdmin(self._admin_url(self.layout.brokers[0]) or "", published)

    def split_segment(self, topic: str, segment_id: int) -> None:
        admin = self.admin()
        try:
            admin.split_segment(topic, segment_id)
        finally:
            admin.close()

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> None:
        admin = self.admin()
        try:
            admin.merge_segments(topic, first_id, second_id)
        finally:
            admin.close()

    def terminate_topic(self, topic: str, *, partitioned: bool = False) -> None:
        admin = self.admin()
        try:
            admin.terminate(topic, partitioned=partitioned)
        finally:
            admin.close()

    def settings(self) -> dict[str, Any]:
        """The broker settings this cluster runs with (broker-0's, by Pulsar name)."""
        broker = self.layout.brokers[0]
        env = interpolate_tree(dict(broker.environment), self._interpolation_env())
        values: dict[str, Any] = {k: _setting_value(v) for k, v in setting_keys(env, PLAIN_SETTINGS).items()}
        values.update(dict(self.spec.settings))
        return values

    # ---- planning -----------------------------------------------------------------------------

    def _interpolation_env(self) -> dict[str, str]:
        return {**self.environ, **self.env}

    def _plan(self) -> None:
        work = self.spec.work_dir
        work.mkdir(parents=True, exist_ok=True)
        variables = sorted(self.layout.port_variables())
        env: dict[str, str] = {}
        for variable, port in zip(variables, free_ports(len(variables)), strict=True):
            env[variable] = str(port)
        if NET_PREFIX_VAR in self.environ:
            env[NET_PREFIX_VAR] = self.environ[NET_PREFIX_VAR]
        elif self._uses_variable(NET_PREFIX_VAR):
            env[NET_PREFIX_VAR] = self._free_prefix()
        self.env = env
        self.links = plan_links(self.layout, self._interpolation_env())
        config_path = work / "toxiproxy.json"
        config_path.write_text(toxiproxy_config_text(self.links), encoding="utf-8")
        self.env[TOXIPROXY_CONFIG_VAR] = str(config_path.resolve())
        self.files = [self.spec.compose_file]
        if self.spec.settings:
            override = work / "settings-override.yaml"
            environment = {f"PULSAR_PREFIX_{k}": _setting_text(v) for k, v in self.spec.settings.items()}
            override.write_text(yaml.safe_dump({"services": {
                b.compose_name: {"environment": environment} for b in self.layout.brokers}}, sort_keys=True),
                encoding="utf-8")
            self.files.append(override)
        write_json_atomic(work / "state.json", {
            "project": self.spec.project, "files": [str(f) for f in self.files], "env": self.env,
            "down": f"docker compose -p {self.spec.project} "
                    + " ".join(f"-f {f}" for f in self.files) + " down -v",
        })

    def _uses_variable(self, name: str) -> bool:
        return name in json.dumps(self.layout.document)

    def _free_prefix(self) -> str:
        """A 10.x prefix whose subnets (as the file spells them) overlap no Docker network."""
        taken: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        with contextlib.suppress(Exception):
            for network in self._client().networks.list():
                for config in ((network.attrs.get("IPAM") or {}).get("Config") or []):
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        taken.append(ipaddress.ip_network(config["Subnet"], strict=False))
        raw_subnets = [s for subnets in self.layout.network_subnets().values() for s in subnets]
        for prefix in PREFIX_CANDIDATES:
            try:
                wanted = [ipaddress.ip_network(interpolate(s, {NET_PREFIX_VAR: prefix}), strict=False)
                          for s in raw_subnets]
            except ValueError:
                continue
            if not any(w.overlaps(t) for w in wanted for t in taken if w.version == t.version):
                return prefix
        raise EnvironmentProblem("no free subnet for the per-broker networks: every prefix "
                                 f"{PREFIX_CANDIDATES[0]}..{PREFIX_CANDIDATES[-1]} overlaps a Docker network; "
                                 f"remove unused networks (`docker network prune`) or set {NET_PREFIX_VAR}")

    # ---- docker plumbing ----------------------------------------------------------------------

    def _compose(self, *args: str, timeout_s: float) -> CommandResult:
        argv = compose_argv(self.spec.docker, self.spec.project, [str(f) for f in self.files], *args)
        env = {**self.environ, **self.env}
        try:
            return self.runner.run(argv, env=env, timeout_s=timeout_s)
        except FileNotFoundError:
            raise EnvironmentProblem(f"`{self.spec.docker}` cannot be run; install Docker Engine 24+ with "
                                     "the Compose v2 plugin, or use --target embedded") from None

    def _client(self) -> Any:
        if self._docker is None:
            import docker

            try:
                if self.spec.docker_base_url:
                    self._docker = docker.DockerClient(base_url=self.spec.docker_base_url, version="auto",
                                                       timeout=60)
                else:
                    self._docker = docker.from_env(version="auto", timeout=60,
                                                   environment=dict(self.environ))
            except docker.errors.DockerException as err:
                raise EnvironmentProblem(f"cannot reach the Docker engine through the Docker SDK ({err}); "
                                         "is it running, and is DOCKER_HOST right?") from None
        return self._docker

    def _containers(self, service: ServiceSpec | None = None) -> list[Any]:
        labels = [f"{PROJECT_LABEL}={self.spec.project}"]
        if service is not None:
            labels.append(f"{SERVICE_LABEL}={service.compose_name}")
        return list(self._client().containers.list(all=True, filters={"label": labels}))

    def _states(self) -> dict[str, ContainerState]:
        out: dict[str, ContainerState] = {}
        for container in self._containers():
            labels = container.labels or {}
            compose_name = labels.get(SERVICE_LABEL, "")
            svc = self.layout.by_name(compose_name)
            out[svc.name if svc else compose_name] = _state_of(container.attrs)
        return out

    def _states_or_empty(self) -> dict[str, ContainerState]:
        if not self._up_attempted:
            return {}
        try:
            return self._states()
        except Exception:
            return {}

    def _state_word(self, name: str, state: ContainerState | None) -> str:
        if state is None:
            return "unknown"
        if state.status in ("running", "paused"):
            return state.status
        if state.status in ("exited", "dead", "created"):
            return "killed" if name in self._killed else "stopped"
        return "unknown"

    def _service(self, name: str) -> ServiceSpec:
        svc = self.layout.by_name(name)
        if svc is None or svc.is_one_shot:
            names = sorted(s.name for s in self.layout.long_running)
            raise KeyError(f"no service {name!r}; have {names}")
        return svc

    def _container(self, svc: ServiceSpec) -> Any:
        found = self._containers(svc)
        if not found:
            raise KeyError(f"no container for {svc.name} ({svc.compose_name}) in project {self.spec.project}; "
                           "is the cluster up?")
        return found[0]

    def _wait_state(self, svc: ServiceSpec, done: Callable[[ContainerState], bool], timeout_s: float,
                    wanted: str) -> None:
        deadline = time.monotonic() + timeout_s
        state: ContainerState | None = None
        while True:
            state = _state_of(self._container(svc).attrs)
            if done(state):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{svc.name} did not become {wanted} within {timeout_s:.0f}s "
                                   f"(status {state.status}, health {state.health})")
            time.sleep(min(0.1, self.spec.poll_s) if timeout_s <= STATE_TIMEOUT_S else self.spec.poll_s)

    def _tail(self, svc: ServiceSpec, lines: int = 30) -> str:
        try:
            raw = self._container(svc).logs(stdout=True, stderr=True, tail=lines)
            return raw.decode(errors="replace").rstrip()
        except Exception as err:
            return f"(no log: {err})"

    def _wait_ready(self, deadline: float) -> None:
        """Until every long-running container is healthy and the one-shots exited 0."""
        while True:
            states = self._states()
            pending: list[tuple[ServiceSpec, ContainerState | None]] = []
            for svc in self.layout.services:
                state = states.get(svc.name)
                if svc.is_one_shot:
                    if state is not None and state.status in ("exited", "dead"):
                        if state.exit_code != 0:
                            raise EnvironmentProblem(
                                f"{svc.compose_name} (cluster metadata initialisation) failed with exit code "
                                f"{state.exit_code}; last lines of its log:\n{self._tail(svc)}")
                        continue
                    pending.append((svc, state))
                    continue
                if state is not None and state.status in ("exited", "dead"):
                    raise EnvironmentProblem(f"{svc.compose_name} ({svc.name}) exited during start-up (code "
                                             f"{state.exit_code}); last lines of its log:\n{self._tail(svc)}")
                if state is not None and state.health == "unhealthy":
                    raise EnvironmentProblem(f"{svc.compose_name} ({svc.name}) is unhealthy (its health check "
                                             f"kept failing); last lines of its log:\n{self._tail(svc)}")
                if state is None or state.status != "running" or state.health not in (None, "healthy"):
                    pending.append((svc, state))
            if not pending:
                return
            if time.monotonic() >= deadline:
                detail = "; ".join(f"{s.compose_name}: {st.status + '/' + str(st.health) if st else 'no container'}"
                                   for s, st in pending)
                first = pending[0][0]
                raise EnvironmentProblem(
                    f"compose cluster not ready within {self.spec.ready_timeout_s:.0f}s ({detail}); "
                    f"last lines of {first.compose_name}:\n{self._tail(first)}")
            time.sleep(self.spec.poll_s)

    def _ensure_links(self) -> None:
        """Check through the Toxiproxy API that every link exists; create what is missing."""
        try:
            with self.toxiproxy() as client:
                have = client.proxies()
                wrong = [link for link in self.links if not _same_proxy(have.get(link.name), link)]
                if wrong:
                    client.populate([ProxySpec(name=link.name, upstream=link.upstream, listen=link.listen)
                                     for link in wrong])
                    have = client.proxies()
                    still = [link.name for link in self.links if not _same_proxy(have.get(link.name), link)]
                    if still:
                        raise EnvironmentProblem(f"Toxiproxy did not take the proxies {still}; see its log")
        except ToxiproxyError as err:
            raise EnvironmentProblem(f"cannot configure Toxiproxy at {self.toxiproxy_url}: {err}") from None

    # ---- addresses ----------------------------------------------------------------------------

    def _host_port(self, svc: ServiceSpec | None, container_port: int | None) -> int | None:
        if svc is None:
            return None
        binding = svc.port_for(container_port)
        return binding.host_port_in(self._interpolation_env()) if binding else None

    def _service_url(self, svc: ServiceSpec) -> str | None:
        for link in self.links:
            if link.dest == svc.name and link.host_listen:
                return f"pulsar://{link.host_listen}"
        return None

    def _admin_url(self, svc: ServiceSpec) -> str | None:
        if svc.role is not ServiceRole.BROKER:
            return None
        port = self._host_port(svc, svc.label_int(LABEL_HTTP_PORT))
        return f"http://{HOST}:{port}" if port else None

    def _metrics_url(self, svc: ServiceSpec) -> str | None:
        port = self._host_port(svc, svc.label_int(LABEL_METRICS_PORT))
        return f"http://{HOST}:{port}/metrics" if port else None


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _normal_listen(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    return ("*" if host in ("", "0.0.0.0", "::") else host, port)


def _same_proxy(proxy: Any, link: ProxyLink) -> bool:
    """Toxiproxy reports a 0.0.0.0 listener as [::]:port; compare what matters."""
    return (proxy is not None and _normal_listen(proxy.listen) == _normal_listen(link.listen)
            and proxy.upstream == link.upstream)

