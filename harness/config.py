"""Scenario files: YAML in, a frozen and validated `RunConfig` out.

A scenario names what to run (workload, load shape, phases, faults, checks) and
against which cluster. Every key is validated on load; a mistake becomes one line
naming the file, the key and the fix (see `harness._validate`). Keys carry their
unit in the name (`steady_s`, `message_size`) so a file reads without a manual.

Bench and chaos matrices run one scenario over several paths: `paths` lists
them, and `RunConfig.for_path()` gives the config of one cell.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from harness._validate import Invalid, bounded, build, to_plain
from harness.anomalies import AnomalyClass
from harness.errors import ConfigError
from harness.txn_paths import ALL_PATHS, TxnPath

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"
_EMPTY: Mapping[str, Any] = types.MappingProxyType({})


class Target(StrEnum):
    """Where a run's cluster comes from."""

    EMBEDDED = "embedded"
    PULSAR = "pulsar"
    COMPOSE = "compose"
    EXTERNAL = "external"


class WorkloadKind(StrEnum):
    ATOMIC_PRODUCE = "atomic-produce"
    CONSUME_TRANSFORM_PRODUCE = "consume-transform-produce"
    ACK_ONLY = "ack-only"
    MIXED = "mixed"


class TxnPipeline(StrEnum):
    """When an atomic-produce user starts its next transaction (see WorkloadConfig.txn_pipeline)."""

    SERIAL = "serial"              # after the previous one's commit or abort returned
    COMMIT_ASYNC = "commit-async"  # once the previous one's sends completed; its commit goes on meanwhile
    SENDS_ASYNC = "sends-async"    # as soon as the previous one opened; its sends and commit go on meanwhile


@dataclass(frozen=True)
class ClusterConfig:
    brokers: int = bounded(2, min=1, max=5, help="embedded brokers")
    settings: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Broker settings by their Pulsar names (e.g. transactionLogBatchedWriteMaxRecords)."""
    ready_timeout_s: float = bounded(90.0, min=1, max=900,
                                     help="seconds the started cluster has to become ready (the compose "
                                          "target waits at least 300)")
    compose_file: str | None = None
    """Compose target: a file path or a file name in compose/; null takes the path's default file."""
    service_url: str | None = None
    """External target: the pulsar:// URL clients start from (or --service-url)."""
    admin_url: str | None = None
    """External target: a broker's http:// admin URL, also read for /metrics (or --admin-url)."""
    pulsar_version: str | None = None
    """Pulsar target: the pinned release to run (targets/pulsar/versions.py); null takes 5.0's."""


