"""Measure the metadata store: put throughput with group commit, fsyncs per put, recovery time.

`python -m tools.bench.metadata [--puts N] [--concurrency 1 32] [--recovery-records 100000]
[--backends ours oxia zk]` starts a store process in a temporary directory, drives it
through each backend of the brokers' interface (one client, like one broker: `ours` is
`MetadataClient` on our protocol, `oxia` is `OxiaMetadataClient`, the real `oxia` client
on the store's Oxia frontend, `zk` is `ZkMetadataClient` on a real ZooKeeper started
beside it, whose fsyncs are not counted), reads the store's own counters from /metrics,
and prints one JSON object. Recovery is measured twice on a log of `--recovery-records`
puts: replaying the whole write-ahead log (snapshots off), and from a snapshot plus
the log written after it (the default snapshot policy). The store is killed with -9
before each restart, so recovery starts from what was on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from embedded.metadata.backend import open_metadata_client
from embedded.metadata.blocking import BlockingMetadataClient
from harness.metrics import parse_prometheus_text
from tools.launch import StoreProcess, ZooKeeperProcess


def _counter(store: StoreProcess, name: str) -> float:
    return parse_prometheus_text(store.metrics_text()).get((name, ()), 0.0)


async def _drive_puts(address: str, puts: int, concurrency: int, prefix: str) -> list[float]:
    latencies: list[float] = []
    client = open_metadata_client(address, session_timeout_ms=10_000, request_timeout_s=30)
    await client.connect()
    try:
        next_index = iter(range(puts))

        async def writer() -> None:
            for i in next_index:   # shared iterator: writers take the next put until all are done
                started = time.perf_counter()
                await client.put(f"{prefix}/{i:08d}", "x" * 100, secondary_indexes={"idx:bench": f"{i % 1000:020d}"})
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(writer() for _ in range(concurrency)))
    finally:
        await client.close()
    return latencies


def measure_throughput(store: StoreProcess, puts: int, concurrency: int, backend: str = "ours",
                       zookeeper: ZooKeeperProcess | None = None) -> dict[str, Any]:
    fsyncs_before = _counter(store, "txnbench_metadata_fsyncs_total")
    started = time.perf_counter()
    if backend == "zk":
        assert zookeeper is not None
        address = zookeeper.url
    else:
        address = f"oxia://{store.oxia_address}" if backend == "oxia" else store.address
    latencies = asyncio.run(_drive_puts(address, puts, concurrency, f"/bench/{backend}/c{concurrency}"))
    elapsed = time.perf_counter() - started
    fsyncs = None if backend == "zk" else _counter(store, "txnbench_metadata_fsyncs_total") - fsyncs_before
    latencies.sort()
    return {
        "backend": backend, "concurrency": concurrency, "puts": puts, "seconds": round(elapsed, 3),
        "puts_per_s": round(puts / elapsed, 1), "fsyncs": None if fsyncs is None else int(fsyncs),
        "fsyncs_per_put": None if fsyncs is None else round(fsyncs / puts, 4),
        "latency_ms": {"p50": round(1000 * statistics.median(latencies), 3),
                       "p99": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 3),
                       "max": round(1000 * latencies[-1], 3)},
    }


def measure_recovery(base: Path, records: int, snapshot_every: int | None) -> dict[str, Any]:
    extra = {"snapshot_every_records": snapshot_every or 10**12, "snapshot_every_bytes": 2**62}
    store = StoreProcess(base, extra_config=extra)
    store.start()
    try:
        asyncio.run(_drive_puts(store.address, records, 32, "/recovery"))
        with BlockingMetadataClient(store.address) as tool:   # let a snapshot in progress finish
            for _ in range(1200):
                if not tool.stats()["snapshot_running"]:
                    break
                time.sleep(0.05)
        snapshots = _counter(store, "txnbench_metadata_snapshots_total")
        store.kill()
        restart_started = time.perf_counter()
        store.start()
        restart_s = time.perf_counter() - restart_started
        parsed = parse_prometheus_text(store.metrics_text())
        wal_files = sorted(p.name for p in (base / "data" / "wal").iterdir())
        return {
            "records": records, "snapshot_every_records": snapshot_every, "snapshots_written": int(snapshots),
            "recovery_s": round(parsed[("txnbench_metadata_recovery_seconds", ())], 3),
            "replayed_log_records": int(parsed[("txnbench_metadata_recovery_replayed_records", ())]),
            "restart_to_healthy_s": round(restart_s, 3), "wal_segments_after": len(wal_files),
            "live_records": int(parsed[("txnbench_metadata_records", ())]),
        }
    finally:
        store.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--puts", type=int, default=5000, help="puts per concurrency level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--recovery-records", type=int, default=100_000)
    parser.add_argument("--snapshot-every", type=int, default=50_000)
    parser.add_argument("--backends", nargs="+", choices=("ours", "oxia", "zk"), default=["ours"],
                        help="clients to drive the puts through (oxia: the real oxia client, zk: a real ZooKeeper)")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"throughput": [], "recovery": []}
    with tempfile.TemporaryDirectory(prefix="metadata-bench-") as tmp:
        base = Path(tmp)
        zookeeper = ZooKeeperProcess(base / "zookeeper") if "zk" in args.backends else None
        with StoreProcess(base / "throughput", oxia="oxia" in args.backends) as store, \
                zookeeper if zookeeper is not None else contextlib.nullcontext():
            for c in args.concurrency:
                for backend in args.backends:   # alternated, so both see the same machine load
                    out["throughput"].append(measure_throughput(store, args.puts, c, backend, zookeeper))
        if args.recovery_records > 0:
            out["recovery"].append(measure_recovery(base / "wal-only", args.recovery_records, None))
            out["recovery"].append(measure_recovery(base / "snapshot", args.recovery_records, args.snapshot_every))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
