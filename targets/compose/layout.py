"""A txnbench compose file, read into the roles the harness needs.

Theory of operation. A compose file is YAML with Compose's variable syntax in its
values (`${VAR:-default}`). The harness never asks Docker what the file means; it
reads the file itself, so it can validate a file and plan a run without a Docker
engine. Each service carries labels that map it onto the shared names of
harness.target: `txnbench.service` is `metadata`, `ledger`, `broker-<i>`,
`proxy` or `init` (a one-shot), and port labels say which container port does what:

    txnbench.port          the port other services dial (metadata, ledger, brokers)
    txnbench.http-port     a broker's web service (admin REST and /metrics)
    txnbench.client-port   Toxiproxy's container port for `client-broker-<i>`
    txnbench.metrics-port  the container port serving Prometheus text at /metrics
    txnbench.api-port      Toxiproxy's HTTP API

Published ports are written `127.0.0.1:${VAR:-default}:<container port>`, so the
harness can bind each to a free host port by setting VAR. The raw document is
kept uninterpolated; `interpolate()` applies an environment when one is chosen.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import TxnbenchError
from harness.target import ServiceRole
from harness.txn_paths import TxnPath

INIT = "init"
PROXY = "proxy"
METADATA = "metadata"
LEDGER = "ledger"
BROKER_NAME = re.compile(r"broker-(\d+)")
LABEL_SERVICE = "txnbench.service"
LABEL_PORT = "txnbench.port"
LABEL_HTTP_PORT = "txnbench.http-port"
LABEL_CLIENT_PORT = "txnbench.client-port"
LABEL_METRICS_PORT = "txnbench.metrics-port"
LABEL_API_PORT = "txnbench.api-port"
PREFIX = "PULSAR_PREFIX_"


class ComposeFileError(TxnbenchError):
    """A compose file cannot be read or does not follow txnbench's conventions."""

    exit_code = 2


# ---- Compose variable interpolation ------------------------------------------------------------

