"""Does v5's transaction metadata on ZooKeeper grow for good, and does the visibility lag grow with it?

Issue #46, item 3 (docs/findings/v5-segment-visibility-lag.md): Pulsar 5.0.1's v5 transactions
write, per transaction, a sequence counter under `/txn/op` and records under
`/txn/segment-events` and `/txn/subscription-events` that no code path deletes (read from the
5.0.1 jars), and on ZooKeeper every decision's apply scans all of `/txn/op`. This measures it:
rounds of transactional load on one scalable topic; after each round the children under those
paths (ZooKeeper's own `ZooKeeperMain`, from PySpark's jars) and the visibility lag (seconds from
the round's end until a fresh reader delivers every value committed so far); then, after the
coordinator's GC retention has passed, the children once more. The plot shows both against the
transactions run.

    txnbench cluster up --target pulsar --path v5  # .txnbench/cluster/state.json: the metadata service's client_port
    python -m tools.repro.v5_txn_metadata_leak <service_url> <admin_url> --zookeeper 127.0.0.1:<port> \
        --rounds 4 --clients 4 --txns 25 --gc-wait 150 --out results/leak-<time>

Exit 1 when `/txn/op` still holds children after the GC wait that no open transaction explains
(the leak shows), 0 when it is empty again, 2 when the measurement could not run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from targets.zookeeper import ZooKeeperUnavailable, java_binary, pyspark_jars

PATHS = ("/txn/op", "/txn/segment-events", "/txn/subscription-events")
COUNTER_SUFFIX = "__seq_counter__"
ZK_CLI_TIMEOUT_S = 60.0
LAG_POLL_S = 5.0          # a fresh read of the topic every this often ...
LAG_BOUND_S = 240.0       # ... until every committed value is delivered, at most this long
QUIET_S = 4.0


@dataclass(frozen=True)
class Count:
    """The metadata after `txns` transactions (committed and aborted), `at` label."""
    at: str
    txns: int
    op_counters: int          # /txn/op/<txn>__seq_counter__
    op_records: int           # every other child of /txn/op
    segment_events: int       # nodes below /txn/segment-events (any depth)
    subscription_events: int  # nodes below /txn/subscription-events (any depth)
    lag_s: float | None       # seconds until a fresh reader had every committed value; None: not within the bound


def parse_ls(output: str) -> list[str]:
    """The children `ZooKeeperMain ... ls PATH` printed: its last `[a, b]` line; [] for a
    missing path (`Node does not exist`)."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            inner = line[1:-1].strip()
            return [name.strip() for name in inner.split(",") if name.strip()] if inner else []
    return []


def parse_ls_recursive(output: str, root: str) -> int:
    """How many nodes `ls -R ROOT` printed below ROOT (ROOT itself not counted)."""
    prefix = root.rstrip("/") + "/"
    return sum(1 for line in output.splitlines() if line.strip().startswith(prefix))


class ZooKeeperUnreachable(RuntimeError):
    """ZooKeeperMain did not connect: a count of 0 would be a lie."""


def connected(output: str) -> bool:
    """Whether ZooKeeperMain's output shows its session connected (it prints the watcher's
    `SyncConnected` event); without it an empty listing means nothing."""
    return "state:SyncConnected" in output


def zk_cli(zookeeper: str, *command: str) -> str:
    """One ZooKeeperMain command against `zookeeper` (host:port); its stdout and stderr.

    Raises:
        ZooKeeperUnreachable: it never connected (a wrong address, a stopped server).
    """
    classpath = str(pyspark_jars() / "*")
    argv = [java_binary(), "-Xmx128m", "-cp", classpath, "org.apache.zookeeper.ZooKeeperMain",
            "-server", zookeeper, *command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=ZK_CLI_TIMEOUT_S, check=False)
    output = done.stdout + "\n" + done.stderr
    if not connected(output):
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise ZooKeeperUnreachable(f"ZooKeeperMain did not connect to {zookeeper!r}: {tail}")
    return output


def count_metadata(zookeeper: str, at: str, txns: int, lag_s: float | None,
                   cli: Callable[..., str] = zk_cli) -> Count:
    op = parse_ls(cli(zookeeper, "ls", "/txn/op"))
    counters = sum(1 for name in op if name.endswith(COUNTER_SUFFIX))
    return Count(at, txns, counters, len(op) - counters,
                 parse_ls_recursive(cli(zookeeper, "ls", "-R", PATHS[1]), PATHS[1]),
                 parse_ls_recursive(cli(zookeeper, "ls", "-R", PATHS[2]), PATHS[2]), lag_s)


def leak_shows(final: Count) -> bool:
    """After the GC wait every transaction is long finished: anything left under `/txn/op` stays."""
    return final.op_counters + final.op_records > 0


