"""`txnbench check --master spark://HOST:PORT` against a real Spark standalone cluster.

A master and two workers are started from the PySpark installation on
127.0.0.1 (`spark-class org.apache.spark.deploy.master.Master` and
`...deploy.worker.Worker`), a history is checked through them by the command
line in a subprocess (the test session's own local Spark stays as it is), and
the verdict must equal the local one. Every process is stopped by its pid
(tools/spark_cluster.py, shared with the scale-out benchmark).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis.check import check_run
from tests.spark.dsl import History
from tools.spark_cluster import StandaloneCluster, master_state

pytestmark = pytest.mark.slow

CHECK_TIMEOUT_S = 600.0


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
                          env=cluster.env(), capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    remote = json.loads((remote_run / "analysis" / "results.json").read_text())
    assert done.returncode == (0 if local["valid"] is True else 1), done.stderr[-2000:]
    assert remote["checker"]["spark_master"] == cluster.url
    assert remote["valid"] == local["valid"]
    assert remote["anomalies"] == local["anomalies"] and remote["checks"] == local["checks"]
    assert remote["transactions"] == local["transactions"]
    state = master_state(cluster.web_port)
    assert state is not None and any(app.get("name") == "txnbench-analysis"
                                     for app in state.get("completedapps", []))
