"""A Spark standalone cluster on 127.0.0.1, started from the PySpark installation and stopped by pid.

Theory of operation. `txnbench check --master spark://HOST:PORT` is the checker on a
cluster (docs/checks.md, "On a Spark cluster"). Two things start one here: the test that
a cluster gives the local verdict (tests/spark/test_standalone_cluster.py) and the
scale-out benchmark (`python -m tools.bench.scaleout`); both want the same daemons, so
they are started once, here. PySpark's wheel ships `bin/spark-class`, which runs
`org.apache.spark.deploy.master.Master` and `...deploy.worker.Worker` with `exec`, so
the process we start is the JVM and its pid is the one we stop. Every daemon binds
127.0.0.1 (`--host`, `SPARK_LOCAL_IP`), and its web UI on a free port of 127.0.0.1: the
master's `/json/` is how readiness is read (status ALIVE, workers registered).

Stopping: the workers first (each stops its executors), then the master; SIGTERM, a
bounded wait, then SIGKILL. Executors are children of their worker, so the pids below
each worker are read before it is signalled, and any still alive afterwards are killed
by pid (checked with its start time) too: nothing of ours outlives `stop()`, even when a worker had to be killed.

Memory: each worker offers `worker_memory` to executors (`--memory`), and when
`executor_memory` is given, `spark.executor.memory` is written to a `spark-defaults.conf`
in the cluster's own `SPARK_CONF_DIR`, which the driver's `spark-submit` reads when it is
started with `env()`; `daemon_memory` is the master's and workers' own heap
(`SPARK_DAEMON_MEMORY`, Spark's default 1g).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from targets.processes import ProcessState, free_port, process_start_time, process_state

__all__ = ["READY_TIMEOUT_S", "StandaloneCluster", "descendants", "master_state", "spark_class"]

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


def spark_class() -> Path:
    """`bin/spark-class` of the installed PySpark (the wheel carries Spark's jars and scripts)."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def descendants(pid: int) -> Iterator[int]:
    """Every process below `pid`, from /proc's children lists (nothing where /proc is absent)."""
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in Path(f"/proc/{parent}/task/{task}/children").read_text().split()]
            except (OSError, ValueError):
                continue
            yield from children
            stack.extend(children)


def master_state(web_port: int) -> dict[str, Any] | None:
    """The master's `/json/` (status, workers, applications), or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as reply:
            data = json.loads(reply.read())
            return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


class StandaloneCluster:
    """A master and `workers` one-core workers on 127.0.0.1, each a `spark-class` process we stop by pid."""

    def __init__(self, work: Path, workers: int = 2, *, worker_memory: str = "1g",
                 executor_memory: str | None = None, daemon_memory: str | None = None) -> None:
        self.work = work
        self.port, self.web_port = free_port(), free_port()
        self.workers = workers
        self.worker_memory = worker_memory
        self.executor_memory = executor_memory
        self.daemon_memory = daemon_memory
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def pids(self) -> list[int]:
        """The daemons' pids (master first); their executors are below the workers'."""
        return [proc.pid for proc in self.procs]

    def env(self) -> dict[str, str]:
        """The environment for the daemons and for a driver of this cluster (`txnbench check --master`)."""
        env = dict(os.environ)
        env.update({
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_HOME": str(spark_class().parent.parent),
            "SPARK_LOG_DIR": str(self.work / "logs"),
            "SPARK_WORKER_DIR": str(self.work / "worker"),
            "PYSPARK_PYTHON": sys.executable,
        })
        if self.daemon_memory:
            env["SPARK_DAEMON_MEMORY"] = self.daemon_memory
        if self.executor_memory:
            env["SPARK_CONF_DIR"] = str(self.work / "conf")
        return env

    def _start(self, name: str, *args: str) -> None:
        log = (self.work / f"{name}.log").open("wb")
        self.logs.append(log)
        self.procs.append(subprocess.Popen([str(spark_class()), *args], env=self.env(), stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def start(self) -> None:
        """Start the master, wait for it, start the workers, wait until all registered (each wait bounded)."""
        self.work.mkdir(parents=True, exist_ok=True)
        if self.executor_memory:
            conf = self.work / "conf"
            conf.mkdir(exist_ok=True)
            (conf / "spark-defaults.conf").write_text(f"spark.executor.memory {self.executor_memory}\n")
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.web_port))
        self._wait(lambda s: s.get("status") == "ALIVE", "the master to come up")
        for n in range(self.workers):
            self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--webui-port", str(free_port()), "--cores", "1", "--memory", self.worker_memory,
                        "--work-dir", str(self.work / f"worker-{n}"), self.url)
        self._wait(lambda s: int(s.get("aliveworkers", 0)) >= self.workers, f"{self.workers} workers to register")

    def _wait(self, ready: Callable[[dict[str, Any]], bool], what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Spark process exited ({dead[0].args!r}) while waiting for {what}; "
                                   f"see {self.work}")
            state = master_state(self.web_port)
            if state is not None and ready(state):
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {READY_TIMEOUT_S} s waiting for {what}; see {self.work}")

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master, by pid; every wait bounded."""
        below = [(pid, process_start_time(pid)) for proc in self.procs if proc.poll() is None
                 for pid in descendants(proc.pid)]
        for proc in reversed(self.procs):          # workers first (they stop their executors), then the master
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid, started in below:                 # an executor its worker did not stop in time
            if started is not None and process_state(pid, started) != ProcessState.STOPPED:
                with contextlib.suppress(OSError):  # the same process (pid and start time), not a recycled pid
                    os.kill(pid, signal.SIGKILL)
        for log in self.logs:
            log.close()
        self.logs.clear()
