"""The one orchestrator: a run's named phases, a matrix of runs over paths, a concurrency sweep.

Theory of operation. A run walks these phases, writing a `phase` event to the
history (writer `run`) as each starts and a metrics snapshot of every service
(`metrics/<phase>-<service>.prom`) as each ends:

    setup     start the target, create the topics, wait until transactions work
    warmup    the load process runs; its numbers are not the result
    steady    the measured window
    faults    the nemesis walks the fault schedule (only when the scenario has faults)
    recovery  faults healed, load still running; then the load stops
    drain     cold reads first (every broker restarted, or every topic unloaded, so
              the final reads come from durable storage; `phases.cold_reads`, said in
              the manifest's `cold_reads`), then final reads of every topic,
              subscriptions consumed until empty, then the `drain-complete` event
    collect   logs and Locust statistics gathered, the cluster stopped

then the analysis (verdict, performance, report) runs on what was written.

The load runs in its own process (`python -m workloads.runner`), in its own session,
because Locust patches the interpreter with gevent; the orchestrator stays a plain
threaded process that can run Spark afterwards. Whatever happens — an error, a
Ctrl-C, a load process that dies — the `finally` path heals every fault, stops the
load, stops what the run started (never an external cluster), keeps the history and
records the status in the manifest. The run folder is printed as the last line of
standard output.

A matrix (bench, chaos) runs the scenario once per path; a sweep runs that matrix
once per user count, lowest first, and compares each level and all levels.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from harness.config import ColdReads, RunConfig, Target
from harness.errors import EnvironmentProblem, TxnbenchError
from harness.history import HistoryRecorder, RunClock
from harness.history.schema import PHASE_DRAIN_COMPLETE, PHASE_SUBSCRIPTION_START, OpF
from harness.results import MatrixDir, RunDir, RunStatus, new_matrix, new_run, write_json_atomic
from harness.targets.base import ClusterTarget, ServiceRole
from harness.txn_paths import TxnPath
from harness.verdicts import Judgement, judge_run
from orchestrator.planted import banner as planted_banner
from orchestrator.planted import refuse_planted_bugs


class Phase(StrEnum):
    SETUP = "setup"
    WARMUP = "warmup"
    STEADY = "steady"
    FAULTS = "faults"
    RECOVERY = "recovery"
    DRAIN = "drain"
    COLLECT = "collect"


class Verdict(StrEnum):
    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"
    NONE = "none"          # the run did not get far enough to be checked

    @property
    def exit_code(self) -> int:
        return {Verdict.VALID: 0, Verdict.INVALID: 1}.get(self, 2)


@dataclass
class RunOutcome:
    run_dir: RunDir
    status: RunStatus
    verdict: Verdict = Verdict.NONE
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    judgement: Judgement | None = None

    @property
    def exit_code(self) -> int:
        """130 interrupted, 2 failed or unknown, 1 anomalies the scenario does not expect, else 0.

        A run whose only anomalies are the ones its scenario provokes on purpose
        (`checks.expected`) is still reported invalid, but does not fail the command.
        """
        if self.status is RunStatus.INTERRUPTED:
            return 130
        if self.status is RunStatus.FAILED:
            return 2
        if self.verdict is Verdict.INVALID and self.judgement is not None and self.judgement.only_expected:
            return 0
        return self.verdict.exit_code


@dataclass
class RunOptions:
    results_root: Path = Path("results")
    matrix: MatrixDir | None = None
    analyze: bool = True
    progress: Callable[[str], None] | None = None
    cluster_dir: Path | None = None      # embedded: where the run's cluster lives (default: a temp dir)
    folder: str | None = None            # a matrix run's folder under runs/ (default: its path)
    command: str = "run"                 # the command that asked for the run (bench, chaos, selftest, ...)
    allow_planted_bugs: bool = False     # only `run --allow-planted-bugs` and `selftest` set it


class LoadProcessDied(TxnbenchError):
    exit_code = 2


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Run:
    """One run of one scenario on one path."""

    def __init__(self, config: RunConfig, options: RunOptions) -> None:
        self.config = config
        self.options = options
        self.say = options.progress or _say
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
                                       path=config.path.value)
        self.target: ClusterTarget | None = None
        self.cluster_info: Any = None
        self.load: subprocess.Popen[bytes] | None = None
        self.nemesis: Any = None
        self.topology: Any = None
        self._temp_cluster_dir: Path | None = None
        self.phase: Phase | None = None
        self.phase_started = time.monotonic()

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
        except KeyboardInterrupt:
            outcome.status, outcome.error = RunStatus.INTERRUPTED, "interrupted (Ctrl-C)"
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
            with _sigint_deferred():
                self._teardown()
                self.run_dir.set_status(outcome.status, outcome.error)
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
                 f"({self.cluster_info.service_url}; metadata store: {store['label']})")
        from workloads import setup as workload_setup
        from workloads import topology as workload_topology

        self.topology = workload_topology.plan(self.config, self.run_dir.run_id)
        workload_setup.prepare(self.cluster_info, self.config, self.topology)
        self._record_subscription_starts()
        workload_setup.wait_transactions_ready(self.cluster_info, self.config,
                                               timeout_s=self.config.cluster.ready_timeout_s)
        self._snapshot(Phase.SETUP)

    def _metadata_store(self) -> dict[str, str]:
        """The store this run's brokers used (harness.metadata_stores), with ZooKeeper's version."""
        from harness.metadata_stores import StoreKind, store_used

        settings = self.cluster_info.settings
        version = None
        if self.config.target is Target.EMBEDDED and str(settings.get("metadataStoreUrl")) in ("zk", "zk:", "zk://"):
            from embedded.metadata.zookeeper import zookeeper_version
            version = zookeeper_version()
        used = store_used(self.config.target.value, self.config.path.value, settings, version=version)
        return used.to_json() | ({"version": version} if version and used.kind is StoreKind.ZOOKEEPER else {})

    def _record_cluster(self) -> dict[str, str]:
        store = self._metadata_store()
        self.run_dir.update_manifest(metadata_store=store, cluster={
            "service_url": self.cluster_info.service_url, "admin_url": self.cluster_info.admin_url,
            "toxiproxy_url": self.cluster_info.toxiproxy_url,
            "services": [{"name": s.name, "role": s.role.value, "pid": s.pid} for s in self.cluster_info.services],
            "settings": self.cluster_info.settings,
        })
        return store

    def _record_subscription_starts(self) -> None:
        """Every durable subscription exists now, before the load sends anything, and starts at the
        earliest message: the `undelivered` check holds each one to every value sent after this."""
        for sub in self.topology.subscription_plans:
            self.history.event(self.history.writer, OpF.PHASE, topic=sub.topic, subscription=sub.name,
                               extra={"name": PHASE_SUBSCRIPTION_START, "initial_position": "earliest",
                                      "sub_type": sub.sub_type.value})

    def _make_target(self) -> ClusterTarget:
        if self.config.target is Target.EMBEDDED:
            from harness.targets.embedded import EmbeddedCluster, EmbeddedSpec

            directory = self.options.cluster_dir
            if directory is None:
                directory = Path(tempfile.mkdtemp(prefix=f"txnbench-{self.run_dir.run_id}-"))
                self._temp_cluster_dir = directory
            spec = EmbeddedSpec(path=self.config.path, brokers=self.config.cluster.brokers,
                                settings=dict(self.config.cluster.settings), directory=directory,
                                parent_pid=os.getpid(), ready_timeout_s=self.config.cluster.ready_timeout_s)
            return EmbeddedCluster(spec)
        if self.config.target is Target.EXTERNAL:
            from harness.targets.external import ExternalCluster

            assert self.config.cluster.service_url  # validated in config
            return ExternalCluster(self.config.cluster.service_url, self.config.cluster.admin_url,
                                   self.config.path)
        try:
            from harness.targets.compose import ComposeCluster
        except ImportError:
            raise EnvironmentProblem("the compose target is not available in this build") from None
        return ComposeCluster.from_config(self.config, self.run_dir)

    def _start_load(self) -> None:
        spec_path = self.run_dir.path / "load-spec.json"
        duration = (self.config.phases.warmup_s + self.config.phases.steady_s + self.config.phases.faults_s
                    + self.config.phases.recovery_s)
        write_json_atomic(spec_path, {
            "run_id": self.run_dir.run_id, "run_dir": str(self.run_dir.path), "path": self.config.path.value,
            "service_url": self.cluster_info.service_url, "admin_url": self.cluster_info.admin_url,
            "config": self.config.to_dict(), "topology": self.topology.to_dict(),
            "max_duration_s": duration + 120.0, "parent_pid": os.getpid(),
            "listener_name": self.cluster_info.listener_name,
            "status_file": str(self.run_dir.locust_dir / "status.json"),
        })
        env = self.clock.export(dict(os.environ))
        env["PYTHONUNBUFFERED"] = "1"
        log = (self.run_dir.logs_dir / "load.log").open("ab")
        self.load = subprocess.Popen([sys.executable, "-m", "workloads.runner", "--spec", str(spec_path)],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        log.close()

    def _check_load_alive(self) -> None:
        if self.load is not None and self.load.poll() is not None:
            tail = _tail(self.run_dir.logs_dir / "load.log")
            raise LoadProcessDied(f"the load process exited early (code {self.load.returncode}); "
                                  f"see {self.run_dir.logs_dir / 'load.log'}:\n{tail}")

    def _timed_phase(self, phase: Phase, seconds: float) -> None:
        self._begin(phase)
        self._wait(seconds)
        self._snapshot(phase)

    def _wait(self, seconds: float) -> None:
        """Sleep through a phase, watching the load process and reporting progress."""
        deadline = time.monotonic() + seconds
        next_report = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline:
                return
            self._check_load_alive()
            if self.nemesis is not None:
                self.nemesis.raise_if_failed()
            if now >= next_report:
                self._report_progress(now, deadline)
                next_report = now + (2.0 if sys.stderr.isatty() else 10.0)
            time.sleep(min(0.2, deadline - now))

    def _report_progress(self, now: float, deadline: float) -> None:
        status_file = self.run_dir.locust_dir / "status.json"
        rates = ""
        with contextlib.suppress(OSError, ValueError):
            status = json.loads(status_file.read_text())
            rates = (f"  txn/s {status.get('committed_txn_per_s', 0):.0f}"
                     f"  msgs/s {status.get('msgs_per_s', 0):.0f}  errors {status.get('errors', 0)}")
            workers = status.get("workers") or []
            if workers:
                rates += f"  workers {len(workers)}: " + " ".join(
                    f"{w['writer']} {w.get('committed_txn_per_s', 0):.0f}/s" for w in workers)
        elapsed = now - self.phase_started
        total = elapsed + max(0.0, deadline - now)
        self.say(f"[{self.config.path.value}] {self.phase} {elapsed:4.0f}/{total:.0f}s{rates}")

    def _faults_phase(self) -> None:
        from faults.nemesis import Nemesis

        self._begin(Phase.FAULTS)
        assert self.target is not None
        recorder = HistoryRecorder(self.run_dir.history_dir, self.run_dir.run_id, "nemesis", self.clock,
                                   path=self.config.path.value)
        self.nemesis = Nemesis(config=self.config, cluster=self.target.info(),
                               control=self.target.process_control(), recorder=recorder,
                               topology=self.topology)
        try:
            with self.nemesis:
                self.nemesis.start()
                self._wait(self.config.phases.faults_s)
        finally:
            recorder.close()
        self.nemesis = None
        self._snapshot(Phase.FAULTS)

    def _stop_load(self, timeout_s: float | None = None) -> None:
        if self.load is None:
            return
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
        from workloads.drain import drain

        self._begin(Phase.DRAIN)
        cold = self._make_reads_cold()
        self.run_dir.update_manifest(cold_reads=cold)
        recorder = HistoryRecorder(self.run_dir.history_dir, self.run_dir.run_id, "drain", self.clock,
                                   path=self.config.path.value)
        try:
            result = drain(self.cluster_info, self.config, self.topology, recorder,
                           timeout_s=self.config.phases.drain_timeout_s)
        finally:
            recorder.close()
        if result.complete:
            self.history.phase(PHASE_DRAIN_COMPLETE, topics=result.topics,
                               subscriptions=[{"topic": t, "subscription": s} for t, s in result.subscriptions],
                               lost_entries=[run.to_json() for run in result.lost])
            if result.lost:
                self.say(f"[{self.config.path.value}] drain: {sum(r.count for r in result.lost)} acknowledged "
                         f"entries the brokers can no longer return ({len(result.lost)} runs); their values "
                         "are missing from the final reads")
        else:
            self.say(f"[{self.config.path.value}] drain incomplete: {result.reason}; the verdict will be unknown")
        self._snapshot(Phase.DRAIN)

    def _make_reads_cold(self) -> dict[str, Any]:
        """Before the final reads: restart every broker (or unload every topic), so what the drain
        reads comes from the ledger store, not from a broker's cache (a write acknowledged before
        it was durable stays visible while the broker that cached it lives). What was done goes
        into the manifest's `cold_reads`; a step that fails is recorded there, and the drain
        goes on (its reads are then not known to be cold)."""
        mode = self.config.phases.cold_reads
        if mode is ColdReads.AUTO:
            mode = ColdReads.RESTART if self.config.faults.enabled else ColdReads.NONE
        if mode is ColdReads.NONE:
            return {"mode": mode.value, "cold": False}
        control = self.target.process_control() if self.target is not None else None
        brokers = [s.name for s in self.cluster_info.by_role(ServiceRole.BROKER)]
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
                for name in brokers:
                    control.start(name)       # waits until it is healthy
                assert self.target is not None
                self.cluster_info = self.target.info()
                self._record_cluster()
                out["services"] = brokers
            else:
                from faults.admin import make_topic_admin

                admin, why = make_topic_admin(self.cluster_info, control)
                if admin is None:
                    raise EnvironmentProblem(f"no admin to unload topics with: {why}")
                try:
                    for topic in self.topology.topics:
                        admin.unload_topic(topic)
                finally:
                    admin.close()
                out["topics"] = list(self.topology.topics)
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


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Let cleanup finish: a second Ctrl-C during teardown is noted, not obeyed mid-step."""
    received: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, lambda *_: received.append(1))
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").rstrip().splitlines()[-lines:])
    except OSError:
        return ""


