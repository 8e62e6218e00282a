"""Does v5's transaction metadata grow for good (on ZooKeeper, on Oxia), and does the visibility lag grow with it?

Issue #46, item 3 (docs/findings/v5-segment-visibility-lag.md): Pulsar 5.0.1's v5 transactions
write, per transaction, op records under `/txn/op` (and on ZooKeeper a sequence counter beside
them) and records under `/txn/segment-events` and `/txn/subscription-events` that no code path
deletes (read from the 5.0.1 jars), and on ZooKeeper every decision's apply scans all of
`/txn/op`. This measures it: rounds of transactional load on one scalable topic; after each
round the nodes under those paths and the visibility lag (seconds from the round's end until a
fresh reader delivers every value committed so far); then, after the coordinator's GC retention
has passed, the nodes once more. The plot shows both against the transactions run.

The same paths are listed on either store, the way Pulsar's own store lists them:

* ZooKeeper: ZooKeeper's own `ZooKeeperMain` (from PySpark's jars), `ls` and `ls -R`.
* Oxia: the `oxia` client's key list. `OxiaMetadataStore` keeps a path as the key itself
  and lists a path's children as the key range [`path/`, `path//`), which in Oxia's
  hierarchical key order holds exactly the keys one level below (`oxia_children_range`); a
  sequence key is Oxia's native one (`<prefix>-<20 digits>`; the server finds the next number
  from the sequence's last key), so no `__seq_counter__` key is written there.

    txnbench cluster up --target pulsar --path v5 [--set metadataStoreUrl=oxia]
    # .txnbench/cluster/state.json: the `metadata` service's client_port (ZooKeeper's or Oxia's)
    python -m tools.repro.v5_txn_metadata_leak <service_url> <admin_url> --zookeeper 127.0.0.1:<port> \
        --rounds 4 --clients 4 --txns 25 --gc-wait 150 --out results/leak-<time>
    python -m tools.repro.v5_txn_metadata_leak <service_url> <admin_url> --oxia 127.0.0.1:<port> ...
    python -m tools.repro.v5_txn_metadata_leak plot <zk>/leak.json <oxia>/leak.json --out both.png

Exit 1 when, after the GC wait, any of the three paths holds more nodes than before the load
(every transaction is long finished, so those stay: the leak shows), 0 when none does, 2 when
the measurement could not run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from targets.pulsar.conf import OXIA_NAMESPACE
from targets.zookeeper import ZooKeeperUnavailable, java_binary, pyspark_jars

PATHS = ("/txn/op", "/txn/segment-events", "/txn/subscription-events")
COUNTER_SUFFIX = "__seq_counter__"
ZK_CLI_TIMEOUT_S = 60.0
OXIA_CALL_TIMEOUT_S = 30.0  # one key list; the oxia client's calls carry no deadline of their own
OXIA_MAX_DEPTH = 6          # levels below a path walked on Oxia (ZooKeeper's `ls -R` walks all; these paths have 1)
LAG_POLL_S = 5.0          # a fresh read of the topic every this often ...
LAG_BOUND_S = 240.0       # ... until every committed value is delivered, at most this long
QUIET_S = 4.0
ZOOKEEPER = "ZooKeeper"
OXIA = "Oxia"

T = TypeVar("T")


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

    @property
    def nodes(self) -> int:
        """Every node counted under the three paths."""
        return self.op_counters + self.op_records + self.segment_events + self.subscription_events


class Lister(Protocol):
    """What a count needs of a metadata store: the same two questions on ZooKeeper and on Oxia."""
    store: str

    def children(self, path: str) -> list[str]:
        """The names one level below `path` ([] for a missing path)."""
        ...

    def count_below(self, path: str) -> int:
        """How many nodes lie below `path` at any depth (`path` itself not counted)."""
        ...


class StoreUnreachable(RuntimeError):
    """The store did not answer: a count of 0 would be a lie."""


class ZooKeeperUnreachable(StoreUnreachable):
    """ZooKeeperMain did not connect."""


class OxiaUnreachable(StoreUnreachable):
    """The Oxia client got no shard assignment or no answer to a key list in time."""


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


class ZooKeeperLister:
    """Children on ZooKeeper through `ZooKeeperMain` (`cli` stands in for it in tests)."""
    store = ZOOKEEPER

    def __init__(self, address: str, cli: Callable[..., str] = zk_cli) -> None:
        self.address = address
        self.cli = cli

    def children(self, path: str) -> list[str]:
        return parse_ls(self.cli(self.address, "ls", path))

    def count_below(self, path: str) -> int:
        return parse_ls_recursive(self.cli(self.address, "ls", "-R", path), path)


def oxia_children_range(path: str) -> tuple[str, str]:
    """The key range [min, max) of `path`'s children, as `OxiaMetadataStore.getChildrenFromStore`
    asks Oxia for it: `path/` to `path//`. In Oxia's hierarchical order a key with more `/`
    after the common part sorts after every key with fewer, so the range holds exactly one level."""
    with_slash = path if path.endswith("/") else path + "/"
    return with_slash, with_slash + "/"


def oxia_child_names(path: str, keys: Sequence[str]) -> list[str]:
    """The child names in a children range's `keys` (the path and its `/` cut off, as the
    store does); a key outside `path/` or with a further `/` is no child and is left out."""
    prefix, _ = oxia_children_range(path)
    return [key[len(prefix):] for key in keys if key.startswith(prefix) and "/" not in key[len(prefix):]]


class OxiaLister:
    """Children on Oxia: one key list per path and level. `list_keys(min, max)` is the oxia
    client's `Client.list` (a fake in tests), each call bounded by `call_timeout_s`."""
    store = OXIA

    def __init__(self, list_keys: Callable[[str, str], list[str]], *,
                 call_timeout_s: float = OXIA_CALL_TIMEOUT_S, max_depth: int = OXIA_MAX_DEPTH) -> None:
        self.list_keys = list_keys
        self.call_timeout_s = call_timeout_s
        self.max_depth = max_depth

    def children(self, path: str) -> list[str]:
        low, high = oxia_children_range(path)
        keys = within(lambda: self.list_keys(low, high), self.call_timeout_s, f"Oxia list [{low!r}, {high!r})")
        return oxia_child_names(path, keys)

    def count_below(self, path: str) -> int:
        """Walk level by level (Oxia has no recursive list), at most `max_depth` levels. A key
        is found through its parent key, as the store's own `getChildren` finds it; Oxia has
        no implicit parents, but `OxiaMetadataStore.createParents` puts every parent first."""
        total, level = 0, [path.rstrip("/")]
        for _ in range(self.max_depth):
            below = [f"{parent}/{name}" for parent in level for name in self.children(parent)]
            if not below:
                break
            total += len(below)
            level = below
        return total


