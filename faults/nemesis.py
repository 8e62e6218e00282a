"""The nemesis: walks a run's fault timeline beside the load, and always heals.

Theory of operation. Built from the run's config and its timeline (planned once,
before the cluster started: faults.schedule, a pure function of the scenario and seed),
it checks every fault against the running cluster and what the target can do, so a
bad scenario fails with one ConfigError before anything runs. `start()` runs the timeline in one background
thread; the orchestrator polls `raise_if_failed()` and leaves the `with` block
when the faults phase ends, which stops the thread and heals. The phase lasts the
plan's length, and on past it (`phases.faults_overrun_s`, bounded) while the thread
still has windows to play: on real brokers a heal takes tens of seconds the plan does
not count, and a timeline cut at its planned end would run some windows on one
release and not on another (the release matrix compares releases by one timeline).

For each fault: resolve its targets (now: coordinators move, segments split),
write the `fault` invoke, inject, write `ok` (in effect), `fail` (certainly not
in effect) or `info` (unknown, e.g. a timeout); at the end of its window write the
`heal` invoke, heal, write `ok` or `info`. Unload, split, merge and terminate cannot be
undone: their `fault` ok carries `extra.healable: false` and no heal follows, and each is
injected on a thread of its own, so a slow answer holds neither the window's clock (its later
faults, its heals) nor its topic; the window ends once they have answered.

Invariants:
* Anything healable that may be in effect is in `_active` from just before its injection
  starts until a heal of it succeeded, so `heal_all()` (on exit, on Ctrl-C, on an
  error, or called again by the orchestrator's teardown) heals exactly that; heals
  are idempotent, so healing a half-made fault is safe.
* Heals run under one lock, one at a time; healable faults of one window never share a
  process or proxy (resolution excludes busy resources); topic operations may meet on
  one topic (an unload while the last one is still answering).
* Every call is bounded in time (faults.bounded); the thread never waits unbounded.
* A heal that fails (after retries) is the nemesis's own failure: the cluster may
  be left broken, so `raise_if_failed()` raises. A failed injection is a result
  of the chaos, recorded in the history, not a failure of the nemesis.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from faults.bounded import call_bounded
from faults.environment import Capability, FaultEnvironment, topology_topics
from faults.kinds import build_actions
from faults.kinds.base import Kind, Refusal
from faults.model import Fault, FaultAction, LoadControl, NotInjected
from faults.resolution import Aim, ResolveContext
from faults.resolve import resolve_fault
from faults.schedule import PlannedFault, Timeline, Window
from faults.selectors import SelectorError, check_against_cluster, uses_coordinator, uses_trigger
from faults.supervisor import Supervisor
from faults.triggers import HistoryTail
from harness.config import RunConfig
from harness.errors import ConfigError, TxnbenchError
from harness.history import HistoryRecorder
from harness.history.schema import OpF
from harness.interrupts import sigint_deferred
from harness.target import ClusterInfo, ProcessControl, ServiceRole

HEAL_ATTEMPTS = 3
NETWORK_TIMEOUT_S = 30.0
PROCESS_TIMEOUT_S = 30.0
ADMIN_TIMEOUT_S = 60.0
LOAD_TIMEOUT_S = 90.0       # a replacement load worker connects within the load's own 60 s bound
RESOLVE_TIMEOUT_S = 30.0


class NemesisError(TxnbenchError):
    """The nemesis could not do its own job (a heal failed, or its thread crashed)."""

    exit_code = 2


@dataclass
class _Active:
    fault: Fault
    action: FaultAction
    kind: Kind


@dataclass
class NemesisStats:
    injected: int = 0
    failed: int = 0          # certainly not in effect
    unknown: int = 0         # outcome unknown (recorded as info, healed anyway)
    healed: int = 0
    heal_failures: int = 0
    not_healable: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Nemesis:
    """A context manager; `start()` begins the timeline, leaving the block heals everything.

    Args:
        config: the run's config (seed, path, the cluster's ready timeout).
        timeline: the run's faults, as planned before the cluster started (faults.schedule.plan_run).
        cluster: the running cluster's services and links.
        control: process control, or None (external target: no kill/pause).
        recorder: the nemesis's history writer.
        topology: the workload topology (its topics are what topic/segment targets pick from).
        environment: inject fakes in tests; by default built from the cluster's URLs.
        progress: where one-line progress goes (default: stderr).
    """

    def __init__(self, config: RunConfig, timeline: Timeline, cluster: ClusterInfo, control: ProcessControl | None,
                 recorder: HistoryRecorder, topology: Any = None, *,
                 environment: FaultEnvironment | None = None,
                 actions: dict[str, FaultAction] | None = None,
                 progress: Callable[[str], None] | None = None,
                 load_control: LoadControl | None = None) -> None:
        self.config = config
        self.cluster = cluster
        self.recorder = recorder
        self.say = progress or _say
        self.label = f"[{config.path.value}] nemesis"
        topics = environment.topics if environment is not None else topology_topics(topology)
        self.timeline = timeline
        if environment is None:
            from faults.environment import for_run

            environment = for_run(cluster, config.path, control, topics, load=load_control)
        self.env = environment
        try:
            self.actions = actions if actions is not None else build_actions(environment)
            self._check_capabilities()
        except BaseException:
            environment.close()
            raise
        self.stats = NemesisStats()
        self._active: dict[str, _Active] = {}
        self._lock = threading.Lock()         # _active, _failures, stats: held only briefly
        self._heal_lock = threading.Lock()    # one heal at a time (the thread's or heal_all's)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures: list[str] = []
        self._phase_start: float | None = None
        self._closed = False
        self._tail: HistoryTail | None = None     # follows the load's history, for triggers
        self._started_at: dict[int, float] = {}   # window index -> seconds into the phase it began
        self._claimed: set[str] = set()           # resources the supervisor holds while it restarts a service
        self.supervisor = (Supervisor(control, [s.name for s in cluster.services], recorder, busy=self._busy,
                                      claim=self._claim, release=self._release,
                                      say=lambda text: self.say(f"{self.label}: {text}"), fail=self._fail)
                           if control is not None else None)

    # ---- validation ------------------------------------------------------------------------------

    def _check_capabilities(self) -> None:
        have = self.env.capabilities()
        source = f"scenario {self.config.name}"
        brokers = len(self.cluster.by_role(ServiceRole.BROKER))
        for planned in self.timeline.faults:
            try:   # planned with the scenario's numbers; the running cluster and the run's topics decide
                check_against_cluster(planned.selector, brokers, len(self.env.topics) or None)
            except SelectorError as err:
                raise ConfigError(source, f"{planned.source}.target", str(err), "pick one that exists") from None
            for need in sorted(planned.kind.needs, key=str):
                if need not in have:
                    raise ConfigError(source, f"{planned.source}.kind",
                                      f"{planned.kind.name} cannot run here: {self.env.why_missing(need)}",
                                      "remove it from the scenario or use the embedded or compose target")
            if planned.kind.name not in self.actions:
                raise ConfigError(source, f"{planned.source}.kind",
                                  f"{planned.kind.name} has no action in this environment",
                                  "remove it from the scenario or use the embedded or compose target")
            if uses_coordinator(planned.selector) and Capability.COORDINATORS not in have:
                raise ConfigError(source, f"{planned.source}.target",
                                  f"{planned.target!r} needs to locate the coordinators: "
                                  f"{self.env.why_missing(Capability.COORDINATORS)}",
                                  "name a broker instead, e.g. broker:0 or broker:random")
        self._check_runs(source)

    def _check_runs(self, source: str) -> None:
        """Each fault against the running cluster's settings and its window, by its kind's `check_run`."""
        for window in self.timeline.windows:
            for planned in window.faults:
                try:
                    if planned.kind.check_run is not None:
                        planned.kind.check_run(planned.params, window.for_s, self.cluster.settings)
                except Refusal as err:
                    raise ConfigError(source, f"{planned.source}.{err.key}", err.problem, err.fix) from None

    # ---- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Nemesis:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.heal_all()

    def start(self) -> None:
        """Begin the timeline now; `at_s`/`every_s` count from this moment."""
        if self._thread is not None:
            raise RuntimeError("the nemesis was already started")
        if self._closed:
            raise RuntimeError("the nemesis was already stopped and healed")
        self._phase_start = time.monotonic()
        for note in self.timeline.notes:
            self.say(f"{self.label}: {note}")
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()
        if self.supervisor is not None:
            self.supervisor.start()

    def raise_if_failed(self) -> None:
        with self._lock:
            failures = list(self._failures)
        if failures:
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise NemesisError(f"nemesis: {failures[0]}{more}")

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def progress(self) -> dict[str, Any]:
        """How far the timeline got: which windows began and how late, which never did.

        Why: a heal (a restart, a store's recovery) takes seconds the plan does not count and a
        trigger waits for the load, so the timeline slips; windows still ahead when the faults
        phase ends never run, and a chaos run that silently skipped its late faults (a client
        isolation, a store kill) would claim paths it never exercised. The run writes this into
        its manifest and report (`faults_progress`).
        """
        with self._lock:
            started = dict(self._started_at)
        progress = timeline_progress(self.timeline, started)
        if self.supervisor is not None:
            progress["service_exits"] = dict(self.supervisor.stats.exits)
        return progress

    def in_effect(self) -> list[Fault]:
        """Faults that may be in effect now (injected or being injected, not yet healed)."""
        with self._lock:
            return [a.fault for a in self._active.values()]

    def heal_all(self) -> None:
        """Stop the timeline and heal everything that may be in effect. Idempotent; a second
        Ctrl-C while healing is deferred (on the main thread) so the heal completes."""
        self._stop.set()
        with sigint_deferred() as ctrl_c:
            if self.supervisor is not None:
                self.supervisor.stop(self._longest_action_s() + 5.0)
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(self._longest_action_s() + 5.0)
                if thread.is_alive():
                    self._fail("the nemesis thread did not stop in time; healing what it left")
            with self._lock:
                pending = list(self._active.values())
            for active in reversed(pending):
                self._heal(active)
            if not self._closed:
                self._closed = True
                self.env.close()
        if ctrl_c:
            _say("nemesis: Ctrl-C while healing; the heal was finished first")

    # ---- the timeline ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            assert self._phase_start is not None
            # The plan's length plus the overrun the run allows: a window the slipping timeline
            # reaches after the plan's end still runs (the run's faults phase waits for it).
            phase_end = self._phase_start + self.timeline.duration_s + self.config.phases.faults_overrun_s
            quiet_until = self._phase_start
            for number, window in enumerate(self.timeline.windows):
                start_at = max(self._phase_start + window.start_s, quiet_until)
                if start_at >= phase_end or not self._sleep_until(start_at):
                    return
                trigger = self._await_trigger(window, phase_end)
                if self._stop.is_set() or time.monotonic() >= phase_end:
                    return
                started = time.monotonic()
                with self._lock:
                    self._started_at[number] = started - self._phase_start
                if not self._play_window(window, trigger, started, phase_end):
                    return
                quiet_until = time.monotonic() + window.quiet_s
        except BaseException as err:  # a bug here must not pass silently
            self._fail(f"the nemesis thread crashed: {type(err).__name__}: {err}\n{traceback.format_exc()}")

    def _sleep_until(self, deadline: float) -> bool:
        """Wait until `deadline`; False when stopped first."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return not self._stop.is_set()
            if self._stop.wait(min(remaining, 1.0)):
                return False

    def _await_trigger(self, window: Window, phase_end: float) -> dict[str, Any] | None:
        """For a triggered window: wait (bounded by `within_s` and the phase) for the load's next
        matching operation; what it saw, for the fault's history `extra.trigger`."""
        spec = window.trigger
        if spec is None:
            return None
        if self._tail is None:
            self._tail = HistoryTail(self.recorder.file_path.parent, skip=[self.recorder.file_path])
        started = time.monotonic()
        budget = max(0.0, min(spec.within_s, phase_end - started))
        aimed = any(uses_trigger(planned.selector) for planned in window.faults)
        seen = self._tail.wait_for(spec.op.value, spec.type.value, budget, self._stop, aimed=aimed)
        info: dict[str, Any] = {"op": spec.op.value, "type": spec.type.value, "fired": seen is not None,
                                "waited_s": round(time.monotonic() - started, 4)}
        if seen is not None:
            info["seen"] = {k: seen.get(k) for k in ("writer", "index", "process", "txn", "topic", "segment",
                                                     "time_ns", "participants", "written")
                          if seen.get(k) is not None}
        return info

    def _play_window(self, window: Window, trigger: dict[str, Any] | None, started: float,
                     phase_end: float) -> bool:
        """Inject the window's faults, each `after_s` into it (stacked: `overlap`), and heal each
        after its own duration: the earliest heal first; faults healed at one moment in the reverse
        order of their injection; an injection due at the moment of a heal after it. False when
        stopped first (heal_all heals what is left)."""
        beside: list[threading.Thread] = []   # topic operations still answering
        try:
            return self._play_window_faults(window, trigger, started, phase_end, beside)
        finally:
            for thread in beside:
                thread.join(timeout=RESOLVE_TIMEOUT_S + ADMIN_TIMEOUT_S + 1.0)

    def _play_window_faults(self, window: Window, trigger: dict[str, Any] | None, started: float,
                            phase_end: float, beside: list[threading.Thread]) -> bool:
        waiting = sorted(enumerate(window.faults), key=lambda item: (item[1].after_s, item[0]))
        healing: list[tuple[float, int, _Active]] = []     # (heal at, -injection order, fault)
        deferred: list[_Active] = []    # heals that failed while other faults of the window held
        while waiting or healing:
            next_heal = min(healing, key=lambda h: (h[0], h[1])) if healing else None
            if waiting and (next_heal is None or started + waiting[0][1].after_s < next_heal[0]):
                number, planned = waiting.pop(0)
                if not self._sleep_until(min(started + planned.after_s, phase_end)):
                    return False
                if time.monotonic() >= phase_end:   # the phase ended before its turn: it never runs
                    continue
                end = window.for_s if planned.for_s is None else min(planned.after_s + planned.for_s, window.for_s)
                if not planned.healable:
                    beside.append(self._inject_beside(planned, max(0.0, end - planned.after_s), trigger))
                    continue
                active = self._inject(planned, max(0.0, end - planned.after_s), trigger)
                if active is not None:
                    healing.append((started + planned.after_s + active.fault.for_s, -number, active))
                continue
            assert next_heal is not None
            healing.remove(next_heal)
            if not self._sleep_until(min(next_heal[0], phase_end)):
                return False
            # A stacked fault's heal can need another's: a broker cannot start while its metadata
            # store is down or out of its reach (Pulsar's broker exits), so its start waits for
            # that heal, as a supervisor's restarts would only succeed then. A heal that fails
            # while others still hold is tried again after each later heal, and fails the run
            # only when nothing of the window is left to heal.
            others = [h[2] for h in healing]
            last = not healing and not waiting
            if (not last and _needs_healed_first(next_heal[2], others) is not None) or \
                    not self._heal(next_heal[2], last_chance=last):
                deferred.append(next_heal[2])
                continue
            for active in list(deferred):
                if not last and _needs_healed_first(active, others) is not None:
                    continue
                if self._heal(active, last_chance=last):
                    deferred.remove(active)
        return True

    def _inject_beside(self, planned: PlannedFault, for_s: float,
                       trigger: dict[str, Any] | None) -> threading.Thread:
        """Inject a fault nothing heals (a topic's unload, split, merge or terminate) on a thread of
        its own. Such a call can take seconds (an unload waits for the topic's load under a slow
        ledger store), and waited for in line it held the window's clock: four unloads meant 1.5 s
        apart ran 8-16 s apart and the 8 s slow store they stacked on was healed after 51 s."""
        def inject() -> None:
            try:
                self._inject(planned, for_s, trigger)
            except BaseException as err:  # a bug here must not pass silently
                self._fail(f"injecting {planned.fault_id} crashed: {type(err).__name__}: {err}\n"
                           f"{traceback.format_exc()}")
        thread = threading.Thread(target=inject, name=f"nemesis-{planned.fault_id}", daemon=True)
        thread.start()
        return thread

    def _busy(self) -> frozenset[str]:
        with self._lock:
            return frozenset(r for a in self._active.values() for r in a.fault.resources) | self._claimed

    def _claim(self, resource: str) -> bool:
        """The supervisor takes `resource` for a restart unless a fault holds it."""
        with self._lock:
            if any(resource in a.fault.resources for a in self._active.values()) or resource in self._claimed:
                return False
            self._claimed.add(resource)
            return True

    def _release(self, resource: str) -> None:
        with self._lock:
            self._claimed.discard(resource)

    def _inject(self, planned: PlannedFault, for_s: float,
                trigger: dict[str, Any] | None = None) -> _Active | None:
        """Resolve, record and inject one fault; the _Active to heal later, or None."""
        ctx = ResolveContext(cluster=self.cluster, rng=random.Random(f"{self.config.seed}/{planned.fault_id}"),
                             busy=self._busy(), topics=self.env.topics, is_running=self.env.is_running(),
                             coordinator_brokers=self.env.coordinator_brokers(),
                             owner_of=self.env.owner_of(),
                             segments_of=self.env.segments_of(),
                             aim=Aim.from_seen((trigger or {}).get("seen")))
        process = f"nemesis/{planned.fault_id}"
        try:
            fault = call_bounded(lambda: resolve_fault(planned, ctx, txn_path=self.config.path, for_s=for_s,
                                                       settings=self.cluster.settings),
                                 RESOLVE_TIMEOUT_S, f"choosing the target of {planned.fault_id}")
        except Exception as err:
            unresolved = Fault(planned.fault_id, planned.kind.name, planned.target, (), planned.params, for_s,
                               planned.healable, planned.source, trigger, planned.kind.effects)
            inv = self.recorder.invoke(process, OpF.FAULT, extra=unresolved.extra())
            self.recorder.fail(inv, _error(err))
            self._count(planned.kind.name, "failed")
            self.say(f"{self.label}: {planned.fault_id} {planned.kind.name} {planned.target}: "
                     f"no target ({_error(err)})")
            return None
        if trigger is not None:
            fault = dataclasses.replace(fault, trigger=trigger)
        action = self.actions[fault.kind]
        active = _Active(fault, action, planned.kind)
        what = f"{fault.fault_id} {fault.kind} {', '.join(map(str, fault.targets))}"
        with self._lock:
            restarting = fault.resources & self._claimed
            if not restarting and fault.healable:   # a fault nothing heals holds nothing
                self._active[fault.fault_id] = active
        if restarting:   # the supervisor took the service between resolve and now
            self._count(fault.kind, "failed")
            self.say(f"{self.label}: {what}: not injected (the supervisor is starting "
                     f"{', '.join(sorted(restarting))} again)")
            return None
        inv = self.recorder.invoke(fault.process, OpF.FAULT, extra=fault.extra())
        effect: Mapping[str, Any] | None = None
        try:
            effect = call_bounded(lambda: action.inject(fault), self._timeout(planned.kind, heal=False),
                                  f"injecting {what}")
        except NotInjected as err:
            with self._lock:
                self._active.pop(fault.fault_id, None)
            self.recorder.fail(inv, _error(err))
            self._count(fault.kind, "failed")
            self.say(f"{self.label}: {what}: not injected ({err})")
            return None
        except Exception as err:
            self.recorder.info(inv, _error(err))
            self._count(fault.kind, "unknown")
            if not fault.healable:   # nothing undoes it (a terminate answered HTTP 500 after one partition):
                with self._lock:     # no heal is recorded, which would read as "the topic is back"
                    self._active.pop(fault.fault_id, None)
                    self.stats.not_healable += 1
                self.say(f"{self.label}: {what}: outcome unknown ({_error(err)}); it may be in effect and stays")
                return None
            self.say(f"{self.label}: {what}: outcome unknown ({_error(err)}); it will be healed")
            return active
        if effect:
            self.recorder.ok(inv, extra={**fault.extra(), "effect": dict(effect)})
            what += f" ({', '.join(f'{k} {v}' for k, v in effect.items())})"
        else:
            self.recorder.ok(inv)
        self._count(fault.kind, "injected")
        if not fault.healable:
            with self._lock:
                self._active.pop(fault.fault_id, None)
                self.stats.not_healable += 1
            self.say(f"{self.label}: {what} (stays: not healable)")
            return None
        self.say(f"{self.label}: {what} in effect for {fault.for_s:g}s")
        return active

    def _heal(self, active: _Active, *, last_chance: bool = True) -> bool:
        """Heal one fault, with retries. True when healed (or healed meanwhile). Otherwise the
        attempt is recorded as unknown; with `last_chance` the nemesis fails, without it the
        fault stays in effect for a later try (False)."""
        fault = active.fault
        what = f"{fault.fault_id} {fault.kind} {', '.join(map(str, fault.targets))}"
        with self._heal_lock:
            with self._lock:
                if fault.fault_id not in self._active:
                    return True   # healed meanwhile (heal_all and the thread both got here)
            recording = not self.recorder.closed
            inv = self.recorder.invoke(fault.process, OpF.HEAL, extra=fault.extra()) if recording else None
            error: BaseException | None = None
            effect: Mapping[str, Any] | None = None
            for attempt in range(1, HEAL_ATTEMPTS + 1):
                try:
                    effect = call_bounded(lambda: active.action.heal(fault), self._timeout(active.kind, heal=True),
                                          f"healing {what}")
                    error = None
                    break
                except Exception as err:
                    error = err
                    if attempt < HEAL_ATTEMPTS:
                        time.sleep(0.5 * attempt)
            if error is None:
                if inv is not None:
                    if effect:
                        self.recorder.ok(inv, extra={**fault.extra(), "effect": dict(effect)})
                    else:
                        self.recorder.ok(inv)
                with self._lock:
                    del self._active[fault.fault_id]
                    self.stats.healed += 1
                self.say(f"{self.label}: {what} healed")
                return True
            if inv is not None:
                self.recorder.info(inv, _error(error))
            if not last_chance:
                self.say(f"{self.label}: {what} not healed yet ({_error(error)}); tried again after "
                         "the next fault of its window is healed")
                return False
            self._fail(f"could not heal {what} after {HEAL_ATTEMPTS} attempts: {_error(error)}; the cluster "
                       "may still be broken (`txnbench cluster heal` repairs an embedded cluster)",
                       heal_failure=True)
            return False

    # ---- helpers --------------------------------------------------------------------------------

    def _timeout(self, kind: Kind, heal: bool) -> float:
        """By what the action acts through (its kind's `needs`); a process start adds the ready timeout."""
        waits_for_start = kind.waits_healthy_on_heal if heal else kind.waits_healthy_on_inject
        if waits_for_start:
            return self.config.cluster.ready_timeout_s + PROCESS_TIMEOUT_S
        through = {Capability.NETWORK: NETWORK_TIMEOUT_S, Capability.PROCESSES: PROCESS_TIMEOUT_S,
                   Capability.ADMIN: ADMIN_TIMEOUT_S, Capability.LOAD: LOAD_TIMEOUT_S}
        return max((through.get(need, 0.0) for need in kind.needs), default=0.0) or NETWORK_TIMEOUT_S

    def _longest_action_s(self) -> float:
        return max(RESOLVE_TIMEOUT_S, ADMIN_TIMEOUT_S, LOAD_TIMEOUT_S * HEAL_ATTEMPTS,
                   (self.config.cluster.ready_timeout_s + PROCESS_TIMEOUT_S) * HEAL_ATTEMPTS)

    def _count(self, kind: str, outcome: str) -> None:
        with self._lock:
            setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)
            if outcome == "injected":
                self.stats.kinds[kind] = self.stats.kinds.get(kind, 0) + 1

    def _fail(self, message: str, heal_failure: bool = False) -> None:
        with self._lock:
            self._failures.append(message)
            if heal_failure:
                self.stats.heal_failures += 1
        self.say(f"{self.label}: {message.splitlines()[0]}")