# ---- command entry points ---------------------------------------------------------------------

def check_before_start(config: RunConfig) -> None:
    """Refuse a scenario whose faults cannot work, before anything starts.

    A bad fault target or parameter is a one-line ConfigError now, not 20 s into a run.
    """
    if config.faults.enabled:
        from faults.validate import check_scenario

        check_scenario(config)


def main_run(config: RunConfig, args: argparse.Namespace) -> int:
    allowed = bool(getattr(args, "allow_planted_bugs", False))
    refuse_planted_bugs(config.cluster.settings, "run", allowed=allowed)
    check_before_start(config)
    options = RunOptions(results_root=args.results, allow_planted_bugs=allowed)
    outcome = Run(config, options).execute()
    _print_outcome(outcome)
    print(outcome.run_dir.path)
    return outcome.exit_code


def main_matrix(config: RunConfig, args: argparse.Namespace, kind: str) -> int:
    refuse_planted_bugs(config.cluster.settings, kind)
    check_before_start(config)
    matrix = new_matrix(kind, config.name, root=args.results,
                        info={"paths": [p.value for p in config.paths], "config": config.to_dict()})
    _say(f"{kind} matrix {matrix.matrix_id}: {config.name} over {', '.join(p.value for p in config.paths)}")
    if kind == "bench" and not getattr(args, "no_capacity", False):
        _ensure_capacity(config)
    outcomes, interrupted = _run_paths(config, matrix, args.results, kind)
    _compare(matrix, outcomes)
    return _finish_matrix(matrix, outcomes, interrupted)


