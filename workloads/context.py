"""Everything the users of one load process share, in one object.

A load process (or a Locust worker) builds one `LoadContext`: the run's config and
topology, the client, the history recorder of its writer (`w0`, `w1`, ...), the run
clock, the Locust request hook, the stop flag, counters for the status file (also of the
racing decisions the load makes, issue #43), the shared pieces of `workloads.shared`, and,
with `workload.foreign_abort_ratio`, the second client (`workloads.foreign`), made by the
factory the load process hands in. Users find it through their Locust environment
(`LoadContext.of(environment)`); tests build one around a fake client.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.client.config import BatchingConfig
from harness.config import RunConfig
from harness.history import HistoryRecorder, OpF, RunClock
from workloads.api import ClientApi
from workloads.concurrent import Background
from workloads.foreign import ForeignAborts
from workloads.session import StatsSink
from workloads.shared import AckGroups, FeedCredit, ProducerCache
from workloads.topology import TopicRole, Topology


@dataclass
class Counters:
    """Running totals of one load process (read by the status reporter)."""

    ok: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    receives: int = 0
    exceptions: int = 0     # errors that are not operation outcomes (bugs, setup failures)
    #: acks refused because another transaction had acked (or held) the message: the broker's
    #: ack-conflict rule working as meant (ack-only's `conflict_ratio` provokes them); counted in
    #: `failed` as the history's `fail`s, left out of `errors`
    conflicts: int = 0
    respawned: int = 0      # users started again after Locust lost them (workloads.user_guard)
    #: racing decisions the load made on purpose (issue #43), and what became of them:
    #: definite failures that were the expected loss of such a race (a commit at the timeout
    #: refused, a raced commit or a second client's abort refused); counted in `failed`, left out
    #: of `errors`, as conflicts are
    race_losses: int = 0
    #: transactions that also acked a message a sibling consumer held (ack-only, and
    #: consume-transform-produce with ctp_consumers_per_subscription > 1)
    ack_steals: int = 0
    #: commits invoked within TIMEOUT_COMMIT_WINDOW_S of their transaction's timeout: `count`, how
    #: they ended (`ok`, `fail`, `info`), `after` (invoked past the timeout) and `after_ok` (of
    #: those, committed), `planned` (held there on purpose: workload.timeout_commit_ratio)
    timeout_commits: Counter[str] = field(default_factory=Counter)
    #: a second client's aborts of transactions being committed (workload.foreign_abort_ratio):
    #: `count`, `ok`, `fail`, `info`
    foreign_aborts: Counter[str] = field(default_factory=Counter)
    #: END_TXN requests the client sent again after a connection was lost with one in flight
    end_txn_resends: int = 0

    def count(self, f: OpF, *, ok: bool, conflict: bool = False, lost_race: bool = False) -> None:
        (self.ok if ok else self.failed)[f.value] += 1
        if conflict and not ok:
            self.conflicts += 1
        elif lost_race and not ok:
            self.race_losses += 1

    @property
    def committed(self) -> int:
        return self.ok[OpF.TXN_COMMIT.value]

    @property
    def messages(self) -> int:
        return self.ok[OpF.SEND.value]

    @property
    def errors(self) -> int:
        """Failed operations and task exceptions, expected ack conflicts (`conflicts`) and lost
        races the load made on purpose (`race_losses`) left out."""
        return sum(self.failed.values()) - self.conflicts - self.race_losses + self.exceptions

    def races(self) -> dict[str, Any]:
        """The racing decisions the load made, for the status file (workloads.status)."""
        return {"ack_steals": self.ack_steals, "timeout_commits": dict(self.timeout_commits),
                "foreign_aborts": dict(self.foreign_aborts), "end_txn_resends": self.end_txn_resends,
                "race_losses": self.race_losses}

    def snapshot(self) -> dict[str, Any]:
        return {"ok": dict(self.ok), "failed": dict(self.failed), "receives": self.receives,
                "exceptions": self.exceptions, "conflicts": self.conflicts, "respawned": self.respawned,
                "race_losses": self.race_losses, "ack_steals": self.ack_steals,
                "timeout_commits": dict(self.timeout_commits), "foreign_aborts": dict(self.foreign_aborts),
                "end_txn_resends": self.end_txn_resends}

    @staticmethod
    def merge(snapshots: list[dict[str, Any]]) -> Counters:
        total = Counters()
        for snap in snapshots:
            total.ok.update(snap.get("ok") or {})
            total.failed.update(snap.get("failed") or {})
            total.receives += int(snap.get("receives") or 0)
            total.exceptions += int(snap.get("exceptions") or 0)
            total.conflicts += int(snap.get("conflicts") or 0)
            total.respawned += int(snap.get("respawned") or 0)
            total.race_losses += int(snap.get("race_losses") or 0)
            total.ack_steals += int(snap.get("ack_steals") or 0)
            total.timeout_commits.update(snap.get("timeout_commits") or {})
            total.foreign_aborts.update(snap.get("foreign_aborts") or {})
            total.end_txn_resends += int(snap.get("end_txn_resends") or 0)
        return total


_CONTEXTS: weakref.WeakKeyDictionary[Any, LoadContext] = weakref.WeakKeyDictionary()

# Messages a consuming user wants waiting for it: enough for two transactions.
INPUTS_PER_CONSUMER_TXNS = 2
FEED_BATCH_DELAY_S = 0.01
"""How long a feeder's batch waits for the rest of the feeder's messages to its partition: longer than
the 1 ms of Java's default, as a feeder's sends start one after another in a busy load process and
a batch should hold what the feeder sent together (feeders are not measured)."""


def fed_in_batches(config: RunConfig, topology: Topology) -> frozenset[str]:
    """The input topics (consume-transform-produce, ack-only) whose feeders send batches."""
    if config.workload.feed_batch <= 1:
        return frozenset()
    return frozenset(topology.topics_for(TopicRole.CTP_INPUT) + topology.topics_for(TopicRole.ACK))


def feeder_batching(feed_batch: int) -> BatchingConfig | None:
    """A feeder producer's batching: a batch closes when it holds the feeder's whole send."""
    if feed_batch <= 1:
        return None
    return BatchingConfig(max_messages=feed_batch, max_delay_s=FEED_BATCH_DELAY_S)


class LoadContext:
    """The shared state of one load process."""

    def __init__(self, *, config: RunConfig, topology: Topology, client: ClientApi,
                 recorder: HistoryRecorder, clock: RunClock, writer: str,
                 fire: StatsSink | None = None, stopping: threading.Event | None = None,
                 second_client: Callable[[], ClientApi] | None = None) -> None:
        self.config = config
        self.workload = config.workload
        self.topology = topology
        self.client = client
        self.recorder = recorder
        self.clock = clock
        self.writer = writer
        self._fire = fire
        self.stopping = stopping or threading.Event()
        self.counters = Counters()
        self.producers = ProducerCache(client, batching=config.workload.batching,
                                       timeout_s=config.workload.op_timeout_s,
                                       batched_topics=fed_in_batches(config, topology),
                                       topic_batching=feeder_batching(config.workload.feed_batch))
        self.feed = FeedCredit(max(1, config.workload.acks_per_txn) * INPUTS_PER_CONSUMER_TXNS)
        self.ack_groups = AckGroups()
        self.fatal: BaseException | None = None
        self._numbers = itertools.count()
        self._ordinals: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()
        self.on_fatal: Callable[[BaseException], None] | None = None
        self._backgrounds: list[Background] = []
        self._terminated: frozenset[str] = frozenset()
        self.foreign: ForeignAborts | None = (ForeignAborts(self, second_client)
                                              if config.workload.foreign_abort_ratio > 0 else None)
        """The second client that races users' commits with aborts (workload.foreign_abort_ratio)."""

    # ---- topics that refuse writes for good -------------------------------------------------

    def note_terminated(self, topic: str) -> None:
        """`topic` answered a send with "terminated": v4 topics stay terminated, so the users of
        this process stop choosing it, as an application would (each choice would stall a user on
        an end-transaction the terminated topic cannot take). v5 segments seal and their topic
        goes on in new segments: `topic://` names are never noted."""
        if topic.startswith("topic://"):
            return
        with self._lock:
            self._terminated = self._terminated | {topic}

    def terminated(self, topic: str) -> bool:
        """Whether `topic` answered a send with "terminated" (see note_terminated)."""
        return topic in self._terminated

    def writable(self, topics: Sequence[str], at_least: int) -> Sequence[str]:
        """`topics` without the terminated ones, unless fewer than `at_least` would be left."""
        terminated = self._terminated
        if not terminated:
            return topics
        left = [t for t in topics if t not in terminated]
        return left if len(left) >= at_least else topics

    # ---- users' background work -----------------------------------------------------------

    def add_background(self, background: Background) -> None:
        with self._lock:
            self._backgrounds.append(background)

    def join_background(self, timeout_s: float) -> bool:
        """Wait, `timeout_s` in all, for every user's transactions still ending; True when none is left.

        The load process calls it before closing the client and the history, so no
        background finisher writes into a closed history."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            backgrounds = list(self._backgrounds)
        return all(b.join(max(0.0, deadline - time.monotonic())) for b in backgrounds)

    def most_in_flight(self) -> int:
        """The most transactions one user had ending in the background at once."""
        with self._lock:
            return max((b.most_in_flight for b in self._backgrounds), default=0)

    # ---- lookup from a Locust environment -----------------------------------------------

    def attach(self, environment: Any) -> None:
        _CONTEXTS[environment] = self

    @staticmethod
    def of(environment: Any) -> LoadContext:
        try:
            return _CONTEXTS[environment]
        except KeyError:
            raise RuntimeError("no LoadContext attached to this Locust environment; the load process "
                               "attaches one before starting users") from None

    # ---- numbering and randomness ---------------------------------------------------------

    def next_number(self) -> int:
        """The next user number of this process (`<writer>/u<n>`), never reused."""
        with self._lock:
            return next(self._numbers)

    def ordinal(self, role: str) -> int:
        """0, 1, 2 ... per role: how users of one kind pick their topics."""
        with self._lock:
            counter = self._ordinals.setdefault(role, itertools.count())
            return next(counter)

    def rng(self, number: int) -> random.Random:
        """A generator seeded from the run's seed, the writer and the user number."""
        return random.Random(f"{self.config.seed}/{self.writer}/{number}")

    # ---- reporting ------------------------------------------------------------------------

    def fire(self, request_type: str, name: str, response_time_ms: float, length: int,
             error: BaseException | None) -> None:
        if self._fire is not None:
            self._fire(request_type, name, response_time_ms, length, error)

    def fail_fatally(self, error: BaseException) -> None:
        """The history cannot be trusted any more (e.g. a write failed): stop the load."""
        if self.fatal is None:
            self.fatal = error
        self.stopping.set()
        if self.on_fatal is not None:
            self.on_fatal(error)

    def stop(self) -> None:
        self.stopping.set()
        self.feed.wake()

    def close_second_client(self, timeout_s: float) -> None:
        """Close the second client, if one was made (after `join_background`)."""
        if self.foreign is not None:
            self.foreign.close(timeout_s)
