"""What a fault kind is: one `Kind` object holding every fact of it, so that the schedule, the
generator, the resolver, the checks and the nemesis stay generic and never name a kind.

A kind module (faults/kinds/<kind>.py) builds its `KIND` from these parts; the registry
(faults/kinds/__init__.py) lists the modules. Its action classes are in faults.actions, its
resolution primitives in faults.selectors; docs/architecture.md, "Add a fault kind", is the recipe.
"""

from __future__ import annotations

import dataclasses
import difflib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from faults.environment import Capability, FaultEnvironment
from faults.model import FaultAction, LoadControl, NetworkApi, TopicAdmin
from faults.resolution import (
    Direction,
    ResolveContext,
    Target,
    resolve_links,
    resolve_segment,
    resolve_service,
)
from faults.selectors import (
    ClientsSelector,
    DefaultSelector,
    LinkSelector,
    LoadSelector,
    SegmentSelector,
    Selector,
    ServiceClass,
    ServiceSelector,
    TopicSelector,
    parse_selector,
)
from harness.config import GeneratedFaults, RunConfig
from harness.history.schema import FaultEffect
from harness.target import ProcessControl
from harness.txn_paths import ALL_PATHS, TxnPath


class Refusal(ValueError):
    """A kind's own check refused a fault: `key` under the fault's scenario key, what is wrong, the fix;
    the caller, who knows the scenario and the key, turns it into a ConfigError."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.key, self.problem, self.fix = key, problem, fix


class ParamError(Refusal):
    """A parameter refused; `key` is the parameter's name."""


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


MAX_MS = 3_600_000


def direction(default: Direction) -> Param:
    return Param(default.value, "both, outbound (away from the selected side) or inbound",
                 choices=tuple(d.value for d in Direction))


def operators() -> Mapping[str, Param]:
    return MappingProxyType({"operators": Param(
        1, "admin clients making this same change at once (two operators, or one and an automated "
           "splitter); each retries a busy answer", 1, 4)})


ActionFactory = Callable[[FaultEnvironment], FaultAction | None]
"""Builds a kind's inject/heal pair in a run's environment; None when what it acts through is missing."""
Resolver = Callable[[Selector, ResolveContext, TxnPath], tuple[Target, ...]]
"""A planned fault's selector to its targets, at injection time (faults.resolve)."""


def through_network(make: Callable[[NetworkApi], FaultAction]) -> ActionFactory:
    return lambda env: make(env.network) if env.network is not None else None


def through_processes(make: Callable[[ProcessControl], FaultAction]) -> ActionFactory:
    return lambda env: make(env.control) if env.control is not None else None


def through_load(make: Callable[[LoadControl], FaultAction]) -> ActionFactory:
    return lambda env: make(env.load) if env.load is not None else None


def through_admin(make: Callable[[TopicAdmin], FaultAction]) -> ActionFactory:
    return lambda env: make(env.admin) if env.admin is not None else None


def links(selector: Selector, ctx: ResolveContext, _path: TxnPath) -> tuple[Target, ...]:
    """A network fault's proxies: the link selected, or every link of the service selected."""
    assert isinstance(selector, (ServiceSelector, LinkSelector, ClientsSelector))
    return resolve_links(selector, ctx)


def one_service(selector: Selector, ctx: ResolveContext, _path: TxnPath) -> tuple[Target, ...]:
    assert isinstance(selector, ServiceSelector)
    return (resolve_service(selector, ctx),)


def one_segment(selector: Selector, ctx: ResolveContext, _path: TxnPath) -> tuple[Target, ...]:
    """One active segment (v4: partition, or the topic itself)."""
    assert isinstance(selector, (TopicSelector, SegmentSelector))
    return (resolve_segment(selector, ctx),)


def writes_only(ctx: ResolveContext) -> ResolveContext:
    """Aimed only where the triggering transaction wrote: a seal, split or merge of a topic it only
    acknowledged on would hit no entry of it."""
    return ctx if ctx.aim is None else dataclasses.replace(ctx, aim=ctx.aim.writes_only())


NETWORK_TARGETS = (ServiceSelector, LinkSelector, ClientsSelector)
TOPIC_TARGETS = (TopicSelector, SegmentSelector)
# What a generated schedule aims the network and process kinds at (faults.generate).
LINK_POOL = ("client-broker:random", "client-broker:coordinator", "broker-metadata:random", "broker-ledger:random",
             "broker-broker:random", "broker-metadata:coordinator", "link:random")
ISOLATED_POOL = ("broker:random", "broker:coordinator", "metadata", "ledger")
PROCESS_POOL = ("broker:random", "broker:0", "coordinator", "metadata", "ledger", "process:random")


