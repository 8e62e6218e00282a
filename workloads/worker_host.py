"""`txnbench worker --master HOST:PORT [--processes N]`: join a run from this host.

Theory of operation (the messages are in workloads.remote). This process is the host's
supervisor: it is not a Locust worker itself. It talks to the run's Locust master over
Locust's message channel as one more client, and:

1. says hello (again every `HELLO_EVERY_S` until the master answers, for at most
   `--wait` seconds: the workers may start before the run does) and gets the load spec
   and its writer names, or a refusal it prints (exit 2);
2. measures its clock against the master's run clock (round trips over the channel)
   and starts N Locust workers (`python -m workloads.runner --worker-name rK`) whose run
   clock is corrected by that offset, each writing `history/rK.jsonl` under
   `--dir/<run id>-rK/`;
3. ships every file's new complete lines to the master every `SHIP_INTERVAL_S`; when a
   worker process dies mid-run it tells the master and ships its file to the last line;
4. on the master's `txnbench-finish` (or SIGTERM/SIGINT here) stops its workers
   gracefully, ships the rest, says the files are complete (size and SHA-256), measures
   the clock again and says bye.

Every wait is bounded: the master silent for `MASTER_SILENT_S` while the workers run
stops them (their files stay in `--dir`, named in the error). Exit 0 when every file
arrived complete, 1 when a worker died or a file did not arrive, 2 on refusal or bad input.

Import only as a process's main module: Locust's package patches the standard library
for gevent when imported.
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from gevent.event import Event  # noqa: E402
from gevent.queue import Empty, Queue  # noqa: E402
from locust.exception import RPCError  # noqa: E402
from locust.rpc import Message  # noqa: E402
from locust.rpc.zmqrpc import Client  # noqa: E402

from harness.config import load_scenario  # noqa: E402
from harness.errors import TxnbenchError  # noqa: E402
from harness.results import RunDir, write_json_atomic  # noqa: E402
from workloads import remote  # noqa: E402
from workloads.entrypoints import RUNNER, python_m  # noqa: E402
from workloads.worker_args import add_worker_arguments  # noqa: E402

log = logging.getLogger("workloads.worker_host")

HELLO_EVERY_S = 2.0
PING_EVERY_S = 2.0
CLOCK_REPLY_TIMEOUT_S = 2.0
MASTER_SILENT_S = 60.0
STOP_WORKERS_TIMEOUT_S = 60.0
FINAL_ACK_TIMEOUT_S = 30.0
EXIT_OK, EXIT_INCOMPLETE, EXIT_REFUSED = 0, 1, 2


class WorkerHostError(TxnbenchError):
    exit_code = 2


def parse_master(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise WorkerHostError(f"--master {text!r}: expected HOST:PORT, e.g. 10.0.0.5:5557 (load.master_bind and "
                              "load.master_port of the run's scenario)")
    return host.strip("[]"), int(port)


@dataclass
class Child:
    writer: str
    proc: subprocess.Popen[bytes]
    history: Path
    log: Path
    shipped: int = 0          # bytes sent (optimistically)
    acked: int = 0            # bytes the master said it has
    reported_lost: bool = False
    done_sent: bool = False
    done_acked: bool = False
    problems: list[str] = field(default_factory=list)


class WorkerHost:
    def __init__(self, master: str, processes: int, directory: Path, wait_s: float,
                 scenario: str | None = None) -> None:
        self.master_host, self.master_port = parse_master(master)
        self.processes = processes
        self.directory = directory
        self.wait_s = wait_s
        self.scenario = scenario
        self.ident = f"txnbench-host-{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.client: Client | None = None
        self.answer: Event = Event()
        self.welcome: dict[str, Any] | None = None
        self.refusal: str | None = None
        self.clock_replies: Queue[dict[str, Any]] = Queue()
        self.finish = Event()
        self.bye_acked = Event()
        self.stop_reason: str | None = None
        self.children: list[Child] = []
        self.last_heard = time.monotonic()
        self.last_ping = time.monotonic()
        self.clock_start: dict[str, Any] | None = None

    # ---- channel ------------------------------------------------------------------------------

    def _send(self, kind: str, data: dict[str, Any]) -> None:
        assert self.client is not None
        try:
            self.client.send(Message(kind, data, self.ident))
        except RPCError as err:
            log.warning("could not send %s to the master: %s", kind, err)

    def _listen(self) -> None:
        assert self.client is not None
        while True:
            try:
                msg = self.client.recv()
            except RPCError as err:
                log.warning("the channel to the master broke: %s", err)
                gevent.sleep(0.5)
                continue
            self.last_heard = time.monotonic()
            self._dispatch(msg)

    def _dispatch(self, msg: Message) -> None:
        data = msg.data or {}
        if msg.type == remote.WELCOME:
            self.welcome = data
            self.answer.set()
        elif msg.type == remote.REFUSED:
            self.refusal = str(data.get("reason"))
            self.answer.set()
        elif msg.type == remote.CLOCK_REPLY:
            if data.get("seq") != "ping":
                self.clock_replies.put(data)
        elif msg.type == remote.HISTORY_ACK:
            self._on_ack(data)
        elif msg.type == remote.FINISH:
            self.stop_reason = self.stop_reason or "the master finished the run"
            self.finish.set()
        elif msg.type == remote.BYE_ACK:
            self.bye_acked.set()
        # Locust's own messages (heartbeat, ack ...) are for Locust workers, not for us.

    def _on_ack(self, data: dict[str, Any]) -> None:
        child = next((c for c in self.children if c.writer == data.get("writer")), None)
        if child is None:
            return
        size = int(data.get("size") or 0)
        child.acked = max(child.acked, size) if not data.get("problem") else size
        if data.get("problem"):
            child.problems.append(str(data["problem"]))
            child.shipped = size          # re-send from where the master's copy ends
        if data.get("done"):
            child.done_acked = True

    # ---- steps --------------------------------------------------------------------------------

    def _join(self) -> dict[str, Any]:
        digest = remote.code_digest()
        scenario_name, workload = None, None
        if self.scenario:
            config = load_scenario(self.scenario)
            scenario_name, workload = config.name, config.to_dict()["workload"]
        hello = remote.Hello.local(self.processes, digest, scenario_name, workload).to_dict()
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline and self.stop_reason is None:
            self._send(remote.HELLO, hello)
            if self.answer.wait(min(HELLO_EVERY_S, max(0.0, deadline - time.monotonic()))):
                break
        if self.refusal is not None:
            raise WorkerHostError(f"the master refused this host: {self.refusal}")
        if self.welcome is None and self.stop_reason is not None:
            raise WorkerHostError(f"stopped ({self.stop_reason}) before a master answered")
        if self.welcome is None:
            raise WorkerHostError(f"no txnbench master answered on {self.master_host}:{self.master_port} within "
                                  f"{self.wait_s:.0f}s (--wait); is the run started with load.remote_workers > 0 and "
                                  "this address as load.master_bind:load.master_port?")
        return self.welcome

    def _measure_clock(self) -> dict[str, Any]:
        samples: list[remote.ClockSample] = []
        for seq in range(remote.CLOCK_SAMPLES):
            sent = time.monotonic_ns()
            self._send(remote.CLOCK, {"seq": seq})
            deadline = time.monotonic() + CLOCK_REPLY_TIMEOUT_S
            while time.monotonic() < deadline:
                try:
                    reply = self.clock_replies.get(timeout=max(0.0, deadline - time.monotonic()))
                except Empty:
                    break
                if reply.get("seq") == seq:
                    samples.append(remote.ClockSample(sent, int(reply["master_ns"]), time.monotonic_ns()))
                    break
        if not samples:
            raise WorkerHostError("the master answered no clock probe within "
                                  f"{CLOCK_REPLY_TIMEOUT_S:.0f}s each; the channel to it is not usable")
        estimate = remote.estimate_offset(samples)
        return {**estimate.to_dict(), "wall_ms": round(time.time() * 1000.0, 3)}

    def _start_children(self, spec: dict[str, Any], writers: list[str], base_ns: int) -> None:
        for writer in writers:
            run_dir = RunDir(self.directory / f"{spec['run_id']}-{writer}")
            run_dir.make_folders()
            local = {**spec, "run_dir": str(run_dir.path), "parent_pid": os.getpid(),
                     "status_file": str(run_dir.locust_dir / "status.json")}
            spec_file = run_dir.path / "load-spec.json"
            write_json_atomic(spec_file, local)
            log_file = run_dir.logs_dir / f"load-{writer}.log"
            env = {**os.environ, "TXNBENCH_RUN_BASE_NS": str(base_ns), "PYTHONUNBUFFERED": "1"}
            with log_file.open("ab") as out:
                proc = subprocess.Popen(
                    python_m(RUNNER, "--spec", str(spec_file), "--worker-name", writer,
                             "--master-host", self.master_host, "--master-port", str(self.master_port)),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
            self.children.append(Child(writer, proc, run_dir.history_dir / f"{writer}.jsonl", log_file))
            log.info("started load worker %s (pid %d) in %s", writer, proc.pid, run_dir.path)

    def _ship(self, child: Child, *, final: bool) -> None:
        for chunk in remote.read_chunks(child.history, child.shipped, final=final):
            self._send(remote.HISTORY, chunk.to_dict())
            child.shipped = chunk.offset + len(chunk.data)

    def _send_done(self, child: Child) -> None:
        data = child.history.read_bytes() if child.history.exists() else b""
        self._send(remote.HISTORY_DONE, {"writer": child.writer, "size": len(data), "sha256": remote.sha256_hex(data),
                                         "exit_code": child.proc.returncode})
        child.done_sent = True

    def _stop_children(self) -> None:
        for child in self.children:
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)

    def _run_loop(self, max_s: float) -> None:
        deadline = time.monotonic() + max_s
        signalled = False
        while time.monotonic() < deadline:
            if (self.finish.is_set() or self.stop_reason) and not signalled:
                self._stop_children()
                signalled = True
            if (not self.finish.is_set() and time.monotonic() - self.last_heard > MASTER_SILENT_S
                    and self.stop_reason is None):
                self.stop_reason = f"the master was silent for {MASTER_SILENT_S:.0f}s"
                log.error("%s; stopping the workers", self.stop_reason)
                continue
            if time.monotonic() - self.last_ping > PING_EVERY_S:   # keeps both sides' silence detectors quiet
                self._send(remote.CLOCK, {"seq": "ping"})
                self.last_ping = time.monotonic()
            running = 0
            for child in self.children:
                code = child.proc.poll()
                if code is None:
                    running += 1
                    self._ship(child, final=False)
                    continue
                if not child.done_sent:
                    if code != 0 and not self.finish.is_set() and not child.reported_lost:
                        reason = f"its process (pid {child.proc.pid}) exited with code {code} mid-run"
                        log.error("load worker %s lost: %s; see %s", child.writer, reason, child.log)
                        self._send(remote.WORKER_LOST, {"writer": child.writer, "reason": reason})
                        child.reported_lost = True
                    self._ship(child, final=True)
                    self._send_done(child)
            if running == 0:
                return
            gevent.sleep(remote.SHIP_INTERVAL_S)
        self.stop_reason = self.stop_reason or f"the run outlasted {max_s:.0f}s"
        self._stop_children()

    def _settle(self) -> None:
        """Wait for every worker to exit, then for the master to confirm every file (re-sending what it lacks)."""
        for child in self.children:
            try:
                child.proc.wait(timeout=STOP_WORKERS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.error("load worker %s did not stop within %.0fs; killing it", child.writer, STOP_WORKERS_TIMEOUT_S)
                child.proc.kill()
                child.proc.wait(timeout=10)
        deadline = time.monotonic() + FINAL_ACK_TIMEOUT_S
        while time.monotonic() < deadline and not all(c.done_acked for c in self.children):
            for child in self.children:
                if not child.done_acked:
                    self._ship(child, final=True)
                    self._send_done(child)
            gevent.sleep(1.0)

    # ---- main ---------------------------------------------------------------------------------

    def run(self) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.client = Client(self.master_host, self.master_port, self.ident)
        listener = gevent.spawn(self._listen)
        gevent.signal_handler(signal.SIGTERM, lambda: self._on_signal("SIGTERM"))
        gevent.signal_handler(signal.SIGINT, lambda: self._on_signal("SIGINT"))
        try:
            welcome = self._join()
            spec, writers = welcome["spec"], list(welcome["writers"])
            log.info("joined run %s (%s on %s) as %s", spec["run_id"], spec["config"]["name"], spec["path"],
                     ", ".join(writers))
            self.clock_start = self._measure_clock()
            log.info("clock: base %d ns, +-%.3f ms (round trip %.3f ms)", self.clock_start["base_ns"],
                     self.clock_start["uncertainty_ns"] / 1e6, self.clock_start["rtt_ns"] / 1e6)
            self._start_children(spec, writers, int(self.clock_start["base_ns"]))
            self._run_loop(float(spec.get("max_duration_s") or 3600.0) + 120.0)
            self._settle()
            clock_end = None
            with contextlib.suppress(WorkerHostError):
                clock_end = self._measure_clock()
            self._send(remote.BYE, {"clock_start": self.clock_start, "clock_end": clock_end})
            self.bye_acked.wait(10.0)
            return self._outcome()
        finally:
            self._stop_children()
            for child in self.children:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.proc.wait(timeout=10)
                if child.proc.poll() is None:
                    child.proc.kill()
            listener.kill(block=False)
            if self.client is not None:
                with contextlib.suppress(Exception):
                    self.client.close(linger=500)

    def _on_signal(self, name: str) -> None:
        """Every loop here watches `stop_reason`: the workers stop gracefully and their files still ship."""
        self.stop_reason = self.stop_reason or name
        self.answer.set()

    def _outcome(self) -> int:
        status = EXIT_OK
        for child in self.children:
            where = child.history
            if not child.done_acked:
                log.error("%s: the master did not confirm its history; the file stays at %s", child.writer, where)
                status = EXIT_INCOMPLETE
            elif child.reported_lost:
                log.error("%s died mid-run; its history reached the master to its last line (%s)", child.writer, where)
                status = EXIT_INCOMPLETE
            else:
                log.info("%s: history complete on the master (%d bytes)", child.writer, child.acked)
        if self.stop_reason and not self.finish.is_set():
            log.error("stopped before the run ended: %s", self.stop_reason)
            status = EXIT_INCOMPLETE
        return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="txnbench worker", description=__doc__.split("\n\n")[0])
    add_worker_arguments(parser)
    args = parser.parse_args(argv)
    return run_from_args(args)


def run_from_args(args: argparse.Namespace) -> int:
    sys.argv = sys.argv[:1]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.processes < 1:
        print("txnbench worker: --processes must be at least 1", file=sys.stderr)
        return EXIT_REFUSED
    try:
        host = WorkerHost(args.master, args.processes, args.dir, args.wait, args.scenario)
        return host.run()
    except TxnbenchError as err:
        print(f"txnbench worker: {err}", file=sys.stderr, flush=True)
        return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main())
