"""The store experiment: v5's latency against the number of open transactions, per metadata store.

`python -m tools.experiments.store_open_txns --stores zk txnbench --open 0,100,400 --probes 30`
starts a v5 embedded cluster on each store (`metadataStoreUrl`), opens transactions with
one send each and keeps them open, and at each level measures probe transactions one
after another (open, one send, commit) while the others stay open.

Why: on ZooKeeper a secondary-index scan is scan-and-filter (Pulsar 5.0's emulation,
`embedded/metadata/zk_client.py`), and END_TXN scans the ops-by-transaction index, so a
commit's cost grows with every indexed record of every open transaction; on the Oxia-like
store the scan is an index range. Probes run one at a time, so a latency here is one
request's, not a queue's. The stores run one after the other in one process (the machine
is shared: only ratios within one run mean anything).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.client import PulsarClient
from harness.client.admin import AdminClient
from harness.client.transaction import Transaction
from harness.metadata_stores import store_used
from harness.txn_paths import TxnPath
from targets.embedded import EmbeddedCluster, EmbeddedSpec

TOPIC = "topic://public/default/store-open-txns"
HELD_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Level:
    """Probe latencies (ms) at one number of open transactions on one store."""

    store: str
    open_txns: int
    probes: int
    open_p50_ms: float
    send_p50_ms: float
    commit_p50_ms: float
    commit_p90_ms: float
    commit_max_ms: float


def _p(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _probe(client: PulsarClient, producer: object, n: int) -> tuple[float, float, float]:
    t0 = time.monotonic()
    txn = client.new_transaction(60)
    t1 = time.monotonic()
    producer.send(f"probe-{n}", key=f"probe-{n}", txn=txn, timeout_s=60)   # type: ignore[attr-defined]
    t2 = time.monotonic()
    txn.commit(timeout_s=120)
    t3 = time.monotonic()
    return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000


def measure(store: str, levels: Sequence[int], probes: int, directory: Path) -> list[Level]:
    """One cluster on `store`; probes at each level of held-open transactions (ascending)."""
    spec = EmbeddedSpec(txn_path=TxnPath.V5, brokers=2, directory=directory, parent_pid=os.getpid(),
                        settings={"metadataStoreUrl": store, "metadataStoreSessionTimeoutMillis": 6000})
    cluster = EmbeddedCluster(spec)
    info = cluster.up()
    out: list[Level] = []
    try:
        AdminClient(info.admin_url, timeout_s=60).create_scalable_topic(TOPIC, 2)
        with PulsarClient(info.service_url, txn_path="v5", operation_timeout_s=60.0) as client:
            producer = client.create_producer(TOPIC)
            held: list[Transaction] = []
            for n in range(3):   # warm the connections and the coordinators
                _probe(client, producer, -1 - n)
            for level in sorted(levels):
                while len(held) < level:   # bounded by the level
                    txn = client.new_transaction(HELD_TIMEOUT_S)
                    producer.send(f"held-{len(held)}", key=f"held-{len(held)}", txn=txn, timeout_s=60)
                    held.append(txn)
                samples = [_probe(client, producer, level * 1000 + i) for i in range(probes)]
                opens, sends, commits = zip(*samples, strict=True)
                out.append(Level(store, level, probes, round(statistics.median(opens), 2),
                                 round(statistics.median(sends), 2), round(statistics.median(commits), 2),
                                 _p(commits, 0.9), round(max(commits), 2)))
                print(json.dumps(asdict(out[-1])), flush=True)
            # the held transactions are left open: the cluster is thrown away (each abort would
            # pay the same index scan, one after another)
    finally:
        cluster.down()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.experiments.store_open_txns", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", nargs="+", default=["zk", "txnbench"], help="metadataStoreUrl values")
    parser.add_argument("--open", default="0,100,400", help="numbers of transactions held open")
    parser.add_argument("--probes", type=int, default=30)
    parser.add_argument("--out", type=Path, help="write the levels as JSON here")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.open.split(",") if x.strip()]
    rows: list[Level] = []
    with tempfile.TemporaryDirectory(prefix="txnbench-store-open-txns-") as tmp:
        for store in args.stores:
            rows += measure(store, levels, args.probes, Path(tmp) / store)
    print(f"{'store':<28}{'open txns':>10}{'open p50':>10}{'send p50':>10}{'commit p50':>12}{'p90':>9}{'max':>9}")
    for row in rows:
        label = store_used("embedded", "v5", {"metadataStoreUrl": row.store}).label
        print(f"{label:<28}{row.open_txns:>10}{row.open_p50_ms:>10}{row.send_p50_ms:>10}"
              f"{row.commit_p50_ms:>12}{row.commit_p90_ms:>9}{row.commit_max_ms:>9}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
