"""Stand-ins for Docker and Toxiproxy, served over HTTP on 127.0.0.1 like the real ones.

`FakeDockerEngine` answers the part of the Docker Engine API that the Docker SDK
uses for listing, inspecting, killing, starting, pausing and unpausing containers,
reading their logs and listing networks, and records every action.
`FakeToxiproxy` answers the Toxiproxy HTTP API and records every change.
`FakeCompose` is a `CommandRunner` that plays `docker compose`: `up` creates the
project's containers in the fake engine and starts fake servers on the host ports
the run chose (the Toxiproxy API, each published /metrics), `down` removes them.
"""

from __future__ import annotations

import json
import re
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from targets.compose.engine import CommandResult
from targets.compose.layout import ComposeLayout, interpolate
from tests.fake_http import HOST, FakeHttpServer


def _json(status: int, data: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(data).encode()


# ---- Docker ------------------------------------------------------------------------------------

@dataclass
class FakeContainer:
    id: str
    name: str
    labels: dict[str, str]
    status: str = "running"
    health: str | None = "healthy"
    exit_code: int = 0
    pid: int = 4242
    log: bytes = b"started\n"
    health_script: list[str] = field(default_factory=list)   # health states the next inspections report

    def inspect(self) -> dict[str, Any]:
        if self.health_script and self.status == "running":
            self.health = self.health_script.pop(0)
        state: dict[str, Any] = {"Status": self.status, "Running": self.status in ("running", "paused"),
                                 "Paused": self.status == "paused", "ExitCode": self.exit_code,
                                 "Pid": self.pid if self.status in ("running", "paused") else 0}
        if self.health is not None:
            state["Health"] = {"Status": self.health}
        return {"Id": self.id, "Name": "/" + self.name, "State": state,
                "Config": {"Labels": self.labels, "Tty": False}, "NetworkSettings": {"Ports": {}}}

    def summary(self) -> dict[str, Any]:
        return {"Id": self.id, "Names": ["/" + self.name], "Labels": self.labels, "State": self.status}


class FakeDockerEngine(FakeHttpServer):
    API = "1.45"

    def __init__(self) -> None:
        self.containers: dict[str, FakeContainer] = {}
        self.networks: list[dict[str, Any]] = []
        self.actions: list[tuple[str, str]] = []       # (action, container name)
        self.lock = threading.Lock()
        super().__init__()

    @property
    def base_url(self) -> str:
        return f"tcp://{HOST}:{self.port}"

    def add(self, container: FakeContainer) -> None:
        with self.lock:
            self.containers[container.id] = container

    def by_service(self, compose_name: str) -> FakeContainer:
        for container in self.containers.values():
            if container.labels.get("com.docker.compose.service") == compose_name:
                return container
        raise KeyError(compose_name)

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(path)
        route = re.sub(r"^/v[\d.]+", "", parts.path)
        query = parse_qs(parts.query)
        with self.lock:
            if route == "/version":
                return _json(200, {"ApiVersion": self.API, "Version": "27.3.1", "MinAPIVersion": "1.24"})
            if route == "/networks" and method == "GET":
                return _json(200, self.networks)
            if route == "/containers/json":
                wanted = json.loads(query.get("filters", ["{}"])[0]).get("label", [])
                if isinstance(wanted, dict):
                    wanted = [k for k, v in wanted.items() if v]
                found = [c.summary() for c in self.containers.values()
                         if all(self._has_label(c, w) for w in wanted)]
                return _json(200, found)
            match = re.fullmatch(r"/containers/([^/]+)/(json|kill|start|pause|unpause|logs)", route)
            if not match or match.group(1) not in self.containers:
                return _json(404, {"message": f"no such container: {route}"})
            container = self.containers[match.group(1)]
            action = match.group(2)
            if action == "json":
                return _json(200, container.inspect())
            if action == "logs":
                payload = struct.pack(">BxxxL", 1, len(container.log)) + container.log
                return 200, {"Content-Type": "application/vnd.docker.raw-stream"}, payload
            self.actions.append((action + (f":{query['signal'][0]}" if "signal" in query else ""),
                                 container.name))
            if action == "kill":
                if container.status == "paused":
                    return _json(409, {"message": "container is paused"})
                container.status, container.exit_code = "exited", 137
            elif action == "start":
                container.status, container.exit_code = "running", 0
                if container.health is not None:
                    container.health = "starting" if container.health_script else "healthy"
            elif action == "pause":
                container.status = "paused"
            elif action == "unpause":
                container.status = "running"
            return 204, {}, b""

    @staticmethod
    def _has_label(container: FakeContainer, wanted: str) -> bool:
        key, sep, value = wanted.partition("=")
        return key in container.labels and (not sep or container.labels[key] == value)


# ---- Toxiproxy ---------------------------------------------------------------------------------

class FakeToxiproxy(FakeHttpServer):
    """Toxiproxy's API; a 0.0.0.0 listener is reported as [::]:port, as Toxiproxy does."""

    def __init__(self, port: int = 0, initial: Sequence[Mapping[str, Any]] = ()) -> None:
        self.proxies: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        for spec in initial:
            self._put(spec)
        super().__init__(port)

    def _put(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        listen = str(spec["listen"])
        if listen.startswith("0.0.0.0:"):
            listen = "[::]:" + listen.split(":", 1)[1]
        proxy = {"name": spec["name"], "listen": listen, "upstream": spec["upstream"],
                 "enabled": bool(spec.get("enabled", True)), "toxics": []}
        self.proxies[spec["name"]] = proxy
        return proxy

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        data: Any = json.loads(body) if body else {}
        route = urlsplit(path).path
        with self.lock:
            self.requests.append((method, route, data or None))
            if route == "/version":
                return _json(200, {"version": "2.12.0"})
            if route == "/metrics":
                return 200, {"Content-Type": "text/plain"}, b"toxiproxy_proxy_received_bytes_total 1\n"
            if route == "/reset" and method == "POST":
                for proxy in self.proxies.values():
                    proxy["enabled"], proxy["toxics"] = True, []
                return 204, {}, b""
            if route == "/proxies" and method == "GET":
                return _json(200, self.proxies)
            if route == "/populate" and method == "POST":
                return _json(201, {"proxies": [self._put(spec) for spec in data]})
            match = re.fullmatch(r"/proxies/([^/]+)(?:/toxics(?:/([^/]+))?)?", route)
            if not match or match.group(1) not in self.proxies:
                return _json(404, {"error": "proxy not found", "status": 404})
            proxy = self.proxies[match.group(1)]
            if route.endswith("/toxics") and method == "POST":
                toxic = {"name": data.get("name") or f"{data['type']}_{data.get('stream', 'downstream')}",
                         "type": data["type"], "stream": data.get("stream", "downstream"),
                         "toxicity": data.get("toxicity", 1.0), "attributes": data.get("attributes", {})}
                proxy["toxics"].append(toxic)
                return _json(200, toxic)
            if match.group(2) and method == "DELETE":
                proxy["toxics"] = [t for t in proxy["toxics"] if t["name"] != match.group(2)]
                return 204, {}, b""
            if method in ("POST", "PATCH") and not match.group(2):
                proxy.update({k: v for k, v in data.items() if k in ("enabled", "listen", "upstream")})
                return _json(200, proxy)
            if method == "GET":
                return _json(200, proxy)
            return _json(405, {"error": "not allowed", "status": 405})


# ---- published endpoints ------------------------------------------------------------------------

class FakeEndpoint(FakeHttpServer):
    """A published port: /metrics, and a hook for admin paths."""

    def __init__(self, port: int, name: str,
                 admin: Callable[[str, str, bytes], tuple[int, dict[str, str], bytes]] | None = None) -> None:
        self.name = name
        self.admin = admin
        self.requests: list[tuple[str, str]] = []
        super().__init__(port)

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        self.requests.append((method, path))
        if path == "/metrics":
            return 200, {"Content-Type": "text/plain"}, f"fake_up{{service=\"{self.name}\"}} 1\n".encode()
        if self.admin is not None:
            return self.admin(method, path, body)
        return 404, {}, b"not found"


# ---- docker compose ----------------------------------------------------------------------------

@dataclass
class FakeCompose:
    """A CommandRunner playing the docker CLI against a FakeDockerEngine."""

    engine: FakeDockerEngine
    layout: ComposeLayout
    compose_version: str = "2.29.7"
    engine_version: str = "27.3.1"
    compose_missing: bool = False
    engine_down: bool = False
    up_exit: int = 0
    init_exit: int = 0
    unhealthy: str | None = None          # a compose service whose health check fails
    never_healthy: str | None = None      # a compose service stuck in `starting`
    toxiproxy_from_config: bool = True    # populate proxies from the -config file, as Toxiproxy does
    commands: list[tuple[str, ...]] = field(default_factory=list)
    envs: list[dict[str, str]] = field(default_factory=list)
    servers: list[Any] = field(default_factory=list)
    toxiproxy: FakeToxiproxy | None = None

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            timeout_s: float = 60.0) -> CommandResult:
        argv = tuple(argv)
        env = dict(env or {})
        self.commands.append(argv)
        self.envs.append(env)
        if argv[1:] == ("compose", "version", "--short"):
            if self.compose_missing:
                return CommandResult(argv, 1, "", "docker: 'compose' is not a docker command.")
            return CommandResult(argv, 0, self.compose_version + "\n", "")
        if argv[1] == "version":
            if self.engine_down:
                return CommandResult(argv, 1, "", "Cannot connect to the Docker daemon at "
                                                  "unix:///var/run/docker.sock. Is the docker daemon running?")
            return CommandResult(argv, 0, self.engine_version + "\n", "")
        if "up" in argv:
            return self._up(argv, env)
        if "down" in argv:
            self._down()
            return CommandResult(argv, 0, "", "Container removed\n")
        if "logs" in argv:
            return CommandResult(argv, 0, "all logs\n", "")
        return CommandResult(argv, 2, "", f"unexpected command {argv}")

    def _up(self, argv: tuple[str, ...], env: dict[str, str]) -> CommandResult:
        if self.up_exit:
            return CommandResult(argv, self.up_exit, "", "Error response from daemon: pull access denied")
        project = argv[argv.index("--project-name") + 1]
        for index, svc in enumerate(self.layout.services):
            labels = {"com.docker.compose.project": project, "com.docker.compose.service": svc.compose_name,
                      **dict(svc.labels)}
            container = FakeContainer(id=f"c{index:02d}{svc.compose_name}", name=f"{project}-{svc.compose_name}-1",
                                      labels=labels, log=f"{svc.compose_name} log line\n".encode())
            if svc.is_one_shot:
                container.status, container.health, container.exit_code = "exited", None, self.init_exit
                container.log = b"Cluster metadata for 'txnbench' setup correctly\n" if not self.init_exit \
                    else b"ERROR failed to connect to the metadata store\n"
            if svc.compose_name == self.unhealthy:
                container.health = "unhealthy"
            if svc.compose_name == self.never_healthy:
                container.health = "starting"
            self.engine.add(container)
            for binding in svc.ports:
                port = binding.host_port_in(env)
                if port is None:
                    continue
                if svc.name == "proxy" and binding.container_port == svc.label_int("txnbench.api-port"):
                    initial: list[dict[str, Any]] = []
                    config = env.get("TXNBENCH_TOXIPROXY_CONFIG")
                    if self.toxiproxy_from_config and config:
                        initial = json.loads(Path(config).read_text())
                    self.toxiproxy = FakeToxiproxy(port, initial)
                    self.servers.append(self.toxiproxy)
                elif binding.container_port == svc.label_int("txnbench.metrics-port"):
                    self.servers.append(FakeEndpoint(port, svc.name))
        return CommandResult(argv, 0, "", "Container started\n")

    def _down(self) -> None:
        with self.engine.lock:
            self.engine.containers.clear()
        self.close_servers()

    def close_servers(self) -> None:
        while self.servers:
            self.servers.pop().close()


def published(layout: ComposeLayout, env: Mapping[str, str], service: str, container_port: int) -> int:
    svc = layout.by_name(service)
    assert svc is not None
    binding = svc.port_for(container_port)
    assert binding is not None and binding.host_port is not None
    return int(interpolate(binding.host_port, env))