def parse_setting_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` pairs as broker settings; VALUE is JSON when it parses (numbers, booleans).

    It lives with `ClusterConfig.settings` because both `txnbench run|bench|...` and
    `txnbench cluster up` read the same pairs into the same settings.
    """
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError("--set", pair, "expected KEY=VALUE", "e.g. --set transactionLogBatchedWriteMaxRecords=64")
        try:
            settings[key] = json.loads(raw)
        except ValueError:
            settings[key] = raw
    return settings


class ColdReads(StrEnum):
    """How the drain makes its final reads come from durable storage, not from brokers' caches."""

    AUTO = "auto"          # restart when the scenario has faults, none otherwise
    RESTART = "restart"    # stop every broker gracefully, then start them all again
    UNLOAD = "unload"      # unload every topic of the run (its partitions or segments)
    NONE = "none"          # read from the brokers as they are


@dataclass(frozen=True)
class PhaseConfig:
    """Phase lengths. Load runs through warmup, steady, faults and recovery."""

    warmup_s: float = bounded(5.0, min=0, max=3600, help="load runs; its numbers are not the result")
    steady_s: float = bounded(60.0, min=1, max=86400, help="the measured window, without faults")
    faults_s: float = bounded(0.0, min=0, max=86400, help="nemesis active; 0 when no faults")
    faults_overrun_s: float = bounded(600.0, min=0, max=86400,
                                      help="how long the faults phase may run past faults_s so that every "
                                           "planned fault window runs (a broker's restart on real Pulsar takes "
                                           "20-35 s the plan does not count, and the timeline slips); the phase "
                                           "ends when the last window has healed; 0 cuts the timeline at faults_s")
    quiet_tail_s: float = bounded(0.0, min=0, max=3600,
                                  help="the load stops this long before the faults phase's planned end, so the last "
                                       "faults heal on a cluster nobody writes to: state a broker kept stale is read "
                                       "by the drain's live read before any write repairs it (the recovery phase "
                                       "then runs without load too); 0: the load runs on")
    recovery_s: float = bounded(5.0, min=0, max=3600, help="faults healed, load still running; then the load stops")
    drain_timeout_s: float = bounded(60.0, min=1, max=3600,
                                     help="bound on the drain (final reads of every topic and subscription "
                                          "after the load stops), plus a second per 4,000 messages the load sent "
                                          "(orchestrator.run.drain_budget_s); a drain cut short makes the verdict "
                                          "unknown")
    cold_reads: ColdReads = ColdReads.AUTO
    """Before the final reads: restart every broker (restart) or unload every topic (unload), so the
    drain reads what is durable, not what a broker cached; auto: restart when there are faults. The
    drain first reads every topic on the live system too, and both reads are checked."""


@dataclass(frozen=True)
class LoadConfig:
    users: int = bounded(8, min=1, max=10000,
                         help="transactional users over all load processes (feeders and verifiers come on top)")
    spawn_rate: float = bounded(8.0, min=0.1, max=10000, help="users started per second")
    rate_per_user: float | None = bounded(None, min=0.01, max=100000)
    """Transactions per second per user; null runs closed-loop (as fast as replies come)."""
    workers: int = bounded(0, min=0, max=64)
    """Locust worker processes; 0 runs a local runner in one load process."""
    web_ui: bool = False
    """Serve Locust's web UI on 127.0.0.1 (or --web-ui)."""
    web_port: int = bounded(8089, min=1024, max=65535, help="port of Locust's web UI when web_ui is true")
    remote_workers: int = bounded(0, min=0, max=1024,
                                  help="Locust worker processes on other hosts (`txnbench worker --master "
                                       "HOST:PORT --processes N`) the run waits for before its users start")
    master_bind: str = "127.0.0.1"
    """Address the Locust master binds when remote_workers > 0 (an address of this host the load hosts
    reach; 0.0.0.0 only when you mean every interface)."""
    master_port: int = bounded(5557, min=1024, max=65535,
                               help="port of the Locust master when remote_workers > 0 (local workers alone "
                                    "use a free port)")
    remote_wait_s: float = bounded(60.0, min=1, max=3600,
                                   help="how long the load process waits for the remote workers to join")

    @property
    def processes(self) -> int:
        """Load-generating processes: local and remote workers, or the one local runner."""
        return max(1, self.workers + self.remote_workers)

    def check(self) -> None:
        try:
            ipaddress.ip_address(self.master_bind)
        except ValueError:
            raise Invalid("master_bind", f"{self.master_bind!r} is not an IP address",
                          "give an address of this host, e.g. 127.0.0.1 or 10.0.0.5") from None


TIMEOUT_COMMIT_WINDOW_S = 1.0
"""A commit invoked this close to its transaction's timeout (either side, counted from its open) races the
coordinator's timeout abort: `workload.timeout_commit_ratio` draws its commits in this window, and the load's
status and the report count every commit invoked in it (timeout-boundary commits)."""