def within(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """`call()`'s answer, or OxiaUnreachable after `timeout_s`: the oxia client's gRPC calls
    carry no deadline, so it runs on a daemon thread that a hung call cannot keep alive."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as err:   # handed to the caller as is, in its own thread
            box["error"] = err

    worker = threading.Thread(target=run, name="oxia-list", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise OxiaUnreachable(f"{what}: no answer within {timeout_s:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def oxia_client(address: str, namespace: str = OXIA_NAMESPACE) -> Any:
    """An `oxia.Client` on `address` (host:port); it waits at most 30 s for the shard assignments.

    Raises:
        OxiaUnreachable: no assignments came (a wrong address, a stopped server).
    """
    import oxia

    try:
        return within(lambda: oxia.Client(address, namespace=namespace), OXIA_CALL_TIMEOUT_S + 5,
                      f"Oxia client on {address!r}")
    except RuntimeError as err:
        raise OxiaUnreachable(f"no Oxia at {address!r} (namespace {namespace!r}): {err}") from err


def close_oxia(client: Any) -> None:
    """Close the client, bounded: oxia 0.2.1's close can hang (tools/repro/oxia_wal_offset_race.py)."""
    closer = threading.Thread(target=client.close, daemon=True)
    closer.start()
    closer.join(5)


def count_metadata(lister: Lister, at: str, txns: int, lag_s: float | None) -> Count:
    """One count of the three paths; counters apart from records, since on ZooKeeper a
    counter outlives its records (the records are deleted when applied, the counter never)."""
    op = lister.children(PATHS[0])
    counters = sum(1 for name in op if name.endswith(COUNTER_SUFFIX))
    return Count(at, txns, counters, len(op) - counters,
                 lister.count_below(PATHS[1]), lister.count_below(PATHS[2]), lag_s)


def leak_shows(before: Count, final: Count) -> bool:
    """After the GC wait every transaction is long finished: a path holding more nodes than
    before the load keeps them (on ZooKeeper the `/txn/op` counters, on either store the
    event records)."""
    return any(getattr(final, field) > getattr(before, field)
               for field in ("op_counters", "op_records", "segment_events", "subscription_events"))


def visibility_lag(read_values: Callable[[], set[str]], committed: set[str], round_end: float) -> float | None:
    """Seconds from `round_end` until `read_values()` (a fresh read) holds every committed value."""
    deadline = round_end + LAG_BOUND_S
    while time.monotonic() < deadline:
        if committed <= read_values():
            return round(time.monotonic() - round_end, 1)
        time.sleep(LAG_POLL_S)
    return None


SERIES: tuple[tuple[str, Callable[[Count], int]], ...] = (
    ("/txn/op counters", lambda c: c.op_counters),
    ("/txn/op records", lambda c: c.op_records),
    ("/txn/segment-events", lambda c: c.segment_events),
    ("/txn/subscription-events", lambda c: c.subscription_events),
)


def plot(counts: Sequence[Count], path: Path, store: str = ZOOKEEPER) -> None:
    """Children against transactions run (the GC point last), and the lag against op records."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    xs = [c.txns for c in counts]
    for label, value in SERIES:
        left.plot(xs, [value(c) for c in counts], marker="o", label=label)
    for c in counts:
        if not c.at.startswith("round"):
            left.annotate(c.at, (c.txns, c.op_counters), textcoords="offset points", xytext=(4, 6), fontsize=8)
    left.set_xlabel("transactions run")
    left.set_ylabel(f"{store} children")
    left.legend(fontsize=8)
    measured = [c for c in counts if c.lag_s is not None]
    right.plot([c.op_counters + c.op_records for c in measured], [c.lag_s for c in measured], marker="o")
    right.set_xlabel("children of /txn/op after the round")
    right.set_ylabel("visibility lag (s)")
    right.set_ylim(bottom=0)   # the lag's size, not its wiggle (a fresh read polls every LAG_POLL_S)
    fig.suptitle(f"Pulsar v5 transaction metadata on {store}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_stores(runs: Sequence[tuple[str, Sequence[Count]]], path: Path) -> None:
    """Several stores' runs in one figure, to be read side by side: per store its nodes per path
    against transactions run (the GC point last; one panel each, one y scale), and the visibility
    lag after each round against the nodes then under the three paths, every store in one panel,
    over the measurement's floor (a fresh read ends only after QUIET_S without a message)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs) + 1, figsize=(5 * (len(runs) + 1), 4.5))
    lag_axis = axes[-1]
    top = max((value(c) for _, counts in runs for c in counts for _, value in SERIES), default=0) or 1
    for axis, (store, counts) in zip(axes, runs, strict=False):
        xs = [c.txns for c in counts]
        for (label, value), (style, mark) in zip(SERIES, (("--", "s"), ("-", "o"), ("-", "o"), (":", "x")),
                                                 strict=True):
            # dashed and square: ZooKeeper's counters run one or two below its events, hidden otherwise
            axis.plot(xs, [value(c) for c in counts], linestyle=style, marker=mark, markersize=5, label=label)
        axis.set_title(f"{store}: nodes under each path", fontsize=10)
        axis.set_xlabel("transactions run (last point: after the GC wait)")
        axis.set_ylim(-top * 0.03, top * 1.08)
        axis.legend(fontsize=7)
        measured = [c for c in counts if c.lag_s is not None]
        lag_axis.plot([c.nodes for c in measured], [c.lag_s for c in measured], marker="o", label=store)
        for c in measured:
            lag_axis.annotate(f"{c.txns} txns", (c.nodes, c.lag_s), textcoords="offset points", xytext=(3, 4),
                              fontsize=7)
    axes[0].set_ylabel("nodes")
    lag_axis.axhline(QUIET_S, color="grey", linestyle=":", linewidth=1,
                     label=f"floor: a read ends {QUIET_S:.0f} s after its last message")
    lag_axis.set_title("visibility lag after each round", fontsize=10)
    lag_axis.set_xlabel("nodes under the three paths after the round")
    lag_axis.set_ylabel("visibility lag (s)")
    lag_axis.set_ylim(bottom=0)
    lag_axis.legend(fontsize=7)
    fig.suptitle("Pulsar 5.0.1 v5 transaction metadata: " + " vs ".join(store for store, _ in runs))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load_run(leak_json: Path) -> tuple[str, list[Count]]:
    """A run's store and counts from its `leak.json` (runs before the store was recorded were ZooKeeper's)."""
    data = json.loads(leak_json.read_text())
    return data.get("store", ZOOKEEPER), [Count(**c) for c in data["counts"]]


def replot(leak_json: Path, path: Path) -> None:
    """Draw `leak.png` again from a run's `leak.json` (no cluster needed)."""
    store, counts = load_run(leak_json)
    plot(counts, path, store)


def plot_main(argv: list[str]) -> int:
    """`plot LEAK_JSON... --out PNG`: one run's plot again, or several stores' runs side by side."""
    parser = argparse.ArgumentParser(prog="v5_txn_metadata_leak plot", description=plot_main.__doc__)
    parser.add_argument("leak_json", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if len(args.leak_json) == 1:
        replot(args.leak_json[0], args.out)
    else:
        plot_stores([load_run(p) for p in args.leak_json], args.out)
    print(f"wrote {args.out}")
    return 0


def address_ok(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit()


def main(argv: list[str] | None = None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plot"]:
        return plot_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("service_url")
    parser.add_argument("admin_url")
    store = parser.add_mutually_exclusive_group(required=True)
    store.add_argument("--zookeeper", help="host:port of the cluster's ZooKeeper")
    store.add_argument("--oxia", help="host:port of the cluster's Oxia (its public port)")
    parser.add_argument("--oxia-namespace", default=OXIA_NAMESPACE, help="the Oxia namespace Pulsar uses")
    parser.add_argument("--listener", default="external", help="advertised listener (pulsar target)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--txns", type=int, default=25, help="transactions per client per round")
    parser.add_argument("--gc-wait", type=float, default=150.0,
                        help="seconds after the last round before the final count (past the GC retention)")
    parser.add_argument("--out", type=Path, required=True, help="folder for leak.json and leak.png")
    args = parser.parse_args(argv)
    listener = args.listener or None
    address = args.zookeeper or args.oxia
    if not address_ok(address):
        print(f"--zookeeper/--oxia must be host:port, got {address!r} (the cluster's state.json names the "
              "metadata service's client_port)")
        return 2
    client_to_close: Any = None
    try:
        if args.zookeeper:
            lister: Lister = ZooKeeperLister(args.zookeeper)
        else:
            client_to_close = oxia_client(args.oxia, args.oxia_namespace)
            lister = OxiaLister(client_to_close.list)
        count_metadata(lister, "check", 0, None)
        return measure(args, lister, listener)
    except (ZooKeeperUnavailable, StoreUnreachable, OSError, subprocess.TimeoutExpired) as err:
        print(f"cannot count the metadata store's children: {err}")
        return 2
    finally:
        if client_to_close is not None:
            close_oxia(client_to_close)


def measure(args: argparse.Namespace, lister: Lister, listener: str | None) -> int:
    """The rounds, the counts and the plot; exit 1 when the leak shows (`leak_shows`)."""
    from harness.client import PulsarClient
    from harness.client.admin import AdminClient
    from tools.repro.v5_segment_visibility import run_load

    args.out.mkdir(parents=True, exist_ok=True)
    topic = f"topic://public/default/leak-{uuid.uuid4().hex[:6]}"
    AdminClient(args.admin_url).create_scalable_topic(topic, 1)
    counts = [count_metadata(lister, "before", 0, None)]
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
            counts.append(count_metadata(lister, f"round {n}", txns, lag))
            print(json.dumps(asdict(counts[-1])), flush=True)
        time.sleep(args.gc_wait)
        counts.append(count_metadata(lister, f"+{args.gc_wait:.0f}s", txns, None))
        print(json.dumps(asdict(counts[-1])), flush=True)
    (args.out / "leak.json").write_text(json.dumps({"topic": topic, "store": lister.store,
                                                    "counts": [asdict(c) for c in counts]}, indent=1))
    plot(counts, args.out / "leak.png", lister.store)
    print(f"wrote {args.out / 'leak.json'} and {args.out / 'leak.png'}")
    return 1 if leak_shows(counts[0], counts[-1]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
