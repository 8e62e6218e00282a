"""The fault kinds: one registry entry per kind, everything the rest of the program asks of it.

`FaultKind` names the kinds (the `kind:` of a scenario's fault); `KINDS` holds, for each,
what it accepts (targets, parameters, paths), what it needs from a target, how it is
injected and healed in a run's environment (`action`), and the flags by which the schedule,
the resolver and the nemesis treat it (`network`, `process_fault`, `topic_fault`,
`waits_healthy_on_heal`). A new kind is one enum member and one entry here, plus its action
class in faults.actions. docs/scenarios.md's fault-kind table is rendered from `KINDS`
(orchestrator/scenario_doc.py); faults/README.md says how each kind is implemented.

The scenario config (harness.config) keeps a kind as text, since the base package does not
import this one; `kind_of` turns it into a `FaultKind` where a scenario is validated
(faults.validate.check_scenario, orchestrator.scenario.load) and planned (faults.schedule),
with the same one-line error for a kind that does not exist.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from faults.actions import (
    ClientKillAction,
    CorruptAction,
    CrashAction,
    KillAction,
    MergeAction,
    PartitionAction,
    PauseAction,
    RestartAction,
    SplitAction,
    TerminateAction,
    ToxicAction,
    UnloadAction,
)
from faults.model import Fault, FaultAction, LoadControl, NetworkApi, TopicAdmin
from faults.proxy.toxics import ToxicType
from faults.selectors import (
    ClientsSelector,
    DefaultSelector,
    Direction,
    LinkSelector,
    LoadSelector,
    SegmentSelector,
    Selector,
    ServiceClass,
    ServiceSelector,
    TopicSelector,
    parse_selector,
)
from harness.errors import ConfigError
from harness.target import CrashAim, DamagedFile, ProcessControl
from harness.txn_paths import ALL_PATHS, TxnPath

if TYPE_CHECKING:   # faults.environment imports this module (Capability)
    from faults.environment import FaultEnvironment

# The v5 GC settings a slow participant must outlast, and Pulsar's defaults (facts file C.3).
GC_RETENTION_KEY = "transactionCoordinatorScalableTopicsGcRetentionSeconds"
GC_INTERVAL_KEY = "transactionCoordinatorScalableTopicsGcIntervalSeconds"
PULSAR_GC_RETENTION_S = 900
PULSAR_GC_INTERVAL_S = 300
SLOW_PARTICIPANT_MARGIN_S = 2.0
# A slow participant must keep its metadata session (Pulsar's default 30 s), or it stops
# being a participant: its topics move to a broker that is not slow.
SESSION_TIMEOUT_KEY = "metadataStoreSessionTimeoutMillis"
PULSAR_SESSION_TIMEOUT_MS = 30_000


class FaultKind(StrEnum):
    """What the nemesis can break (a scenario's `kind:`)."""

    PARTITION = "partition"          # cut a link (client-broker, broker-broker, broker-metadata, broker-ledger)
    LATENCY = "latency"              # delay (and jitter) a link
    BANDWIDTH = "bandwidth"          # limit a link's rate
    KILL = "kill"                    # kill -9 a process, restart it when healed
    PAUSE = "pause"                  # SIGSTOP a process, SIGCONT when healed
    SPLIT = "split"                  # split a v5 segment mid-transaction
    MERGE = "merge"                  # merge two v5 segments mid-transaction
    TERMINATE = "terminate"          # seal a v5 segment or terminate a v4 topic
    SLOW_PARTICIPANT = "slow-participant"  # delay one broker's metadata link past the v5 GC retention
    RESTART = "restart"              # graceful stop (SIGTERM) of a process, started again when healed
    UNLOAD = "unload"                # unload a topic, partition or v5 segment: its ownership moves, no crash
    CLIENT_KILL = "client-kill"      # kill -9 a Locust worker of the load: its open transactions are abandoned
    CLIENT_ISOLATE = "client-isolate"  # cut every client off from every broker for longer than the txn timeout
    CRASH = "crash"                  # power loss of a store: kill -9, its unsynced writes lost or torn; restart
    CORRUPT = "corrupt"              # a bit of a store's durable file flipped: its recovery must refuse it


def kind_of(text: str, source: str, key: str) -> FaultKind:
    """The kind a scenario names; a ConfigError naming the file, the key and the closest kind otherwise."""
    try:
        return FaultKind(text)
    except ValueError:
        choices = [k.value for k in FaultKind]
        close = difflib.get_close_matches(str(text), choices, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"use one of: {', '.join(choices)}"
        raise ConfigError(source, key, f"{text!r} is not a valid choice", fix) from None


class Capability(StrEnum):
    """What a fault needs from the target and the run."""

    NETWORK = "network"        # a Toxiproxy API in front of the links
    PROCESSES = "processes"    # kill/start/pause/resume (ProcessControl)
    ADMIN = "admin"            # admin REST for topics and segments
    TOPICS = "topics"          # the run's topic list (the workload topology)
    COORDINATORS = "coordinators"  # a client that can say which broker hosts each coordinator
    LOAD = "load"              # the load process kills and replaces its workers (harness.load_control)


class ParamError(ValueError):
    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.key, self.problem, self.fix = key, problem, fix


@dataclass(frozen=True)
class Param:
    default: Any
    help: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()

    def convert(self, name: str, value: Any) -> Any:
        if self.choices:
            if value not in self.choices:
                raise ParamError(name, f"{value!r} is not one of {', '.join(self.choices)}",
                                 f"use one of: {', '.join(self.choices)}")
            return value
        if value is None and self.default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamError(name, f"expected a whole number ({self.help}), found {value!r}",
                             "write an integer such as 200")
        if self.minimum is not None and value < self.minimum:
            raise ParamError(name, f"{value} is below the minimum {self.minimum}", f"use >= {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ParamError(name, f"{value} is above the maximum {self.maximum}", f"use <= {self.maximum}")
        return value


_DIRECTIONS = tuple(d.value for d in Direction)
_MAX_MS = 3_600_000


def _direction(default: Direction) -> Param:
    return Param(default.value, "both, outbound (away from the selected side) or inbound", choices=_DIRECTIONS)


ActionFactory = Callable[["FaultEnvironment"], FaultAction | None]
"""Builds a kind's inject/heal pair in a run's environment; None when what it acts through is missing."""


@dataclass(frozen=True)
class KindSpec:
    kind: FaultKind
    summary: str
    accepts: tuple[type, ...]
    """The selector classes its `target` may be (faults.selectors)."""
    default_target: Callable[[TxnPath], str]
    """What `target: random` means on a path."""
    action: ActionFactory
    params: Mapping[str, Param] = field(default_factory=lambda: MappingProxyType({}))
    healable: bool = True
    paths: frozenset[TxnPath] = frozenset(ALL_PATHS)
    needs: frozenset[Capability] = frozenset()
    brokers_only: bool = False
    network: bool = False
    """Its targets resolve to proxied links (a link selector, or every link of a service)."""
    process_fault: bool = False
    """It acts on a process (ProcessControl): resolved to one service, timed as a process action."""
    topic_fault: bool = False
    """It acts on a topic or segment through admin REST: timed as an admin call."""
    waits_healthy_on_heal: bool = False
    """Its heal starts a process and waits until it is healthy (the cluster's ready timeout applies)."""
    client_fault: bool = False
    """It abandons the load's open transactions (a worker killed, every client cut off): timed as a
    load-control call, and checked against the load's settings (faults.validate)."""

    def accepts_selector(self, selector: Selector) -> bool:
        if isinstance(selector, DefaultSelector):
            return True
        if not isinstance(selector, self.accepts):
            return False
        return not (self.brokers_only and isinstance(selector, ServiceSelector)
                    and selector.service is not ServiceClass.BROKER)


_NETWORK_TARGETS = (ServiceSelector, LinkSelector, ClientsSelector)
_TOPIC_TARGETS = (TopicSelector, SegmentSelector)


def _operators() -> Mapping[str, Param]:
    return MappingProxyType({"operators": Param(
        1, "admin clients making this same change at once (two operators, or one and an automated "
           "splitter); each retries a busy answer", 1, 4)})


def _through_network(make: Callable[[NetworkApi], FaultAction]) -> ActionFactory:
    return lambda env: make(env.network) if env.network is not None else None


def _through_processes(make: Callable[[ProcessControl], FaultAction]) -> ActionFactory:
    return lambda env: make(env.control) if env.control is not None else None


def _through_load(make: Callable[[LoadControl], FaultAction]) -> ActionFactory:
    return lambda env: make(env.load) if env.load is not None else None


def _through_admin(make: Callable[[TopicAdmin], FaultAction]) -> ActionFactory:
    return lambda env: make(env.admin) if env.admin is not None else None


def _latency(fault: Fault) -> Mapping[str, int]:
    return {"latency": int(fault.params["latency_ms"]), "jitter": int(fault.params["jitter_ms"])}


def _bandwidth(fault: Fault) -> Mapping[str, int]:
    return {"rate": int(fault.params["rate_kbps"])}


def _slow_participant(fault: Fault) -> Mapping[str, int]:
    return {"latency": int(fault.params["latency_ms"]), "jitter": 0}


KINDS: Mapping[FaultKind, KindSpec] = MappingProxyType({
    FaultKind.PARTITION: KindSpec(
        FaultKind.PARTITION, "cut links: disable the proxies (both ways) or drop one stream (timeout 0)",
        _NETWORK_TARGETS, lambda _p: "link:random", _through_network(PartitionAction),
        MappingProxyType({"direction": _direction(Direction.BOTH)}), needs=frozenset({Capability.NETWORK}),
        network=True),
    FaultKind.LATENCY: KindSpec(
        FaultKind.LATENCY, "delay links (latency toxic, optional jitter)",
        _NETWORK_TARGETS, lambda _p: "link:random",
        _through_network(lambda network: ToxicAction(network, ToxicType.LATENCY, _latency)),
        MappingProxyType({"latency_ms": Param(200, "milliseconds added per chunk", 0, _MAX_MS),
                          "jitter_ms": Param(0, "milliseconds of random variation", 0, _MAX_MS),
                          "direction": _direction(Direction.BOTH)}),
        needs=frozenset({Capability.NETWORK}), network=True),
    FaultKind.BANDWIDTH: KindSpec(
        FaultKind.BANDWIDTH, "limit links' rate (bandwidth toxic)",
        _NETWORK_TARGETS, lambda _p: "link:random",
        _through_network(lambda network: ToxicAction(network, ToxicType.BANDWIDTH, _bandwidth)),
        MappingProxyType({"rate_kbps": Param(64, "KB per second (1 KB = 1000 bytes)", 0, 10_000_000),
                          "direction": _direction(Direction.BOTH)}),
        needs=frozenset({Capability.NETWORK}), network=True),
    FaultKind.KILL: KindSpec(
        FaultKind.KILL, "kill -9 a process; start it again when healed",
        (ServiceSelector,), lambda _p: "process:random", _through_processes(KillAction),
        needs=frozenset({Capability.PROCESSES}), process_fault=True, waits_healthy_on_heal=True),
    FaultKind.PAUSE: KindSpec(
        FaultKind.PAUSE, "SIGSTOP a process; SIGCONT when healed",
        (ServiceSelector,), lambda _p: "process:random", _through_processes(PauseAction),
        needs=frozenset({Capability.PROCESSES}), process_fault=True),
    FaultKind.SPLIT: KindSpec(
        FaultKind.SPLIT, "split an active segment of a scalable topic (admin REST)",
        _TOPIC_TARGETS, lambda _p: "segment:random", _through_admin(SplitAction), _operators(), healable=False,
        paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.ADMIN, Capability.TOPICS}), topic_fault=True),
    FaultKind.MERGE: KindSpec(
        FaultKind.MERGE, "merge two adjacent active segments of a scalable topic (admin REST)",
        _TOPIC_TARGETS, lambda _p: "topic:random", _through_admin(MergeAction), _operators(), healable=False,
        paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.ADMIN, Capability.TOPICS}), topic_fault=True),
    FaultKind.TERMINATE: KindSpec(
        FaultKind.TERMINATE, "terminate a v4 topic or partition, or seal a v5 segment (admin REST)",
        _TOPIC_TARGETS, lambda p: "segment:random" if p is TxnPath.V5 else "topic:random",
        _through_admin(TerminateAction), _operators(), healable=False,
        needs=frozenset({Capability.ADMIN, Capability.TOPICS}), topic_fault=True),
    FaultKind.SLOW_PARTICIPANT: KindSpec(
        FaultKind.SLOW_PARTICIPANT,
        "delay one broker's metadata-store link past the v5 GC retention window",
        (ServiceSelector,), lambda _p: "broker:random",
        _through_network(lambda network: ToxicAction(network, ToxicType.LATENCY, _slow_participant)),
        MappingProxyType({"latency_ms": Param(None, "milliseconds; default: GC retention + GC interval "
                                                    "+ 2 s from the cluster settings", 0, _MAX_MS),
                          "direction": _direction(Direction.INBOUND)}),
        paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.NETWORK}), brokers_only=True),
    FaultKind.RESTART: KindSpec(
        FaultKind.RESTART, "stop a process gracefully (SIGTERM: it unloads its topics); start it when healed",
        (ServiceSelector,), lambda _p: "broker:random", _through_processes(RestartAction),
        needs=frozenset({Capability.PROCESSES}), process_fault=True, waits_healthy_on_heal=True),
    FaultKind.UNLOAD: KindSpec(
        FaultKind.UNLOAD, "unload a topic, partition or v5 segment: ownership moves without a crash (admin REST)",
        _TOPIC_TARGETS, lambda _p: "topic:random", _through_admin(UnloadAction), healable=False,
        needs=frozenset({Capability.ADMIN, Capability.TOPICS}), topic_fault=True),
    FaultKind.CLIENT_KILL: KindSpec(
        FaultKind.CLIENT_KILL, "kill -9 a Locust worker of the load (its open transactions are abandoned); "
                               "a replacement worker takes its users when healed",
        (LoadSelector,), lambda _p: "load:random", _through_load(ClientKillAction),
        needs=frozenset({Capability.LOAD}), client_fault=True),
    FaultKind.CLIENT_ISOLATE: KindSpec(
        FaultKind.CLIENT_ISOLATE, "cut every client off from every broker (all client-broker links) for "
                                  "longer than the transaction timeout: the open transactions are abandoned",
        (ClientsSelector,), lambda _p: "clients", _through_network(PartitionAction),
        MappingProxyType({"direction": _direction(Direction.BOTH)}), needs=frozenset({Capability.NETWORK}),
        network=True, client_fault=True),
    FaultKind.CRASH: KindSpec(
        FaultKind.CRASH, "power-loss crash (LazyFS-like): kill -9 while the store has a write in flight, lose or "
                         "tear what it never fsynced (never what it acknowledged); start it again when healed",
        (ServiceSelector,), lambda _p: "ledger", _through_processes(CrashAction),
        MappingProxyType({"aim_ms": Param(2000, "how long to wait for the moment `aim` names before the kill", 0,
                                          10_000),
                          "aim": Param(CrashAim.WRITE.value, "write: at a log write in flight; crash-loop: that, "
                                       "then start the store and crash it again as it creates its next log "
                                       "file (its first write after the start), before that file's header is "
                                       "durable",
                                       choices=tuple(a.value for a in CrashAim))}),
        needs=frozenset({Capability.PROCESSES}), process_fault=True, waits_healthy_on_heal=True),
    FaultKind.CORRUPT: KindSpec(
        FaultKind.CORRUPT, "disk corruption: kill -9 a store, flip one bit of a durable file its recovery reads "
                           "whole, start it: it must refuse, naming the damage; healed by flipping the bit back",
        (ServiceSelector,), lambda _p: "ledger", _through_processes(CorruptAction),
        MappingProxyType({"file": Param(DamagedFile.LOG.value, "log (a sealed log file, not the newest) or "
                                        "snapshot (the metadata store's newest)",
                                        choices=tuple(f.value for f in DamagedFile))}),
        needs=frozenset({Capability.PROCESSES}), process_fault=True, waits_healthy_on_heal=True),
})