def main_sweep(config: RunConfig, args: argparse.Namespace, levels: Sequence[int]) -> int:
    """Experiment 1: every path at each user count, a comparison per count, lines against users.

    Levels run in increasing order, all paths at one level before the next, so an
    interrupted sweep still holds complete levels to compare.
    """
    refuse_planted_bugs(config.cluster.settings, "sweep")
    check_before_start(config)
    paths = ", ".join(p.value for p in config.paths)
    matrix = new_matrix("sweep", config.name, root=args.results,
                        info={"paths": [p.value for p in config.paths], "levels": list(levels),
                              "config": config.to_dict()})
    _say(f"sweep {matrix.matrix_id}: {config.name} over {paths} at {', '.join(map(str, levels))} users")
    shaped = [with_users(config, users) for users in levels]
    if not getattr(args, "no_capacity", False):
        for level_config in shaped:
            _ensure_capacity(level_config)
    outcomes: list[RunOutcome] = []
    interrupted = False
    for index, level_config in enumerate(shaped, start=1):
        users = level_config.load.users
        _say(f"=== sweep level {index}/{len(shaped)}: {users} users ===")
        level, interrupted = _run_paths(level_config, matrix, args.results, "sweep", suffix=f"-u{users}")
        outcomes += level
        if interrupted:
            break
    _compare_sweep(matrix, outcomes)
    return _finish_matrix(matrix, outcomes, interrupted)