def visibility_lag(read_values: Callable[[], set[str]], committed: set[str], round_end: float) -> float | None:
    """Seconds from `round_end` until `read_values()` (a fresh read) holds every committed value."""
    deadline = round_end + LAG_BOUND_S
    while time.monotonic() < deadline:
        if committed <= read_values():
            return round(time.monotonic() - round_end, 1)
        time.sleep(LAG_POLL_S)
    return None


def plot(counts: Sequence[Count], path: Path) -> None:
    """Children against transactions run (the GC point last), and the lag against op records."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    xs = [c.txns for c in counts]
    for label, values in (("/txn/op counters", [c.op_counters for c in counts]),
                          ("/txn/op records", [c.op_records for c in counts]),
                          ("/txn/segment-events", [c.segment_events for c in counts]),
                          ("/txn/subscription-events", [c.subscription_events for c in counts])):
        left.plot(xs, values, marker="o", label=label)
    for c in counts:
        if not c.at.startswith("round"):
            left.annotate(c.at, (c.txns, c.op_counters), textcoords="offset points", xytext=(4, 6), fontsize=8)
    left.set_xlabel("transactions run")
    left.set_ylabel("ZooKeeper children")
    left.legend(fontsize=8)
    measured = [c for c in counts if c.lag_s is not None]
    right.plot([c.op_counters + c.op_records for c in measured], [c.lag_s for c in measured], marker="o")
    right.set_xlabel("children of /txn/op after the round")
    right.set_ylabel("visibility lag (s)")
    right.set_ylim(bottom=0)   # the lag's size, not its wiggle (a fresh read polls every LAG_POLL_S)
    fig.suptitle("Pulsar v5 transaction metadata on ZooKeeper")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replot(leak_json: Path, path: Path) -> None:
    """Draw `leak.png` again from a run's `leak.json` (no cluster needed)."""
    counts = [Count(**c) for c in json.loads(leak_json.read_text())["counts"]]
    plot(counts, path)


def main(argv: list[str] | None = None) -> int:
    from harness.client import PulsarClient
    from harness.client.admin import AdminClient
    from tools.repro.v5_segment_visibility import run_load

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("service_url")
    parser.add_argument("admin_url")
    parser.add_argument("--zookeeper", required=True, help="host:port of the cluster's ZooKeeper")
    parser.add_argument("--listener", default="external", help="advertised listener (pulsar target)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--txns", type=int, default=25, help="transactions per client per round")
    parser.add_argument("--gc-wait", type=float, default=150.0,
                        help="seconds after the last round before the final count (past the GC retention)")
    parser.add_argument("--out", type=Path, required=True, help="folder for leak.json and leak.png")
    args = parser.parse_args(argv)
    listener = args.listener or None
    host, _, port = args.zookeeper.rpartition(":")
    if not host or not port.isdigit():
        print(f"--zookeeper must be host:port, got {args.zookeeper!r} (the cluster's state.json names the "
              "metadata service's client_port)")
        return 2
    try:
        count_metadata(args.zookeeper, "check", 0, None)
    except (ZooKeeperUnavailable, ZooKeeperUnreachable, OSError, subprocess.TimeoutExpired) as err:
        print(f"cannot count ZooKeeper's children: {err}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    topic = f"topic://public/default/leak-{uuid.uuid4().hex[:6]}"
    AdminClient(args.admin_url).create_scalable_topic(topic, 1)
    counts = [count_metadata(args.zookeeper, "before", 0, None)]
    print(json.dumps(asdict(counts[-1])), flush=True)
    committed: set[str] = set()
    txns = 0
    with PulsarClient(args.service_url, txn_path="v5", listener_name=listener, operation_timeout_s=30) as client:
        def fresh_read() -> set[str]:
            reader = client.create_reader(topic)
            values: set[str] = set()
            try:
                end = time.monotonic() + 60.0
                while time.monotonic() < end:
                    message = reader.read_next(QUIET_S)
                    if message is None:
                        break
                    values.add(message.data.decode())
            finally:
                reader.close()
            return values

        for n in range(1, args.rounds + 1):
            sent = run_load(args.service_url, topic, clients=args.clients, txns=args.txns, messages=2,
                            abort_every=3, listener_name=listener)
            round_end = time.monotonic()
            txns += args.clients * args.txns
            committed |= {s.value for s in sent if s.outcome == "committed"}
            lag = visibility_lag(fresh_read, committed, round_end)
            counts.append(count_metadata(args.zookeeper, f"round {n}", txns, lag))
            print(json.dumps(asdict(counts[-1])), flush=True)
        time.sleep(args.gc_wait)
        counts.append(count_metadata(args.zookeeper, f"+{args.gc_wait:.0f}s", txns, None))
        print(json.dumps(asdict(counts[-1])), flush=True)
    (args.out / "leak.json").write_text(json.dumps({"topic": topic, "counts": [asdict(c) for c in counts]}, indent=1))
    plot(counts, args.out / "leak.png")
    print(f"wrote {args.out / 'leak.json'} and {args.out / 'leak.png'}")
    return 1 if leak_shows(counts[-1]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