@dataclass(frozen=True)
class WorkloadConfig:
    kind: WorkloadKind = WorkloadKind.ATOMIC_PRODUCE
    """Which transactional users run; `mixed` runs several kinds side by side, weighted by `mix`."""
    namespace: str = "public/txnbench"
    topics: int = bounded(4, min=1, max=1000,
                          help="topics of each role the workload uses (atomic-produce's, the "
                               "consume-transform-produce inputs and outputs, ack-only's)")
    participants: int = bounded(2, min=1, max=64,
                                help="participants per topic, the same on every path: v4 partitions = v5 "
                                     "initial segments, so a transaction touching a topic has as many "
                                     "possible participants on both (the comparison flags runs whose "
                                     "shapes differ)")
    partitions: int | None = bounded(None, min=0, max=64,
                                     help="v4 partitions per topic when it must differ from `participants` "
                                          "(0 = not partitioned); null follows `participants`")
    segments: int | None = bounded(None, min=1, max=64,
                                   help="v5 initial segments per scalable topic when it must differ from "
                                        "`participants`; null follows `participants`")
    messages_per_txn: int = bounded(4, min=1, max=10000,
                                    help="messages each transaction sends (consume-transform-produce: at "
                                         "most, one per input)")
    topics_per_txn: int = bounded(2, min=1, max=1000,
                                  help="distinct topics each transaction's messages are spread over")
    acks_per_txn: int = bounded(2, min=1, max=10000,
                                help="consume-transform-produce and ack-only: inputs each transaction "
                                     "receives and acks (at most)")
    message_size: int = bounded(256, min=64, max=4 * 1024 * 1024, help="payload bytes incl. padding")
    keys: int = bounded(16, min=0, max=1_000_000,
                        help="distinct message keys, drawn at random; 0: messages carry no key (a partitioned "
                             "topic routes them round robin, as pulsar-perf's)")
    abort_ratio: float = bounded(0.1, min=0.0, max=1.0, help="share of transactions aborted on purpose")
    txn_timeout_s: float = bounded(30.0, min=1, max=3600,
                                   help="timeout of each transaction at its coordinator; the drain waits "
                                        "this long for transactions the load left open")
    hold_s: float = bounded(0.0, min=0, max=600,
                            help="atomic-produce: seconds a transaction stays open after its sends before it "
                                 "ends, so about `users` transactions are open at any time (experiment 3)")
    ack_hold_s: float = bounded(0.0, min=0, max=600,
                                help="consume-transform-produce and ack-only: seconds a transaction stays open "
                                     "after its acks before it ends, so its acknowledgements are held (pending) "
                                     "across topic unloads and broker restarts")
    long_txn_ratio: float = bounded(0.0, min=0.0, max=1.0,
                                    help="share of transactions held open `long_hold_s` after their sends or "
                                         "acks (a stream processor's checkpoint-long transaction), so some "
                                         "are open across ledger rollovers, moves, splits and failovers")
    long_hold_s: float = bounded(8.0, min=0, max=600,
                                 help="seconds a long transaction (`long_txn_ratio`) stays open before it ends")
    op_timeout_s: float = bounded(30.0, min=0.1, max=3600,
                                  help="client timeout of each operation (send, receive, ack, commit, abort)")
    send_concurrency: int = bounded(1, min=1, max=1000,
                                    help="atomic-produce and consume-transform-produce: sends of one transaction "
                                         "in flight at once, each recorded under its own process lane "
                                         "(`w0/u7/l1` ...); 1 sends one after another")
    txn_pipeline: TxnPipeline = TxnPipeline.SERIAL
    """atomic-produce: when a user opens its next transaction. `serial`: after the previous one's commit or
    abort returned. `commit-async`: once the previous one's sends completed, its commit going on in the
    background (pulsar-perf's V5 client). `sends-async`: as soon as the previous one opened, its sends and
    commit going on in the background (pulsar-perf's v4 client, whose commit waits for the sends). Every
    operation still has its own process lane, at most `open_txns_per_user` transactions per user in flight."""
    open_txns_per_user: int = bounded(16, min=1, max=1000,
                                      help="atomic-produce with a txn_pipeline other than serial: transactions "
                                           "one user has in flight (opened, not yet ended) at most")
    batching: bool = False
    """Batch messages in the client's producers (not the coordinator's log: that is the v4-batched path)."""
    feed_batch: int = bounded(1, min=1, max=1000,
                              help="feeders send up to this many inputs to one topic at once through a "
                                   "batching producer (as Java's default producer does), so consumers receive "
                                   "batches and their transactions acknowledge single messages of a batch "
                                   "(batch-index acks, `msg_id` `ledger:entry:index`); 1 sends one at a time, "
                                   "unbatched")
    feed_txn_ratio: float = bounded(
        0.0, min=0.0, max=1.0,
        help="share of feeder sends made in a transaction of their own (with `feed_batch`, a whole batch in one), "
             "aborted with `abort_ratio`: the consume-transform-produce and ack-only inputs then hold committed, "
             "aborted and still open transactional messages besides plain ones, so the input subscriptions "
             "(Shared, Failover) dispatch past transaction markers, filter aborted messages and wait at a held "
             "read position while their own transactions' acks are pending on the same entries; 0: plain sends")
    consumers_per_subscription: int = bounded(2, min=1, max=100,
                                              help="ack-only: users sharing each Shared subscription, "
                                                   "whose acks can conflict")
    ctp_consumers_per_subscription: int = bounded(
        1, min=1, max=100,
        help="consume-transform-produce: users of a load process sharing each input topic's Shared "
             "subscription (1: each user on the next input topic); with 2 or more, a transaction also "
             "processes, with probability `conflict_ratio`, an input a sibling holds, so two transactions "
             "ack the same message")
    ctp_cumulative_users: int = bounded(
        0, min=0, max=100,
        help="consume-transform-produce users per load process that acknowledge cumulatively: the last input "
             "topic gets a Failover subscription (the others keep theirs, Shared), these users all consume it "
             "(one active consumer per partition or segment, the others on standby, so a killed or cut-off "
             "active one fails over with its transaction's cumulative ack pending) and each transaction acks "
             "the last input it processed from each partition or segment cumulatively; after one that did not "
             "commit, the user asks for everything unacknowledged again, as a Java application must")
    conflict_ratio: float = bounded(0.1, min=0.0, max=1.0,
                                    help="ack-only, and consume-transform-produce with "
                                         "`ctp_consumers_per_subscription` 2 or more: share of transactions "
                                         "that also ack a message a sibling consumer holds (provokes "
                                         "TransactionConflict)")
    timeout_commit_ratio: float = bounded(
        0.0, min=0.0, max=1.0,
        help="share of transactions (every transactional kind) held open until their timeout "
             "(`txn_timeout_s`, within 1 s either side, drawn) and then committed: the commit races the "
             "coordinator's timeout abort. Such a transaction ends in the background while its user goes on")
    foreign_abort_ratio: float = bounded(
        0.0, min=0.0, max=1.0,
        help="share of commits a second client of the load process races with an abort of the same "
             "transaction by its id (END_TXN from another connection; Pulsar's coordinator checks no owner "
             "without authentication), recorded as a `txn-abort` of process `<writer>/foreign`")
    feeders: int = bounded(2, min=0, max=1000,
                           help="feeder users per load process supplying consume-transform-produce "
                                "and ack-only inputs")
    verifiers: int = bounded(1, min=0, max=1000,
                             help="verifying consumer users per load process")
    mix: Mapping[WorkloadKind, int] = field(default_factory=lambda: types.MappingProxyType({}))
    """Weights of the user kinds in a `mixed` workload."""

    @property
    def v4_partitions(self) -> int:
        """Partitions of each v4 topic (0: not partitioned; one participant is an unpartitioned topic)."""
        if self.partitions is not None:
            return self.partitions
        return self.participants if self.participants > 1 else 0

    @property
    def v5_segments(self) -> int:
        """Initial segments of each v5 scalable topic."""
        return self.participants if self.segments is None else self.segments

    def shape(self, scalable: bool) -> dict[str, int]:
        """The participants shape a run on one path has: what must match for a fair comparison.

        `per_topic` is the partitions (v4) or initial segments (v5) of each topic (an
        unpartitioned v4 topic is one participant); the rest says how many topics a
        transaction spreads over and how many messages and acks it carries.
        """
        per_topic = self.v5_segments if scalable else max(1, self.v4_partitions)
        return {"per_topic": per_topic, "topics": self.topics, "topics_per_txn": self.topics_per_txn,
                "messages_per_txn": self.messages_per_txn, "acks_per_txn": self.acks_per_txn}

    def check(self) -> None:
        if self.topics_per_txn > self.topics:
            raise Invalid("topics_per_txn", f"{self.topics_per_txn} is more than topics ({self.topics})",
                          "lower topics_per_txn or raise topics")
        if self.hold_s and self.hold_s >= self.txn_timeout_s:
            raise Invalid("hold_s", f"{self.hold_s:g} s is not below txn_timeout_s ({self.txn_timeout_s:g} s): "
                          "the coordinator would time every held transaction out",
                          "lower hold_s or raise txn_timeout_s")
        if self.ack_hold_s and self.ack_hold_s >= self.txn_timeout_s:
            raise Invalid("ack_hold_s", f"{self.ack_hold_s:g} s is not below txn_timeout_s "
                          f"({self.txn_timeout_s:g} s): the coordinator would time every held transaction out",
                          "lower ack_hold_s or raise txn_timeout_s")
        if self.long_txn_ratio and self.long_hold_s >= self.txn_timeout_s:
            raise Invalid("long_hold_s", f"{self.long_hold_s:g} s is not below txn_timeout_s "
                          f"({self.txn_timeout_s:g} s): the coordinator would time every long transaction out",
                          "lower long_hold_s or raise txn_timeout_s")
        if self.txn_pipeline is not TxnPipeline.SERIAL and self.kind not in (WorkloadKind.ATOMIC_PRODUCE,
                                                                            WorkloadKind.MIXED):
            raise Invalid("txn_pipeline", f"{self.txn_pipeline.value} applies to atomic-produce users only, and "
                          f"this workload is {self.kind.value}", "use txn_pipeline: serial")
        if self.kind is WorkloadKind.MIXED and not self.mix:
            raise Invalid("mix", "a mixed workload needs weights",
                          "add e.g. `mix: {atomic-produce: 2, ack-only: 1}`")
        if WorkloadKind.MIXED in self.mix:
            raise Invalid("mix", "'mixed' cannot be one of its own parts", "list only concrete kinds")
        if any(w < 0 for w in self.mix.values()) or (self.mix and sum(self.mix.values()) == 0):
            raise Invalid("mix", "weights must be non-negative with a positive sum", "e.g. 2 and 1")
        fed = (WorkloadKind.CONSUME_TRANSFORM_PRODUCE, WorkloadKind.ACK_ONLY)
        needs_inputs = (self.kind in fed if self.kind is not WorkloadKind.MIXED
                        else any(self.mix.get(k, 0) > 0 for k in fed))
        if needs_inputs and self.feeders == 0:
            raise Invalid("feeders", "consume-transform-produce and ack-only users need inputs, "
                          "and no feeder users would supply them", "set feeders to 1 or more")
        if self.ctp_cumulative_users:
            ctp_runs = (self.kind is WorkloadKind.CONSUME_TRANSFORM_PRODUCE
                        or (self.kind is WorkloadKind.MIXED
                            and self.mix.get(WorkloadKind.CONSUME_TRANSFORM_PRODUCE, 0) > 0))
            if not ctp_runs:
                raise Invalid("ctp_cumulative_users", "cumulative consume-transform-produce users need the "
                              "consume-transform-produce topics, and this workload has none",
                              "add consume-transform-produce to the workload, or set ctp_cumulative_users: 0")
            if self.topics < 2:
                raise Invalid("ctp_cumulative_users", f"the cumulative users take the last input topic and the "
                              f"Shared ones the others, and topics is {self.topics}", "set topics to 2 or more")
        if "/" not in self.namespace or self.namespace.count("/") != 1:
            raise Invalid("namespace", f"{self.namespace!r} is not tenant/namespace", "e.g. public/txnbench")


