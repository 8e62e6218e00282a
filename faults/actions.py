"""Inject and heal, per fault kind.

Network faults act only through the Toxiproxy HTTP API (`NetworkApi`), so the
embedded fault proxy and the compose target's real Toxiproxy behave the same:

* partition, both ways: disable each proxy (its listener closes, live connections
  are cut, new ones refused); heal: enable it.
* partition, one way: a `timeout` toxic with timeout 0 on the stream of that
  direction (data is dropped until the toxic goes); heal: remove the toxic, which
  closes the connections it held.
* latency, bandwidth, slow participant: `latency` / `bandwidth` toxics on the
  streams of the direction; heal: remove them.

Toxics are named `txnbench-<fault id>-<type>-<stream>`, so a heal removes exactly
its own. Process faults go through `ProcessControl` (kill -9 then start; SIGTERM
then start; SIGSTOP then SIGCONT). Topic faults go through `TopicAdmin` and are not healable: a split,
merge, seal or termination stays.

Which action serves which kind, and what it acts through, is the kind's registry entry
(faults.kinds.KINDS, `action`).

Every heal is idempotent: enabling an enabled proxy, removing a toxic that is not
there, starting a running process and resuming a running one all succeed, so
heal-everything after an interrupted injection is always safe.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from faults.model import Fault, NetworkApi, NotInjected, TopicAdmin
from faults.selectors import Direction, LinkEnd, SegmentTarget, ServiceTarget, TopicTarget
from harness.target import ProcessControl
from harness.toxiproxy.client import NotFound
from harness.toxiproxy.model import ToxicType

TOXIC_PREFIX = "txnbench-"


def toxic_name(fault: Fault, type_: ToxicType, stream: str) -> str:
    return f"{TOXIC_PREFIX}{fault.fault_id}-{type_.value}-{stream}"


def _ends(fault: Fault) -> list[LinkEnd]:
    ends = [t for t in fault.targets if isinstance(t, LinkEnd)]
    if not ends:
        raise NotInjected(f"{fault.kind.value} needs links as targets, got {[str(t) for t in fault.targets]}")
    return ends


def _services(fault: Fault) -> list[str]:
    names = [t.name for t in fault.targets if isinstance(t, ServiceTarget)]
    if not names:
        raise NotInjected(f"{fault.kind.value} needs a service as target")
    return names


class ToxicAction:
    """Adds one toxic per (link, stream) of the fault's direction; heals by removing them."""

    def __init__(self, network: NetworkApi, type_: ToxicType,
                 attributes: Callable[[Fault], Mapping[str, int]]) -> None:
        self.network = network
        self.type = type_
        self.attributes = attributes

    def _toxics(self, fault: Fault) -> list[tuple[str, str]]:
        direction = Direction(fault.params.get("direction", Direction.BOTH.value))
        return [(end.proxy, stream.value) for end in _ends(fault) for stream in end.streams(direction)]

    def inject(self, fault: Fault) -> None:
        attributes = dict(self.attributes(fault))
        for proxy, stream in self._toxics(fault):
            self.network.add_toxic(proxy, self.type, attributes, stream=stream,
                                   name=toxic_name(fault, self.type, stream))

    def heal(self, fault: Fault) -> None:
        for proxy, stream in self._toxics(fault):
            with contextlib.suppress(NotFound):
                self.network.remove_toxic(proxy, toxic_name(fault, self.type, stream))


class PartitionAction:
    """Both ways: disable the proxies. One way: drop one stream with a `timeout` 0 toxic."""

    def __init__(self, network: NetworkApi) -> None:
        self.network = network
        self.one_way = ToxicAction(network, ToxicType.TIMEOUT, lambda _f: {"timeout": 0})

    @staticmethod
    def _both(fault: Fault) -> bool:
        return Direction(fault.params.get("direction", Direction.BOTH.value)) is Direction.BOTH

    def inject(self, fault: Fault) -> None:
        if not self._both(fault):
            self.one_way.inject(fault)
            return
        for proxy in dict.fromkeys(end.proxy for end in _ends(fault)):
            self.network.disable(proxy)

    def heal(self, fault: Fault) -> None:
        if not self._both(fault):
            self.one_way.heal(fault)
            return
        for proxy in dict.fromkeys(end.proxy for end in _ends(fault)):
            self.network.enable(proxy)


