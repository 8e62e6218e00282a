"""One run: a scenario's named phases on one path, and the `txnbench run` command.

Theory of operation. A run walks these phases, writing a `phase` event to the
history (writer `run`) as each starts and a metrics snapshot of every service
(`metrics/<phase>-<service>.prom`) as each ends:

    setup     start the target, create the topics, wait until transactions work
    warmup    the load process runs; its numbers are not the result
    steady    the measured window
    faults    the nemesis walks the fault schedule (only when the scenario has faults)
    recovery  faults healed, load still running; then the load stops
    drain     when the reads are to be cold: live reads of every topic first (writer
              `drain-live`, the manifest's `live_reads`); then cold reads (every broker
              restarted, or every topic unloaded, so the final reads come from durable
              storage; `phases.cold_reads`, said in the manifest's `cold_reads`), then
              final reads of every topic,
              subscriptions consumed until empty, then the `drain-complete` event
    collect   logs and Locust statistics gathered, the cluster stopped

then the analysis (verdict, performance, report) runs on what was written.

The load runs in its own process (`python -m workloads.runner`), in its own session,
because Locust patches the interpreter with gevent; the orchestrator stays a plain
threaded process that can run Spark afterwards. Whatever happens — an error, a
Ctrl-C, a load process that dies — the `finally` path heals every fault, stops the
load, stops what the run started (never an external cluster), keeps the history and
records the status in the manifest. The run folder is printed as the last line of
standard output. The matrices (bench, chaos, sweep) run this once per cell
(orchestrator.matrix).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.verdicts import judge_run
from faults.nemesis import Nemesis
from harness.config import ColdReads, RunConfig, Target
from harness.cpus import preexec_pinning
from harness.errors import ConfigError, EnvironmentProblem, TxnbenchError
from harness.history import HistoryRecorder, RunClock
from harness.history.integrity import RECORD_KEY as HISTORY_RECORD_KEY
from harness.history.integrity import record_history
from harness.history.schema import PHASE_DRAIN_COMPLETE, PHASE_SUBSCRIPTION_START, OpF
from harness.interrupts import sigint_deferred
from harness.load_control import LoadControlClient, control_dir
from harness.results import RunStatus, new_run
from harness.target import ClusterInfo, ClusterTarget, ServiceRole
from orchestrator import scenario
from orchestrator.coverage import COVERAGE_DIR
from orchestrator.outcome import (
    LoadProcessDied,
    Phase,
    RunOptions,
    RunOutcome,
    Verdict,
    print_outcome,
    say,
)
from orchestrator.planted import banner as planted_banner
from orchestrator.planted import refuse_planted_bugs
from workloads.entrypoints import RUNNER, python_m
from workloads.loadspec import LoadSpec
from workloads.topology import Topology

if TYPE_CHECKING:
    from orchestrator.load.drain import DrainResult

LOAD_CONTROL_TIMEOUT_S = 80.0   # a replacement worker connects within the load's own 60 s bound

#: Seconds a real Pulsar cluster gets to start (JVMs, cluster metadata, a first transaction).
PULSAR_READY_TIMEOUT_S = 300.0
#: The slowest rate, in messages per second, at which the drain is assumed to read back what the
#: load sent: its budget is `phases.drain_timeout_s` plus the messages sent at this rate. Measured
#: about 8,000 a second on 2 cores against real Pulsar (2026-11-28, a peer run's 551,244 messages:
#: 488,020 read in the 60 s it had); half of that leaves room for a busier machine.
DRAIN_READ_FLOOR_PER_S = 4000.0


def drain_budget_s(drain_timeout_s: float, messages_sent: int) -> float:
    """The drain's bound: the scenario's, plus the time to read back what was sent.

    Why: a fixed bound that suits a chaos run (thousands of messages) cuts short the reads of a
    full-speed benchmark (a peer run sends half a million), and a cut-short drain leaves the
    verdict unknown. Still bounded: it grows with what the load sent, which is finite."""
    return drain_timeout_s + max(0, messages_sent) / DRAIN_READ_FLOOR_PER_S


class Run:
    """One run of one scenario on one path."""

    def __init__(self, config: RunConfig, options: RunOptions) -> None:
        self.config = config
        self.options = options
        self.say = options.progress or say
        # Refused before any folder exists: bench/chaos/sweep never run with a planted bug
        self.planted_bugs = refuse_planted_bugs(config.cluster.settings, options.command,
                                                allowed=options.allow_planted_bugs)
        self.clock = RunClock.start()
        if options.matrix is not None:
            self.run_dir = new_run(config.name, config.path.value, config=config.to_dict(), seed=config.seed,
                                   target=config.target.value, parent=options.matrix.runs_dir,
                                   matrix_id=options.matrix.matrix_id, folder=options.folder)
        else:
            self.run_dir = new_run(config.name, config.path.value, config=config.to_dict(), seed=config.seed,
                                   target=config.target.value, root=options.results_root)
        self.run_dir.update_manifest(run_base_monotonic_ns=self.clock.base_ns,
                                     participants=config.workload.shape(config.path.uses_scalable_topics),
                                     planted_bugs=self.planted_bugs)
        self.history = HistoryRecorder(self.run_dir.history_dir, self.run_dir.run_id, "run", self.clock,
                                       txn_path=config.path.value)
        self.target: ClusterTarget | None = None
        self.cluster_info: ClusterInfo | None = None
        self.load: subprocess.Popen[bytes] | None = None
        self.load_stopped = False
        """True once the run stopped the load itself (its end is no failure)."""
        self.nemesis: Nemesis | None = None
        self.topology: Topology | None = None
        self._temp_cluster_dir: Path | None = None
        self.phase: Phase | None = None
        self.phase_started = time.monotonic()

    @property
    def _cluster(self) -> ClusterInfo:
        """The running cluster: setup brings it up, every later phase works on it."""
        if self.cluster_info is None:
            raise RuntimeError("no cluster yet: the setup phase has not brought it up")
        return self.cluster_info

    @property
    def _topology(self) -> Topology:
        """The run's topics and subscriptions: planned in setup, loaded, faulted and drained after."""
        if self.topology is None:
            raise RuntimeError("no topology yet: the setup phase has not planned it")
        return self.topology

    # ---- phases --------------------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        outcome = RunOutcome(self.run_dir, RunStatus.RUNNING)
        self.say(f"run {self.run_dir.run_id}: {self.config.name} on {self.config.path.value} "
                 f"({self.config.target.value} target) -> {self.run_dir.path}")
        if self.planted_bugs:
            self.say(f"run {self.run_dir.run_id}: {planted_banner(self.planted_bugs)}")
        try:
            self._setup()
            self._start_load()
            self._timed_phase(Phase.WARMUP, self.config.phases.warmup_s)
            self._timed_phase(Phase.STEADY, self.config.phases.steady_s)
            if self.config.faults.enabled:
                self._faults_phase()
            self._timed_phase(Phase.RECOVERY, self.config.phases.recovery_s)
            self._stop_load()
            self._snapshot(Phase.RECOVERY)
            self._drain()
            self._begin(Phase.COLLECT)
            outcome.status = RunStatus.COMPLETE
        except KeyboardInterrupt as stop:   # Ctrl-C, or SIGTERM (harness.interrupts)
            outcome.status, outcome.error = RunStatus.INTERRUPTED, f"interrupted ({stop or 'Ctrl-C'})"
            self.say(f"run {self.run_dir.run_id}: interrupted in phase {self.phase}; cleaning up")
        except TxnbenchError as err:
            outcome.status, outcome.error = RunStatus.FAILED, str(err)
            self.say(f"run {self.run_dir.run_id}: failed in phase {self.phase}: {err}")
        except Exception as err:
            outcome.status, outcome.error = RunStatus.FAILED, f"{type(err).__name__}: {err}"
            (self.run_dir.logs_dir / "orchestrator-error.txt").write_text(traceback.format_exc())
            self.say(f"run {self.run_dir.run_id}: failed in phase {self.phase}: {outcome.error} "
                     f"(traceback in {self.run_dir.logs_dir / 'orchestrator-error.txt'})")
        finally:
            with sigint_deferred():
                self._teardown()
                self._record_history()
                self.run_dir.set_status(outcome.status, outcome.error)
                self._pulsar_coverage()
        if outcome.status is RunStatus.COMPLETE and self.options.analyze:
            outcome.verdict, outcome.summary = self._analyze()
            outcome.judgement = judge_run(self.run_dir.path)
        self.run_dir.update_manifest(verdict=outcome.verdict.value,
                                     judgement=outcome.judgement.to_json() if outcome.judgement else None)
        return outcome

    def _begin(self, phase: Phase) -> None:
        self.phase = phase
        self.phase_started = time.monotonic()
        self.history.phase(phase.value)
        self.say(f"[{self.config.path.value}] {phase.value}")

    def _setup(self) -> None:
        self._begin(Phase.SETUP)
        self.target = self._make_target()
        started = time.monotonic()
        self.cluster_info = self.target.up()
        store = self._record_cluster()
        self.say(f"[{self.config.path.value}] cluster ready in {time.monotonic() - started:.1f}s "
                 f"({self._cluster.service_url}; metadata store: {store['label']})")
        from orchestrator.load import setup as workload_setup
        from workloads import topology as workload_topology

        self.topology = workload_topology.plan(self.config, self.run_dir.run_id)
        workload_setup.prepare(self._cluster, self.config, self._topology)
        self._record_subscription_starts()
        workload_setup.wait_transactions_ready(self._cluster, self.config,
                                               timeout_s=self.config.cluster.ready_timeout_s)
        self._snapshot(Phase.SETUP)

    def _metadata_store(self) -> dict[str, str]:
        """The store this run's brokers used (harness.metadata_stores), with ZooKeeper's or Oxia's version."""
        from harness.metadata_stores import StoreKind, store_used

        settings = self._cluster.settings
        version = None
        if self.config.target is Target.EMBEDDED and str(settings.get("metadataStoreUrl")) in ("zk", "zk:", "zk://"):
            from targets.zookeeper import zookeeper_version
            version = zookeeper_version()
        if self.config.target is Target.PULSAR:   # its components name the store it ran: zookeeper or oxia
            components = getattr(self.target, "components", {})
            version = str(components.get("oxia") or components.get("zookeeper") or "") or None
        used = store_used(self.config.target.value, self.config.path.value, settings, version=version)
        real = used.kind in (StoreKind.ZOOKEEPER, StoreKind.OXIA)
        return used.to_json() | ({"version": version} if version and real else {})

    def _record_cluster(self) -> dict[str, str]:
        store = self._metadata_store()
        versions = getattr(self.target, "versions", None)
        if callable(versions):   # a real system under test: its release and components, in every manifest
            recorded = self.run_dir.read_manifest().get("versions") or {}
            self.run_dir.update_manifest(versions={**recorded, **versions()})
        self.run_dir.update_manifest(metadata_store=store, cluster={
            "service_url": self._cluster.service_url, "admin_url": self._cluster.admin_url,
            "toxiproxy_url": self._cluster.toxiproxy_url,
            "services": [{"name": s.name, "role": s.role.value, "pid": s.pid} for s in self._cluster.services],
            "settings": self._cluster.settings,
        })
        return store

    def _record_subscription_starts(self) -> None:
        """Every durable subscription exists now, before the load sends anything, and starts at the
        earliest message: the `undelivered` check holds each one to every value sent after this."""
        for sub in self._topology.subscription_plans:
            self.history.event(self.history.writer, OpF.PHASE, topic=sub.topic, subscription=sub.name,
                               extra={"name": PHASE_SUBSCRIPTION_START, "initial_position": "earliest",
                                      "sub_type": sub.sub_type.value})

    def _make_target(self) -> ClusterTarget:
        if self.options.target is not None:   # the caller started it and stops it (txnbench peer)
            return self.options.target
        if self.config.target is Target.EMBEDDED:
            from targets.embedded import EmbeddedCluster, EmbeddedSpec

            directory = self.options.cluster_dir
            if directory is None:
                directory = Path(tempfile.mkdtemp(prefix=f"txnbench-{self.run_dir.run_id}-"))
                self._temp_cluster_dir = directory
            spec = EmbeddedSpec(txn_path=self.config.path, brokers=self.config.cluster.brokers,
                                settings=dict(self.config.cluster.settings), directory=directory,
                                parent_pid=os.getpid(), ready_timeout_s=self.config.cluster.ready_timeout_s,
                                planted_bugs=tuple(self.planted_bugs),
                                coverage_dir=self.run_dir.path / COVERAGE_DIR if self.options.coverage else None)
            return EmbeddedCluster(spec)
        if self.config.target is Target.PULSAR:
            from targets.pulsar.cluster import PulsarCluster, PulsarSpec

            directory = self.options.cluster_dir
            if directory is None:
                directory = Path(tempfile.mkdtemp(prefix=f"txnbench-{self.run_dir.run_id}-"))
                self._temp_cluster_dir = directory
            pulsar = PulsarCluster(PulsarSpec(
                txn_path=self.config.path, version=self.config.cluster.pulsar_version,
                brokers=self.config.cluster.brokers, settings=dict(self.config.cluster.settings),
                directory=directory, parent_pid=os.getpid(),
                ready_timeout_s=max(self.config.cluster.ready_timeout_s, PULSAR_READY_TIMEOUT_S), say=self.say,
                coverage_dir=self.run_dir.path / COVERAGE_DIR if self.options.coverage else None))
            return pulsar
        if self.config.target is Target.EXTERNAL:
            from targets.external import ExternalCluster

            assert self.config.cluster.service_url  # validated in config
            return ExternalCluster(self.config.cluster.service_url, self.config.cluster.admin_url,
                                   self.config.path)
        try:
            from targets.compose import ComposeCluster
        except ImportError:
            raise EnvironmentProblem("the compose target is not available in this build") from None
        return ComposeCluster.from_config(self.config, self.run_dir)

    def _start_load(self) -> None:
        spec_path = self.run_dir.path / "load-spec.json"
        phases = self.config.phases
        overrun = phases.faults_overrun_s if self.config.faults.enabled else 0.0
        duration = phases.warmup_s + phases.steady_s + phases.faults_s + overrun + phases.recovery_s
        cluster = self._cluster
        LoadSpec(run_id=self.run_dir.run_id, run_dir=self.run_dir, txn_path=self.config.path,
                 service_url=cluster.service_url, admin_url=cluster.admin_url, config=self.config,
                 topology=self._topology, max_duration_s=duration + 120.0, parent_pid=os.getpid(),
                 status_file=self.run_dir.locust_dir / "status.json",
                 listener_name=cluster.listener_name).write(spec_path)
        env = self.clock.export(dict(os.environ))
        env["PYTHONUNBUFFERED"] = "1"
        log = (self.run_dir.logs_dir / "load.log").open("ab")
        self.load = subprocess.Popen(python_m(RUNNER, "--spec", str(spec_path)),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True,
                                     preexec_fn=preexec_pinning(self.options.load_cpus))
        log.close()

    def _check_load_alive(self) -> None:
        if self.load is not None and not self.load_stopped and self.load.poll() is not None:
            tail = _tail(self.run_dir.logs_dir / "load.log")
            raise LoadProcessDied(f"the load process exited early (code {self.load.returncode}); "
                                  f"see {self.run_dir.logs_dir / 'load.log'}:\n{tail}")

    def _timed_phase(self, phase: Phase, seconds: float) -> None:
        self._begin(phase)
        self._wait(seconds)
        self._snapshot(phase)

    def _wait(self, seconds: float, *, while_: Callable[[], bool] | None = None,
              phase_end: float | None = None) -> None:
        """Sleep through a phase, watching the load process and reporting progress; with `while_`,
        return as soon as it turns false; `phase_end` (monotonic): when the phase ends, if later than
        this wait (the progress line counts to it)."""
        deadline = time.monotonic() + seconds
        next_report = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline or (while_ is not None and not while_()):
                return
            self._check_load_alive()
            if self.nemesis is not None:
                self.nemesis.raise_if_failed()
            if now >= next_report:
                self._report_progress(now, max(deadline, phase_end or deadline))
                next_report = now + (2.0 if sys.stderr.isatty() else 10.0)
            time.sleep(min(0.2, deadline - now))

    def _report_progress(self, now: float, deadline: float) -> None:
        status_file = self.run_dir.locust_dir / "status.json"
        rates = ""
        with contextlib.suppress(OSError, ValueError):
            status = json.loads(status_file.read_text())
            rates = (f"  txn/s {status.get('committed_txn_per_s', 0):.0f}"
                     f"  msgs/s {status.get('msgs_per_s', 0):.0f}  errors {status.get('errors', 0)}"
                     + (f" (+{status['ack_conflicts']} ack conflicts)" if status.get("ack_conflicts") else "")
                     # users Locust lost that the load started again (workloads.user_guard)
                     + (f"  users respawned {status['users_respawned']}" if status.get("users_respawned") else ""))
            workers = status.get("workers") or []
            if workers:
                rates += f"  workers {len(workers)}: " + " ".join(
                    f"{w['writer']} {w.get('committed_txn_per_s', 0):.0f}/s" for w in workers)
        if self.load_stopped:
            rates = "  load stopped"
        elapsed = now - self.phase_started
        total = elapsed + max(0.0, deadline - now)
        self.say(f"[{self.config.path.value}] {self.phase} {elapsed:4.0f}/{total:.0f}s{rates}")

    def _faults_phase(self) -> None:
        self._begin(Phase.FAULTS)
        assert self.target is not None
        recorder = HistoryRecorder(self.run_dir.history_dir, self.run_dir.run_id, "nemesis", self.clock,
                                   txn_path=self.config.path.value)
        # Client kills go through the load process, which owns its workers (harness.load_control).
        load_control = LoadControlClient(control_dir(self.run_dir.path), timeout_s=LOAD_CONTROL_TIMEOUT_S) \
            if self.config.load.workers > 0 else None
        self.nemesis = Nemesis(config=self.config, timeline=scenario.timeline(self.config),
                               cluster=self.target.info(), control=self.target.process_control(), recorder=recorder,
                               topology=self._topology, load_control=load_control)
        overrun_s: float | None = None     # unknown when the phase was cut short by an error
        try:
            with self.nemesis:
                self.nemesis.start()
                self._faults_with_quiet_tail()
                overrun_s = round(self._wait_for_timeline(self.nemesis), 1)
        finally:
            recorder.close()
            self._record_faults_progress({**self.nemesis.progress(), "overrun_s": overrun_s})
        self.nemesis = None
        self._snapshot(Phase.FAULTS)

    def _faults_with_quiet_tail(self) -> None:
        """`faults_s` of faults; with `phases.quiet_tail_s`, the load stops that long before their
        planned end while the nemesis plays on. Why: a busy topic repairs what a broker kept stale
        with its next write (a fenced ledger closes the topic, the next load reads afresh), so state
        left stale by the last faults is read by the drain only if nothing writes after them (a
        broker re-acquiring a vanished bundle lock served its old ledger lists on real Pulsar until
        a write came: docs/findings/stale-ledgers-after-ownership-reacquired.md)."""
        phases = self.config.phases
        started = time.monotonic()
        end = started + phases.faults_s
        if phases.quiet_tail_s > 0:
            self._wait(phases.faults_s - phases.quiet_tail_s, phase_end=end)
            self.say(f"[{self.config.path.value}] quiet tail: the load stops {phases.quiet_tail_s:g} s before the "
                     "faults phase's planned end")
            self._stop_load()
        self._wait(max(0.0, end - time.monotonic()), phase_end=end)

    def _wait_for_timeline(self, nemesis: Nemesis) -> float:
        """After `faults_s`: while the nemesis still has windows to play, the phase goes on, up to
        `faults_overrun_s`; the seconds it ran over. Why: the timeline slips by every heal the plan
        does not count (a real broker's restart, 20-35 s), and a cut at the planned end dropped 28
        of 37 windows of `chaos.yaml` on every release of one matrix (docs/results.md,
        `2026-12-03-overrun`): the store kill, the client isolation and every partition never ran."""
        if not nemesis.running:
            return 0.0
        limit = self.config.phases.faults_overrun_s
        started = time.monotonic()
        if limit > 0:
            self.say(f"[{self.config.path.value}] nemesis: the timeline is behind its plan; the faults phase "
                     f"runs on until its last window has healed (at most {limit:g} s more)")
        self._wait(limit, while_=lambda: nemesis.running)
        return time.monotonic() - started

    def _record_faults_progress(self, progress: dict[str, Any]) -> None:
        """Into the manifest; and said aloud when planned faults never ran (the report repeats it)."""
        self.run_dir.update_manifest(faults_progress=progress)
        missed = progress["unreached"]
        if missed:
            self.say(f"[{self.config.path.value}] nemesis: {len(missed)} of {progress['windows']} planned fault "
                     f"windows never ran (from at_s {missed[0]['at_s']:g} on): the timeline ran "
                     f"{progress['last_late_s']:g} s behind its plan when the faults phase ended "
                     f"(heals and triggers take time); raise phases.faults_overrun_s (or faults_s) to run them")

    def _stop_load(self, timeout_s: float | None = None) -> None:
        if self.load is None:
            return
        self.load_stopped = True
        if self.load.poll() is not None:
            self._record_load_workers()
            return
        timeout_s = timeout_s or self.config.workload.op_timeout_s + 30.0
        if self.config.load.remote_workers:   # remote hosts stop their workers and ship the rest first
            timeout_s += self.config.workload.op_timeout_s + 40.0
        self.load.send_signal(signal.SIGTERM)
        try:
            self.load.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.say(f"load process did not stop within {timeout_s:.0f}s; killing it")
            self.load.kill()
            self.load.wait(timeout=10)
        self._record_load_workers()

    def _record_load_workers(self) -> None:
        """Remote workers: who joined, their clock offsets, and who was lost (the checker names them)."""
        workers = self.run_dir.locust_dir / "workers.json"
        if not workers.is_file():
            return
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(workers.read_text())
            self.run_dir.update_manifest(load_workers=data)
            for lost in data.get("lost") or []:
                self.say(f"[{self.config.path.value}] remote load worker {lost['writer']} ({lost['host']}) was lost: "
                         f"{lost['reason']}")

    def _drain(self) -> None:
        from orchestrator.load.drain import drain

        self._begin(Phase.DRAIN)
        live = self._live_reads() if self._cold_mode() is not ColdReads.NONE else None
        cold = self._make_reads_cold()
        self.run_dir.update_manifest(cold_reads=cold)
        recorder = HistoryRecorder(self.run_dir.history_dir, self.run_dir.run_id, "drain", self.clock,
                                   txn_path=self.config.path.value)
        try:
            result = drain(self._cluster, self.config, self._topology, recorder, timeout_s=self._drain_budget)
        finally:
            recorder.close()
        if result.notes:   # e.g. a broker's last message id that lagged its data: a fact about the cluster
            self.run_dir.update_manifest(drain_notes=list(result.notes))
        if result.complete:
            live_extra = {} if live is None else {
                "live_topics": live.topics, "live_lost_entries": [run.to_json() for run in live.lost],
                "live_held_horizons": [held.to_json() for held in live.held],
                "live_undeliverable_ends": [end.to_json() for end in live.undeliverable]}
            self.history.phase(PHASE_DRAIN_COMPLETE, topics=result.topics,
                               subscriptions=[{"topic": t, "subscription": s} for t, s in result.subscriptions],
                               lost_entries=[run.to_json() for run in result.lost],
                               held_horizons=[held.to_json() for held in result.held],
                               undeliverable_ends=[end.to_json() for end in result.undeliverable],
                               last_id_refused=list(result.last_id_refused),
                               last_id_unanswered=list(result.last_id_unanswered),
                               last_id_failed=list(result.last_id_failed), **live_extra)
            if result.undeliverable or (live is not None and live.undeliverable):
                stale = len(result.undeliverable) + (len(live.undeliverable) if live is not None else 0)
                self.say(f"[{self.config.path.value}] drain: {stale} partition read(s) ended before the broker's "
                         "last message id, past which it dispatches nothing (transaction markers and aborted "
                         "messages; apache/pulsar#11877, up to 3.2)")
            for topic, how in [*((t, "closed the connection on") for t in result.last_id_refused),
                               *((t, "did not answer") for t in result.last_id_unanswered),
                               *((t, "answered an error to") for t in result.last_id_failed)]:
                self.say(f"[{self.config.path.value}] drain: {topic}: the broker {how} every GET_LAST_MESSAGE_ID of "
                         "this terminated topic; read to its end of topic instead (apache/pulsar#24063, before "
                         "3.0.11, 3.3.6, 4.0.4)")
            for held in [*(live.held if live is not None else []), *result.held]:
                self.say(f"[{self.config.path.value}] drain: {held.describe()}")
            if result.lost:
                self.say(f"[{self.config.path.value}] drain: {sum(r.count for r in result.lost)} acknowledged "
                         f"entries the brokers can no longer return ({len(result.lost)} runs); their values "
                         "are missing from the final reads")
        else:
            self.say(f"[{self.config.path.value}] drain incomplete: {result.reason}; the verdict will be unknown")
        self._snapshot(Phase.DRAIN)

    @functools.cached_property
    def _drain_budget(self) -> float:
        """`drain_budget_s` for what the load's status file says it sent; said (once: the live and the
        cold reads share it) when it exceeds the scenario's. Read after the load stopped."""
        sent = 0
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            sent = int(json.loads((self.run_dir.locust_dir / "status.json").read_text()).get("messages") or 0)
        budget = drain_budget_s(self.config.phases.drain_timeout_s, sent)
        if budget >= self.config.phases.drain_timeout_s + 1:
            self.say(f"[{self.config.path.value}] drain: {sent:,} messages sent; up to {budget:.0f}s to read them back "
                     f"(phases.drain_timeout_s {self.config.phases.drain_timeout_s:g} plus "
                     f"{DRAIN_READ_FLOOR_PER_S:,.0f} messages a second)")
        return budget

    def _cold_mode(self) -> ColdReads:
        """`phases.cold_reads` with `auto` resolved: restart when the run has faults."""
        mode = self.config.phases.cold_reads
        if mode is ColdReads.AUTO:
            mode = ColdReads.RESTART if self.config.faults.enabled else ColdReads.NONE
        return mode

    def _live_reads(self) -> DrainResult:
        """Before the cold restart: the final reads on the live system (writer `drain-live`).

        The checker holds both reads to the same rules (docs/checks.md, "Live and cold final
        reads"): what a broker shows from memory must be what it shows once restarted from
        durable state. The topics read to the end go into `drain-complete`'s `live_topics`."""
        from orchestrator.load.drain import LIVE_WRITER, drain

        recorder = HistoryRecorder(self.run_dir.history_dir, self.run_dir.run_id, LIVE_WRITER, self.clock,
                                   txn_path=self.config.path.value)
        try:
            result = drain(self._cluster, self.config, self._topology, recorder,
                           timeout_s=self._drain_budget, live=True)
        finally:
            recorder.close()
        self.run_dir.update_manifest(live_reads={"complete": result.complete, "reason": result.reason,
                                                 "topics": result.topics})
        if not result.complete:
            self.say(f"[{self.config.path.value}] live reads incomplete: {result.reason}; only the topics read "
                     "to the end are compared")
        return result

    def _make_reads_cold(self) -> dict[str, Any]:
        """Before the final reads: restart every broker (or unload every topic), so what the drain
        reads comes from the ledger store, not from a broker's cache (a write acknowledged before
        it was durable stays visible while the broker that cached it lives). What was done goes
        into the manifest's `cold_reads`; a step that fails is recorded there, and the drain
        goes on (its reads are then not known to be cold)."""
        mode = self._cold_mode()
        if mode is ColdReads.NONE:
            return {"mode": mode.value, "cold": False}
        control = self.target.process_control() if self.target is not None else None
        brokers = [s.name for s in self._cluster.by_role(ServiceRole.BROKER)]
        if mode is ColdReads.RESTART and (control is None or not brokers):
            self.say(f"[{self.config.path.value}] cold reads: this target cannot restart brokers; unloading "
                     "every topic instead")
            mode = ColdReads.UNLOAD
        started = time.monotonic()
        out: dict[str, Any] = {"mode": mode.value}
        try:
            if mode is ColdReads.RESTART:
                assert control is not None
                for name in brokers:          # all down first: no broker keeps a cache of any topic
                    control.stop(name)
                failed = []
                for name in brokers:          # every broker, even after one failed: a broker left
                    try:                      # down would leave the drain nothing to read from
                        control.start(name)   # waits until it is healthy
                    except Exception as err:
                        failed.append(f"{name}: {err}")
                if failed:
                    raise EnvironmentProblem("could not start every broker again: " + "; ".join(failed))
                assert self.target is not None
                self.cluster_info = self.target.info()
                self._record_cluster()
                out["services"] = brokers
            else:
                from faults.admin import make_topic_admin

                admin, why = make_topic_admin(self._cluster, control)
                if admin is None:
                    raise EnvironmentProblem(f"no admin to unload topics with: {why}")
                try:
                    for topic in self._topology.topics:
                        admin.unload_topic(topic)
                finally:
                    admin.close()
                out["topics"] = list(self._topology.topics)
        except Exception as err:
            out.update(cold=False, error=f"{type(err).__name__}: {err}")
            self.say(f"[{self.config.path.value}] cold reads: {mode.value} failed ({err}); the final reads "
                     "may come from caches")
            return out
        out.update(cold=True, seconds=round(time.monotonic() - started, 3))
        self.say(f"[{self.config.path.value}] cold reads: {mode.value} done in {out['seconds']:.1f}s")
        return out

    def _snapshot(self, phase: Phase) -> None:
        if self.target is None:
            return
        try:
            for service, text in self.target.scrape_metrics().items():
                (self.run_dir.metrics_dir / f"{phase.value}-{service}.prom").write_text(text)
        except Exception as err:  # metrics are evidence, not a reason to lose the run
            self.say(f"metrics snapshot after {phase.value} failed: {err}")

    def _teardown(self) -> None:
        steps: list[tuple[str, Callable[[], None]]] = []
        if self.nemesis is not None:
            steps.append(("heal faults", self.nemesis.heal_all))
        steps.append(("stop load", lambda: self._stop_load(timeout_s=30.0)))
        if self.target is not None:
            target = self.target
            steps.append(("collect logs", lambda: target.collect_logs(self.run_dir.logs_dir)))
            steps.append(("stop cluster", target.down))
        steps.append(("close history", self.history.close))
        if self._temp_cluster_dir is not None:
            temp = self._temp_cluster_dir
            steps.append(("remove cluster data", lambda: shutil.rmtree(temp, ignore_errors=True)))
        for name, step in steps:
            try:
                step()
            except Exception as err:
                self.say(f"cleanup step '{name}' failed: {err}")

    def _pulsar_coverage(self) -> None:
        """--coverage on the pulsar target: JaCoCo's dumps merged and reported, the recovery methods
        judged (orchestrator/pulsar_coverage.py), once the cluster is down."""
        if not self.options.coverage or self.config.target is not Target.PULSAR:
            return
        if not (self.run_dir.path / COVERAGE_DIR / "dumps.jsonl").is_file():
            return
        from orchestrator import pulsar_coverage

        try:
            result = pulsar_coverage.report_run(self.run_dir.path, say=self.say)
        except Exception as err:   # the coverage is evidence, not a reason to lose the run
            (self.run_dir.logs_dir / "coverage-error.txt").write_text(traceback.format_exc())
            self.say(f"[{self.config.path.value}] coverage report failed: {type(err).__name__}: {err} "
                     f"(traceback in {self.run_dir.logs_dir / 'coverage-error.txt'})")
            return
        if result is not None:
            self.say(f"[{self.config.path.value}] coverage: {pulsar_coverage.summary(result)}; "
                     f"{self.run_dir.path / COVERAGE_DIR / 'coverage.md'}")

    def _record_history(self) -> None:
        """What the run wrote to its history, into the manifest (`history_files`), once every writer
        stopped: `txnbench check` compares the files with it, so a history cut, changed or lost
        afterwards is named as damage (verdict unknown), never judged as the cluster's anomalies."""
        try:
            self.run_dir.update_manifest(**{HISTORY_RECORD_KEY: record_history(self.run_dir.history_dir)})
        except Exception as err:   # the record guards the history; its failure must not cost the run
            self.say(f"run {self.run_dir.run_id}: could not record what the history holds ({err}); a check "
                     "will judge it as an older run's, by its torn last lines only")

    def _analyze(self) -> tuple[Verdict, dict[str, Any]]:
        try:
            from analysis.pipeline import analyze_run
        except ImportError:
            self.say("analysis is not available in this build; the history is kept for `txnbench check`")
            return Verdict.NONE, {}
        self.say(f"[{self.config.path.value}] analysis")
        summary = analyze_run(self.run_dir.path)
        valid = summary.get("valid")
        verdict = Verdict.VALID if valid is True else Verdict.INVALID if valid is False else Verdict.UNKNOWN
        return verdict, summary


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").rstrip().splitlines()[-lines:])
    except OSError:
        return ""