class TriggerOn(StrEnum):
    """History operations a fault can wait for (what the load records, see docs/history.md)."""

    TXN_OPEN = "txn-open"
    SEND = "send"
    ACK = "ack"
    TXN_COMMIT = "txn-commit"
    TXN_ABORT = "txn-abort"


class TriggerType(StrEnum):
    INVOKE = "invoke"       # the operation starts (e.g. the coordinator is about to end a transaction)
    OK = "ok"               # it completed (e.g. a commit's markers or decision were written)


@dataclass(frozen=True)
class TriggerSpec:
    """Inject at a critical moment: when the fault is due, wait for the load's next matching
    operation in the run's history, then inject at once (faults/README.md, 'Triggers')."""

    op: TriggerOn
    """The operation to wait for: txn-open, send, ack, txn-commit or txn-abort."""
    type: TriggerType = TriggerType.INVOKE
    """invoke (the operation started) or ok (it completed)."""
    within_s: float = bounded(10.0, min=0.1, max=3600, help="seconds to wait for it; the fault is injected "
                                                            "anyway when none comes (recorded as not fired)")


@dataclass(frozen=True)
class FlapSpec:
    """A flapping fault: `count` short windows back to back, each `for_s` on then `off_s` off."""

    count: int = bounded(10, min=1, max=10000, help="windows in one burst")
    off_s: float = bounded(1.0, min=0, max=3600, help="seconds healed between two windows of the burst")