def with_users(config: RunConfig, users: int) -> RunConfig:
    """The scenario at `users` concurrent users, all spawned at once (the sweep measures steady state)."""
    load = dataclasses.replace(config.load, users=users, spawn_rate=max(config.load.spawn_rate, float(users)))
    return dataclasses.replace(config, load=load)


def _run_paths(config: RunConfig, matrix: MatrixDir, results_root: Path, kind: str,
               suffix: str = "") -> tuple[list[RunOutcome], bool]:
    """Run `config` on each of its paths into the matrix; stop at the first interrupted run."""
    outcomes: list[RunOutcome] = []
    for index, path in enumerate(config.paths, start=1):
        _say(f"== {kind} {index}/{len(config.paths)}: {path.value}{suffix} ==")
        options = RunOptions(results_root=results_root, matrix=matrix,
                             folder=f"{path.value}{suffix}" if suffix else None, command=kind)
        outcome = Run(config.for_path(path), options).execute()
        outcomes.append(outcome)
        _print_outcome(outcome)
        if outcome.status is RunStatus.INTERRUPTED:
            return outcomes, True
    return outcomes, False


def _finish_matrix(matrix: MatrixDir, outcomes: list[RunOutcome], interrupted: bool) -> int:
    """Write matrix-status.json, print the folder, and return the matrix's exit status."""
    write_json_atomic(matrix.path / "matrix-status.json", {
        "runs": [{"path": o.run_dir.path.name, "run_id": o.run_dir.run_id, "status": o.status.value,
                  "verdict": o.verdict.value, "exit_code": o.exit_code,
                  "judgement": o.judgement.to_json() if o.judgement else None, "error": o.error}
                 for o in outcomes],
        "interrupted": interrupted,
    })
    print(matrix.path)
    if interrupted:
        return 130
    if any(o.status is RunStatus.FAILED for o in outcomes):
        return 2
    codes = [o.exit_code for o in outcomes]
    return 1 if 1 in codes else (2 if 2 in codes else 0)