_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?err}`, `$$`."""

    def replace(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("braced") or match.group("named")
        op, arg = match.group("op"), match.group("arg") or ""
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return value if value is not None else arg
        if op in (":?", "?") and (value is None or (op == ":?" and not value)):
            raise ComposeFileError(f"variable {name} is required: {arg or 'not set'}")
        return value or ""

    return _VARIABLE.sub(replace, text)


def interpolate_tree(value: Any, env: Mapping[str, str]) -> Any:
    """Interpolate every string value (not keys) of a parsed document."""
    if isinstance(value, str):
        return interpolate(value, env)
    if isinstance(value, Mapping):
        return {k: interpolate_tree(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate_tree(v, env) for v in value]
    return value


def variable_default(text: str) -> tuple[str, str] | None:
    """`${VAR:-default}` (the whole text) -> (VAR, default)."""
    match = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?-([^}]*)\}", text.strip())
    return (match.group(1), match.group(2)) if match else None


# ---- YAML loading -----------------------------------------------------------------------------

class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, as Docker Compose does."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:   # the keys written here; `<<` merges may be overridden
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_document(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ComposeFileError(f"{source}: not valid YAML{where} ({problem}); "
                               "fix the file (check indentation and duplicate keys)") from None
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ComposeFileError(f"{source}: not a compose file (no `services:` mapping)")
    return data


# ---- the model --------------------------------------------------------------------------------

@dataclass(frozen=True)
class PortBinding:
    """One `ports:` entry. `host_port` may be a `${VAR:-default}` expression."""

    raw: str
    host_ip: str | None
    host_port: str | None
    container_port: int | None
    variable: str | None = None
    default: str | None = None

    def host_port_in(self, env: Mapping[str, str]) -> int | None:
        if self.host_port is None:
            return None
        text = interpolate(self.host_port, env)
        return int(text) if text.isdigit() else None


def _parse_long_port(entry: Mapping[str, Any]) -> PortBinding:
    target = str(entry.get("target"))
    published = entry.get("published")
    host_port = None if published is None else str(published)
    var = variable_default(host_port) if host_port else None
    return PortBinding(raw=str(dict(entry)), host_ip=entry.get("host_ip"), host_port=host_port,
                       container_port=int(target) if target.isdigit() else None,
                       variable=var[0] if var else None, default=var[1] if var else None)


def parse_port(entry: Any) -> PortBinding:
    """A short (`[ip:]host:container[/proto]`) or long (`target:`, `published:`) entry."""
    if isinstance(entry, Mapping):
        return _parse_long_port(entry)
    text = str(entry).split("/", 1)[0]
    # split on ':' outside ${...}
    parts: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if char == ":" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    host_ip: str | None = None
    host_port: str | None = None
    if len(parts) == 3:
        host_ip, host_port, container = parts
    elif len(parts) == 2:
        host_port, container = parts
    else:
        container = parts[0]
    var = variable_default(host_port) if host_port else None
    return PortBinding(raw=str(entry), host_ip=host_ip or None, host_port=host_port or None,
                       container_port=int(container) if container.isdigit() else None,
                       variable=var[0] if var else None, default=var[1] if var else None)


def _as_mapping(value: Any, separator: str = "=") -> dict[str, str]:
    """Compose's list-or-mapping fields (environment, labels, extra_hosts)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    for item in value:
        text = str(item)
        key, sep, rest = text.partition(separator)
        out[key] = rest if sep else ""
    return out


def _extra_hosts(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    for item in value or ():
        text = str(item)
        sep = "=" if "=" in text else ":"
        host, _, address = text.partition(sep)
        out[host] = address
    return out


@dataclass(frozen=True)
class ServiceSpec:
    """One compose service, raw (uninterpolated) values."""

    compose_name: str
    name: str                                  # txnbench.service label; compose name when absent
    labels: Mapping[str, str]
    ports: tuple[PortBinding, ...]
    networks: tuple[str, ...]
    environment: Mapping[str, str]
    extra_hosts: Mapping[str, str]
    healthcheck: Mapping[str, Any] | None
    restart: str | None
    image: str | None
    depends_on: tuple[str, ...]
    command: str
    raw: Mapping[str, Any] = field(repr=False, default_factory=dict)

    @property
    def role(self) -> ServiceRole | None:
        if self.name == METADATA:
            return ServiceRole.METADATA
        if self.name == LEDGER:
            return ServiceRole.LEDGER
        if self.name == PROXY:
            return ServiceRole.PROXY
        if BROKER_NAME.fullmatch(self.name):
            return ServiceRole.BROKER
        return None

    @property
    def is_one_shot(self) -> bool:
        return self.name == INIT

    @property
    def broker_index(self) -> int | None:
        match = BROKER_NAME.fullmatch(self.name)
        return int(match.group(1)) if match else None

    def label_int(self, key: str) -> int | None:
        value = self.labels.get(key)
        return int(value) if value is not None and value.strip().isdigit() else None

    def port_for(self, container_port: int | None) -> PortBinding | None:
        if container_port is None:
            return None
        for binding in self.ports:
            if binding.container_port == container_port:
                return binding
        return None

    def setting(self, key: str) -> str | None:
        """A broker setting as apply-config-from-env.py sees it (PULSAR_PREFIX_ wins)."""
        if PREFIX + key in self.environment:
            return self.environment[PREFIX + key]
        return self.environment.get(key)


def _service(compose_name: str, raw: Mapping[str, Any]) -> ServiceSpec:
    labels = _as_mapping(raw.get("labels"))
    networks_raw = raw.get("networks") or ()
    networks = tuple(networks_raw) if not isinstance(networks_raw, Mapping) else tuple(networks_raw.keys())
    depends = raw.get("depends_on") or ()
    depends_on = tuple(depends.keys()) if isinstance(depends, Mapping) else tuple(depends)
    command = raw.get("command") or ""
    command_text = command if isinstance(command, str) else " ".join(str(c) for c in command)
    healthcheck = raw.get("healthcheck")
    return ServiceSpec(
        compose_name=compose_name, name=labels.get(LABEL_SERVICE, compose_name), labels=labels,
        ports=tuple(parse_port(p) for p in raw.get("ports") or ()), networks=networks,
        environment=_as_mapping(raw.get("environment")), extra_hosts=_extra_hosts(raw.get("extra_hosts")),
        healthcheck=dict(healthcheck) if isinstance(healthcheck, Mapping) else None,
        restart=None if raw.get("restart") is None else str(raw.get("restart")),
        image=None if raw.get("image") is None else str(raw.get("image")),
        depends_on=depends_on, command=command_text, raw=raw,
    )


@dataclass(frozen=True)
class ComposeLayout:
    """A compose file as txnbench sees it."""

    source: Path
    txn_path: TxnPath | None
    services: tuple[ServiceSpec, ...]
    document: Mapping[str, Any] = field(repr=False, default_factory=dict)

    @property
    def extension(self) -> Mapping[str, Any]:
        ext = self.document.get("x-txnbench")
        return ext if isinstance(ext, Mapping) else {}

    def by_name(self, name: str) -> ServiceSpec | None:
        for svc in self.services:
            if svc.name == name or svc.compose_name == name:
                return svc
        return None

    def require(self, name: str) -> ServiceSpec:
        svc = self.by_name(name)
        if svc is None:
            raise ComposeFileError(f"{self.source}: no service labelled `{LABEL_SERVICE}: {name}`; "
                                   "label each service as compose/README.md describes")
        return svc

    @property
    def brokers(self) -> tuple[ServiceSpec, ...]:
        found = [s for s in self.services if s.role is ServiceRole.BROKER]
        return tuple(sorted(found, key=lambda s: s.broker_index or 0))

    @property
    def long_running(self) -> tuple[ServiceSpec, ...]:
        return tuple(s for s in self.services if not s.is_one_shot)

    @property
    def default_toxiproxy_config(self) -> Path | None:
        rel = self.extension.get("toxiproxy-config")
        return (self.source.parent / str(rel)) if rel else None

    def network_subnets(self) -> dict[str, list[str]]:
        """Raw `ipam.config[].subnet` strings per network."""
        out: dict[str, list[str]] = {}
        for name, net in (self.document.get("networks") or {}).items():
            configs = ((net or {}).get("ipam") or {}).get("config") or []
            out[str(name)] = [str(c["subnet"]) for c in configs if isinstance(c, Mapping) and "subnet" in c]
        return out

    def proxy_address_on(self, network: str, env: Mapping[str, str]) -> str | None:
        """Toxiproxy's static IPv4 address on `network` (interpolated)."""
        proxy = self.by_name(PROXY)
        if proxy is None:
            return None
        nets = proxy.raw.get("networks")
        if not isinstance(nets, Mapping):
            return None
        entry = nets.get(network)
        if not isinstance(entry, Mapping) or "ipv4_address" not in entry:
            return None
        return interpolate(str(entry["ipv4_address"]), env)

    def port_variables(self) -> dict[str, str]:
        """Every host-port variable of a published port -> its default."""
        out: dict[str, str] = {}
        for svc in self.services:
            for binding in svc.ports:
                if binding.variable:
                    out[binding.variable] = binding.default or ""
        return out


def parse_layout(document: Mapping[str, Any], source: Path) -> ComposeLayout:
    services = tuple(_service(str(name), raw or {}) for name, raw in document["services"].items())
    ext = document.get("x-txnbench")
    path_text = ext.get("path") if isinstance(ext, Mapping) else None
    try:
        txn_path = TxnPath(path_text) if path_text else None
    except ValueError:
        txn_path = None
    return ComposeLayout(source=source, txn_path=txn_path, services=services, document=document)


def load_layout(source: Path) -> ComposeLayout:
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as err:
        raise ComposeFileError(f"cannot read compose file {source}: {err.strerror or err}; "
                               "check cluster.compose_file") from None
    return parse_layout(load_document(text, str(source)), source)


def setting_keys(environment: Mapping[str, str], plain_keys: Sequence[str] = ()) -> dict[str, str]:
    """Broker settings named by an environment: PULSAR_PREFIX_ keys and the listed plain keys."""
    out = {k: environment[k] for k in plain_keys if k in environment}
    out.update({k[len(PREFIX):]: v for k, v in environment.items() if k.startswith(PREFIX)})
    return out
