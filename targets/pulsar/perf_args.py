"""A txnbench scenario as `pulsar-perf transaction` flags, and the scenario matched to them.

Why a matching step in both directions: pulsar-perf's transaction test is less expressive
than a txnbench workload, so the two are made to run the same load by bending txnbench
toward what pulsar-perf can do, and every bend is written down (`PeerPlan.notes`):

* pulsar-perf aborts all transactions (`-abort`) or none: a txnbench `abort_ratio` below
  one half becomes 0 on both sides, one half or more becomes "all aborted".
* pulsar-perf sends `-nmp` messages to *each* of its `--topics-p` topics, always the same
  ones; txnbench spreads `messages_per_txn` over `topics_per_txn` topics drawn from
  `topics`. Matched: `topics = topics_per_txn`, `-nmp = messages_per_txn / topics_per_txn`
  (rounded up, and txnbench's `messages_per_txn` raised to the product).
* pulsar-perf's payload is 1024 bytes: txnbench's `message_size` becomes 1024.
* pulsar-perf runs no consumer in a produce-only test: txnbench's verifying consumers
  (`verifiers`) become 0; the drain's final reads still give the checker its evidence.
* pulsar-perf's producers keep the Java client's default batching (its producer builder
  sets only `sendTimeout(0)`; read in 4.0.8's and 5.0.1's class files) and send no key: a v4
  txnbench matched to it batches too, with the same defaults and Java's batching router (a
  partitioned topic's unkeyed messages stay on one partition for 10 ms), and sends unkeyed
  messages (`keys: 0`). Before this (the 2026-11-27 runs) txnbench sent keyed messages one
  per entry: 12.7 bookie writes and 5.9 coordinator-log appends per transaction against
  pulsar-perf's 9.0 and 5.0. The V5 client's per-segment batching is not modeled: v5 runs
  unbatched.
* concurrency: `-threads = load.users`, closed loop on both sides (no `-txnRate`), and the
  same overlap inside each client (read in PerformanceTransactionBase and its V4/V5
  subclasses of 5.0.1, and PerformanceTransaction of 4.0.8): a pulsar-perf thread blocks
  only on opening a transaction. It issues the transaction's `-nmp` x topics sends at
  once; with the v4 client it then fires the commit without waiting (the client's commit
  waits for the sends) and opens the next; with the V5 client it waits for the sends, fires
  the commit and opens the next. Matched: `send_concurrency = messages_per_txn` and
  `txn_pipeline = sends-async` (v4 client) or `commit-async` (V5 client), so each txnbench
  user overlaps its transactions as a pulsar-perf thread does, every operation on its own
  history lane; pulsar-perf does not bound the transactions a thread has in flight,
  txnbench keeps `open_txns_per_user`.
* pulsar-perf prints its counters every 10 s, so warm-up and measured window are
  whole multiples of 10 s on both sides; the warm-ups and the windows have the same length,
  the warm-up at least `PERF_MIN_WARMUP_S` (pulsar-perf's JVM compiles itself while it
  climbs; txnbench's rate climbed too, from 463 to 739 txn/s over its first 40 s after a
  10 s warm-up, `results/20261127-224410-peer-atomic-produce-v4-4.0.8`).

Only `atomic-produce` maps: consume-transform-produce and ack-only would need pulsar-perf's
consumer topics pre-filled (its `receive()` waits forever on an empty topic) and `mixed` has
no pulsar-perf counterpart; they are refused with that reason.

Which command on which release (checked with `--help` on the jars): 4.0.x's `transaction` is
the legacy (v4) client; 5.0.1's `transaction` picks the client by the topics' domain
(`persistent://` v4, `topic://` V5) and takes `--client-api V4|V5`; 5.0.1 has no
`transaction-v4` subcommand. v5 needs `--scalable --scalable-segments N` so pulsar-perf
creates scalable topics (they are not auto-created).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from harness.config import RunConfig, TxnPipeline, WorkloadKind
from harness.errors import ConfigError
from harness.txn_paths import TxnPath
from targets.pulsar.versions import PulsarRelease

#: pulsar-perf's fixed payload (PerformanceTransaction: `new byte[1024]`).
PERF_PAYLOAD_BYTES = 1024
#: pulsar-perf prints its interval counters and writes one histogram pair every 10 s.
PERF_INTERVAL_S = 10
#: Seconds pulsar-perf runs past the measured window, so the window's last interval line is printed:
#: its clock starts before its clients are built and each interval runs a little over 10 s.
PERF_TAIL_S = 15
PERF_NAMESPACE = "public/default"
#: pulsar-perf's own warm-up, at least: a fresh JVM on a busy 2-core machine climbed for 30-40 s
#: (5.0.1, Java 25: 11, 39, 64, 113, 137 txn/s in its first five intervals) while JIT compiled it.
PERF_MIN_WARMUP_S = 30


@dataclass(frozen=True)
class PerfPlan:
    """What pulsar-perf is asked to do; `argv` turns it into its command line."""

    release: str
    txn_path: TxnPath
    client_api: str | None            # "V4"/"V5" on 5.x (its --client-api); None on 4.0 (no such flag)
    producer_topics: tuple[str, ...]
    threads: int
    messages_per_topic: int            # -nmp
    partitions: int | None             # -np (v4)
    scalable_segments: int | None      # --scalable --scalable-segments (v5)
    warmup_s: int
    steady_s: int
    abort: bool
    txn_timeout_s: int
    subscription: str
    #: -txnRate (transactions opened per second); the peer runs a closed loop (None). pulsar-perf ignores
    #: it: docs/findings/pulsar-perf-txnrate-ignored.md, reproduced by targets/pulsar/perf_txnrate.py
    txn_rate: int | None = None

    @property
    def duration_s(self) -> int:
        return self.warmup_s + self.steady_s + PERF_TAIL_S

    @property
    def messages_per_txn(self) -> int:
        return self.messages_per_topic * len(self.producer_topics)

    @property
    def consumer_topic(self) -> str:
        """pulsar-perf insists on a consumer topic; with -nmc 0 it subscribes and never receives."""
        return self.producer_topics[0]

    def argv(self, service_url: str, admin_url: str, listener_name: str | None) -> list[str]:
        """The arguments after `PulsarPerfTestTool <client.conf>`."""
        args = ["transaction", "-u", service_url, "-au", admin_url]
        if listener_name:
            args += ["--listener-name", listener_name]
        if self.client_api:
            args += ["--client-api", self.client_api]
        for topic in self.producer_topics:
            args += ["--topics-p", topic]
        args += ["--topics-c", self.consumer_topic, "-ss", self.subscription, "-ns", "1", "-sp", "Earliest",
                 "-threads", str(self.threads), "-nmp", str(self.messages_per_topic), "-nmc", "0",
                 "-time", str(self.duration_s), "-tto", str(self.txn_timeout_s)]
        if self.scalable_segments is not None:
            args += ["--scalable", "--scalable-segments", str(self.scalable_segments)]
        elif self.partitions:
            args += ["-np", str(self.partitions)]
        if self.abort:
            args.append("-abort")
        if self.txn_rate is not None:
            args += ["-txnRate", str(self.txn_rate)]
        return args

    def to_json(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "txn_path": self.txn_path.value, "duration_s": self.duration_s,
                "messages_per_txn": self.messages_per_txn, "payload_bytes": PERF_PAYLOAD_BYTES}


@dataclass(frozen=True)
class PeerPlan:
    """Both sides of one peer comparison: pulsar-perf's plan, txnbench's matched scenario, and why."""

    perf: PerfPlan
    config: RunConfig
    notes: tuple[str, ...]


def _whole_intervals(seconds: float, minimum: int) -> int:
    return max(minimum, PERF_INTERVAL_S * math.ceil(seconds / PERF_INTERVAL_S))


def plan_peer(config: RunConfig, release: PulsarRelease, tag: str) -> PeerPlan:
    """Map `config` (one path, validated) to pulsar-perf flags and bend it to match; ConfigError if it cannot."""
    w = config.workload
    source = config.name
    if w.kind is not WorkloadKind.ATOMIC_PRODUCE:
        raise ConfigError(source, "workload.kind", f"pulsar-perf has no counterpart for {w.kind.value}",
                          "use an atomic-produce scenario (e.g. atomic-produce): consume-transform-produce and "
                          "ack-only would need pulsar-perf's consumer topics pre-filled, mixed has no match")
    if config.path is TxnPath.V4_BATCHED:
        raise ConfigError(source, "path", "the peer runs v4 (transaction on the legacy client) and v5",
                          "pass --path v4 or --path v5")
    if not release.supports(config.path):
        raise ConfigError(source, "path", f"{config.path.value} needs Pulsar 5.0", "pass --pulsar-version 5.0.1")
    if not release.perf:
        raise ConfigError(source, "cluster.pulsar_version", f"the Maven mirror does not serve pulsar-testclient "
                          f"{release.version} (pulsar-perf)", "pass --pulsar-version 4.0.8 or 5.0.1 "
                          "(`txnbench releases`, column perf)")
    notes: list[str] = []
    topics_per_txn = min(w.topics_per_txn, w.topics)
    per_topic = math.ceil(w.messages_per_txn / topics_per_txn)
    if per_topic * topics_per_txn != w.messages_per_txn:
        notes.append(f"messages_per_txn {w.messages_per_txn} -> {per_topic * topics_per_txn}: pulsar-perf sends "
                     f"-nmp {per_topic} to each of its {topics_per_txn} topics")
    if w.topics != topics_per_txn:
        notes.append(f"topics {w.topics} -> {topics_per_txn}: pulsar-perf sends to the same {topics_per_txn} "
                     "topics in every transaction")
    abort = w.abort_ratio >= 0.5
    if w.abort_ratio not in (0.0, 1.0):
        notes.append(f"abort_ratio {w.abort_ratio:g} -> {1 if abort else 0}: pulsar-perf aborts all "
                     "transactions (-abort) or none")
    if w.message_size != PERF_PAYLOAD_BYTES:
        notes.append(f"message_size {w.message_size} -> {PERF_PAYLOAD_BYTES}: pulsar-perf's payload is fixed")
    if w.verifiers:
        notes.append(f"verifiers {w.verifiers} -> 0: pulsar-perf runs no consumer in a produce-only test "
                     "(the drain's final reads still feed the checker)")
    scalable = config.path.uses_scalable_topics
    batching = not scalable
    if batching and not w.batching:
        notes.append("batching off -> on: pulsar-perf's producers batch (the Java client's defaults: 1 ms, 1000 "
                     "messages, 128 KiB) and keep a partitioned topic's unkeyed messages on one partition for 10 ms, "
                     "so a transaction's messages to a topic share a batch and a partition; txnbench's do the same")
    if w.batching and not batching:
        notes.append("batching -> off: the V5 client batches per segment (its entry bucketing), which txnbench's v5 "
                     "producer does not model")
    if batching and w.keys:
        notes.append(f"keys {w.keys} -> 0: pulsar-perf's messages carry no key, so its producers route them by "
                     "batching window, not by key hash")
    if w.hold_s:
        notes.append(f"hold_s {w.hold_s:g} -> 0: pulsar-perf ends each transaction as soon as its sends complete")
    if config.load.rate_per_user is not None:
        notes.append("rate_per_user -> closed loop: the peer compares the most each tool drives")
    warmup = max(_whole_intervals(config.phases.warmup_s, PERF_INTERVAL_S), PERF_MIN_WARMUP_S)
    steady = _whole_intervals(config.phases.steady_s, PERF_INTERVAL_S)
    if (warmup, steady) != (config.phases.warmup_s, config.phases.steady_s):
        notes.append(f"warmup/steady {config.phases.warmup_s:g}/{config.phases.steady_s:g} s -> {warmup}/{steady} s: "
                     f"pulsar-perf reports in {PERF_INTERVAL_S} s intervals and warms up at least "
                     f"{PERF_MIN_WARMUP_S} s; both sides get the same warm-up")
    domain = "topic" if scalable else "persistent"
    topics = tuple(f"{domain}://{PERF_NAMESPACE}/peer-{tag}-{i}" for i in range(topics_per_txn))
    line5 = release.scalable_transactions
    perf = PerfPlan(
        release=release.version, txn_path=config.path,
        client_api=("V5" if scalable else "V4") if line5 else None, producer_topics=topics,
        threads=config.load.users, messages_per_topic=per_topic,
        partitions=None if scalable else (w.v4_partitions or None),
        scalable_segments=w.v5_segments if scalable else None,
        warmup_s=warmup, steady_s=steady, abort=abort,
        txn_timeout_s=max(1, math.ceil(w.txn_timeout_s)), subscription=f"peer-{tag}")
    pipeline = TxnPipeline.COMMIT_ASYNC if scalable else TxnPipeline.SENDS_ASYNC
    messages = per_topic * topics_per_txn
    if (w.send_concurrency, w.txn_pipeline) != (messages, pipeline):
        notes.append(f"send_concurrency {w.send_concurrency} -> {messages}, txn_pipeline {w.txn_pipeline.value} -> "
                     f"{pipeline.value}: a pulsar-perf thread sends a transaction's messages at once and opens the "
                     f"next transaction {'once they completed' if scalable else 'at once'}, its commit still going")
    matched_workload = dataclasses.replace(
        w, topics=topics_per_txn, topics_per_txn=topics_per_txn, messages_per_txn=messages,
        abort_ratio=1.0 if abort else 0.0, message_size=PERF_PAYLOAD_BYTES, verifiers=0, batching=batching,
        keys=0 if batching else w.keys, hold_s=0.0,
        send_concurrency=messages, txn_pipeline=pipeline)
    matched = dataclasses.replace(
        config, workload=matched_workload,
        load=dataclasses.replace(config.load, rate_per_user=None),
        phases=dataclasses.replace(config.phases, warmup_s=float(warmup), steady_s=float(steady)))
    return PeerPlan(perf=perf, config=matched, notes=tuple(notes))
