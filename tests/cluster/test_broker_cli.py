"""`txnbench cluster up` / `status` / `down` from the command line, with the real brokers.

Acceptance criterion (issue 4): after `down` no process of the cluster is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pulsar

from targets.processes import ProcessState, process_state
from tests.waiting import wait_until


def txnbench(directory: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", "cluster", "--dir", str(directory), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=Path(__file__).resolve().parents[2])


def test_cluster_up_status_down_leaves_no_process_behind(tmp_path: Path) -> None:
    directory = tmp_path / "cli-cluster"
    pids: dict[str, tuple[int, int | None]] = {}
    try:
        up = txnbench(directory, "up", "--brokers", "2", "--set", "txnbenchTxnExtensions=[]",
                      "--set", "metadataStoreSessionTimeoutMillis=3000")
        assert up.returncode == 0, up.stderr[-3000:]
        status = txnbench(directory, "status", "--json")
        assert status.returncode == 0, status.stderr[-2000:]
        info = json.loads(status.stdout)
        state = json.loads((directory / "state.json").read_text())
        pids = {s["name"]: (s["pid"], s["start_time"]) for s in state["services"]}
        assert {p["name"] for p in info["processes"]} == {"proxy", "metadata", "ledger", "broker-0", "broker-1"}
        assert all(p["state"] == "running" for p in info["processes"]), info["processes"]

        client = pulsar.Client(info["service_url"], operation_timeout_seconds=15,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        try:
            consumer = client.subscribe("cli-check", "s", initial_position=pulsar.InitialPosition.Earliest)
            client.create_producer("cli-check").send(b"hello")
            assert consumer.receive(timeout_millis=10_000).data() == b"hello"
        finally:
            client.close()

        down = txnbench(directory, "down", timeout=60)
        assert down.returncode == 0, down.stderr[-2000:]
        assert "stopped 5 process(es)" in down.stdout
        wait_until(lambda: all(process_state(pid, start) == ProcessState.STOPPED for pid, start in pids.values()),
                   10, message="every cluster process is gone")
        after = txnbench(directory, "status", "--json")
        assert after.returncode == 1 and all(p["state"] == "stopped" for p in json.loads(after.stdout)["processes"])
    finally:
        for pid, start in pids.values():   # only if the test failed half-way: stop what it started
            if process_state(pid, start) != ProcessState.STOPPED:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
