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
then start; SIGSTOP then SIGCONT; a power-loss crash: kill -9, tear what was never fsynced, start). Topic faults go through `TopicAdmin` and are not healable: a split,
merge, seal or termination stays.

Which action serves which kind, and what it acts through, is the kind's registry entry
(its module in faults/kinds/, `action`).

Every heal is idempotent: enabling an enabled proxy, removing a toxic that is not
there, starting a running process and resuming a running one all succeed, so
heal-everything after an interrupted injection is always safe.
"""

from __future__ import annotations

import contextlib
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from faults.model import Fault, LoadControl, NetworkApi, NotInjected, TopicAdmin
from faults.resolution import (
    Direction,
    LinkEnd,
    LoadTarget,
    SegmentTarget,
    ServiceTarget,
    TopicTarget,
)
from harness.target import (
    CorruptionControl,
    CrashAim,
    NothingToDamage,
    PowerLossControl,
    ProcessControl,
)
from harness.toxiproxy.client import NotFound
from harness.toxiproxy.model import ToxicType

TOXIC_PREFIX = "txnbench-"


def toxic_name(fault: Fault, type_: ToxicType, stream: str) -> str:
    return f"{TOXIC_PREFIX}{fault.fault_id}-{type_.value}-{stream}"


def _ends(fault: Fault) -> list[LinkEnd]:
    ends = [t for t in fault.targets if isinstance(t, LinkEnd)]
    if not ends:
        raise NotInjected(f"{fault.kind} needs links as targets, got {[str(t) for t in fault.targets]}")
    return ends


def _services(fault: Fault) -> list[str]:
    names = [t.name for t in fault.targets if isinstance(t, ServiceTarget)]
    if not names:
        raise NotInjected(f"{fault.kind} needs a service as target")
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


def _seed_of(fault: Fault) -> int:
    """A fault's own random seed: its id and where it was written, so a run reproduces it."""
    return zlib.crc32(f"{fault.fault_id}/{fault.source}".encode())


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


class CrashAction:
    """A power-loss crash (LazyFS-like): kill -9 at a moment the store has a write in flight, then
    lose what it never fsynced (targets/power_loss.py); healed by starting the process again,
    which recovers from what is left. Only what the store never acknowledged is lost."""

    def __init__(self, control: ProcessControl) -> None:
        self.control = control

    def inject(self, fault: Fault) -> Mapping[str, Any]:
        if not isinstance(self.control, PowerLossControl):
            raise NotInjected("this target cannot crash a store's files (only the embedded cluster's stores "
                              "record what they fsynced)")
        seed = _seed_of(fault)
        aim_s = int(fault.params.get("aim_ms", 0)) / 1000
        aim = CrashAim(fault.params.get("aim", CrashAim.WRITE.value))
        return {"lost": {name: self.control.crash(name, seed, aim_s, aim) for name in _services(fault)}}

    def heal(self, fault: Fault) -> None:
        for name in _services(fault):
            self.control.start(name)


class CorruptAction:
    """Disk corruption (targets/corruption.py): kill -9 a store, flip one bit of a durable file its
    recovery reads whole, start it again and record whether it refused to (it should, naming the
    damage); healed by flipping the bit back and starting it. While the fault holds the store is
    down (it refused) or serves what it read from the damaged file (the checks judge that)."""

    def __init__(self, control: ProcessControl) -> None:
        self.control = control

    def inject(self, fault: Fault) -> Mapping[str, Any]:
        if not isinstance(self.control, CorruptionControl):
            raise NotInjected("this target cannot damage a store's files (only the embedded cluster's stores, "
                              "whose formats it knows)")
        seed = _seed_of(fault)
        which = str(fault.params.get("file", "log"))
        effect: dict[str, Any] = {}
        for name in _services(fault):
            try:
                effect[name] = self.control.corrupt(name, seed, which)
            except NothingToDamage as err:
                raise NotInjected(str(err)) from None
        return effect

    def heal(self, fault: Fault) -> None:
        for name in _services(fault):
            if isinstance(self.control, CorruptionControl):
                self.control.repair(name)
            else:
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


class ClientKillAction:
    """kill -9 one Locust worker of the load: the transactions it had open are abandoned, its
    history may end in a torn line. Healed by a replacement worker under a new writer name
    (the master rebalances the users onto it). The load process does both, on request
    (`LoadControl`), since it started the workers and must not take this death for a failure."""

    def __init__(self, control: LoadControl) -> None:
        self.control = control
        self._killed: dict[str, str] = {}      # fault id -> the writer killed
        self._healed: set[str] = set()
        self._lock = threading.Lock()

    def inject(self, fault: Fault) -> Mapping[str, Any]:
        (target,) = fault.targets
        if not isinstance(target, LoadTarget):
            raise NotInjected(f"client-kill needs a load worker as target, got {target}")
        seed = _seed_of(fault)
        worker = target.worker
        seen = (fault.trigger or {}).get("seen") or {}
        if worker == "random" and isinstance(seen.get("writer"), str) and seen.get("txn"):
            worker = seen["writer"]   # triggered: the worker whose transaction set it off, still open
        try:
            done = self.control.kill(fault.fault_id, worker, seed)
        except Exception as err:
            if "no running load worker" in str(err):
                raise NotInjected(str(err)) from None
            raise
        with self._lock:
            self._killed[fault.fault_id] = str(done["writer"])
        return {"writer": done["writer"], "pid": done.get("pid")}

    def heal(self, fault: Fault) -> Mapping[str, Any] | None:
        with self._lock:
            writer = self._killed.get(fault.fault_id)
            if writer is None or fault.fault_id in self._healed:
                return None     # nothing was killed, or it was already replaced
        done = self.control.start(fault.fault_id, writer)
        with self._lock:
            self._healed.add(fault.fault_id)
        return {"replaced": writer, "writer": done["writer"], "pid": done.get("pid")}


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