@dataclass(frozen=True)
class OverlapSpec:
    """A fault stacked inside another's window: injected `after_s` into it, healed after its own
    `for_s` (a store down while a coordinator moves; several failures at once, as outages are)."""

    kind: str
    """The fault kind, as in `faults.schedule[].kind`."""
    target: str = "random"
    """What to break; a `...:trigger` target aims at what the window's trigger saw."""
    after_s: float = bounded(0.0, min=0, max=3600, help="seconds after the window's start (its first "
                                                        "fault's injection) to inject this one")
    for_s: float = bounded(5.0, min=0, max=3600, help="seconds until this fault is healed (0 for the "
                                                      "instant kinds and a restart at once)")
    params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Settings of the kind, as in `faults.schedule[].params`."""


@dataclass(frozen=True)
class FaultSpec:
    """One scheduled fault: what, where, when and for how long.

    `target` selects what to break; the `faults` package resolves it (e.g.
    `broker:random`, `broker:0`, `coordinator`, `metadata`, `ledger`,
    `client-broker:random`, `broker-metadata:1`, `segment:random`).
    `at_s` and `every_s` count from the start of the faults phase.
    """

    kind: str
    """The fault kind (the table below). The kinds are the `faults` package's (faults/kinds/);
    an unknown one is refused before anything starts."""
    target: str = "random"
    """What to break (a selector, see above); `random` takes the kind's default target."""
    at_s: float | None = bounded(None, min=0, max=86400, help="inject once, this many seconds into the "
                                                               "faults phase (give this or every_s)")
    every_s: float | None = bounded(None, min=0.1, max=86400, help="inject at 0 s and every this many "
                                                                   "seconds after (give this or at_s)")
    until_s: float | None = bounded(None, min=0.1, max=86400, help="with every_s: no occurrence at or after "
                                                                   "this many seconds into the faults phase; "
                                                                   "null: repeat until the phase ends")
    for_s: float = bounded(5.0, min=0, max=3600, help="seconds until the fault is healed (split, merge "
                                                      "and terminate are instant)")
    params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Settings of the kind, e.g. direction, latency_ms, jitter_ms, rate_kbps (faults/README.md)."""
    quiet_s: float | None = bounded(None, min=0, max=3600, help="fault-free seconds after each of this "
                                                                "entry's windows; null takes faults.quiet_s")
    flap: FlapSpec | None = None
    """Repeat the fault as a burst of short windows (count, off_s); null: one window."""
    trigger: TriggerSpec | None = None
    """Wait for a moment of the load (op, type, within_s) before injecting; null: inject when due."""
    overlap: tuple[OverlapSpec, ...] = ()
    """Faults stacked inside this one's window, each `after_s` into it and held its own `for_s`;
    the window lasts until the last is healed. Empty: this fault alone."""

    def check(self) -> None:
        if (self.at_s is None) == (self.every_s is None):
            raise Invalid("at_s", "give exactly one of at_s (once) and every_s (repeating)",
                          "e.g. `at_s: 10` or `every_s: 20`")
        if self.until_s is not None and self.every_s is None:
            raise Invalid("until_s", "until_s ends a repeating entry; this one runs once (at_s)",
                          "drop until_s, or give every_s instead of at_s")
        if self.overlap and self.flap is not None:
            raise Invalid("overlap", "a flapping fault cannot carry overlapping ones",
                          "give the overlapping faults their own entry, or drop flap")


@dataclass(frozen=True)
class RandomFaults:
    """Seeded random faults: every `every_s`, pick a random non-empty subset of `kinds`, hold it `for_s`."""

    kinds: tuple[str, ...]
    """Fault kinds to draw from; those that do not apply to the run's path are left out."""
    every_s: float = bounded(15.0, min=0.1, max=86400,
                             help="seconds between draws, from the start of the faults phase")
    for_s: float = bounded(5.0, min=0, max=3600, help="seconds until each draw is healed")
    target: str = "random"
    """Selector for every drawn fault; `random` takes each kind's default target."""

    def check(self) -> None:
        if not self.kinds:
            raise Invalid("kinds", "no fault kinds listed", "list at least one, e.g. [partition, kill]")