# ---- the command ------------------------------------------------------------------------------

def main_run(config: RunConfig, args: argparse.Namespace) -> int:
    """`txnbench run`: `config` comes validated from orchestrator.scenario.load."""
    allowed = bool(getattr(args, "allow_planted_bugs", False))
    refuse_planted_bugs(config.cluster.settings, "run", allowed=allowed)
    coverage = bool(getattr(args, "coverage", False))
    if coverage and config.target not in (Target.EMBEDDED, Target.PULSAR):
        raise ConfigError(f"scenario {config.name}", "--coverage",
                          f"coverage is measured on the embedded cluster and on the pulsar target, not "
                          f"{config.target.value}", "drop --coverage or use --target embedded or pulsar")
    options = RunOptions(results_root=args.results, allow_planted_bugs=allowed, coverage=coverage)
    outcome = Run(config, options).execute()
    if coverage and config.target is Target.EMBEDDED:   # the pulsar target's report is made by the run
        from orchestrator.coverage import repository_root, summary_lines, write_matrix_coverage

        folder = outcome.run_dir.path / COVERAGE_DIR
        result = write_matrix_coverage(folder, {config.path.value: outcome.run_dir.path}, repository_root())
        for line in summary_lines(result):
            say(line.replace("**", ""))
    print_outcome(outcome)
    print(outcome.run_dir.path)
    return outcome.exit_code