def _ensure_capacity(config: RunConfig) -> None:
    """Measure, once per host and load shape, how much load the harness itself can generate.

    The load process of each run copies the figure into its status file, and the
    report puts it next to the measured throughput: a reader can see whether the
    harness, not the cluster, was the bottleneck. Cached in .txnbench/capacity.json.
    """
    from workloads.capacity import find_capacity, measure, save_capacity

    seen: set[str] = set()
    for path in config.paths:
        shaped = config.for_path(path)
        client = "v5" if path is TxnPath.V5 else "v4"
        if client in seen or find_capacity(shaped) is not None:
            seen.add(client)
            continue
        seen.add(client)
        _say(f"measuring the load generator's capacity against a null broker ({client} client, "
             f"{shaped.load.users} users; once per host and load shape, about 15 s)")
        try:
            result = measure(shaped)
        except Exception as err:   # the benchmark still runs; the report says capacity is absent
            _say(f"could not measure the load generator's capacity: {err}")
            continue
        save_capacity(shaped, result)
        _say(f"load generator capacity: {result['committed_txn_per_s']:.0f} txn/s, "
             f"{result['msgs_per_s']:.0f} msgs/s at {result.get('cpu_percent')}% of a core")


def _compare(matrix: MatrixDir, outcomes: list[RunOutcome]) -> None:
    complete = [o for o in outcomes if o.status is RunStatus.COMPLETE]
    if not complete:
        return
    try:
        from analysis.pipeline import analyze_matrix
    except ImportError:
        _say("comparison report not available in this build")
        return
    try:
        analyze_matrix(matrix.path)
        _say(f"comparison: {matrix.path / 'compare.html'}")
    except Exception as err:
        _say(f"comparison report failed: {err}")


def _compare_sweep(matrix: MatrixDir, outcomes: list[RunOutcome]) -> None:
    if not any(o.status is RunStatus.COMPLETE for o in outcomes):
        return
    try:
        from analysis.pipeline import analyze_sweep

        analyze_sweep(matrix.path)
        _say(f"sweep report: {matrix.path / 'sweep.html'}")
    except Exception as err:
        _say(f"sweep report failed: {err}")


def _print_outcome(outcome: RunOutcome) -> None:
    line = f"run {outcome.run_dir.run_id}: {outcome.status.value}"
    if outcome.status is RunStatus.COMPLETE:
        line += f", verdict {outcome.verdict.value}"
        anomalies = outcome.summary.get("anomalies") or {}
        if anomalies:
            line += " (" + ", ".join(f"{k}: {v.get('count')}" for k, v in anomalies.items()) + ")"
        judgement = outcome.judgement
        if judgement is not None and judgement.expected:
            reasons = sorted(set(judgement.expected.values()))
            which = "all expected" if judgement.only_expected else f"expected: {', '.join(judgement.expected)}"
            line += f"; {which} ({'; '.join(reasons)})"
        for lost in outcome.summary.get("lost_workers") or []:
            line += f"; {lost}"
    if outcome.error:
        line += f": {outcome.error}"
    _say(line)
