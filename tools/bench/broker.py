"""Messages per second through one broker with the real Pulsar client.

`python -m tools.bench.broker [--messages N] [--size B] [--no-batching]` starts a
metadata store, a ledger store and one broker (no fault proxy) in a temporary folder,
then measures with `pulsar-client`:

* produce: one producer sending N messages asynchronously (batched by default, as the
  client does by default), until every send is acknowledged;
* consume: one Exclusive consumer reading the same N messages from the earliest
  position and acknowledging each one;
* end to end: producer and consumer at the same time.

Every process it starts is stopped by pid before it returns.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path
from typing import Any

from tools.launch import one_broker


def _cpu_seconds(pid: int | None) -> float:
    """User+system CPU time of a process so far (Linux /proc), 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _produce(client: Any, topic: str, count: int, payload: bytes, batching: bool) -> float:
    import pulsar

    producer = client.create_producer(topic, batching_enabled=batching, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=5, max_pending_messages=10_000,
                                      block_if_queue_full=True)
    done = threading.Semaphore(0)
    failures: list[Any] = []

    def callback(result: Any, _: Any) -> None:
        if result != pulsar.Result.Ok:
            failures.append(result)
        done.release()

    started = time.perf_counter()
    for _ in range(count):
        producer.send_async(payload, callback)
    producer.flush()
    for _ in range(count):
        done.acquire(timeout=60)
    elapsed = time.perf_counter() - started
    producer.close()
    if failures:
        raise RuntimeError(f"{len(failures)} sends failed, e.g. {failures[0]}")
    return elapsed


def _consume(client: Any, topic: str, subscription: str, count: int) -> float:
    import pulsar

    consumer = client.subscribe(topic, subscription, initial_position=pulsar.InitialPosition.Earliest,
                                receiver_queue_size=5000)
    started = time.perf_counter()
    for _ in range(count):
        consumer.acknowledge(consumer.receive(timeout_millis=30_000))
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def run(messages: int, size: int, batching: bool) -> dict[str, float]:
    import pulsar

    results: dict[str, float] = {}
    with one_broker({"txnbenchTxnExtensions": []}, prefix="txnbench-broker-bench-") as (meta, ledger, broker):
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=30,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        payload = b"x" * size
        pids = {"broker": broker.pid, "ledger": ledger.pid, "metadata": meta.pid}
        cpu_before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        wall_started = time.perf_counter()
        try:
            elapsed = _produce(client, "bench-produce", messages, payload, batching)
            results["produce_msgs_per_s"] = messages / elapsed
            elapsed = _consume(client, "bench-produce", "bench", messages)
            results["consume_backlog_msgs_per_s"] = messages / elapsed
            consumer_time: list[float] = []
            reader = threading.Thread(target=lambda: consumer_time.append(
                _consume(client, "bench-e2e", "bench", messages)))
            client.subscribe("bench-e2e", "bench").close()   # create the subscription first
            started = time.perf_counter()
            reader.start()
            _produce(client, "bench-e2e", messages, payload, batching)
            reader.join(timeout=120)
            results["end_to_end_msgs_per_s"] = messages / (time.perf_counter() - started)
            wall = time.perf_counter() - wall_started
            for name, pid in pids.items():
                results[f"{name}_cpu_share"] = (_cpu_seconds(pid) - cpu_before[name]) / wall
        finally:
            client.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--no-batching", action="store_true")
    args = parser.parse_args(argv)
    results = run(args.messages, args.size, not args.no_batching)
    mode = "unbatched" if args.no_batching else "batched"
    for name, value in results.items():
        if name.endswith("_cpu_share"):
            print(f"{name:28} {value:10.2f}   (CPU seconds per second over the whole run)")
        else:
            print(f"{name:28} {value:10.0f}   ({args.messages} x {args.size} B, {mode})")


if __name__ == "__main__":
    main()
