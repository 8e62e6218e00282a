"""Micro-benchmark: how much load one client process can generate (`python -m tools.bench.client`).

It starts a null broker (`embedded.nullbroker`, a separate process that answers
every request at once) and measures, for a few seconds each:

* `send`: blocking `Producer.send` from N workers (one round trip per message);
* `send_async+batch`: one worker pipelining `send_async` with batching on;
* `txn`: N workers each looping new_transaction -> 2 transactional sends -> commit
  (5 round trips per transaction: NEW_TXN, ADD_PARTITION, SEND, SEND, END_TXN);
* `txn-pipelined`: pulsar-perf's v4 loop (`PerformanceTransaction`): each worker waits only
  for new_transaction, sends 2 unkeyed 1024-byte messages to each of 2 topics without
  waiting (batching as Java's defaults), fires the commit and opens the next; the rate of
  committed transactions and the mean wait for an open. Against a real cluster (`--url`, `--listener`, and `--admin-url`
  to create the 2 topics with `--partitions`) it is the bare client beside `txnbench peer`'s
  numbers: what the client reaches without the harness's history and workload around it.

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

SCENARIOS = ("send", "send_async+batch", "txn", "txn-pipelined")
#: txn-pipelined: what pulsar-perf sends per transaction (`-nmp 2` to each of 2 topics, its fixed payload)
PIPELINED_TOPICS, PIPELINED_PER_TOPIC, PIPELINED_PAYLOAD = 2, 2, 1024


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


def _pipelined(client: Any, topics: list[str], counts: list[int], opens_s: list[float], seconds: float,
               mode: str) -> Any:
    """The body of a `txn-pipelined` worker (see the module docstring)."""
    producers = [client.create_producer(topic, batching=True) for topic in topics]
    payload = b"x" * PIPELINED_PAYLOAD
    client.new_transaction().commit()  # discovery outside the measured window

    import threading

    counted = threading.Lock()

    def commit(txn: Any, index: int) -> None:
        txn.commit()   # counted once committed: a failed commit raises here and counts nothing
        with counted:
            counts[index] += 1

    def commit_in_background(txn: Any, index: int) -> Any:
        if mode == "gevent":
            import gevent

            return gevent.spawn(commit, txn, index)
        thread = threading.Thread(target=commit, args=(txn, index))
        thread.start()
        return thread

    def body(index: int) -> None:
        end = time.monotonic() + seconds
        commits: list[Any] = []
        while time.monotonic() < end:
            started = time.perf_counter()
            txn = client.new_transaction(timeout_s=60)
            opens_s.append(time.perf_counter() - started)
            for producer in producers:
                for _ in range(PIPELINED_PER_TOPIC):
                    producer.send_async(payload, txn=txn)
            commits.append(commit_in_background(txn, index))
            if len(commits) >= 64:   # bounded: the oldest commits are done long since
                for commit in commits[:32]:
                    commit.join()
                del commits[:32]
        for commit in commits:
            commit.join()

    return body


def create_topics(admin_url: str, partitions: int) -> list[str]:
    """`txn-pipelined`'s topics on a real cluster, partitioned as `txnbench peer` makes them."""
    from harness.client.admin import AdminClient

    stamp = f"{os.getpid()}-{int(time.time())}"
    topics = [f"persistent://public/default/bench-pipelined-{stamp}-{i}" for i in range(PIPELINED_TOPICS)]
    admin = AdminClient(admin_url)
    for topic in topics:
        if partitions > 0:
            admin.create_partitioned_topic(topic, partitions)
        else:
            admin.create_topic(topic)
    return topics