@dataclass(frozen=True)
class GeneratedFaults:
    """A schedule generated from the run's seed (faults/generate.py), as Jepsen's nemesis packages
    compose faults: every kind, random targets, start times, durations and parameters within these
    bounds, several faults in effect at once. The same seed gives the same schedule, so a failing
    seed reproduces with `txnbench run SCENARIO --path P --seed S`."""

    kinds: tuple[str, ...] = ()
    """Fault kinds to draw from; empty: every kind but slow-participant (whose delay must fit the
    GC and session settings), client faults included (client-kill is left out of a run without
    load.workers). Kinds that do not apply to the run's path are left out."""
    gap_min_s: float = bounded(1.0, min=0, max=3600, help="shortest fault-free gap before a window")
    gap_max_s: float = bounded(6.0, min=0, max=3600, help="longest fault-free gap before a window")
    for_min_s: float = bounded(0.5, min=0, max=3600, help="shortest time a healable fault stays")
    for_max_s: float = bounded(8.0, min=0, max=3600, help="longest time a healable fault stays")
    together: int = bounded(3, min=1, max=8, help="at most this many faults in effect at once (each "
                                                  "healed after its own duration)")
    triggered: float = bounded(0.4, min=0, max=1, help="share of windows timed to the load (a commit or a "
                                                       "transactional send) and aimed at what it touched")
    terminates: int = bounded(1, min=0, max=100, help="at most this many terminates (a terminated v4 topic "
                                                      "refuses every later send)")
    isolations: int = bounded(1, min=0, max=100, help="at most this many client-isolate faults (each held "
                                                      "longer than the transaction timeout)")
    from_s: float = bounded(0.0, min=0, max=86400, help="first moment of the faults phase a window may start "
                                                        "(after a written schedule, say)")
    until_s: float | None = bounded(None, min=0.1, max=86400, help="no window starts at or after this second of "
                                                                   "the faults phase; null: the phase's end")

    def check(self) -> None:
        if self.until_s is not None and self.from_s >= self.until_s:
            raise Invalid("from_s", f"{self.from_s:g} is not before until_s ({self.until_s:g})",
                          "start the generated windows before until_s")
        if self.gap_min_s > self.gap_max_s:
            raise Invalid("gap_min_s", f"{self.gap_min_s:g} is above gap_max_s ({self.gap_max_s:g})",
                          "swap them")
        if self.for_min_s > self.for_max_s:
            raise Invalid("for_min_s", f"{self.for_min_s:g} is above for_max_s ({self.for_max_s:g})",
                          "swap them")


@dataclass(frozen=True)
class FaultsConfig:
    quiet_s: float = bounded(5.0, min=0, max=3600, help="fault-free time after each heal")
    schedule: tuple[FaultSpec, ...] = ()
    random: RandomFaults | None = None
    generated: GeneratedFaults | None = None
    """A schedule generated from the seed (every kind, random targets, times, durations; faults
    overlapping); null: none."""

    @property
    def enabled(self) -> bool:
        return bool(self.schedule) or self.random is not None or self.generated is not None


class ExpectationScope(StrEnum):
    """Which instances of an expected anomaly class the expectation covers."""

    ANY = "any"
    TERMINATED_TOPICS = "terminated-topics"   # only those a terminate could have caused: its topic, its window


