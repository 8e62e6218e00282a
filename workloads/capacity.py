"""How much load the harness itself can generate: the load process against a null broker.

`measure` (run by `python -m orchestrator.capacity SCENARIO [--path P] [--seconds S]`)
starts the null broker it is given (`embedded.nullbroker`, a broker that answers every
request at once and stores nothing: the caller, above both packages, passes its command
in, since the load does not import the cluster), runs the real load process (`workloads.runner`: Locust, the workloads, the
client, the history) against it with atomic-produce transactions of the scenario's
shape (users, workers, messages_per_txn, topics_per_txn, message_size, batching,
client path), and records the committed transactions and messages per second it
reached in the capacity file (`$TXNBENCH_CAPACITY_FILE`, default
`.txnbench/capacity.json`). A later run of the same shape on the same host copies that
figure into its status file (`capacity`), so the report can say how close the run came
to what the harness could have driven.

`--remote-workers N` measures the distributed path instead: the load process becomes a
Locust master waiting for N remote workers, and one `txnbench worker --processes N` on
127.0.0.1 joins it (histories shipped back as in a real run). On one host this says what
N worker processes add here; on a load host of its own each adds about one process's figure.

Consumers get nothing from a null broker, so only the producing shape is measured;
consume-transform-produce and ack-only iterations cost more client work per
transaction than atomic-produce, and their capacity is lower than this figure.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.config import RunConfig, WorkloadKind
from harness.history import RunClock
from harness.results import RunDir, write_json_atomic
from harness.txn_paths import TxnPath
from workloads.entrypoints import RUNNER, WORKER_HOST, python_m
from workloads.loadspec import LoadSpec

CAPACITY_ENV = "TXNBENCH_CAPACITY_FILE"
DEFAULT_FILE = Path(".txnbench") / "capacity.json"
AGAINST = "null broker (embedded.nullbroker)"


def capacity_file() -> Path:
    return Path(os.environ.get(CAPACITY_ENV) or DEFAULT_FILE)


def shape_of(config: RunConfig) -> dict[str, Any]:
    """What the capacity of a run depends on (the lookup key)."""
    w = config.workload
    return {"host": platform.node(), "python": platform.python_version(),
            "client_path": "v5" if config.path is TxnPath.V5 else "v4",
            "users": config.load.users, "workers": config.load.workers,
            "messages_per_txn": w.messages_per_txn, "topics_per_txn": w.topics_per_txn,
            "message_size": w.message_size, "batching": w.batching}


def _read_entries(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = data.get("entries") if isinstance(data, dict) else None
    return [e for e in entries or [] if isinstance(e, dict)]


def find_capacity(config: RunConfig, path: Path | None = None) -> dict[str, Any] | None:
    """The newest measurement of this run's shape on this host, as the status file's `capacity`."""
    wanted = shape_of(config)
    matches = [e for e in _read_entries(path or capacity_file()) if e.get("shape") == wanted]
    if not matches:
        return None
    best = max(matches, key=lambda e: str(e.get("measured_at", "")))
    result = best.get("result") or {}
    return {"committed_txn_per_s": result.get("committed_txn_per_s"), "msgs_per_s": result.get("msgs_per_s"),
            "cpu_percent": result.get("cpu_percent"), "against": AGAINST, "users": wanted["users"],
            "workers": wanted["workers"], "duration_s": result.get("duration_s"),
            "measured_at": best.get("measured_at"), "workload": "atomic-produce"}


def with_remote_workers(capacity: Mapping[str, Any] | None, config: RunConfig) -> dict[str, Any] | None:
    """A run with remote workers: this host's one-process figure times the load processes.

    Remote hosts are not measured from here; each Locust worker on a load machine of its own
    generates about what one process does here (README, "Load from many machines"), so the
    report's utilization holds the run against that sum and says so.
    """
    if capacity is None or not config.load.remote_workers:
        return dict(capacity) if capacity is not None else None
    processes = config.load.processes
    scaled = dict(capacity)
    for key in ("committed_txn_per_s", "msgs_per_s"):
        if isinstance(capacity.get(key), int | float):
            scaled[key] = round(float(capacity[key]) * processes, 1)
    scaled["against"] = (f"{capacity.get('against', AGAINST)}, one process here x {processes} load processes "
                         f"({config.load.remote_workers} remote, not measured from this host)")
    scaled["processes"] = processes
    return scaled


def save_capacity(config: RunConfig, result: Mapping[str, Any], path: Path | None = None) -> Path:
    target = path or capacity_file()
    entries = [e for e in _read_entries(target) if e.get("shape") != shape_of(config)]
    entries.append({"shape": shape_of(config), "result": dict(result),
                    "measured_at": datetime.now(UTC).isoformat()})
    write_json_atomic(target, {"entries": entries})
    return target


def capacity_config(config: RunConfig) -> RunConfig:
    """The run's producing shape: atomic-produce, no verifiers (a null broker delivers nothing)."""
    workload = dataclasses.replace(config.workload, kind=WorkloadKind.ATOMIC_PRODUCE, verifiers=0, abort_ratio=0.0,
                                   mix={}, topics=max(config.workload.topics, config.workload.topics_per_txn))
    load = dataclasses.replace(config.load, web_ui=False, rate_per_user=None)
    return dataclasses.replace(config, workload=workload, load=load)