def _no_params(_rng: random.Random) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Draw:
    """How a generated schedule (faults.generate) draws the kind. Each callable consumes the seeded
    generator in a fixed order: changing one changes every later draw of every seed."""

    targets: tuple[str, ...]
    aimed: tuple[str, ...] = ()
    """More targets when the window waits for a trigger: what the triggering transaction touched."""
    params: Callable[[random.Random], dict[str, Any]] = _no_params
    duration: Callable[[float, random.Random, float], float] | None = None
    """(the drawn duration, the generator, the transaction timeout) -> its duration."""
    cap: Callable[[GeneratedFaults], int] | None = None
    """At most this many in one schedule."""
    by_default: bool = True
    """Drawn when the scenario names no kinds."""


@dataclass(frozen=True, eq=False, repr=False)
class Kind:
    """Everything about one kind of fault (a scenario's `kind:`)."""

    name: str
    summary: str
    accepts: tuple[type, ...]
    """The selector classes its `target` may be (faults.selectors)."""
    default_target: Callable[[TxnPath], str]
    """What `target: random` means on a path."""
    resolve: Resolver
    action: ActionFactory
    draw: Draw
    params: Mapping[str, Param] = field(default_factory=lambda: MappingProxyType({}))
    healable: bool = True
    """False: instant, it stays (no heal; drawn with no duration)."""
    effects: frozenset[FaultEffect] = frozenset()
    """What it does while it holds, as the history records it for the analysis."""
    paths: frozenset[TxnPath] = frozenset(ALL_PATHS)
    needs: frozenset[Capability] = frozenset()
    """What it acts through; also what times its actions (faults.nemesis)."""
    brokers_only: bool = False
    network: bool = False
    """Its targets are link selectors (or a service's links) cut or delayed as a whole."""
    waits_healthy_on_heal: bool = False
    """Its heal starts a process and waits until it is healthy (the cluster's ready timeout applies)."""
    waits_healthy_on_inject: bool = False
    """Its injection starts a process once too (a crash-loop)."""
    fill_params: Callable[[dict[str, Any], Mapping[str, Any]], None] | None = None
    """Completes its parameters from the cluster's settings at injection time."""
    check_run: Callable[[Mapping[str, Any], float, Mapping[str, Any]], None] | None = None
    """(params, seconds held, cluster settings): raises Refusal when the running cluster cannot host it."""
    check_entry: Callable[[float, RunConfig], None] | None = None
    """(the entry's for_s, the scenario): raises Refusal when the scenario's other settings defeat it."""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"

    def accepts_selector(self, selector: Selector) -> bool:
        if isinstance(selector, DefaultSelector):
            return True
        if not isinstance(selector, self.accepts):
            return False
        return not (self.brokers_only and isinstance(selector, ServiceSelector)
                    and selector.service is not ServiceClass.BROKER)

    def selector(self, text: str, txn_path: TxnPath) -> Selector:
        """The parsed selector, with `random` replaced by the kind's default for `txn_path`."""
        selector = parse_selector(text)
        if isinstance(selector, DefaultSelector):
            selector = parse_selector(self.default_target(txn_path))
        return selector

    def describe_accepts(self) -> str:
        return ", ".join(_ACCEPTS[cls] if cls is not ServiceSelector or not self.brokers_only else
                         "broker:<i|random|coordinator|trigger>, coordinator, coordinator:trigger"
                         for cls in self.accepts)

    def validate_params(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters with defaults filled in; ParamError names a bad one."""
        known = self.params
        for name in raw:
            if name not in known:
                if not known:
                    raise ParamError(name, f"{self.name} takes no params", "remove the params")
                close = difflib.get_close_matches(str(name), list(known), n=1)
                fix = f"did you mean '{close[0]}'?" if close else f"{self.name} takes: {', '.join(known)}"
                raise ParamError(name, "unknown parameter", fix)
        return {name: (param.convert(name, raw[name]) if name in raw else param.default)
                for name, param in known.items()}


_ACCEPTS: Mapping[type, str] = {
    ServiceSelector: "broker:<i|random|coordinator|trigger>, coordinator, coordinator:trigger, metadata, "
                     "ledger, process:random",
    LinkSelector: "client-broker:<i|random|coordinator|trigger>, broker-metadata:<i|random|coordinator|trigger>, "
                  "broker-ledger:<i|random|coordinator|trigger>, broker-broker:<i>-<j>, link:random",
    TopicSelector: "topic:<k|random|trigger>",
    SegmentSelector: "segment:<k|random|trigger>",
    ClientsSelector: "clients",
    LoadSelector: "load:<i|random>",
}