@dataclass(frozen=True)
class ExpectedAnomalies:
    """Anomalies a scenario provokes on purpose on some paths, and why (Jepsen's allowed errors).

    The checker still reports them and the run is still invalid; the matrix's exit status
    and the report tell them apart from anomalies nobody expected, so a known design
    limitation (v4's commit markers on a terminated topic) does not hide a new bug. With
    `scope: terminated-topics` an instance is expected only when a terminate caused it: its
    transaction sent to the terminated topic (a partition of it, or the sealed segment) and was
    open when it was terminated, or its values lie, in a terminated partition, behind an entry of
    such a transaction; at most as many instances per transaction as one transaction can produce
    (docs/checks.md, "Expected anomalies"). Any other instance (the same class in a transaction
    that never sent there, or was done before the terminate, or one that cannot be attributed)
    still counts as unexpected.
    """

    paths: tuple[TxnPath, ...]
    """Paths on which these anomalies are expected."""
    anomalies: tuple[str, ...]
    """Anomaly classes expected (the classes of docs/checks.md, e.g. partial-txn)."""
    reason: str
    """The design limitation that causes them; the report shows it."""
    scope: ExpectationScope = ExpectationScope.ANY
    """`any` instance, or only instances a terminate caused: of transactions that sent to the terminated
    topic or segment and were open when it was terminated (or values behind such a transaction's entry)."""

    def check(self) -> None:
        if not self.paths:
            raise Invalid("paths", "no paths listed", "list the paths these anomalies are expected on")
        known = tuple(AnomalyClass)
        unknown = [a for a in self.anomalies if a not in known]
        if unknown or not self.anomalies:
            raise Invalid("anomalies", f"{unknown[0]!r} is not an anomaly class" if unknown else "none listed",
                          f"use some of: {', '.join(known)}")
        if not self.reason.strip():
            raise Invalid("reason", "an expected anomaly needs its reason", "say which design limitation causes it")

    @property
    def classes(self) -> tuple[AnomalyClass, ...]:
        """`anomalies` as the enum (a scenario's names are checked by `check()`).

        The YAML names are read as text so that a wrong one is refused by `check()`, whose
        error lists every class, rather than by the generic enum conversion.
        """
        return tuple(AnomalyClass(a) for a in self.anomalies)