def _start_null_broker(command: Sequence[str]) -> tuple[subprocess.Popen[str], int]:
    """Start `command`, a null broker that prints `READY <port>` first; the process and its port."""
    proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"the null broker did not start (it printed {line!r})")
    return proc, int(line.split()[1])


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_users(status_path: Path, load: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Until the load process runs its users (remote workers take a while to join), bounded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and load.poll() is None:
        status = _read_status(status_path)
        if status and status.get("state") == "running" and status.get("users"):
            return
        time.sleep(0.2)


def _read_status(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def measure(config: RunConfig, null_broker: Sequence[str], seconds: float = 10.0,
            warmup_s: float = 3.0) -> dict[str, Any]:
    """Run the load process against a null broker; committed txn/s and msgs/s after warm-up.

    `null_broker` is the command of the null broker (`embedded.nullbroker --port 0`): the
    caller names it, because the load package does not import the reference cluster."""
    from workloads.topology import plan

    shaped = capacity_config(config)
    remote = shaped.load.remote_workers
    if remote:
        shaped = dataclasses.replace(shaped, load=dataclasses.replace(shaped.load, master_bind="127.0.0.1",
                                                                      master_port=_free_port()))
    broker, port = _start_null_broker(null_broker)
    work = Path(tempfile.mkdtemp(prefix="txnbench-capacity-"))
    run_dir = RunDir(work / "run")
    run_dir.make_folders()
    clock = RunClock.start()
    LoadSpec(run_id="capacity", run_dir=run_dir, txn_path=shaped.path, service_url=f"pulsar://127.0.0.1:{port}",
             admin_url="", config=shaped, topology=plan(shaped, "capacity"),
             max_duration_s=seconds + warmup_s + 60, parent_pid=os.getpid(),
             status_file=run_dir.locust_dir / "status.json").write(run_dir.path / "load-spec.json")
    log = (run_dir.logs_dir / "load.log").open("ab")
    load = subprocess.Popen(python_m(RUNNER, "--spec", str(run_dir.path / "load-spec.json")),
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env=clock.export(dict(os.environ)), start_new_session=True)
    log.close()
    host: subprocess.Popen[bytes] | None = None
    if remote:
        with (run_dir.logs_dir / "worker-host.log").open("ab") as out:
            host = subprocess.Popen(python_m(WORKER_HOST, "--master", f"127.0.0.1:{shaped.load.master_port}",
                                             "--processes", str(remote), "--dir", str(work / "host"),
                                             "--wait", "60"),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    status_path = run_dir.locust_dir / "status.json"
    try:
        _wait_users(status_path, load, timeout_s=120.0)
        time.sleep(warmup_s)
        first = _read_status(status_path)
        time.sleep(seconds)
        last = _read_status(status_path)
        if load.poll() is not None or first is None or last is None:
            tail = (run_dir.logs_dir / "load.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the load process did not run against the null broker:\n{tail}")
        span = (last["time_ns"] - first["time_ns"]) / 1e9
        cpu_s = (last["cpu_samples"][-1][1] - first["cpu_samples"][-1][1]) if last.get("cpu_samples") else None
        return {"committed_txn_per_s": round((last["committed_txns"] - first["committed_txns"]) / span, 1),
                "msgs_per_s": round((last["messages"] - first["messages"]) / span, 1),
                "cpu_percent": round(100.0 * cpu_s / span, 1) if cpu_s is not None else None,
                "errors": last["errors"], "duration_s": round(span, 2), "users": last["users"]}
    finally:
        if load.poll() is None:
            load.send_signal(signal.SIGTERM)
            try:
                load.wait(timeout=60)
            except subprocess.TimeoutExpired:
                load.kill()
                load.wait(timeout=10)
        if host is not None:
            try:
                host.wait(timeout=60)
            except subprocess.TimeoutExpired:
                host.kill()
                host.wait(timeout=10)
        broker.terminate()
        try:
            broker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
