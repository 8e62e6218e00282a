"""Static checks of a txnbench compose file: what must hold before Docker ever sees it.

Why static: the machines that write and review these files often have no Docker
engine, and a compose cluster that starts but quietly runs the wrong transaction
path (or publishes a port on every interface) would make a whole nightly run
meaningless. So the rules a run depends on are checked here, on the YAML alone,
by the unit tests and by the compose target before `docker compose up`:

* roles: one `metadata`, one `ledger`, one `proxy`, an `init` one-shot that runs
  `initialize-cluster-metadata` and `initialize-transaction-coordinator-metadata`,
  and at least two brokers `broker-0` ... `broker-<n-1>`;
* every long-running service has a health check and no restart policy (a restart
  policy would undo the nemesis's kills);
* every published port is bound to 127.0.0.1 with a `${VAR:-default}` host port;
* every image is pinned to a version tag (or digest), never `latest`;
* each broker has the transaction settings of the file's path, advertises an
  `internal` listener and an `external` one through its Toxiproxy client port, and
  reaches every dependency through Toxiproxy (one network, `extra_hosts` to the
  proxy's address on it);
* the committed default Toxiproxy config matches the links the file implies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.target import ServiceRole
from harness.txn_paths import TxnPath
from targets.compose.layout import (
    INIT,
    LABEL_API_PORT,
    LABEL_CLIENT_PORT,
    LABEL_HTTP_PORT,
    LABEL_METRICS_PORT,
    LABEL_PORT,
    LEDGER,
    METADATA,
    PREFIX,
    PROXY,
    ComposeFileError,
    ComposeLayout,
    ServiceSpec,
    interpolate,
    load_layout,
)
from targets.compose.links import plan_links, toxiproxy_config

LOOPBACK = "127.0.0.1"
RESTART_OK = {"no", "\"no\"", "'no'"}
INIT_COMMANDS = ("initialize-cluster-metadata", "initialize-transaction-coordinator-metadata")

BATCH_SWITCHES = ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled")
BATCH_LIMITS = {   # PIP-160 limits and the broker's lower bounds (TransactionBatchedWriteValidator)
    "transactionLogBatchedWriteMaxRecords": 10,
    "transactionLogBatchedWriteMaxSize": 128 * 1024,
    "transactionLogBatchedWriteMaxDelayInMillis": 1,
    "transactionPendingAckBatchedWriteMaxRecords": 10,
    "transactionPendingAckBatchedWriteMaxSize": 128 * 1024,
    "transactionPendingAckBatchedWriteMaxDelayInMillis": 1,
}
V5_SWITCHES = ("scalableTopicsEnabled", "transactionCoordinatorScalableTopicsEnabled")
ALWAYS_ON = ("transactionCoordinatorEnabled", "systemTopicEnabled")
TXN_KEY = re.compile(r"(transaction|scalableTopics|systemTopicEnabled)")


@dataclass(frozen=True)
class Problem:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def _is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def _is_false(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "false"


def _pinned(image: str) -> str | None:
    """None when pinned, else why not. `${VAR:-image}` is judged by its default."""
    text = interpolate(image, {})
    if not text:
        return "has no image (or only a variable without a default)"
    if "@sha256:" in text:
        return None
    name, _, tag = text.rpartition(":")
    if not name or "/" in tag:
        return f"{text!r} has no tag; pin a version, e.g. {text}:1.2.3"
    if tag == "latest" or not re.search(r"\d", tag):
        return f"{text!r} is not pinned to a version (tag {tag!r}); use a release tag"
    return None


def _check_service_basics(layout: ComposeLayout, svc: ServiceSpec) -> Iterator[Problem]:
    where = f"{layout.source.name}: {svc.compose_name}"
    if svc.image is None:
        yield Problem(where, "has no image")
    else:
        why = _pinned(svc.image)
        if why:
            yield Problem(where, f"image {why}")
    if svc.raw.get("network_mode") == "host":
        yield Problem(where, "uses network_mode: host, which exposes every port on every interface")
    for binding in svc.ports:
        if binding.host_ip != LOOPBACK:
            yield Problem(where, f"port {binding.raw!r} is published on "
                                 f"{binding.host_ip or 'all interfaces'}; bind it to 127.0.0.1 "
                                 "as `127.0.0.1:${VAR:-port}:container_port`")
        elif binding.variable is None:
            yield Problem(where, f"port {binding.raw!r} has a fixed host port; write it as "
                                 "`127.0.0.1:${VAR:-port}:container_port` so each run can pick a free one")
        if binding.container_port is None:
            yield Problem(where, f"port {binding.raw!r} has no numeric container port")
    if svc.is_one_shot:
        return
    check = svc.healthcheck
    test = check.get("test") if check else None
    if not check or check.get("disable") or not test or test in (["NONE"], "NONE"):
        yield Problem(where, "has no health check; every long-running service needs one "
                             "(the harness waits on it)")
    restart = svc.restart
    if restart is not None and restart.strip() not in RESTART_OK:
        yield Problem(where, f"has restart: {restart}; use \"no\" so a killed process stays down "
                             "until the nemesis starts it")
    metrics = svc.label_int(LABEL_METRICS_PORT)
    if metrics is not None and svc.port_for(metrics) is None:
        yield Problem(where, f"metrics port {metrics} is not published; add "
                             f"`127.0.0.1:${{VAR:-port}}:{metrics}` to its ports")


def _check_roles(layout: ComposeLayout) -> Iterator[Problem]:
    where = layout.source.name
    if layout.txn_path is None:
        yield Problem(where, "x-txnbench.path is missing or not one of v4, v4-batched, v5")
    for name in (METADATA, LEDGER, PROXY, INIT):
        count = sum(1 for s in layout.services if s.name == name)
        if count != 1:
            yield Problem(where, f"needs exactly one service labelled `txnbench.service: {name}`, "
                                 f"found {count}")
    unknown = [s.compose_name for s in layout.services if s.role is None and not s.is_one_shot]
    if unknown:
        yield Problem(where, f"services without a txnbench role label: {unknown}")
    brokers = layout.brokers
    if len(brokers) < 2:
        yield Problem(where, f"needs at least two brokers, found {len(brokers)}")
    indexes = [b.broker_index for b in brokers]
    if indexes != list(range(len(brokers))):
        yield Problem(where, f"brokers must be broker-0 ... broker-{len(brokers) - 1}, found {indexes}")
    init = layout.by_name(INIT)
    if init is not None:
        for command in INIT_COMMANDS:
            if command not in init.command:
                yield Problem(f"{where}: {init.compose_name}", f"does not run `pulsar {command}`")


def _txn_settings(broker: ServiceSpec) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in broker.environment.items():
        name = key[len(PREFIX):] if key.startswith(PREFIX) else key
        if TXN_KEY.search(name):
            out[name] = value
    return out


def _check_transactions(layout: ComposeLayout, broker: ServiceSpec) -> Iterator[Problem]:
    where = f"{layout.source.name}: {broker.compose_name}"
    env = broker.environment
    for key in list(env):
        if key.startswith(PREFIX) and key[len(PREFIX):] in env and env[key] != env[key[len(PREFIX):]]:
            yield Problem(where, f"sets both {key[len(PREFIX):]} and {key} to different values")
    for key in ALWAYS_ON:
        if not _is_true(broker.setting(key)):
            yield Problem(where, f"{key} must be true (transactions need it); set PULSAR_PREFIX_{key}: \"true\"")
    txn_path = layout.txn_path
    if txn_path is TxnPath.V4:
        for key in BATCH_SWITCHES:
            if not _is_false(broker.setting(key)):
                yield Problem(where, f"path v4 needs {key}: \"false\" (PIP-160 batching off), "
                                     f"found {broker.setting(key)!r}")
    if txn_path is TxnPath.V4_BATCHED:
        for key in BATCH_SWITCHES:
            if not _is_true(broker.setting(key)):
                yield Problem(where, f"path v4-batched needs {key}: \"true\", found {broker.setting(key)!r}")
        for key, minimum in BATCH_LIMITS.items():
            value = broker.setting(key)
            if value is None or not value.strip().isdigit():
                yield Problem(where, f"path v4-batched needs {key} (a number >= {minimum})")
            elif int(value) < minimum:
                yield Problem(where, f"{key} is {value}; the broker refuses values below {minimum}")
    if txn_path in (TxnPath.V4, TxnPath.V4_BATCHED):
        for key in V5_SWITCHES:
            if _is_true(broker.setting(key)):
                yield Problem(where, f"path {txn_path.value} must not enable {key}")
    if txn_path is TxnPath.V5:
        for key in V5_SWITCHES:
            if not _is_true(broker.setting(key)):
                yield Problem(where, f"path v5 needs {key}: \"true\" (via PULSAR_PREFIX_{key}; "
                                     "it is not in broker.conf)")
        for key in BATCH_SWITCHES:
            if _is_true(broker.setting(key)):
                yield Problem(where, f"path v5 must not enable {key}")


def _check_broker(layout: ComposeLayout, broker: ServiceSpec) -> Iterator[Problem]:
    where = f"{layout.source.name}: {broker.compose_name}"
    labels = {label: broker.label_int(label)
              for label in (LABEL_PORT, LABEL_HTTP_PORT, LABEL_CLIENT_PORT, LABEL_METRICS_PORT)}
    for label, value in labels.items():
        if value is None:
            yield Problem(where, f"needs a numeric `{label}` label")
    port, http, client = labels[LABEL_PORT], labels[LABEL_HTTP_PORT], labels[LABEL_CLIENT_PORT]
    if port is not None and broker.setting("brokerServicePort") != str(port):
        yield Problem(where, f"brokerServicePort must equal its txnbench.port label ({port})")
    if http is not None:
        if broker.setting("webServicePort") != str(http):
            yield Problem(where, f"webServicePort must equal its txnbench.http-port label ({http})")
        if broker.port_for(http) is None:
            yield Problem(where, f"its web service port {http} is not published on 127.0.0.1")
    listeners = broker.setting("advertisedListeners") or ""
    if broker.setting("internalListenerName") != "internal":
        yield Problem(where, "internalListenerName must be `internal` (broker-to-broker traffic)")
    if port is not None and f"internal:pulsar://{broker.compose_name}:{port}" not in listeners:
        yield Problem(where, f"advertisedListeners needs internal:pulsar://{broker.compose_name}:{port}")
    proxy = layout.by_name(PROXY)
    binding = proxy.port_for(client) if proxy is not None else None
    if binding is None:
        yield Problem(where, f"Toxiproxy does not publish its client port {client} for this broker")
    elif f"external:pulsar://{LOOPBACK}:{binding.host_port}" not in listeners:
        yield Problem(where, f"advertisedListeners needs external:pulsar://{LOOPBACK}:{binding.host_port} "
                             "(the Toxiproxy port clients dial; the same variable as the proxy's port)")
    yield from _check_transactions(layout, broker)
    metadata = layout.by_name(METADATA)
    store = broker.setting("metadataStoreUrl") or ""
    if metadata is not None and metadata.compose_name not in store:
        yield Problem(where, f"metadataStoreUrl {store!r} does not name the metadata service "
                             f"{metadata.compose_name}")
    if len(broker.networks) != 1:
        yield Problem(where, f"must be attached to exactly one network (its own), not {list(broker.networks)}; "
                             "otherwise its traffic bypasses Toxiproxy")
        return
    network = broker.networks[0]
    address = None
    if proxy is not None:
        nets = proxy.raw.get("networks")
        entry = nets.get(network) if isinstance(nets, Mapping) else None
        address = entry.get("ipv4_address") if isinstance(entry, Mapping) else None
    if address is None:
        yield Problem(where, f"Toxiproxy has no ipv4_address on network {network}")
        return
    targets = [s.compose_name for s in layout.services
               if s.role in (ServiceRole.METADATA, ServiceRole.LEDGER) or
               (s.role is ServiceRole.BROKER and s is not broker)]
    for target in targets:
        if broker.extra_hosts.get(target) != str(address):
            yield Problem(where, f"extra_hosts must send {target} to Toxiproxy ({address}) so the link "
                                 f"{broker.name} -> {target} can be faulted")
    others = [s.compose_name for s in layout.services if s is not broker and network in s.networks
              and s.role is not ServiceRole.PROXY]
    if others:
        yield Problem(where, f"network {network} is shared with {others}; each broker needs its own")


def _check_proxy(layout: ComposeLayout) -> Iterator[Problem]:
    proxy = layout.by_name(PROXY)
    if proxy is None:
        return
    where = f"{layout.source.name}: {proxy.compose_name}"
    api = proxy.label_int(LABEL_API_PORT)
    if api is None or proxy.port_for(api) is None:
        yield Problem(where, "must publish its API port (label txnbench.api-port) on 127.0.0.1")
    if "-host=0.0.0.0" not in proxy.command:
        yield Problem(where, "Toxiproxy must listen on -host=0.0.0.0 inside its container")
    if "-config=" not in proxy.command:
        yield Problem(where, "Toxiproxy needs -config=<file> so its proxies exist before the brokers start")
    for net, subnets in layout.network_subnets().items():
        if any(net in b.networks for b in layout.brokers) and not subnets:
            yield Problem(f"{layout.source.name}: networks.{net}", "needs an ipam subnet "
                          "(Toxiproxy's address on it is fixed)")


def _check_default_config(layout: ComposeLayout) -> Iterator[Problem]:
    path = layout.default_toxiproxy_config
    where = layout.source.name
    if path is None:
        yield Problem(where, "x-txnbench.toxiproxy-config (the default Toxiproxy config) is missing")
        return
    try:
        expected = toxiproxy_config(plan_links(layout, {}))
    except ComposeFileError as err:
        yield Problem(where, f"cannot plan the Toxiproxy links: {err}")
        return
    try:
        actual = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        yield Problem(where, f"cannot read the default Toxiproxy config {path}: {err}; regenerate it with "
                             "`python -m targets.compose write-configs`")
        return
    if actual != expected:
        yield Problem(where, f"{path.name} does not match the links the file implies; regenerate it with "
                             "`python -m targets.compose write-configs`")


def validate_layout(layout: ComposeLayout, *, check_default_config: bool = True) -> list[Problem]:
    """Every problem of the file; an empty list means the harness can run it."""
    problems: list[Problem] = list(_check_roles(layout))
    for svc in layout.services:
        problems.extend(_check_service_basics(layout, svc))
    for broker in layout.brokers:
        problems.extend(_check_broker(layout, broker))
    problems.extend(_check_proxy(layout))
    settings = [_txn_settings(b) for b in layout.brokers]
    if any(s != settings[0] for s in settings[1:]):
        problems.append(Problem(layout.source.name, "brokers differ in their transaction settings"))
    if check_default_config:
        problems.extend(_check_default_config(layout))
    return problems


def validate_file(path: Path, *, check_default_config: bool = True) -> list[Problem]:
    return validate_layout(load_layout(path), check_default_config=check_default_config)