@dataclass(frozen=True)
class ChecksConfig:
    stall_after_s: float = bounded(10.0, min=0.001, max=86400,
                                   help="a commit or abort slower than this is a stalled-commit anomaly")
    abort_bound_s: float = bounded(5.0, min=0, max=3600,
                                   help="a transaction its client abandoned must be aborted within its timeout "
                                        "plus this (unresolved-txn); the drain asks the coordinators after it")
    expected: tuple[ExpectedAnomalies, ...] = ()
    """Anomalies the scenario provokes on purpose on some paths, and why."""

    def expected_on(self, txn_path: TxnPath) -> dict[AnomalyClass, ExpectedAnomalies]:
        """Anomaly class -> the expectation covering it on `txn_path` (the first entry naming it).

        The one definition of what a scenario expects: the run's exit status, the report
        and the comparison all ask it (analysis.verdicts, from the manifest's plain config).
        """
        out: dict[AnomalyClass, ExpectedAnomalies] = {}
        for entry in self.expected:
            if txn_path in entry.paths:
                for anomaly in entry.classes:
                    out.setdefault(anomaly, entry)
        return out

    @classmethod
    def from_plain(cls, data: Mapping[str, Any] | None, source: str) -> ChecksConfig:
        """Rebuild the checks config a manifest recorded (`config.checks`, `to_dict()`'s form).

        Validated as a scenario's is, so an old run folder's manifest gives the same
        expectations as the scenario it ran; a damaged one is a ConfigError naming
        `source` and the key.
        """
        return build(cls, data, source, "config.checks")


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs, resolved and frozen. `source` is the file it came from."""

    name: str = ""
    """Names the run folders and reports; empty takes the file's name without `.yaml`."""
    description: str = ""
    seed: int = 1
    """Seeds every random choice: keys, on-purpose aborts, the fault schedule and its targets."""
    path: TxnPath = TxnPath.V4
    """The path `txnbench run` uses (or --path)."""
    paths: tuple[TxnPath, ...] = ALL_PATHS
    """The paths a matrix (bench, chaos, sweep) runs, in this order (or --paths)."""
    target: Target = Target.EMBEDDED
    """Where the cluster comes from: started here (embedded), Docker Compose, or an external cluster."""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    phases: PhaseConfig = field(default_factory=PhaseConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    faults: FaultsConfig = field(default_factory=FaultsConfig)
    checks: ChecksConfig = field(default_factory=ChecksConfig)

    def check(self) -> None:
        if self.name and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", self.name):
            raise Invalid("name", f"{self.name!r} cannot be part of a folder name",
                          "use letters, digits, '-', '_' and '.' (at most 64)")
        if not self.paths:
            raise Invalid("paths", "no paths listed", "list some of: v4, v4-batched, v5")
        if len(set(self.paths)) != len(self.paths):
            raise Invalid("paths", "a path is listed twice", "list each path once")
        if self.faults.enabled and self.phases.faults_s <= 0:
            raise Invalid("phases.faults_s", "faults are configured but the faults phase is 0 s",
                          "set phases.faults_s, e.g. 60")
        if self.phases.quiet_tail_s > 0:
            self._check_quiet_tail()
        if self.target is Target.EXTERNAL and not self.cluster.service_url:
            raise Invalid("cluster.service_url", "the external target needs a service URL",
                          "set cluster.service_url or pass --service-url")

    def _check_quiet_tail(self) -> None:
        """A quiet tail needs a faults phase to end, and no fault that needs the load process after
        it stopped: a client kill goes through it, and a drawn schedule may place one anywhere."""
        tail, faults_s = self.phases.quiet_tail_s, self.phases.faults_s
        if not self.faults.enabled or tail >= faults_s:
            raise Invalid("phases.quiet_tail_s", f"{tail:g} s of quiet tail needs a faults phase longer than it "
                          f"(faults_s {faults_s:g})", "set phases.quiet_tail_s below phases.faults_s, or 0")
        if self.faults.random is not None or self.faults.generated is not None:
            raise Invalid("phases.quiet_tail_s", "a drawn schedule (faults.random, faults.generated) may kill a "
                          "load worker after the load stopped", "use a written schedule, or set phases.quiet_tail_s 0")
        kills = [f for f in self.faults.schedule if f.kind == "client-kill"
                 or any(o.kind == "client-kill" for o in f.overlap)]
        if kills:
            raise Invalid("phases.quiet_tail_s", "client-kill goes through the load process, which the quiet tail "
                          "stops", "drop the client-kill windows, or set phases.quiet_tail_s 0")
        quiet_from = faults_s - tail
        waiting = [f for f in self.faults.schedule if f.trigger is not None
                   and (f.at_s if f.at_s is not None else 0.0) >= quiet_from]
        if waiting:
            raise Invalid("phases.quiet_tail_s", f"a triggered fault at {waiting[0].at_s:g} s waits for a load "
                          f"operation, and the load stops at {quiet_from:g} s",
                          "move the triggered windows before the quiet tail, or drop their trigger")

    def for_path(self, txn_path: TxnPath) -> RunConfig:
        return dataclasses.replace(self, path=txn_path)

    def with_duration(self, seconds: float) -> RunConfig:
        """Shorten or lengthen the main phase: faults for chaos scenarios, steady otherwise."""
        if seconds <= 0:
            raise ConfigError("--duration", "", f"{seconds} is not a positive number of seconds",
                              "pass e.g. --duration 20")
        if self.faults.enabled:
            tail = self.phases.quiet_tail_s
            if tail and seconds <= tail:
                raise ConfigError("--duration", "", f"{seconds:g} s of faults leaves no load before the scenario's "
                                  f"{tail:g} s quiet tail (phases.quiet_tail_s)",
                                  f"pass --duration above {tail:g}")
            return dataclasses.replace(self, phases=dataclasses.replace(self.phases, faults_s=float(seconds)))
        return dataclasses.replace(self, phases=dataclasses.replace(self.phases, steady_s=float(seconds)))

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_plain(cls, data: Any, source: str) -> RunConfig:
        """Rebuild a config from its `to_dict()`, trusting it: each value is converted back, the
        classes' `check()` rules are not run again (the orchestrator validated the scenario once,
        before anything started: orchestrator.scenario.load). A ConfigError when the data is not
        a config."""
        return build(cls, data, source, checked=False)


def available_scenarios(directory: Path = SCENARIO_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yaml"))


def resolve_scenario(name_or_path: str, directory: Path = SCENARIO_DIR) -> Path:
    """Find a scenario file: an existing path, or a name in scenarios/."""
    candidate = Path(name_or_path)
    if candidate.is_file():
        return candidate
    for base in (Path.cwd() / "scenarios", directory):
        for name in (name_or_path, f"{name_or_path}.yaml"):
            if (base / name).is_file():
                return base / name
    known = ", ".join(available_scenarios(directory)) or "none"
    raise ConfigError(f"scenario '{name_or_path}'", "",
                      "not found (no such file, and no scenarios/" + f"{candidate.stem}.yaml)",
                      f"use a file path or one of: {known}")


def load_scenario(name_or_path: str) -> RunConfig:
    """Load and validate a scenario by name (scenarios/<name>.yaml) or path."""
    path = resolve_scenario(name_or_path)
    return parse_scenario(path.read_text(encoding="utf-8"), source=str(path), default_name=path.stem)


def parse_scenario(text: str, source: str = "<string>", default_name: str = "scenario") -> RunConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(source, where, f"not valid YAML ({problem})",
                          "check the indentation and quoting on that line") from None
    if data is None:
        data = {}
    config = build(RunConfig, data, source)
    if not config.name:
        config = dataclasses.replace(config, name=default_name)
    return config