def measure(url: str, scenario: str, workers: int, seconds: float, mode: str,
            payload_size: int = 100, listener: str | None = None,
            topics: list[str] | None = None) -> dict[str, Any]:
    """Run one scenario against `url`; returns its counts and rate."""
    from harness.client import BatchingConfig, PulsarClient

    payload = b"x" * payload_size
    counts = [0] * workers
    opens_s: list[float] = []
    client = PulsarClient(url, txn_path="v4", operation_timeout_s=30, listener_name=listener)
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
        elif scenario == "txn-pipelined":
            body = _pipelined(client, topics or [f"bench-pipelined-{os.getpid()}-{i}"
                                                 for i in range(PIPELINED_TOPICS)], counts, opens_s, seconds, mode)
        else:
            raise ValueError(f"unknown scenario {scenario!r}; choose from {SCENARIOS}")
        started = time.monotonic()
        cpu_before = time.process_time()
        _run_workers(workers, body, mode)
        elapsed = time.monotonic() - started
        cpu_s = time.process_time() - cpu_before
    finally:
        client.close()
    total = sum(counts)
    unit = "txn/s" if scenario.startswith("txn") else "msg/s"
    row = {"scenario": scenario, "mode": mode, "workers": workers, "seconds": round(elapsed, 2),
           "count": total, "rate": round(total / elapsed, 1), "unit": unit,
           "cpu_ms_per_op": round(1000.0 * cpu_s / total, 3) if total else None}
    if opens_s:
        row["open_mean_ms"] = round(1000.0 * sum(opens_s) / len(opens_s), 2)
    return row


def _child(url: str, workers: int, seconds: float, scenarios: list[str], listener: str | None,
           topics: list[str] | None) -> list[dict[str, Any]]:
    # Patch before anything (even the harness.client package) imports threading or socket.
    argv = ["--url", url, "--workers", str(workers), "--seconds", str(seconds), "--mode",
            "gevent", "--json", "--scenarios", ",".join(scenarios)]
    argv += ["--listener", listener] if listener else []
    argv += ["--topics", ",".join(topics)] if topics else []
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
    parser.add_argument("--listener", help="the advertised listener to look up with (e.g. `external` on the "
                                           "pulsar target, whose clients go through Toxiproxy)")
    parser.add_argument("--admin-url", help="txn-pipelined on a real cluster: create its topics through this "
                                            "admin URL")
    parser.add_argument("--partitions", type=int, default=2, help="txn-pipelined: partitions per topic (0: none)")
    parser.add_argument("--topics", help=argparse.SUPPRESS)   # the gevent child reuses the parent's topics
    args = parser.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    if args.mode == "gevent" and args.url:
        from gevent import monkey

        if not monkey.is_module_patched("socket"):
            monkey.patch_all()   # before the admin client imports urllib3 (and ssl)
    topics = args.topics.split(",") if args.topics else None
    if topics is None and args.admin_url and "txn-pipelined" in scenarios:
        topics = create_topics(args.admin_url, args.partitions)
    if args.mode == "gevent" and args.url:
        print(json.dumps([measure(args.url, s, args.workers, args.seconds, "gevent", listener=args.listener,
                                  topics=topics) for s in scenarios]))
        return 0
    broker = None
    url = args.url
    if url is None:
        broker, port = _start_null_broker(tc_count=4)
        url = f"pulsar://127.0.0.1:{port}"
    results = []
    try:
        if args.mode in ("both", "threads"):
            results += [measure(url, s, args.workers, args.seconds, "threads", listener=args.listener,
                                topics=topics) for s in scenarios]
        if args.mode in ("both", "gevent"):
            results += _child(url, args.workers, args.seconds, scenarios, args.listener, topics)
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(10)
    if args.json:
        print(json.dumps(results))
    else:
        print(f"{'scenario':<18} {'mode':<8} {'workers':>7} {'rate':>10}  {'unit':<6} {'CPU ms/op':>9} "
              f"{'open ms':>8}")
        for row in results:
            print(f"{row['scenario']:<18} {row['mode']:<8} {row['workers']:>7} {row['rate']:>10.1f}  "
                  f"{row['unit']:<6} {row['cpu_ms_per_op'] or 0:>9.3f} {row.get('open_mean_ms', ''):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
