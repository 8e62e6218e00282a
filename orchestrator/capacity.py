"""How much load the harness itself can generate, measured once per host and load shape (bench, sweep).

`python -m orchestrator.capacity SCENARIO [--path P] [--users N] [--seconds S]` measures one
shape by hand. `measure` starts the reference cluster's null broker (`embedded.nullbroker`, a
broker that answers every request at once and stores nothing), runs the real load process
(`workloads.runner`: Locust, the workloads, the client, the history) against it with
atomic-produce transactions of the scenario's shape (users, workers, messages_per_txn,
topics_per_txn, message_size, batching, client path), and saves the committed transactions and
messages per second it reached in the capacity file (workloads/capacity.py), which a later run of
the same shape reads. Why here and not in `workloads`: only a package above both the load and the
cluster may import the two.

`--remote-workers N` measures the distributed path instead: the load process becomes a
Locust master waiting for N remote workers, and one `txnbench worker --processes N` on
127.0.0.1 joins it (histories shipped back as in a real run). On one host this says what
N worker processes add here; on a load host of its own each adds about one process's figure.

Consumers get nothing from a null broker, so only the producing shape is measured;
consume-transform-produce and ack-only iterations cost more client work per
transaction than atomic-produce, and their capacity is lower than this figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.config import RunConfig, WorkloadKind, load_scenario
from harness.entrypoints import python_m
from harness.history import RunClock
from harness.results import RunDir
from harness.txn_paths import TxnPath
from orchestrator.outcome import say
from targets.processes import free_port
from workloads.capacity import find_capacity, save_capacity, shape_of
from workloads.entrypoints import RUNNER, WORKER_HOST
from workloads.entrypoints import (
    python_m as load_argv,  # by name: importing the load patches for gevent
)
from workloads.loadspec import LoadSpec
from workloads.topology import plan


def ensure_capacity(config: RunConfig) -> None:
    """Measure, once per host and load shape, how much load the harness itself can generate.

    The load process of each run copies the figure into its status file, and the
    report puts it next to the measured throughput: a reader can see whether the
    harness, not the cluster, was the bottleneck. Cached in .txnbench/capacity.json.
    """
    seen: set[str] = set()
    for txn_path in config.paths:
        shaped = config.for_path(txn_path)
        client = "v5" if txn_path is TxnPath.V5 else "v4"
        if client in seen or find_capacity(shaped) is not None:
            seen.add(client)
            continue
        seen.add(client)
        say(f"measuring the load generator's capacity against a null broker ({client} client, "
             f"{shaped.load.users} users; once per host and load shape, about 15 s)")
        try:
            result = measure(shaped)
        except Exception as err:   # the benchmark still runs; the report says capacity is absent
            say(f"could not measure the load generator's capacity: {err}")
            continue
        save_capacity(shaped, result)
        say(f"load generator capacity: {result['committed_txn_per_s']:.0f} txn/s, "
             f"{result['msgs_per_s']:.0f} msgs/s at {result.get('cpu_percent')}% of a core")


def capacity_config(config: RunConfig) -> RunConfig:
    """The run's producing shape: atomic-produce, no verifiers (a null broker delivers nothing)."""
    workload = dataclasses.replace(config.workload, kind=WorkloadKind.ATOMIC_PRODUCE, verifiers=0, abort_ratio=0.0,
                                   mix={}, topics=max(config.workload.topics, config.workload.topics_per_txn))
    load = dataclasses.replace(config.load, web_ui=False, rate_per_user=None)
    return dataclasses.replace(config, workload=workload, load=load)


def start_null_broker() -> tuple[subprocess.Popen[str], int]:
    """`python -m embedded.nullbroker --port 0`, which answers every request at once and prints
    `READY <port>` first: the process and its port."""
    import embedded.nullbroker

    proc = subprocess.Popen(python_m(embedded.nullbroker, "--port", "0"), stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"the null broker did not start (it printed {line!r})")
    return proc, int(line.split()[1])


def _end(proc: subprocess.Popen[Any], sig: signal.Signals | None, timeout_s: float) -> None:
    """Send `sig` (None: it ends by itself), wait up to `timeout_s`, and kill it if it is still there."""
    if sig is not None and proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


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


def measure(config: RunConfig, seconds: float = 10.0, warmup_s: float = 3.0) -> dict[str, Any]:
    """Run the load process against a null broker; committed txn/s and msgs/s after warm-up."""
    shaped = capacity_config(config)
    remote = shaped.load.remote_workers
    if remote:
        shaped = dataclasses.replace(shaped, load=dataclasses.replace(shaped.load, master_bind="127.0.0.1",
                                                                      master_port=free_port()))
    broker, port = start_null_broker()
    work = Path(tempfile.mkdtemp(prefix="txnbench-capacity-"))
    run_dir = RunDir(work / "run")
    run_dir.make_folders()
    clock = RunClock.start()
    LoadSpec(run_id="capacity", run_dir=run_dir, txn_path=shaped.path, service_url=f"pulsar://127.0.0.1:{port}",
             admin_url="", config=shaped, topology=plan(shaped, "capacity"),
             max_duration_s=seconds + warmup_s + 60, parent_pid=os.getpid(),
             status_file=run_dir.locust_dir / "status.json").write(run_dir.path / "load-spec.json")
    log = (run_dir.logs_dir / "load.log").open("ab")
    load = subprocess.Popen(load_argv(RUNNER, "--spec", str(run_dir.path / "load-spec.json")),
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env=clock.export(dict(os.environ)), start_new_session=True)
    log.close()
    host: subprocess.Popen[bytes] | None = None
    if remote:
        with (run_dir.logs_dir / "worker-host.log").open("ab") as out:
            host = subprocess.Popen(load_argv(WORKER_HOST, "--master", f"127.0.0.1:{shaped.load.master_port}",
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
        _end(load, signal.SIGTERM, 60)
        if host is not None:
            _end(host, None, 60)
        _end(broker, signal.SIGTERM, 10)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Measure one shape against the null broker, print it, and save it unless `--no-save`."""
    parser = argparse.ArgumentParser(prog="python -m orchestrator.capacity",
                                     description="The load generator's capacity against a null broker.")
    parser.add_argument("scenario", nargs="?", default="atomic-produce")
    parser.add_argument("--path", choices=[p.value for p in TxnPath], default=None, dest="txn_path")
    parser.add_argument("--users", type=int, default=None)
    parser.add_argument("--workers", type=int, default=None, help="Locust worker processes (load.workers)")
    parser.add_argument("--remote-workers", type=int, default=None,
                        help="measure through N remote workers (one `txnbench worker --processes N` on 127.0.0.1)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-save", action="store_true", help="print only; do not update the capacity file")
    args = parser.parse_args(argv)
    config = load_scenario(args.scenario)
    if args.txn_path:
        config = config.for_path(TxnPath(args.txn_path))
    if args.users:
        config = dataclasses.replace(config, load=dataclasses.replace(config.load, users=args.users))
    if args.workers is not None:
        config = dataclasses.replace(config, load=dataclasses.replace(config.load, workers=args.workers))
    if args.remote_workers is not None:
        config = dataclasses.replace(config, load=dataclasses.replace(config.load, remote_workers=args.remote_workers))
    result = measure(config, seconds=args.seconds)
    print(json.dumps({"shape": shape_of(config), "result": result}, indent=2))
    if not args.no_save and not config.load.remote_workers:   # the cache is for local load processes
        print(f"saved to {save_capacity(config, result)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
