"""`txnbench check --master spark://HOST:PORT` against a real Spark standalone cluster.

A master and two workers are started from the PySpark installation on
127.0.0.1 (`spark-class org.apache.spark.deploy.master.Master` and
`...deploy.worker.Worker`), a history is checked through them by the command
line in a subprocess (the test session's own local Spark stays as it is), and
the verdict must equal the local one. Every process is stopped by its pid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyspark
import pytest

from analysis.check import check_run
from targets.processes import free_port
from tests.spark.dsl import History

pytestmark = pytest.mark.slow

READY_TIMEOUT_S = 90.0
CHECK_TIMEOUT_S = 600.0


def _spark_class() -> Path:
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "PYSPARK_PYTHON": sys.executable,
    })
    return env


def _master_state(web_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as reply:
            data = json.loads(reply.read())
            return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


class StandaloneCluster:
    """A master and workers on 127.0.0.1, each a `spark-class` process we stop by pid."""

    def __init__(self, work: Path, workers: int = 2) -> None:
        self.work = work
        self.port, self.web_port = free_port(), free_port()
        self.workers = workers
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        log = (self.work / f"{name}.log").open("wb")
        self.logs.append(log)
        self.procs.append(subprocess.Popen([str(_spark_class()), *args], env=_env(self.work), stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.web_port))
        self._wait(lambda s: s.get("status") == "ALIVE", "the master to come up")
        for n in range(self.workers):
            self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                        "--work-dir", str(self.work / f"worker-{n}"), self.url)
        self._wait(lambda s: int(s.get("aliveworkers", 0)) >= self.workers, f"{self.workers} workers to register")

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise AssertionError(f"a Spark process exited ({dead[0].args}) while waiting for {what}; "
                                     f"see {self.work}")
            state = _master_state(self.web_port)
            if state is not None and ready(state):
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out after {READY_TIMEOUT_S} s waiting for {what}; see {self.work}")

    def stop(self) -> None:
        for proc in reversed(self.procs):          # workers first (they stop their executors), then the master
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for log in self.logs:
            log.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Java is needed for a Spark standalone cluster (run `make check-java`)")
    c = StandaloneCluster(tmp_path / "spark-cluster")
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _history() -> History:
    h = History()
    h.process("w0/u1").open().sends("a", "b").commit()
    h.process("w0/u2").open().send("c").abort()
    h.process("w0/u3").open().send("d").commit(type="info")
    c = h.process("w1/c1")
    c.receive("a")
    c.open().ack("a").commit()
    return h


@pytest.mark.parametrize("reads", [["a", "b", "d"], ["a", "c", "d"]], ids=["valid", "invalid"])
def test_a_check_on_a_standalone_cluster_gives_the_local_verdict(spark: object, cluster: StandaloneCluster,
                                                                 tmp_path: Path, reads: list[str]) -> None:
    local_run = _history().drain(reads={"t1": reads}).write(tmp_path / "local")
    remote_run = _history().drain(reads={"t1": reads}).write(tmp_path / "remote")
    local = check_run(local_run)
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "check", str(remote_run), "--master", cluster.url],
                          env=_env(cluster.work), capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    remote = json.loads((remote_run / "analysis" / "results.json").read_text())
    assert done.returncode == (0 if local["valid"] is True else 1), done.stderr[-2000:]
    assert remote["checker"]["spark_master"] == cluster.url
    assert remote["valid"] == local["valid"]
    assert remote["anomalies"] == local["anomalies"] and remote["checks"] == local["checks"]
    assert remote["transactions"] == local["transactions"]
    state = _master_state(cluster.web_port)
    assert state is not None and any(app.get("name") == "txnbench-analysis"
                                     for app in state.get("completedapps", []))