class KillAction:
    """kill -9; healed by starting the process again (same ports, data and config)."""

    def __init__(self, control: ProcessControl) -> None:
        self.control = control

    def inject(self, fault: Fault) -> None:
        for name in _services(fault):
            self.control.kill(name)

    def heal(self, fault: Fault) -> None:
        for name in _services(fault):
            self.control.start(name)


class RestartAction:
    """A graceful stop (SIGTERM: the broker unloads its topics, releases its ownerships and
    coordinators); healed by starting the process again. Ownership moves without a crash."""

    def __init__(self, control: ProcessControl) -> None:
        self.control = control

    def inject(self, fault: Fault) -> None:
        for name in _services(fault):
            if not self.control.is_running(name):
                raise NotInjected(f"{name} is not running; it cannot be restarted")
            self.control.stop(name)

    def heal(self, fault: Fault) -> None:
        for name in _services(fault):
            self.control.start(name)


class PauseAction:
    """SIGSTOP; healed by SIGCONT."""

    def __init__(self, control: ProcessControl) -> None:
        self.control = control

    def inject(self, fault: Fault) -> None:
        for name in _services(fault):
            if not self.control.is_running(name):
                raise NotInjected(f"{name} is not running; it cannot be paused")
            self.control.pause(name)

    def heal(self, fault: Fault) -> None:
        for name in _services(fault):
            self.control.resume(name)


class _InstantAction:
    """A topic change that stays: nothing to heal."""

    def heal(self, fault: Fault) -> None:
        return None


class SplitAction(_InstantAction):
    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin

    def inject(self, fault: Fault) -> None:
        (target,) = fault.targets
        if not isinstance(target, SegmentTarget) or target.segment_id is None:
            raise NotInjected(f"split needs a v5 segment, got {target}")
        self.admin.split_segment(target.topic, target.segment_id)


class MergeAction(_InstantAction):
    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin

    def inject(self, fault: Fault) -> None:
        first, second = fault.targets
        if not (isinstance(first, SegmentTarget) and isinstance(second, SegmentTarget)) \
                or first.segment_id is None or second.segment_id is None:
            raise NotInjected(f"merge needs two v5 segments, got {[str(t) for t in fault.targets]}")
        self.admin.merge_segments(first.topic, first.segment_id, second.segment_id)


class TerminateAction(_InstantAction):
    """Terminate a v4 topic (or one partition) or seal a v5 segment."""

    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin

    def inject(self, fault: Fault) -> None:
        (target,) = fault.targets
        if isinstance(target, SegmentTarget) and target.segment.startswith("segment://"):
            self.admin.terminate_segment(target.segment)
        elif isinstance(target, SegmentTarget):
            self.admin.terminate_topic(target.segment)
        elif isinstance(target, TopicTarget) and target.topic.startswith("persistent://"):
            self.admin.terminate_topic(target.topic)
        else:
            raise NotInjected(f"terminate takes a persistent:// topic or a segment, got {target}")


class UnloadAction(_InstantAction):
    """Unload a topic (every partition or segment), a partition or a v5 segment. Instant: the
    next lookup loads it again, on whichever broker the load manager picks."""

    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin

    def inject(self, fault: Fault) -> None:
        (target,) = fault.targets
        if isinstance(target, SegmentTarget) and target.segment.startswith("segment://"):
            self.admin.unload_segment(target.segment)
        elif isinstance(target, SegmentTarget):
            self.admin.unload_topic(target.segment)
        elif isinstance(target, TopicTarget):
            self.admin.unload_topic(target.topic)
        else:
            raise NotInjected(f"unload takes a topic or a segment, got {target}")
