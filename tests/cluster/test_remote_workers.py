"""Remote load workers as separate processes on 127.0.0.1, each host in its own folder.

* against the null broker (no cluster): a master load process waiting for two remote
  workers, two `txnbench worker` hosts, and a third started for another scenario that
  must be refused; one host's worker is killed with SIGKILL mid-run; every gathered file
  must equal the host's own byte for byte, the killed one included, and the master must
  record whom it lost;
* a master that waits for a worker nobody starts fails within load.remote_wait_s, naming
  what is missing;
* (slow) `txnbench run` on the embedded cluster with two remote workers: the gathered
  history passes the checker; and the same with one worker killed mid-run: the history is
  readable and the verdict names the lost worker.
"""

from __future__ import annotations

import dataclasses
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

from harness.config import RunConfig, load_scenario
from harness.history import RunClock
from harness.history.reader import read_history_dir
from harness.results import RunDir, write_json_atomic
from orchestrator.capacity import capacity_config, start_null_broker
from targets.processes import free_port
from tests.cluster.test_run_scenarios import short_scenario
from tests.waiting import wait_until
from workloads.topology import plan

TXNBENCH = [sys.executable, "-m", "orchestrator.cli"]
REPO = Path(__file__).resolve().parents[2]


def start_host(folder: Path, port: int, processes: int = 1, *extra: str) -> subprocess.Popen[bytes]:
    """A `txnbench worker` in its own folder, standing in for another machine."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "host.log").open("wb") as out:
        return subprocess.Popen([*TXNBENCH, "worker", "--master", f"127.0.0.1:{port}", "--processes", str(processes),
                                 "--dir", "work", "--wait", "90", *extra],
                                stdout=out, stderr=subprocess.STDOUT, cwd=folder,
                                env={**os.environ, "PYTHONPATH": str(REPO)})


def stop(proc: subprocess.Popen[Any], timeout_s: float = 90) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise


class NullBrokerMaster:
    """A master load process against the null broker, as orchestrator/run.py would start it."""

    def __init__(self, tmp: Path, config: RunConfig) -> None:
        self.broker, broker_port = start_null_broker()
        self.run_dir = RunDir(tmp / "run")
        self.run_dir.make_folders()
        self.clock = RunClock.start()
        spec = {"run_id": "remote", "run_dir": str(self.run_dir.path), "path": config.path.value,
                "service_url": f"pulsar://127.0.0.1:{broker_port}", "admin_url": "", "config": config.to_dict(),
                "topology": plan(config, "remote").to_dict(), "max_duration_s": 120, "parent_pid": os.getpid(),
                "status_file": str(self.run_dir.locust_dir / "status.json")}
        write_json_atomic(self.run_dir.path / "load-spec.json", spec)
        with (self.run_dir.logs_dir / "load.log").open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "workloads.runner", "--spec",
                                          str(self.run_dir.path / "load-spec.json")],
                                         stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                         env=self.clock.export(dict(os.environ)))

    def status(self) -> dict[str, Any]:
        path = self.run_dir.locust_dir / "status.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def close(self) -> None:
        for proc in (self.proc, self.broker):
            if proc.poll() is None:
                stop(proc)


def remote_config(remote_workers: int, port: int, **load: Any) -> RunConfig:
    config = capacity_config(load_scenario("atomic-produce"))
    return dataclasses.replace(config, load=dataclasses.replace(
        config.load, remote_workers=remote_workers, master_port=port, users=4, spawn_rate=100, **load))


@pytest.mark.slow
def test_two_hosts_join_a_third_is_refused_a_killed_worker_is_recorded_and_every_file_arrives(tmp_path: Path) -> None:
    port = free_port()
    master = NullBrokerMaster(tmp_path, remote_config(2, port))
    hosts = [start_host(tmp_path / f"host{i}", port) for i in range(2)]
    other = short_scenario(tmp_path, "consume-transform-produce")
    stranger = start_host(tmp_path / "host-other", port, 1, "--scenario", str(other))
    try:
        assert stranger.wait(timeout=90) == 2
        said = (tmp_path / "host-other" / "host.log").read_text()
        assert "the master refused this host" in said and "master runs 'atomic-produce'" in said

        def both_working() -> bool:
            status = master.status()
            workers = {w["writer"]: w for w in status.get("workers") or []}
            return set(workers) == {"r0", "r1"} and all(w["committed_txns"] > 0 for w in workers.values())

        wait_until(both_working, timeout_s=90, interval_s=0.3, message="both remote workers committing")
        victim_file = next((tmp_path / "host1" / "work").glob("remote-r*/history/r*.jsonl"))
        victim = victim_file.stem
        pid = next(p.pid for p in psutil.Process(hosts[1].pid).children()
                   if "--worker-name" in p.cmdline() and victim in p.cmdline())
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: "lost" in (tmp_path / "host1" / "host.log").read_text(), timeout_s=30,
                   message="the host reports its killed worker")
        assert master.proc.poll() is None, "losing one remote worker must not end the run"
        assert stop(master.proc) == 0
        assert [h.wait(timeout=90) for h in hosts] == [0, 1]      # the host that lost a worker says so
    finally:
        for proc in [*hosts, stranger]:
            if proc.poll() is None:
                stop(proc)
        master.close()

    workers = json.loads((master.run_dir.locust_dir / "workers.json").read_text())
    assert [w["writer"] for w in workers["writers"]] == ["r0", "r1"]
    assert all(w["complete"] for w in workers["writers"])
    assert [(lost["writer"], lost["complete"]) for lost in workers["lost"]] == [(victim, True)]
    assert "exited with code -9 mid-run" in workers["lost"][0]["reason"]
    assert len(workers["refused"]) == 1
    for host in workers["hosts"]:     # one machine: the measured offset must put the base within its bound
        start = host["clock_start"]
        assert abs(start["base_ns"] - master.clock.base_ns) <= start["uncertainty_ns"]
        assert host["clock_end"] is not None
    for i in range(2):
        local = next((tmp_path / f"host{i}" / "work").glob("remote-r*/history/r*.jsonl"))
        assert (master.run_dir.history_dir / local.name).read_bytes() == local.read_bytes()
    history, _ = read_history_dir(master.run_dir.history_dir)
    assert {op["writer"] for op in history} == {"r0", "r1"}
    assert all(op["process"].startswith(op["writer"] + "/") for op in history)


def test_a_master_waiting_for_a_worker_nobody_starts_fails_naming_what_is_missing(tmp_path: Path) -> None:
    master = NullBrokerMaster(tmp_path, remote_config(1, free_port(), remote_wait_s=2))
    try:
        assert master.proc.wait(timeout=60) == 2
    finally:
        master.close()
    said = (master.run_dir.logs_dir / "load.log").read_text()
    assert "waited 2s (load.remote_wait_s) for 1 remote load worker(s) on 127.0.0.1:" in said
    assert "0 joined (none joined), 0 connected to Locust, 1 missing" in said
    assert "txnbench worker --master 127.0.0.1:" in said


def test_a_worker_with_no_master_or_a_bad_address_exits_2_saying_so(tmp_path: Path) -> None:
    nobody = subprocess.run([*TXNBENCH, "worker", "--master", f"127.0.0.1:{free_port()}", "--wait", "1",
                             "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert nobody.returncode == 2 and "no txnbench master answered on 127.0.0.1:" in nobody.stderr
    bad = subprocess.run([*TXNBENCH, "worker", "--master", "loadmaster", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode == 2 and "expected HOST:PORT" in bad.stderr


# ---- the embedded cluster, end to end ---------------------------------------------------------------


def remote_run(tmp_path: Path, *, kill_one: bool) -> tuple[Path, dict[str, Any], list[int]]:
    scenario = short_scenario(tmp_path, "atomic-produce", steady_s=8)
    data = yaml.safe_load(scenario.read_text())
    data["load"] = {**data["load"], "remote_workers": 2, "remote_wait_s": 120}
    scenario.write_text(yaml.safe_dump(data))
    port = free_port()
    results = tmp_path / "results"
    with (tmp_path / "run.out").open("wb") as out, (tmp_path / "run.err").open("wb") as err:
        run = subprocess.Popen([*TXNBENCH, "run", str(scenario), "--master", f"127.0.0.1:{port}",
                                "--results", str(results)], stdout=out, stderr=err, cwd=REPO)
    hosts = [start_host(tmp_path / f"host{i}", port) for i in range(2)]
    try:
        if kill_one:
            def worker_pid() -> int | None:   # mid-run: once its history has some transactions in it
                files = list((tmp_path / "host1" / "work").glob("*/history/r*.jsonl"))
                if not files or files[0].read_bytes().count(b'"txn-commit"') < 20:
                    return None
                kids = [p for p in psutil.Process(hosts[1].pid).children() if "--worker-name" in p.cmdline()]
                return kids[0].pid if kids else None

            pid = wait_until(worker_pid, timeout_s=240, interval_s=0.3, message="transactions on host1")
            assert pid is not None     # wait_until returns only a truthy pid
            os.kill(pid, signal.SIGKILL)
        run.wait(timeout=420)
        codes = [h.wait(timeout=120) for h in hosts]
    finally:
        for proc in [run, *hosts]:
            if proc.poll() is None:
                stop(proc)
    run_dir = Path((tmp_path / "run.out").read_text().strip().splitlines()[-1])
    results_json = json.loads((run_dir / "analysis" / "results.json").read_text())
    return run_dir, results_json, codes


@pytest.mark.slow
def test_a_run_with_two_remote_workers_gathers_one_history_that_passes_the_checker(tmp_path: Path) -> None:
    run_dir, results, codes = remote_run(tmp_path, kill_one=False)
    assert codes == [0, 0]
    assert results["valid"] is True, results
    files = sorted(p.name for p in (run_dir / "history").glob("*.jsonl"))
    assert files == ["drain.jsonl", "r0.jsonl", "r1.jsonl", "run.jsonl"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [w["complete"] for w in manifest["load_workers"]["writers"]] == [True, True]
    ops, _ = read_history_dir(run_dir / "history")
    for writer in ("r0", "r1"):   # the shape a local load process records: its own writer, indexes 0, 1, 2 ...
        mine = [op for op in ops if op["writer"] == writer]
        assert mine and [op["index"] for op in mine] == list(range(len(mine)))
        assert {op["f"] for op in mine} >= {"txn-open", "send", "txn-commit"}
        assert all(op["process"].startswith(writer + "/") for op in mine)


@pytest.mark.slow
def test_a_remote_worker_killed_mid_run_leaves_a_readable_history_and_a_verdict_that_names_it(tmp_path: Path) -> None:
    run_dir, results, codes = remote_run(tmp_path, kill_one=True)
    assert codes == [0, 1]
    assert results["valid"] is True, results     # a client that dies leaves the cluster atomic
    lost = results.get("lost_workers") or []
    assert len(lost) == 1 and "was lost mid-run" in lost[0] and "to its last line" in lost[0], results
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [entry["complete"] for entry in manifest["load_workers"]["lost"]] == [True]