def _needs_healed_first(active: _Active, others: list[_Active]) -> _Active | None:
    """Another fault still in effect that `fault`'s heal needs healed first: a heal that starts a
    broker (kill, crash, restart) needs the metadata store running and reachable from it."""
    fault = active.fault
    if not active.kind.waits_healthy_on_heal:
        return None
    brokers = {str(t) for t in fault.targets if str(t).startswith("broker-")}
    if not brokers:
        return None
    cuts = {"metadata"} | {f"{broker}-metadata" for broker in brokers}
    for other in others:
        if any(str(t) in cuts for t in other.fault.targets):
            return other
    return None


def timeline_progress(timeline: Timeline, started_at: Mapping[int, float]) -> dict[str, Any]:
    """The windows that began (with their lateness against the plan) and those that never did."""
    late = [started_at[n] - w.start_s for n, w in enumerate(timeline.windows) if n in started_at]
    unreached = [{"window": n + 1, "at_s": w.start_s,
                  "faults": [f"{f.kind.name} {f.target}" for f in w.faults]}
                 for n, w in enumerate(timeline.windows) if n not in started_at]
    return {"windows": len(timeline.windows), "started": len(started_at),
            "max_late_s": round(max(late), 1) if late else 0.0,
            "last_late_s": round(late[-1], 1) if late else 0.0,
            "unreached": unreached}


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"