def spec(kind: FaultKind) -> KindSpec:
    return KINDS[kind]


def build_actions(env: FaultEnvironment) -> dict[FaultKind, FaultAction]:
    """The actions this environment can run; kinds whose dependency is missing are absent."""
    built = {kind: s.action(env) for kind, s in KINDS.items()}
    return {kind: action for kind, action in built.items() if action is not None}


def effective_selector(kind: FaultKind, text: str, txn_path: TxnPath) -> Selector:
    """The parsed selector, with `random` replaced by the kind's default for `txn_path`."""
    selector = parse_selector(text)
    if isinstance(selector, DefaultSelector):
        selector = parse_selector(KINDS[kind].default_target(txn_path))
    return selector


def describe_accepts(kind: FaultKind) -> str:
    s = KINDS[kind]
    names = []
    for cls in s.accepts:
        if cls is ServiceSelector:
            names.append("broker:<i|random|coordinator|trigger>, coordinator, coordinator:trigger"
                         if s.brokers_only else
                         "broker:<i|random|coordinator|trigger>, coordinator, coordinator:trigger, metadata, "
                         "ledger, process:random")
        elif cls is LinkSelector:
            names.append("client-broker:<i|random|coordinator|trigger>, broker-metadata:<i|random|coordinator|trigger>, "
                         "broker-ledger:<i|random|coordinator|trigger>, broker-broker:<i>-<j>, link:random")
        elif cls is TopicSelector:
            names.append("topic:<k|random|trigger>")
        elif cls is SegmentSelector:
            names.append("segment:<k|random|trigger>")
        elif cls is ClientsSelector:
            names.append("clients")
        elif cls is LoadSelector:
            names.append("load:<i|random>")
    return ", ".join(names)


def validate_params(kind: FaultKind, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The kind's parameters with defaults filled in; ParamError names a bad one."""
    known = KINDS[kind].params
    for name in raw:
        if name not in known:
            if not known:
                raise ParamError(name, f"{kind.value} takes no params", "remove the params")
            close = difflib.get_close_matches(str(name), list(known), n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"{kind.value} takes: {', '.join(known)}"
            raise ParamError(name, "unknown parameter", fix)
    return {name: (param.convert(name, raw[name]) if name in raw else param.default)
            for name, param in known.items()}


def slow_participant_latency_ms(settings: Mapping[str, Any]) -> int:
    """Longer than one GC retention window plus one GC interval, so the GC runs while the
    participant still waits for the decision (the PIP-473 review's race)."""
    retention = float(settings.get(GC_RETENTION_KEY, PULSAR_GC_RETENTION_S))
    interval = float(settings.get(GC_INTERVAL_KEY, PULSAR_GC_INTERVAL_S))
    return int((retention + interval + SLOW_PARTICIPANT_MARGIN_S) * 1000)


def session_timeout_ms(settings: Mapping[str, Any]) -> float:
    return float(settings.get(SESSION_TIMEOUT_KEY, PULSAR_SESSION_TIMEOUT_MS))
