"""Micro-benchmark: how much load one client process can generate (`python -m tools.bench.client`).

It starts a null broker (`embedded.nullbroker`, a separate process that answers
every request at once) and measures, for a few seconds each:

* `send`: blocking `Producer.send` from N workers (one round trip per message);
* `send_async+batch`: one worker pipelining `send_async` with batching on;
* `txn`: N workers each looping new_transaction -> 2 transactional sends -> commit
  (5 round trips per transaction: NEW_TXN, ADD_PARTITION, SEND, SEND, END_TXN);

once with plain threads and once with greenlets under gevent's monkey-patching (in a
child process, since patching must come before anything imports `threading`). The
numbers bound what a Locust worker process can drive: if a run's target rate is near
them, the harness, not the broker, is the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

SCENARIOS = ("send", "send_async+batch", "txn")


def _start_null_broker(tc_count: int) -> tuple[subprocess.Popen[str], int]:
    # imported here, not at the top: the gevent child imports this module right after patching
    import embedded.nullbroker
    from harness.entrypoints import python_m

    process = subprocess.Popen(python_m(embedded.nullbroker, "--port", "0", "--tc-count", str(tc_count)),
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"null broker did not start (printed {line!r})")
    return process, int(line.split()[1])


def _run_workers(count: int, body: Any, mode: str) -> None:
    if mode == "gevent":
        import gevent

        gevent.joinall([gevent.spawn(body, i) for i in range(count)])
        return
    import threading

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def measure(url: str, scenario: str, workers: int, seconds: float, mode: str,
            payload_size: int = 100) -> dict[str, Any]:
    """Run one scenario against `url`; returns its counts and rate."""
    from harness.client import BatchingConfig, PulsarClient

    payload = b"x" * payload_size
    counts = [0] * workers
    client = PulsarClient(url, txn_path="v4", operation_timeout_s=30)
    try:
        if scenario == "send":
            producer = client.create_producer(f"bench-send-{os.getpid()}")

            def body(index: int) -> None:
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    producer.send(payload)
                    counts[index] += 1
        elif scenario == "send_async+batch":
            producer = client.create_producer(f"bench-batch-{os.getpid()}",
                                              batching=BatchingConfig(max_messages=500,
                                                                      max_delay_s=0.005))
            workers = 1
            counts = [0]

            def body(index: int) -> None:
                end = time.monotonic() + seconds
                window: list[Any] = []
                while time.monotonic() < end:
                    window.append(producer.send_async(payload))
                    if len(window) >= 2000:
                        for future in window:
                            future.result(30)
                        counts[index] += len(window)
                        window = []
                for future in window:
                    future.result(30)
                counts[index] += len(window)
        elif scenario == "txn":
            producer = client.create_producer(f"bench-txn-{os.getpid()}")
            client.new_transaction().commit()  # discovery outside the measured window

            def body(index: int) -> None:
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    txn = client.new_transaction(timeout_s=60)
                    producer.send(payload, txn=txn)
                    producer.send(payload, txn=txn)
                    txn.commit()
                    counts[index] += 1
        else:
            raise ValueError(f"unknown scenario {scenario!r}; choose from {SCENARIOS}")
        started = time.monotonic()
        _run_workers(workers, body, mode)
        elapsed = time.monotonic() - started
    finally:
        client.close()
    total = sum(counts)
    unit = "txn/s" if scenario == "txn" else "msg/s"
    return {"scenario": scenario, "mode": mode, "workers": workers, "seconds": round(elapsed, 2),
            "count": total, "rate": round(total / elapsed, 1), "unit": unit}


def _child(url: str, workers: int, seconds: float, scenarios: list[str]) -> list[dict[str, Any]]:
    # Patch before anything (even the harness.client package) imports threading or socket.
    argv = ["--url", url, "--workers", str(workers), "--seconds", str(seconds), "--mode",
            "gevent", "--json", "--scenarios", ",".join(scenarios)]
    script = ("from gevent import monkey; monkey.patch_all()\n"
              "import sys\nfrom tools.bench.client import main\n"
              f"sys.exit(main({argv!r}))\n")
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True, text=True, timeout=60 + 10 * seconds * len(scenarios), check=True)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.client",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each scenario")
    parser.add_argument("--workers", type=int, default=8, help="threads or greenlets")
    parser.add_argument("--mode", choices=("both", "threads", "gevent"), default="both")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--url", help="use this broker instead of starting a null broker")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    if args.mode == "gevent" and args.url:
        from gevent import monkey

        if not monkey.is_module_patched("socket"):
            monkey.patch_all()
        print(json.dumps([measure(args.url, s, args.workers, args.seconds, "gevent")
                          for s in scenarios]))
        return 0
    broker = None
    url = args.url
    if url is None:
        broker, port = _start_null_broker(tc_count=4)
        url = f"pulsar://127.0.0.1:{port}"
    results = []
    try:
        if args.mode in ("both", "threads"):
            results += [measure(url, s, args.workers, args.seconds, "threads") for s in scenarios]
        if args.mode in ("both", "gevent"):
            results += _child(url, args.workers, args.seconds, scenarios)
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(10)
    if args.json:
        print(json.dumps(results))
    else:
        print(f"{'scenario':<18} {'mode':<8} {'workers':>7} {'rate':>10}  unit")
        for row in results:
            print(f"{row['scenario']:<18} {row['mode']:<8} {row['workers']:>7} "
                  f"{row['rate']:>10.1f}  {row['unit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
