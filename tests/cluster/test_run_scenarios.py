"""`txnbench run` end to end on the embedded cluster: every workload scenario, the external
target, and Ctrl-C in the middle of a run.

Each run is the real command line in a subprocess: cluster up, setup, the load process,
drain, analysis, teardown. The shipped scenarios are shortened (phases of seconds,
shorter transaction timeouts so the drain's settling is quick) but keep their workload.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from harness.config import SCENARIO_DIR, available_scenarios, load_scenario
from harness.history.reader import read_history_dir
from tests.waiting import wait_until

TXNBENCH = [sys.executable, "-m", "orchestrator.cli"]
RUN_TIMEOUT_S = 420
#: past a run's own bound, so a slow run fails with its stderr, not with pytest-timeout's stack
#: (its default 300 s cut the atomic-produce run short on a loaded machine, 2026-11-29)
pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)


def short_scenario(tmp: Path, name: str, *, steady_s: float = 6, path: str = "v4",
                   workload: dict[str, Any] | None = None, cold_reads: str = "auto") -> Path:
    data = yaml.safe_load((SCENARIO_DIR / f"{name}.yaml").read_text())
    data["name"] = f"{name}-short"
    data["path"] = path
    phases = {"warmup_s": 2, "steady_s": steady_s, "recovery_s": 2, "drain_timeout_s": 90, "cold_reads": cold_reads}
    faults_s = data.get("phases", {}).get("faults_s")
    if faults_s:
        # A scenario with faults is refused without its faults phase (`--duration` sets its length
        # after the file is validated): the slow real-Pulsar coverage test's failover was.
        phases["faults_s"] = faults_s
    data["phases"] = phases
    data["load"] = {**data.get("load", {}), "users": 6, "spawn_rate": 100}
    data["workload"] = {**data["workload"], "txn_timeout_s": 10, "op_timeout_s": 10, **(workload or {})}
    data.pop("paths", None)
    file = tmp / f"{name}.yaml"
    file.write_text(yaml.safe_dump(data))
    return file


@pytest.mark.parametrize("name", available_scenarios())
def test_every_scenario_shortened_is_still_a_valid_scenario(tmp_path: Path, name: str) -> None:
    """The run tests (and the real-Pulsar ones) start from these shortened files. When `txnbench run`
    refuses one, those tests fail only minutes into a cluster run (the slow coverage test's failover
    did, in the nightly); this test fails at once."""
    config = load_scenario(str(short_scenario(tmp_path, name)))
    assert config.name == f"{name}-short" and config.phases.warmup_s == 2
    if config.faults.enabled:
        assert config.phases.faults_s > 0


def txnbench(*args: str, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT_S,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TXNBENCH, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd or Path.cwd())


def run_folder(done: subprocess.CompletedProcess[str]) -> Path:
    lines = done.stdout.strip().splitlines()
    assert lines, f"no run folder printed; stderr:\n{done.stderr[-4000:]}"
    return Path(lines[-1])


def processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and text in " ".join(proc.info["cmdline"] or ()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def assert_no_process_left(run_dir: Path) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    pids = [s["pid"] for s in (manifest.get("cluster") or {}).get("services", []) if s.get("pid")]

    def all_gone() -> bool:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        return not alive and not processes_mentioning(str(run_dir))

    wait_until(all_gone, timeout_s=30, message=f"every process of {run_dir.name} gone")


def assert_valid_run(done: subprocess.CompletedProcess[str]) -> tuple[Path, list[dict[str, Any]]]:
    run_dir = run_folder(done)
    detail = f"exit {done.returncode}; stderr tail:\n{done.stderr[-6000:]}"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", detail
    assert manifest["verdict"] == "valid", detail + "\n" + (run_dir / "analysis" / "results.json").read_text()[:4000]
    assert done.returncode == 0, detail
    ops, _ = read_history_dir(run_dir / "history")
    assert any(op["f"] == "phase" and op["extra"]["name"] == "drain-complete" for op in ops)
    commits = [op for op in ops if op["f"] == "txn-commit" and op["type"] == "ok"]
    assert len(commits) >= 10, detail
    status = json.loads((run_dir / "locust" / "status.json").read_text())
    assert status["state"] == "stopped" and status["committed_txns"] == len(commits)
    assert (run_dir / "locust" / "locust_stats.csv").is_file()
    assert_no_process_left(run_dir)
    return run_dir, ops


@pytest.mark.parametrize("name", [
    "atomic-produce",
    pytest.param("consume-transform-produce", marks=pytest.mark.slow),
    # ack-only once was a strict xfail (the embedded broker redelivered a position another transaction's
    # ack had committed); the broker skips such positions since f5bcc4d, and the run is valid (2026-11-29)
    pytest.param("ack-only", marks=pytest.mark.slow),
    pytest.param("mixed", marks=pytest.mark.slow),
])
def test_each_workload_scenario_runs_to_a_valid_verdict(tmp_path: Path, name: str) -> None:
    # atomic-produce (the one not marked slow) also proves cold reads: every broker restarted
    cold = "restart" if name == "atomic-produce" else "auto"
    done = txnbench("run", str(short_scenario(tmp_path, name, cold_reads=cold)),
                    "--results", str(tmp_path / "results"))
    run_dir, ops = assert_valid_run(done)
    if cold == "restart":
        assert_cold_reads(run_dir, ops, "restart", done.stderr)
    status = json.loads((run_dir / "locust" / "status.json").read_text())
    assert status["processes"] == 1 and status["host_cpus"] >= 1
    assert len(status["cpu_samples"]) >= 5 and status["cpu_samples"][-1][1] > status["cpu_samples"][0][1]
    perf = json.loads((run_dir / "analysis" / "perf.json").read_text())
    assert "load_generator" in perf
    # v4 runs on a real ZooKeeper by default (Pulsar 4.x); the manifest and report say so
    store = json.loads((run_dir / "manifest.json").read_text())["metadata_store"]
    assert store["kind"] == "zookeeper" and store["label"].startswith("ZooKeeper 3.")
    assert perf["metadata_store"] == store
    assert f"metadata store {store['label']}" in (run_dir / "report.md").read_text()
    sends = [op for op in ops if op["f"] == "send" and op["type"] == "ok"]
    acks = [op for op in ops if op["f"] == "ack" and op["type"] == "ok" and op["txn"]]
    if name in ("consume-transform-produce", "mixed"):
        assert any(op["inputs"] for op in sends), "no consume-transform-produce output"
    if name in ("ack-only", "consume-transform-produce", "mixed"):
        assert acks, "no transactional ack"
    assert any(op["f"] == "receive" and op["writer"] == "w0" for op in ops), "the load received nothing"


def test_inputs_fed_in_transactions_reach_the_consumers_only_once_committed(tmp_path: Path) -> None:
    """workload.feed_txn_ratio: the consume-transform-produce inputs are written in the feeders' own
    transactions, half of them aborted, so the input subscriptions dispatch transactional data. The run
    is valid, and no value of an aborted feed was given to a consumer."""
    file = short_scenario(tmp_path, "consume-transform-produce",
                          workload={"feed_txn_ratio": 0.5, "feed_batch": 2, "abort_ratio": 0.5})
    done = txnbench("run", str(file), "--results", str(tmp_path / "results"))
    _, ops = assert_valid_run(done)
    by_txn: dict[str, list[dict[str, Any]]] = {}
    for op in ops:
        if op["txn"] and op["f"] in ("send", "txn-commit", "txn-abort"):
            by_txn.setdefault(op["txn"], []).append(op)

    def fed(end: str) -> set[str]:
        """Values the feeders' transactions that ended with `end` (ok) sent: only inputs' topics."""
        return {op["value"] for txn_ops in by_txn.values()
                if any(o["f"] == end and o["type"] == "ok" for o in txn_ops)
                and all("-ctp-in-" in o["topic"] for o in txn_ops if o["f"] == "send")
                for op in txn_ops if op["f"] == "send" and op["type"] == "ok"}

    aborted, committed = fed("txn-abort"), fed("txn-commit")
    assert aborted and committed, f"aborted feeds {len(aborted)}, committed {len(committed)}"
    received = {op["value"] for op in ops if op["f"] == "receive"}
    assert not received & aborted
    assert received & committed, "no input fed in a committed transaction was received"


def assert_cold_reads(run_dir: Path, ops: list[dict[str, Any]], mode: str, stderr: str) -> None:
    """The manifest says how the final reads were made cold, and every subscription's start is
    in the history (what the undelivered check holds the subscriptions to)."""
    cold = json.loads((run_dir / "manifest.json").read_text())["cold_reads"]
    assert cold["mode"] == mode and cold["cold"] is True and cold["seconds"] > 0, cold
    if mode == "restart":
        assert cold["services"] == ["broker-0", "broker-1"]
        assert "cold reads: restart done" in stderr
    else:
        assert cold["topics"] and all(t.startswith("topic://") for t in cold["topics"])
    starts = [op for op in ops if op["f"] == "phase" and op["extra"]["name"] == "subscription-start"]
    assert starts and all(op["topic"] and op["subscription"] for op in starts)
    # before the restart the drain read every topic on the live system too (writer drain-live),
    # and the checker judged both reads (the run's verdict is valid: they agree)
    live = json.loads((run_dir / "manifest.json").read_text())["live_reads"]
    assert live["complete"] is True and live["topics"], live
    live_reads = [op for op in ops if op["f"] == "read" and op["writer"] == "drain-live"]
    assert live_reads and all(op["process"].startswith("drain-live/r") for op in live_reads)
    complete = [op for op in ops if op["f"] == "phase" and op["extra"]["name"] == "drain-complete"]
    assert complete and sorted(complete[-1]["extra"]["live_topics"]) == sorted(live["topics"])
    cold_values = {op["value"] for op in ops if op["f"] == "read" and op["writer"] == "drain"}
    assert {op["value"] for op in live_reads} == cold_values


@pytest.mark.slow
def test_cold_reads_by_unloading_every_topic_on_v5(tmp_path: Path) -> None:
    file = short_scenario(tmp_path, "atomic-produce", steady_s=4, path="v5", cold_reads="unload")
    done = txnbench("run", str(file), "--results", str(tmp_path / "results"))
    run_dir, ops = assert_valid_run(done)
    assert_cold_reads(run_dir, ops, "unload", done.stderr)


@pytest.mark.slow
def test_atomic_produce_on_v5_runs_to_a_valid_verdict(tmp_path: Path) -> None:
    done = txnbench("run", str(short_scenario(tmp_path, "atomic-produce", path="v5")),
                    "--results", str(tmp_path / "results"))
    _, ops = assert_valid_run(done)
    assert all(op["topic"].startswith("topic://") for op in ops if op["f"] == "send")


@pytest.mark.slow   # a second full run through the command line (make test's 15 minutes); nightly runs it
def test_external_target_against_a_running_cluster_leaves_it_running(tmp_path: Path) -> None:
    env = {"TXNBENCH_CLUSTER_DIR": str(tmp_path / "cluster")}
    up = txnbench("cluster", "up", "--path", "v4", env=env, timeout=180)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        status = json.loads(txnbench("cluster", "status", "--json", env=env, timeout=60).stdout)
        done = txnbench("run", str(short_scenario(tmp_path, "atomic-produce")), "--target", "external",
                        "--service-url", status["service_url"], "--admin-url", status["admin_url"],
                        "--results", str(tmp_path / "results"), env=env)
        run_dir = run_folder(done)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert (manifest["status"], manifest["verdict"], done.returncode) == ("complete", "valid", 0), \
            done.stderr[-4000:]
        after = txnbench("cluster", "status", "--json", env=env, timeout=60)
        assert after.returncode == 0, "the external cluster was stopped by the run"
        states = {p["name"]: p["state"] for p in json.loads(after.stdout)["processes"]}
        assert states and all(state == "running" for state in states.values()), states
        assert not processes_mentioning(str(run_dir))       # the run's own load process is gone
    finally:
        txnbench("cluster", "down", env=env, timeout=120)


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_the_middle_leaves_no_process_and_a_readable_interrupted_history(tmp_path: Path) -> None:
    scenario = short_scenario(tmp_path, "atomic-produce", steady_s=120)
    # A shell that starts a job in the background (`make test &`, nohup under setsid) makes its
    # children ignore SIGINT, and Python keeps an ignored SIGINT ignored: the run, as a user's
    # terminal would start it, gets SIGINT's default back before it starts.
    proc = subprocess.Popen([*TXNBENCH, "run", str(scenario), "--results", str(tmp_path / "results")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_in_a_terminal)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()                       # "run <id>: ... -> <folder>"
        run_dir = Path(first.rsplit("-> ", 1)[1].strip())
        status_file = run_dir / "locust" / "status.json"

        def committing() -> bool:
            try:
                return json.loads(status_file.read_text()).get("committed_txns", 0) >= 20
            except (OSError, ValueError):
                return False

        wait_until(committing, timeout_s=180, interval_s=0.5, message="the load committing")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 130, err[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert_no_process_left(run_dir)
    ops, scan = read_history_dir(run_dir / "history")
    assert {"run", "w0"} <= {op["writer"] for op in ops}
    assert any(op["f"] == "txn-commit" and op["type"] == "ok" for op in ops)
    assert not scan.torn_tails                               # the load stopped gracefully
    check = txnbench("check", str(run_dir), timeout=300)
    assert check.returncode == 2, check.stderr[-3000:]      # unknown: no drain, but the history was read
    results = json.loads((run_dir / "analysis" / "results.json").read_text())
    assert results["valid"] == "unknown"

