"""What each fault kind accepts: targets, parameters, paths, and what it needs from a target.

This is the table the nemesis validates a scenario against before anything runs,
and that faults/README.md documents. Behaviour (inject/heal) is in faults.actions.

| kind | targets | params | paths | healed by |
|---|---|---|---|---|
| partition | a link selector, or a service (isolates it) | direction | all | enabling the proxy / removing the toxic |
| latency | same | latency_ms, jitter_ms, direction | all | removing the toxics |
| bandwidth | same | rate_kbps, direction | all | removing the toxics |
| kill | a service | | all | starting it again |
| pause | a service | | all | SIGCONT |
| split | a segment or topic | | v5 | not healable |
| merge | a topic (or segment: its topic) | | v5 | not healable |
| terminate | a topic (v4) or segment (v5) | | all | not healable |
| slow-participant | a broker | latency_ms, direction | v5 | removing the toxic |
| restart | a service | | all | starting it again (it was stopped gracefully) |
| unload | a topic (all its partitions or segments) or one segment/partition | | all | not healable (ownership moved) |
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from faults.selectors import (
    DefaultSelector,
    Direction,
    LinkSelector,
    SegmentSelector,
    Selector,
    ServiceClass,
    ServiceSelector,
    TopicSelector,
    parse_selector,
)
from harness.config import FaultKind
from harness.txn_paths import ALL_PATHS, TxnPath

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


class Capability(StrEnum):
    """What a fault needs from the target and the run."""

    NETWORK = "network"        # a Toxiproxy API in front of the links
    PROCESSES = "processes"    # kill/start/pause/resume (ProcessControl)
    ADMIN = "admin"            # admin REST for topics and segments
    TOPICS = "topics"          # the run's topic list (the workload topology)
    COORDINATORS = "coordinators"  # a client that can say which broker hosts each coordinator


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


@dataclass(frozen=True)
class KindSpec:
    kind: FaultKind
    summary: str
    accepts: tuple[type, ...]
    default_target: Callable[[TxnPath], str]
    params: Mapping[str, Param] = field(default_factory=lambda: MappingProxyType({}))
    healable: bool = True
    paths: frozenset[TxnPath] = frozenset(ALL_PATHS)
    needs: frozenset[Capability] = frozenset()
    brokers_only: bool = False

    def accepts_selector(self, selector: Selector) -> bool:
        if isinstance(selector, DefaultSelector):
            return True
        if not isinstance(selector, self.accepts):
            return False
        return not (self.brokers_only and isinstance(selector, ServiceSelector)
                    and selector.service is not ServiceClass.BROKER)


_NETWORK_TARGETS = (ServiceSelector, LinkSelector)
_TOPIC_TARGETS = (TopicSelector, SegmentSelector)

SPECS: Mapping[FaultKind, KindSpec] = MappingProxyType({
    FaultKind.PARTITION: KindSpec(
        FaultKind.PARTITION, "cut links: disable the proxies (both ways) or drop one stream (timeout 0)",
        _NETWORK_TARGETS, lambda _p: "link:random",
        MappingProxyType({"direction": _direction(Direction.BOTH)}), needs=frozenset({Capability.NETWORK})),
    FaultKind.LATENCY: KindSpec(
        FaultKind.LATENCY, "delay links (latency toxic, optional jitter)",
        _NETWORK_TARGETS, lambda _p: "link:random",
        MappingProxyType({"latency_ms": Param(200, "milliseconds added per chunk", 0, _MAX_MS),
                          "jitter_ms": Param(0, "milliseconds of random variation", 0, _MAX_MS),
                          "direction": _direction(Direction.BOTH)}),
        needs=frozenset({Capability.NETWORK})),
    FaultKind.BANDWIDTH: KindSpec(
        FaultKind.BANDWIDTH, "limit links' rate (bandwidth toxic)",
        _NETWORK_TARGETS, lambda _p: "link:random",
        MappingProxyType({"rate_kbps": Param(64, "KB per second (1 KB = 1000 bytes)", 0, 10_000_000),
                          "direction": _direction(Direction.BOTH)}),
        needs=frozenset({Capability.NETWORK})),
    FaultKind.KILL: KindSpec(
        FaultKind.KILL, "kill -9 a process; start it again when healed",
        (ServiceSelector,), lambda _p: "process:random", needs=frozenset({Capability.PROCESSES})),
    FaultKind.PAUSE: KindSpec(
        FaultKind.PAUSE, "SIGSTOP a process; SIGCONT when healed",
        (ServiceSelector,), lambda _p: "process:random", needs=frozenset({Capability.PROCESSES})),
    FaultKind.SPLIT: KindSpec(
        FaultKind.SPLIT, "split an active segment of a scalable topic (admin REST)",
        _TOPIC_TARGETS, lambda _p: "segment:random", healable=False, paths=frozenset({TxnPath.V5}),
        needs=frozenset({Capability.ADMIN, Capability.TOPICS})),
    FaultKind.MERGE: KindSpec(
        FaultKind.MERGE, "merge two adjacent active segments of a scalable topic (admin REST)",
        _TOPIC_TARGETS, lambda _p: "topic:random", healable=False, paths=frozenset({TxnPath.V5}),
        needs=frozenset({Capability.ADMIN, Capability.TOPICS})),
    FaultKind.TERMINATE: KindSpec(
        FaultKind.TERMINATE, "terminate a v4 topic or partition, or seal a v5 segment (admin REST)",
        _TOPIC_TARGETS, lambda p: "segment:random" if p is TxnPath.V5 else "topic:random", healable=False,
        needs=frozenset({Capability.ADMIN, Capability.TOPICS})),
    FaultKind.SLOW_PARTICIPANT: KindSpec(
        FaultKind.SLOW_PARTICIPANT,
        "delay one broker's metadata-store link past the v5 GC retention window",
        (ServiceSelector,), lambda _p: "broker:random",
        MappingProxyType({"latency_ms": Param(None, "milliseconds; default: GC retention + GC interval "
                                                    "+ 2 s from the cluster settings", 0, _MAX_MS),
                          "direction": _direction(Direction.INBOUND)}),
        paths=frozenset({TxnPath.V5}), needs=frozenset({Capability.NETWORK}), brokers_only=True),
    FaultKind.RESTART: KindSpec(
        FaultKind.RESTART, "stop a process gracefully (SIGTERM: it unloads its topics); start it when healed",
        (ServiceSelector,), lambda _p: "broker:random", needs=frozenset({Capability.PROCESSES})),
    FaultKind.UNLOAD: KindSpec(
        FaultKind.UNLOAD, "unload a topic, partition or v5 segment: ownership moves without a crash (admin REST)",
        _TOPIC_TARGETS, lambda _p: "topic:random", healable=False,
        needs=frozenset({Capability.ADMIN, Capability.TOPICS})),
})


def spec(kind: FaultKind) -> KindSpec:
    return SPECS[kind]


def effective_selector(kind: FaultKind, text: str, path: TxnPath) -> Selector:
    """The parsed selector, with `random` replaced by the kind's default for `path`."""
    selector = parse_selector(text)
    if isinstance(selector, DefaultSelector):
        selector = parse_selector(SPECS[kind].default_target(path))
    return selector


def describe_accepts(kind: FaultKind) -> str:
    s = SPECS[kind]
    names = []
    for cls in s.accepts:
        if cls is ServiceSelector:
            names.append("broker:<i|random|coordinator>, coordinator" if s.brokers_only else
                         "broker:<i|random|coordinator>, coordinator, metadata, ledger, process:random")
        elif cls is LinkSelector:
            names.append("client-broker:<b>, broker-metadata:<b>, broker-ledger:<b>, broker-broker:<i>-<j>, "
                         "link:random")
        elif cls is TopicSelector:
            names.append("topic:<k|random>")
        elif cls is SegmentSelector:
            names.append("segment:<k|random>")
    return ", ".join(names)


def validate_params(kind: FaultKind, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The kind's parameters with defaults filled in; ParamError names a bad one."""
    known = SPECS[kind].params
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
