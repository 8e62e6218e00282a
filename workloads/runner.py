"""The load process: `python -m workloads.runner --spec RUN_DIR/load-spec.json`.

Theory of operation. The orchestrator (orchestrator/run.py) starts this process in its
own session, with the run clock's base in `TXNBENCH_RUN_BASE_NS`, and stops it with
SIGTERM. It runs Locust in library mode:

* `load.workers` = 0: one process, a LocalRunner; its history is `history/w0.jsonl`.
* `load.workers` = N > 0: this process is a MasterRunner on 127.0.0.1 (a free port)
  that starts N worker processes (`--worker i --master-port P`), each a WorkerRunner
  with its own client and its own history `history/w<i>.jsonl`. The master runs no
  users; it aggregates Locust's statistics and the workers' counters.
* `load.remote_workers` = M > 0: the master binds `load.master_bind:load.master_port` and
  also waits (at most `load.remote_wait_s`) for M workers from other hosts
  (`txnbench worker`, workloads.worker_host): it welcomes them, answers their clock
  probes and gathers their histories (`history/r<k>.jsonl`) before it quits Locust
  (workloads.remote_master; `locust/workers.json` says who joined and who was lost).
  A remote worker lost mid-run is recorded, not fatal: the others carry on.

It writes Locust's CSV statistics to `locust/locust_*.csv` and the status file
(workloads.status) every second, serves Locust's web UI when `load.web_ui` is set
(failing clearly when its port is taken), and stops gracefully: on SIGTERM or
SIGINT, after `max_duration_s`, when its parent process is gone, or when a history
cannot be written. A graceful stop sets the workloads' stop flag (an open
transaction is aborted, no new one starts), lets every user finish its current
operation (Locust's `stop_timeout`, bounded by the operation timeout), then closes
the client and the history files. Exit code: 0 after a graceful stop, 2 when the
load failed (a history write failed, a worker died, bad spec or port in use).

Users Locust loses are started again: each worker (and the local runner) checks every
second that it runs the users its latest spawn job asked for, none of them stopping, and
tops up a class short twice in a row (workloads.user_guard; a warning, and
`users_respawned` in the status file). A worker killed on request (client-kill) is dropped
from the master's workers as soon as Locust marks it missing, so its replacement's arrival
is the one re-dispatch it causes (`drop_missing_worker`).

gevent's monkey-patching must come before anything imports `threading` or
`socket`, so it is the first thing this module does; import it only in a process
meant to become a load process.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from gevent.event import Event  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.exception import RPCError  # noqa: E402
from locust.log import setup_logging  # noqa: E402
from locust.runners import STATE_MISSING, STATE_RUNNING, Runner  # noqa: E402
from locust.stats import PERCENTILES_TO_REPORT, StatsCSVFileWriter, stats_history  # noqa: E402
from locust.user.task import LOCUST_STATE_STOPPING  # noqa: E402

from harness import load_control  # noqa: E402
from harness.errors import EnvironmentProblem, TxnbenchError  # noqa: E402
from harness.history import HistoryMisuse, HistoryRecorder, HistoryWriteError, RunClock  # noqa: E402
from workloads.capacity import find_capacity, with_remote_workers  # noqa: E402
from workloads.context import Counters, LoadContext  # noqa: E402
from workloads.entrypoints import RUNNER, python_m  # noqa: E402
from workloads.loadspec import LoadSpec  # noqa: E402
from workloads.remote import code_digest  # noqa: E402
from workloads.remote_master import RemoteHub  # noqa: E402
from workloads.status import CpuMeter, StatusReporter  # noqa: E402
from workloads.user_guard import GUARD_INTERVAL_S, UserGuard, live_users  # noqa: E402
from workloads.users import user_classes  # noqa: E402

log = logging.getLogger("workloads.runner")

STATUS_INTERVAL_S = 1.0
WORKER_CONNECT_TIMEOUT_S = 60.0
FORGET_TIMEOUT_S = 6.0    # Locust checks heartbeats every second; a killed worker is forgotten within a few
CLIENT_CLOSE_TIMEOUT_S = 2.0
REMOTE_FINISH_GRACE_S = 20.0   # after the users stopped: remote hosts stop their workers and ship the rest
# After a worker's users stopped: time for Locust to send "client_stopped" before the worker ends.
WORKER_FINISH_DELAY_S = 0.2
# Worst case of a graceful stop: Locust's stop_timeout (op_timeout_s + 10) + 5 s + quit 5 s + closing
# (2 s producers, 2 x 2 s client) stays under the orchestrator's op_timeout_s + 30 before it kills.
STOP_GRACE_S = 10.0        # Locust's stop_timeout = operation timeout + this
EXIT_OK, EXIT_FAILED = 0, 2


class LoadFailed(TxnbenchError):
    """The load process cannot go on (and says why)."""


def _parent_gone(original_ppid: int, parent_pid: int | None) -> bool:
    if os.getppid() != original_ppid:
        return True
    if parent_pid is None:
        return False
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as err:
            raise EnvironmentProblem(
                f"load.web_port {port} is in use on 127.0.0.1 ({err.strerror}); another Locust web UI? "
                "Set load.web_port to a free port, or load.web_ui: false") from None


def repair_users(runner: Runner, guard: UserGuard) -> dict[str, int]:
    """One check of `guard` on a local or worker runner: start the users it finds missing
    (workloads.user_guard) and return them per class (empty: none was missing)."""
    spawning = runner.spawning_greenlet
    busy = runner.state != STATE_RUNNING or (spawning is not None and not spawning.dead)
    missing = guard.check(runner.target_user_classes_count,
                          live_users(runner.user_greenlets, LOCUST_STATE_STOPPING), busy=busy)
    if missing:
        runner.spawn_users(missing)
    return missing


def drop_missing_worker(runner: Any, client_id: str) -> bool:
    """Drop a worker Locust has marked missing from the master's workers, as Locust drops one
    that quit; True if it was dropped.

    Marking it missing already took it out of the users dispatcher. Left in `runner.clients`,
    Locust would drop it only after `HEARTBEAT_DEAD_INTERNAL` (60 s) and then dispatch every
    user again from zero with a fresh dispatcher: a ramp-up at the spawn rate, a spawn message
    a second, under which the workers lost the users they were stopping (workloads.user_guard).
    Only while no dispatch is in progress: the master's loops over its workers that wait
    (sending) run within one, and the caller must not be stopping the runner either."""
    client = runner.clients.get(client_id)
    if client is None or client.state != STATE_MISSING or not getattr(runner, "spawning_completed", False):
        return False
    del runner.clients[client_id]
    return True


class LoadProcess:
    """One load process: the local runner, or the master of N workers, or one worker."""

    def __init__(self, spec: LoadSpec, *, worker_index: int | None = None, master_port: int | None = None,
                 worker_name: str | None = None, master_host: str = "127.0.0.1") -> None:
        self.spec = spec
        self.config = spec.config
        self.worker_index = worker_index
        self.worker_name = worker_name
        self.master_host = master_host
        self.master_port = master_port
        is_worker = worker_index is not None or worker_name is not None
        self.workers = 0 if is_worker else spec.config.load.workers
        self.remote_workers = 0 if is_worker else spec.config.load.remote_workers
        self.hub: RemoteHub | None = None
        self.worker_writers: dict[str, str] = {}
        self.worker_cpu_s: dict[str, float] = {}
        self.clock = RunClock.from_env()
        self.stop_timeout_s = spec.config.workload.op_timeout_s + STOP_GRACE_S
        classes, self.total_users = user_classes(spec.config)
        self.env = Environment(user_classes=classes, stop_timeout=self.stop_timeout_s, host=spec.service_url)
        self.ctx: LoadContext | None = None
        self.recorder: HistoryRecorder | None = None
        self.client: Any = None
        self.runner: Runner | None = None
        self.worker_procs: list[subprocess.Popen[bytes]] = []
        self.worker_names: list[str] = []          # the writer of each of worker_procs
        self.killed: set[int] = set()              # indexes into worker_procs killed on request (client-kill)
        self.worker_counters: dict[str, dict[str, Any]] = {}
        self.reporter: StatusReporter | None = None
        self.state = "starting"
        self.failure: str | None = None
        self.done = Event()
        self._stopping = False
        self._greenlets: list[gevent.Greenlet] = []
        self._original_ppid = os.getppid()

    # ---- set-up -------------------------------------------------------------------------------

    @property
    def is_worker(self) -> bool:
        return self.worker_index is not None or self.worker_name is not None

    @property
    def is_master(self) -> bool:
        return not self.is_worker and (self.workers > 0 or self.remote_workers > 0)

    @property
    def writer(self) -> str:
        return self.worker_name or f"w{self.worker_index or 0}"

    def _make_context(self) -> LoadContext:
        from harness.client import PulsarClient

        spec = self.spec
        try:
            self.recorder = HistoryRecorder(spec.run_dir.history_dir, spec.run_id, self.writer, self.clock,
                                            txn_path=spec.txn_path.value)
        except FileExistsError:
            raise LoadFailed(f"{spec.run_dir.history_dir / (self.writer + '.jsonl')} already exists: a load "
                             "process already ran in this run folder; start a new run") from None
        self.client = PulsarClient(spec.service_url, txn_path=spec.txn_path.value,
                                   operation_timeout_s=self.config.workload.op_timeout_s,
                                   listener_name=spec.listener_name)
        request = self.env.events.request

        def fire(request_type: str, name: str, ms: float, length: int, error: BaseException | None) -> None:
            request.fire(request_type=request_type, name=name, response_time=ms, response_length=length,
                         exception=error, context={})

        def second_client() -> PulsarClient:   # workloads.foreign: its own connections
            return PulsarClient(spec.service_url, txn_path=spec.txn_path.value,
                                operation_timeout_s=self.config.workload.op_timeout_s,
                                listener_name=spec.listener_name)

        ctx = LoadContext(config=self.config, topology=spec.topology, client=self.client, recorder=self.recorder,
                          clock=self.clock, writer=self.writer, fire=fire, second_client=second_client)
        ctx.on_fatal = lambda err: self._spawn_stop(f"the history cannot be written: {err}", failed=True)
        ctx.attach(self.env)
        self.env.events.test_stopping.add_listener(lambda **_: ctx.stop())

        def on_user_error(user_instance: Any, exception: BaseException, tb: Any) -> None:
            if isinstance(exception, HistoryWriteError | HistoryMisuse):
                ctx.fail_fatally(exception)

        self.env.events.user_error.add_listener(on_user_error)
        return ctx

    def _spawn_worker(self, writer: str, args: list[str]) -> subprocess.Popen[bytes]:
        assert self.runner is not None
        port = self.runner.server.port  # type: ignore[attr-defined]
        out = (self.spec.run_dir.logs_dir / f"load-{writer}.log").open("ab")
        proc = subprocess.Popen(
            python_m(RUNNER, "--spec", str(self._spec_file), *args, "--master-port", str(port)),
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
        out.close()
        self.worker_procs.append(proc)
        self.worker_names.append(writer)
        return proc

    def _alive_workers(self) -> int:
        return sum(1 for i, p in enumerate(self.worker_procs) if i not in self.killed and p.poll() is None)

    def _wait_connected(self, wanted: int) -> None:
        """Until `wanted` workers are connected (bounded by WORKER_CONNECT_TIMEOUT_S)."""
        assert self.runner is not None
        log_dir = self.spec.run_dir.logs_dir
        deadline = gevent.Timeout(WORKER_CONNECT_TIMEOUT_S)
        deadline.start()
        try:
            while self.runner.worker_count < wanted:  # type: ignore[attr-defined]
                for index, proc in enumerate(self.worker_procs):
                    if index not in self.killed and proc.poll() is not None:
                        name = self.worker_names[index]
                        raise LoadFailed(f"load worker {name} exited (code {proc.returncode}) before connecting; "
                                         f"see {log_dir / f'load-{name}.log'}")
                gevent.sleep(0.1)
        except gevent.Timeout:
            raise LoadFailed(f"only {self.runner.worker_count} of {wanted} load workers "  # type: ignore[attr-defined]
                             f"connected within {WORKER_CONNECT_TIMEOUT_S:.0f}s; see {log_dir}/load-w*.log") from None
        finally:
            deadline.cancel()

    def _start_workers(self) -> None:
        for index in range(self.workers):
            self._spawn_worker(f"w{index}", ["--worker", str(index)])
        self._wait_connected(self.workers)

    # ---- client faults (harness.load_control) -------------------------------------------------

    def _control_loop(self) -> None:
        """Serve the nemesis's client-kill requests until the load stops (bounded by its life)."""
        directory = load_control.control_dir(self.spec.run_dir.path)
        while not self.done.is_set() and not self._stopping:
            for request_id, body in list(load_control.pending_requests(directory)):
                result = load_control.answer(directory, request_id, self._serve_control, body)
                log.info("load control %s %s: %s", request_id, body, result)
            self.done.wait(load_control.POLL_S)

    def _serve_control(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._stopping:
            raise LoadFailed("the load is stopping")
        if body.get("op") == "kill":
            return self._kill_worker(str(body.get("worker") or "random"), int(body.get("seed") or 0))
        if body.get("op") == "start":
            return self._replace_worker(str(body.get("replaces") or ""))
        raise LoadFailed(f"unknown load-control request {body!r}")

    def _kill_worker(self, wanted: str, seed: int) -> dict[str, Any]:
        alive = [i for i, p in enumerate(self.worker_procs) if i not in self.killed and p.poll() is None]
        if wanted != "random":
            alive = [i for i in alive if self.worker_names[i] == wanted]
        if not alive:
            raise LoadFailed(f"no running load worker {'' if wanted == 'random' else wanted + ' '}to kill")
        index = alive[random.Random(seed).randrange(len(alive))]
        proc = self.worker_procs[index]
        self.killed.add(index)      # before the kill: the watcher must not take its exit for a failure
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        self._forget_locust_worker(self.worker_names[index])
        return {"writer": self.worker_names[index], "pid": proc.pid}

    def _forget_locust_worker(self, writer: str) -> None:
        """Have Locust mark a killed worker missing at its next heartbeat check (1 s), not after
        three missed heartbeats: a replacement that connected first would be dispatched users
        beside the dead worker, and those would be lost when it is finally marked missing."""
        assert self.runner is not None
        for client_id, name in list(self.worker_writers.items()):
            client = self.runner.clients.get(client_id) if name == writer else None  # type: ignore[attr-defined]
            if client is not None:
                client.heartbeat = -1

    def _wait_forgotten(self, alive: int) -> None:
        """Until Locust counts no more workers than are alive (bounded: a few heartbeat checks)."""
        assert self.runner is not None
        with gevent.Timeout(FORGET_TIMEOUT_S, False):
            while self.runner.worker_count > alive:  # type: ignore[attr-defined]
                gevent.sleep(0.1)

    def _drop_killed_worker(self, writer: str) -> None:
        """Once Locust marked a killed worker missing, drop it from the master's workers
        (`drop_missing_worker`), so its replacement's dispatch is the only one the kill causes."""
        assert self.runner is not None
        if self._stopping:     # the runner's stop walks its workers, sending to each: not under it
            return
        for client_id, name in list(self.worker_writers.items()):
            if name == writer and drop_missing_worker(self.runner, client_id):
                log.info("killed load worker %s (%s) dropped from the master's workers", writer, client_id)

    def _replace_worker(self, replaces: str) -> dict[str, Any]:
        if replaces not in self.worker_names:
            raise LoadFailed(f"there is no load worker {replaces!r} to replace")
        base = replaces.split("-", 1)[0]
        generation = 1 + sum(1 for name in self.worker_names if name.split("-", 1)[0] == base)
        writer = load_control.replacement_writer(replaces, generation)
        self._wait_forgotten(self._alive_workers())
        self._drop_killed_worker(replaces)
        proc = self._spawn_worker(writer, ["--worker-name", writer])
        self._wait_connected(self._alive_workers())
        return {"writer": writer, "pid": proc.pid}

    def _counters(self) -> Counters:
        if self.ctx is not None:
            return self.ctx.counters
        return Counters.merge(list(self.worker_counters.values()))

    def _per_worker(self) -> dict[str, dict[str, Any]]:
        """Each worker's counters by its writer name (the progress line shows each one's rate)."""
        hosts = self.hub.writer_hosts() if self.hub is not None else {}
        out: dict[str, dict[str, Any]] = {}
        for client_id, snapshot in self.worker_counters.items():
            writer = self.worker_writers.get(client_id, client_id)
            out[writer] = {"counters": snapshot, "host": hosts.get(writer, "local")}
        return out

    def _remote_cpu_s(self) -> float:
        """CPU seconds the remote workers reported (local ones are measured by pid)."""
        return sum(cpu for client_id, cpu in self.worker_cpu_s.items()
                   if self.worker_writers.get(client_id, "").startswith("r"))

    def _watch_remote(self) -> None:
        """Record remote workers whose Locust heartbeats stopped, and hosts gone silent."""
        if self.hub is None or self.runner is None:
            return
        missing = [(self.worker_writers[c.id], f"its Locust worker stopped sending heartbeats ({c.id})")
                   for c in self.runner.clients.missing  # type: ignore[attr-defined]
                   if c.id in self.worker_writers and self.worker_writers[c.id].startswith("r")]
        self.hub.note_missing_locust_clients(missing)
        self.hub.check_hosts()

    def _users(self) -> tuple[int, dict[str, int]]:
        runner = self.runner
        if runner is None:
            return 0, {}
        if self.is_master:
            return runner.user_count, dict(runner.reported_user_classes_count)  # type: ignore[attr-defined]
        return runner.user_count, dict(runner.user_classes_count)

    def _pids(self) -> list[int]:
        return [os.getpid()] + [p.pid for p in self.worker_procs if p.poll() is None]

    def _guard_users(self) -> None:
        """Every GUARD_INTERVAL_S until the load ends, start again the users Locust lost without
        a replacement (workloads.user_guard): warned about, and counted in the status file."""
        guard = UserGuard()
        while not self.done.wait(GUARD_INTERVAL_S):
            runner, ctx = self.runner, self.ctx
            if runner is None or ctx is None or self._stopping or ctx.stopping.is_set():
                continue
            try:
                missing = repair_users(runner, guard)
            except Exception:     # e.g. a user that cannot be built: say so, try again later
                log.exception("%s: could not start the users the load was missing", self.writer)
                continue
            if missing:
                ctx.counters.respawned += sum(missing.values())
                log.warning("%s: %d user(s) had ended without a replacement, started again: %s "
                            "(the spawn job's target: %s)", self.writer, sum(missing.values()), missing,
                            dict(runner.target_user_classes_count))

    # ---- main ---------------------------------------------------------------------------------

    def run(self, spec_file: Path) -> int:
        self._spec_file = spec_file
        try:
            self._run()
        except TxnbenchError as err:
            self.failure = str(err)
            log.error("%s", err)
        except Exception as err:  # a bug: say so, still close the histories
            self.failure = f"{type(err).__name__}: {err}"
            log.exception("the load process failed")
        finally:
            self._cleanup()
        return EXIT_FAILED if self.failure else EXIT_OK

    def _run(self) -> None:
        load = self.config.load
        if self.is_worker:
            self._run_worker()
            return
        if load.web_ui:
            _check_port_free(load.web_port)
        if self.is_master:
            self._create_master()
        else:
            self.ctx = self._make_context()
            self.runner = self.env.create_local_runner()
        capacity = with_remote_workers(find_capacity(self.config), self.config)
        self.reporter = StatusReporter(self.spec.status_file, self.clock, run_id=self.spec.run_id,
                                       processes=load.processes, counters=self._counters,
                                       users=self._users, cpu=CpuMeter(self._pids, extra=self._remote_cpu_s),
                                       capacity=capacity, per_worker=self._per_worker if self.is_master else None)
        self.reporter.write(self.state)
        self._install_stops()
        if self.is_master and self.workers:
            self._start_workers()
            self._greenlets.append(gevent.spawn(self._control_loop))
        if self.hub is not None:
            self._wait_remote()
        if load.web_ui:
            self.env.create_web_ui("127.0.0.1", load.web_port)
            log.info("Locust web UI on http://127.0.0.1:%d", load.web_port)
        self._start_csv()
        self._greenlets.append(gevent.spawn(self._status_loop))
        log.info("starting %d users (spawn rate %.1f/s) against %s on %s", self.total_users, load.spawn_rate,
                 self.spec.service_url, self.spec.txn_path.value)
        self.state = "running"
        assert self.runner is not None
        self.runner.start(self.total_users, load.spawn_rate)
        if not self.is_master:
            self._greenlets.append(gevent.spawn(self._guard_users))
        self.done.wait()

    def _create_master(self) -> None:
        load = self.config.load
        bind, port = ("127.0.0.1", 0) if not self.remote_workers else (load.master_bind, load.master_port)
        try:
            self.runner = self.env.create_master_runner(bind, port)
        except RPCError as err:
            raise EnvironmentProblem(f"the Locust master cannot bind {bind}:{port} ({err}); set load.master_port "
                                     "to a free port (and give the load hosts the same one)") from None
        self.env.events.worker_report.add_listener(self._on_worker_report)
        if self.remote_workers:
            runner = self.runner

            def send(kind: str, data: dict[str, Any], client_id: str) -> None:
                runner.send_message(kind, data, client_id=client_id)

            self.hub = RemoteHub(self.spec, self.clock, self.remote_workers, code_digest(), send)
            self.hub.register(self.runner)
            log.info("Locust master on %s:%d waits for %d remote worker(s): txnbench worker --master %s:%d",
                     bind, port, self.remote_workers, bind, port)

    def _wait_remote(self) -> None:
        assert self.hub is not None and self.runner is not None
        runner = self.runner
        hub = self.hub

        def cannot_start() -> str | None:
            lost = [f"{w.writer} ({w.host}): {w.lost}" for w in hub.gatherer.writers.values() if w.lost]
            if lost:
                return f"remote load worker(s) lost before the users started: {'; '.join(lost)}"
            return self.failure or ("the load was stopped while waiting for remote workers" if self._stopping else None)

        problem = hub.wait_joined(self.config.load.remote_wait_s, lambda: runner.worker_count,  # type: ignore[attr-defined]
                                  self.workers, cannot_start)
        if problem:
            raise LoadFailed(problem)
        log.info("remote workers joined: %s", self.hub.describe_joined())

    def _run_worker(self) -> None:
        assert self.master_port is not None
        self.ctx = self._make_context()
        self.runner = self.env.create_worker_runner(self.master_host, self.master_port)
        ctx = self.ctx
        writer = self.writer
        import psutil

        me = psutil.Process()

        def report(client_id: str, data: dict[str, Any]) -> None:
            data["txnbench"] = ctx.counters.snapshot()
            data["txnbench_writer"] = writer
            with contextlib.suppress(psutil.Error):
                times = me.cpu_times()
                data["txnbench_cpu_s"] = times.user + times.system

        self.env.events.report_to_master.add_listener(report)
        runner = self.runner

        def users_stopped(**_kwargs: Any) -> None:
            # A txnbench load is never restarted, so a worker whose users have stopped is done.
            # Locust would instead wait for a "quit" that never comes: the master forgets a
            # worker once it reports "client_stopped", and its quit() only tells the workers it
            # still knows, so the worker sat out its stop timeout and was then killed with -9
            # (its history closed by no one). Report the final numbers and end instead.
            def finish() -> None:
                with contextlib.suppress(Exception):
                    runner._send_stats()
                runner.greenlet.kill(block=False)

            gevent.spawn_later(WORKER_FINISH_DELAY_S, finish)

        self.env.events.test_stop.add_listener(users_stopped)
        self._install_stops()
        self._greenlets.append(gevent.spawn(self._guard_users))
        self.state = "running"
        self.runner.greenlet.join()   # ends once its users stopped (above), the master says quit, or our own stop
        self.done.set()

    def _on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        snapshot = data.get("txnbench")
        if isinstance(snapshot, dict):
            self.worker_counters[client_id] = snapshot
        if isinstance(data.get("txnbench_writer"), str):
            self.worker_writers[client_id] = data["txnbench_writer"]
        if isinstance(data.get("txnbench_cpu_s"), int | float):
            self.worker_cpu_s[client_id] = float(data["txnbench_cpu_s"])

    # ---- stopping -----------------------------------------------------------------------------

    def _install_stops(self) -> None:
        gevent.signal_handler(signal.SIGTERM, lambda: self._spawn_stop("SIGTERM"))
        gevent.signal_handler(signal.SIGINT, lambda: self._spawn_stop("SIGINT"))
        if not self.is_worker:
            self._greenlets.append(gevent.spawn_later(self.spec.max_duration_s, self._stop,
                                                      f"max duration {self.spec.max_duration_s:.0f}s reached"))
        self._greenlets.append(gevent.spawn(self._watch_parent))

    def _watch_parent(self) -> None:
        parent = self.spec.parent_pid if not self.is_worker else None
        while not self.done.is_set():
            if _parent_gone(self._original_ppid, parent):
                self._stop("the parent process is gone")
                return
            for index, proc in enumerate(self.worker_procs):
                if index not in self.killed and proc.poll() is not None and not self._stopping:
                    name = self.worker_names[index]
                    self._stop(f"load worker {name} exited early (code {proc.returncode}); "
                               f"see {self.spec.run_dir.logs_dir / f'load-{name}.log'}", failed=True)
                    return
            self.done.wait(1.0)

    def _spawn_stop(self, reason: str, failed: bool = False) -> None:
        gevent.spawn(self._stop, reason, failed)

    def _stop(self, reason: str, failed: bool = False) -> None:
        if failed and self.failure is None:
            self.failure = reason
        if self._stopping:
            return
        self._stopping = True
        self.state = "stopping"
        log.info("stopping the load: %s", reason)
        if self.ctx is not None:
            self.ctx.stop()
        runner = self.runner
        if runner is not None:
            with gevent.Timeout(self.stop_timeout_s + 5.0, False):
                runner.stop()
            if self.hub is not None:   # before quit: quitting ends the master's message channel
                self.hub.finish(self.stop_timeout_s + REMOTE_FINISH_GRACE_S)
            with gevent.Timeout(5.0, False):
                runner.quit()
        self.done.set()

    # ---- statistics ---------------------------------------------------------------------------

    def _start_csv(self) -> None:
        locust_dir = self.spec.run_dir.locust_dir
        locust_dir.mkdir(parents=True, exist_ok=True)
        self.csv = StatsCSVFileWriter(self.env, PERCENTILES_TO_REPORT, str(locust_dir / "locust"), full_history=True)
        assert self.runner is not None
        self._greenlets.append(gevent.spawn(self.csv.stats_writer))
        self._greenlets.append(gevent.spawn(stats_history, self.runner))

    def _finish_csv(self) -> None:
        csv = getattr(self, "csv", None)
        if csv is None:
            return
        with contextlib.suppress(Exception):   # final numbers: the same rewrite the writer loop does
            csv.requests_csv_filehandle.seek(0)
            csv.requests_csv_filehandle.truncate()
            csv.requests_csv_writer.writerow(csv.requests_csv_columns)
            csv._requests_data_rows(csv.requests_csv_writer)
            csv.failures_csv_filehandle.seek(csv.failures_csv_data_start)
            csv._failures_data_rows(csv.failures_csv_writer)
            csv.failures_csv_filehandle.truncate()
            csv.exceptions_csv_filehandle.seek(csv.exceptions_csv_data_start)
            csv._exceptions_data_rows(csv.exceptions_csv_writer)
            csv.exceptions_csv_filehandle.truncate()
        with contextlib.suppress(Exception):
            csv.close_files()

    def _status_loop(self) -> None:
        while not self.done.is_set():
            if not self._stopping:
                self._watch_remote()
            self._write_status()
            self.done.wait(STATUS_INTERVAL_S)

    def _write_status(self) -> None:
        if self.reporter is None:
            return
        if self.ctx is not None and self.ctx.fatal is not None:
            self.reporter.fatal = f"{type(self.ctx.fatal).__name__}: {self.ctx.fatal}"
        elif self.failure:
            self.reporter.fatal = self.failure
        try:
            self.reporter.write(self.state)
            if self.hub is not None:   # also while running: a load process killed later still leaves it
                self.hub.write(self.spec.run_dir.locust_dir / "workers.json")
        except OSError as err:
            log.warning("could not write %s: %s", self.reporter.path, err)

    # ---- cleanup ------------------------------------------------------------------------------

    def _cleanup(self) -> None:
        if not self._stopping and self.runner is not None:
            self._stop("the load process is ending")
        if self.ctx is not None and self.ctx.fatal is not None and self.failure is None:
            self.failure = f"the history cannot be written: {self.ctx.fatal}"
        for greenlet in self._greenlets:
            greenlet.kill(block=False)
        self._finish_csv()
        self._wait_workers()
        if self.hub is not None:
            self.hub.write(self.spec.run_dir.locust_dir / "workers.json")
            for lost in self.hub.to_dict()["lost"]:
                log.error("remote load worker %s (host %s) was lost: %s; %d bytes of its history %s",
                          lost["writer"], lost["host"], lost["reason"], lost["bytes"],
                          "arrived complete" if lost["complete"] else "arrived")
        second: Any = None
        if self.ctx is not None:
            # transactions users left ending in the background (workload.txn_pipeline) write into
            # the history until they end: wait for them (bounded) before anything is closed
            if not self.ctx.join_background(self.stop_timeout_s):
                log.warning("transactions were still ending in the background after %.0f s", self.stop_timeout_s)
            # the second client (workloads.foreign) closes beside the rest, within their time
            second = gevent.spawn(self.ctx.close_second_client, CLIENT_CLOSE_TIMEOUT_S)
            with gevent.Timeout(CLIENT_CLOSE_TIMEOUT_S, False):
                self.ctx.producers.close(CLIENT_CLOSE_TIMEOUT_S)
        if self.client is not None:
            with gevent.Timeout(CLIENT_CLOSE_TIMEOUT_S * 2, False), contextlib.suppress(Exception):
                self.client.close(CLIENT_CLOSE_TIMEOUT_S)
        if second is not None:
            second.join(0.5)
            second.kill(block=False)
        if self.recorder is not None:
            self.recorder.close()
        self.state = "failed" if self.failure else "stopped"
        self._write_status()
        if self.reporter is not None:
            counters = self._counters()
            log.info("load %s: %d committed transactions, %d messages, %d errors", self.state,
                     counters.committed, counters.messages, counters.errors)

    def _wait_workers(self) -> None:
        deadline = self.stop_timeout_s + 15.0
        for index, proc in enumerate(self.worker_procs):
            name = self.worker_names[index]
            try:
                proc.wait(timeout=max(1.0, deadline))
            except subprocess.TimeoutExpired:
                log.warning("load worker %s did not exit; killing it", name)
                proc.kill()
                proc.wait(timeout=10)
            deadline = 1.0
            if index not in self.killed and proc.returncode not in (0, None) and self.failure is None \
                    and not self._stopping:
                self.failure = f"load worker {name} exited with code {proc.returncode}"


GC_YOUNG_THRESHOLD = 50_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


def tune_gc() -> None:
    """Collect cyclic garbage less often, and never look at what was there before the load began.

    Why: every operation allocates a few dozen short-lived objects (futures, commands, history
    lines), so with Python's default threshold the collector ran hundreds of times a second, and
    its older generations walked every object of Locust, gevent and protobuf each time: about
    3% of the load process's CPU against the null broker (issue #27). Freezing moves what exists
    now (modules, classes, the client) out of the collector's sight; cycles made later are
    still collected, in batches of `GC_YOUNG_THRESHOLD` allocations (a few MB at most).
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, type=Path, help="RUN_DIR/load-spec.json")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--master-port", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--master-host", default="127.0.0.1", help=argparse.SUPPRESS)
    parser.add_argument("--worker-name", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # Locust's web UI parses sys.argv as if this were the `locust` command line; ours is not.
    sys.argv = sys.argv[:1]
    setup_logging(os.environ.get("TXNBENCH_LOAD_LOG_LEVEL", "INFO").upper())   # DEBUG to trace the client
    try:
        spec = LoadSpec.load(args.spec)
        process = LoadProcess(spec, worker_index=args.worker, master_port=args.master_port,
                              worker_name=args.worker_name, master_host=args.master_host)
    except TxnbenchError as err:
        print(f"load process: {err}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    tune_gc()
    return process.run(args.spec)


if __name__ == "__main__":
    sys.exit(main())