#: HTTP status of a broker saying another change of the same topic is under way ("retry")
BUSY_STATUS = 409
#: how long an operator keeps retrying a busy answer, and how often (an operator, or a script,
#: retries what the broker told it to retry; the nemesis waits for the slowest of them)
BUSY_RETRY_FOR_S = 8.0
BUSY_RETRY_PAUSE_S = 0.25
#: how long the operators wait for each other to be ready before they all send
OPERATORS_START_TIMEOUT_S = 5.0


def _busy(err: NotInjected) -> bool:
    return getattr(err.__cause__, "status", None) == BUSY_STATUS


def _as_operator(change: Callable[[], None], ready: threading.Barrier) -> tuple[str, Exception | None]:
    """One operator's change: ("ok", None), ("refused", why) or ("unknown", error). A busy answer
    is retried every BUSY_RETRY_PAUSE_S for BUSY_RETRY_FOR_S, then counts as refused."""
    with contextlib.suppress(threading.BrokenBarrierError):
        ready.wait(OPERATORS_START_TIMEOUT_S)
    deadline = time.monotonic() + BUSY_RETRY_FOR_S
    while True:   # bounded by the deadline
        try:
            change()
            return "ok", None
        except NotInjected as err:
            if _busy(err) and time.monotonic() < deadline:
                time.sleep(BUSY_RETRY_PAUSE_S)
                continue
            return "refused", err
        except Exception as err:
            return "unknown", err


def as_operators(fault: Fault, change: Callable[[], None]) -> Mapping[str, Any] | None:
    """Make the change `params.operators` times at once, as that many operators (or an operator
    and an automated splitter) acting on the same view of the topic would.

    One operator: the change as it is. Several: each sends it from its own thread, all released
    together; a busy answer (another change of the topic is under way) is retried, as the broker
    asks. The fault took effect when one of them was answered ok; the others' refusals (the
    segment is no longer active) or answers (a terminate answers the position already
    terminated) are what the race is for, and are recorded as the fault's effect. None ok: all
    refused is NotInjected, else the outcome is unknown (the first such error is raised)."""
    count = int(fault.params.get("operators", 1) or 1)
    if count <= 1:
        change()
        return None
    ready = threading.Barrier(count)
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix=f"operator-{fault.fault_id}") as pool:
        answers = list(pool.map(lambda _i: _as_operator(change, ready), range(count)))
    summary = [outcome if err is None else f"{outcome}: {err}" for outcome, err in answers]
    if any(outcome == "ok" for outcome, _ in answers):
        return {"operators": count, "answers": summary}
    unknown = [err for outcome, err in answers if outcome == "unknown" and err is not None]
    if unknown:
        raise unknown[0]
    raise NotInjected(f"every one of {count} operators was refused: {'; '.join(summary)}")


class SplitAction(_InstantAction):
    """Split a segment; `operators` > 1: that many at once (`as_operators`)."""

    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin

    def inject(self, fault: Fault) -> Mapping[str, Any] | None:
        (target,) = fault.targets
        if not isinstance(target, SegmentTarget) or target.segment_id is None:
            raise NotInjected(f"split needs a v5 segment, got {target}")
        topic, segment_id = target.topic, target.segment_id
        return as_operators(fault, lambda: self.admin.split_segment(topic, segment_id))


class MergeAction(_InstantAction):
    """Merge two segments; `operators` > 1: that many at once (`as_operators`)."""

    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin

    def inject(self, fault: Fault) -> Mapping[str, Any] | None:
        first, second = fault.targets
        if not (isinstance(first, SegmentTarget) and isinstance(second, SegmentTarget)) \
                or first.segment_id is None or second.segment_id is None:
            raise NotInjected(f"merge needs two v5 segments, got {[str(t) for t in fault.targets]}")
        topic, first_id, second_id = first.topic, first.segment_id, second.segment_id
        return as_operators(fault, lambda: self.admin.merge_segments(topic, first_id, second_id))


class TerminateAction(_InstantAction):
    """Terminate a v4 topic (or one partition) or seal a v5 segment; `operators` > 1: that
    many at once (`as_operators`)."""

    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin

    def inject(self, fault: Fault) -> Mapping[str, Any] | None:
        (target,) = fault.targets
        change: Callable[[], None]
        if isinstance(target, SegmentTarget) and target.segment.startswith("segment://"):
            segment = target.segment
            change = lambda: self.admin.terminate_segment(segment)  # noqa: E731
        elif isinstance(target, SegmentTarget):
            partition = target.segment
            change = lambda: self.admin.terminate_topic(partition)  # noqa: E731
        elif isinstance(target, TopicTarget) and target.topic.startswith("persistent://"):
            topic = target.topic
            change = lambda: self.admin.terminate_topic(topic)  # noqa: E731
        else:
            raise NotInjected(f"terminate takes a persistent:// topic or a segment, got {target}")
        return as_operators(fault, change)


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
