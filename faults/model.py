"""A fault as data, and the protocols its actions and the world they act on implement.

A `Fault` is a planned fault with its targets resolved: kind, targets, timing and
params, frozen. A `FaultAction` is its inject/heal pair. Actions reach the cluster
only through the narrow protocols below, so the same actions drive the embedded
cluster, the compose cluster (real Toxiproxy, Docker containers, real brokers)
and the fakes of the unit tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from faults.resolution import Target
from harness.history.schema import FaultEffect
from harness.toxiproxy.model import Stream, ToxicType


class NotInjected(Exception):
    """The fault certainly did not take effect (history `fail`): e.g. no target was free,
    or the target refused before anything changed."""


@dataclass(frozen=True)
class Fault:
    """A fault ready to inject: what, on which targets, with which parameters, for how long."""

    fault_id: str
    kind: str
    """The kind's name (its faults.kinds `Kind` is above this module: the kinds build on these types)."""
    selector: str
    targets: tuple[Target, ...]
    params: Mapping[str, Any]
    for_s: float
    healable: bool
    source: str
    trigger: Mapping[str, Any] | None = None
    """For a triggered fault: what it waited for and what it saw (history `extra.trigger`)."""
    effects: frozenset[FaultEffect] = frozenset()
    """Its kind's effects (history `extra.effects`)."""

    @property
    def resources(self) -> frozenset[str]:
        return frozenset(t.resource for t in self.targets)

    @property
    def process(self) -> str:
        """The history `process` of this fault's fault and heal ops."""
        return f"nemesis/{self.fault_id}"

    def extra(self) -> dict[str, Any]:
        """The history `extra` of its fault and heal ops (docs/history.md: kind, targets, params)."""
        return {"kind": self.kind, "targets": [str(t) for t in self.targets],
                "params": dict(self.params), "selector": self.selector, "fault_id": self.fault_id,
                "for_s": self.for_s, "healable": self.healable, "source": self.source,
                "effects": sorted(e.value for e in self.effects),
                **({"trigger": dict(self.trigger)} if self.trigger is not None else {})}


@runtime_checkable
class FaultAction(Protocol):
    """How one kind of fault is injected and healed.

    `inject` returns once the fault is in effect, with what it did that the fault's data
    could not say in advance (the worker a client kill chose), recorded in the `fault` ok's
    `extra.effect`; most actions return None. `heal` returns once it is not; it
    is idempotent and safe to call for a fault whose injection failed half way or
    was never finished (heal_all calls it for anything that may be in effect).
    A non-healable kind's `heal` does nothing.
    """

    def inject(self, fault: Fault) -> Mapping[str, Any] | None: ...

    def heal(self, fault: Fault) -> Mapping[str, Any] | None: ...


class NetworkApi(Protocol):
    """The part of the Toxiproxy HTTP API the network faults use (harness.toxiproxy.client.ToxiproxyClient)."""

    def disable(self, name: str) -> Any: ...

    def enable(self, name: str) -> Any: ...

    def add_toxic(self, proxy: str, type: ToxicType | str, attributes: Mapping[str, int] | None = None,
                  *, stream: Stream | str = ..., name: str | None = None, toxicity: float = ...) -> Any: ...

    def remove_toxic(self, proxy: str, name: str) -> None: ...

    def close(self) -> None: ...


class TopicAdmin(Protocol):
    """Topic and segment actions over Pulsar's admin REST (v4 topics, v5 scalable topics)."""

    def terminate_topic(self, topic: str) -> None:
        """Terminate a persistent:// topic (every partition when it is partitioned) or one partition."""

    def terminate_segment(self, segment: str) -> None:
        """Seal one segment:// of a scalable topic."""

    def unload_topic(self, topic: str) -> None:
        """Unload a topic (every partition, or every active segment of a scalable topic) or one
        partition: its owner closes it and a broker loads it again on the next lookup."""

    def unload_segment(self, segment: str) -> None:
        """Unload one segment:// of a scalable topic."""

    def split_segment(self, topic: str, segment_id: int) -> None: ...

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> None: ...

    def partitions(self, topic: str) -> int:
        """A v4 topic's partition count; 0 when it is not partitioned."""

    def active_segments(self, topic: str) -> Sequence[str]:
        """A scalable topic's active (not sealed) segments, as segment:// names."""

    def close(self) -> None: ...


class LoadControl(Protocol):
    """The load process's workers, killed and replaced on request (harness.load_control)."""

    def kill(self, request_id: str, worker: str, seed: int = 0) -> Mapping[str, Any]:
        """SIGKILL one worker (`w<i>` or `random`); its `writer` and `pid`."""

    def start(self, request_id: str, replaces: str) -> Mapping[str, Any]:
        """Start a replacement for worker `replaces` under a new writer name; its `writer` and `pid`."""

    def close(self) -> None: ...


class CoordinatorLocator(Protocol):
    """Which broker hosts each transaction coordinator, asked of the cluster right now."""

    def coordinator_brokers(self) -> Mapping[int, str]:
        """tc id -> the broker's service URL (v4: owner of assign partition i; v5: tc i's leader)."""

    def owner_broker(self, topic: str) -> str:
        """The service URL of the broker that owns `topic` (a partition, or a v5 segment) now."""

    def close(self) -> None: ...
