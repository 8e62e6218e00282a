"""The drain: final reads of every topic and every subscription consumed until empty.

Theory of operation. The checker decides lost writes, partial transactions and stuck
acks against what the drain saw, so the drain must see everything the cluster will
ever make visible, and must say so only when that is true.

1. *Settle.* A transaction the load left open (its commit's outcome unknown, or the
   load killed mid-transaction) can still commit or abort until the coordinator times
   it out, and until then it hides what follows it in each topic (the read horizon)
   and holds the messages it acked. From the load's histories the drain finds every
   transaction that did not end with an `ok` commit or abort and waits until each is
   past `txn_timeout_s` since it was opened (plus a margin for the coordinator's
   timeout sweep: `checks.abort_bound_s`, the bound the checker holds the coordinators
   to). If that wait does not fit in the drain's time, the drain stops there and says
   which transaction and what to change.
1b. *The coordinators' view.* Then, past every such deadline, the drain connects every
   transaction coordinator, as a transactional client does when it starts (a v4 broker loads
   a coordinator, and finishes the commits and aborts it had in flight, only then), and asks the
   coordinator of each of those transactions whose id is known for its state (admin
   `GET /admin/v3/transactions/transactionMetadata/{most}/{least}`) and records the
   answer as a `txn-state` event (`extra.status`: the coordinator's status, `NOT_FOUND`
   when it no longer knows the transaction, `UNKNOWN` with `error` when it could not
   answer, a coordinator not loaded included). On the v5 path the coordinator's view is the
   transaction's header in the metadata store, and Pulsar 5.0.1's admin API has no v5
   endpoint: where the run names the store's address, the drain reads the headers there
   (`extra.metadata.source` `metadata-store`; orchestrator.load.txn_headers). A state that
   is no end (open, committing, aborting) is asked again every `TXN_STATE_REASK_S` for
   `checks.abort_bound_s`: a coordinator just connected finishes what it had in flight while
   it already answers. The checker's `unresolved-txn` holds each abandoned transaction to
   that: not still open, committing or aborting after its timeout plus the bound.
2. *Reads.* Each topic is read from the earliest message to its end with a
   non-durable reader (`Reader.read_to_end`: up to the last message id the broker
   reports for each partition or segment), each message recorded as a `read` event
   (writer `drain`) in log order, per partition, v5 parent segments before children.
   The read goes in rounds of at most `READ_STALL_S`; a round that brings nothing
   means the read is stuck (the end the broker named never arrives), so one stuck
   topic does not take the others' time, unless the owner says a silent partition's
   transaction buffer is still recovering (a v4 partition loaded again gives readers
   nothing until then): that read waits on, its stall counted from the buffer's
   readiness. A topic whose end was not reached is not listed as read. Every round
   goes on with the same reader, which counts a partition it read to its end in an
   earlier round (or was started at) as done, as Pulsar's
   `hasMessageAvailable` does: otherwise a partition finished while another was stuck
   would wait for its last message again and look stuck itself (it did, in the
   self-test of the ledger store that loses acknowledged writes; docs/selftest.md).
   A reader that reached that end listens on for `IDLE_S` more: a broker's last message
   id can lag its data (Pulsar 5.0.1's v5 segments, docs/findings/), and what arrives
   after it is read and noted, not left out.
   Every topic is read once before any is read again: a topic whose reads lack values the
   load's histories show committed is read again (after the first reads of all topics),
   every `REREAD_AFTER_S`, while re-reads bring new values (a broker can make commits
   readable late: Pulsar 5.0.1's v5 segments on ZooKeeper, tens of seconds under load).
   The drain follows the lag it sees rather than one fixed budget: it stops after
   `NO_PROGRESS_REREADS` re-reads that bring nothing, or `LAG_FACTOR` times the longest
   interval it saw between two late arrivals, if that is more; and each late arrival moves
   its deadline to `LAG_FACTOR` times that value's delay from now (never past
   `MAX_STRETCH` times its budget). Late values are noted with their delay, and so is a topic
   whose first messages came later than a stuck round allows (a cold restart loading it): that
   delay stretches the deadline too. The budget starts after step 1: the wait for abandoned
   transactions to time out has its own bound. A topic whose
   committed values were still arriving when even the stretched deadline passed is not
   settled: the drain is incomplete and says how late the last values were, rather than
   leave the checker values it would call lost. The histories only decide how long
   re-reading is worth it, never a verdict.
1c. *Stale ends.* A v4 read that stops short of the broker's last message id, nothing arriving:
   when every entry between the last one read and that end is a transaction marker or a message
   of a transaction the histories show aborted, the read reached the end of what a reader is
   given (Pulsar up to 3.2 names such entries; orchestrator/load/undeliverable.py). Where the owner cannot
   show those entries (getMessageById failing on a terminated topic loaded again, 2.10-4.0.3), the
   reader's own cursor past them says the same. The partition counts as read and the stale end is
   noted (`drain-complete` `extra.undeliverable_ends`, `seen_by_cursor` for the second kind).
1d. *A refused last message id.* A broker can close the connection each time a reader asks
   GET_LAST_MESSAGE_ID, never answer it, or answer it with an error (Pulsar 2.10-4.0.3 on a
   terminated topic it loaded again: apache/pulsar#24063,
   docs/findings/historical/terminated-topic-unreadable-after-reload.md; 2.10, 2.11, 3.3 and 4.0.0
   close the connection, 3.2 stays silent, 3.3 with a transaction buffer answers "Failed to recover
   Transaction Buffer."). After `LAST_ID_LOSSES` such losses, `LAST_ID_UNANSWERED` rounds without
   an answer, or `LAST_ID_FAILURES` error answers, on one topic whose every partition the owner
   says is terminated, the read asks no more and runs to REACHED_END_OF_TOPIC, which a
   terminated partition sends once it dispatched everything. The topic is noted and listed in
   `drain-complete`'s `extra.last_id_refused`, `extra.last_id_unanswered` or
   `extra.last_id_failed`; it explains, it does not judge (a broker slow to load a topic after a
   restart is silent too).
2a. *Held horizons.* A v4 topic still missing committed values after its re-reads: the
   drain asks each partition's owner what holds its read horizon (the transaction buffer's
   max read position, the transaction of the entry after it and that transaction's
   coordinator's view; orchestrator/load/horizons.py), notes it and records it in `drain-complete`'s
   `extra.held_horizons`. It explains; it does not judge.
2b. *Lost entries.* A stuck read is either slow or blocked by an entry the broker can
   no longer return. For each v4 partition (or plain topic) that stopped short, the
   drain asks its owner (admin `internalStats`, then `getMessageById` for entries after
   the last one read: the next one, and per ledger its last one and a binary search for
   where a lost tail starts, since a batch read stops some entries before the lost
   one): when the owner answers that a position it acknowledged
   (inside its ledger list) is gone from the ledger store (`nonRecoverable`), those
   entries are *lost*, a finding rather than a doubt. The drain reads the partition up
   to them with a one-permit reader (one entry per broker read), records each lost run
   (`DrainResult.lost`, the `drain-complete` event's `extra.lost_entries`), reads on
   after it with a reader started there, and lists the topic as read. The reader is at
   a lost run when nothing more arrives and either the entry after the last one read
   is lost, or the broker's cursor of this reader (internalStats' `cursors`, readers'
   included, `readPosition`, asked before the silent round) is stuck at a lost entry:
   between the last value read and a lost entry there may be transaction markers and
   aborted messages, which the broker reads past and never gives a reader. Every value the
   lost entries held is then missing from the final reads, so the checker reports the
   committed ones as `lost-write`. Any other answer (the entry is readable, the store is
   down, no answer) leaves the read stuck, and the verdict unknown, as before. Bounded:
   `MAX_LOST_RUNS` runs and `MAX_PROBES` probed positions per partition.
3. *Subscriptions* (after every read is done). Each planned subscription is consumed with its own type, every
   message recorded as a `receive` event (`extra.redelivery`) and acknowledged
   (a recorded, non-transactional `ack`), until no message is delivered for
   `IDLE_S` seconds. With every transaction ended no ack is pending, so a connected
   consumer with free permits is given every unacknowledged message at once: a
   subscription that stays silent that long is empty, unless the broker is not
   delivering what it should, which is exactly what the checker's stuck-ack looks
   for. Where the admin API gives the subscription's backlog, a backlog left after
   the drain is noted.

Everything is bounded by one deadline (`timeout_s`). Reads and subscriptions run on
a few threads, each its own history process (`drain/r<k>`, `drain/s<k>`).

*Live reads* (`live=True`, writer `drain-live`, processes `drain-live/r<k>`). When the
run makes its final reads cold (every broker restarted), it first drains once on the
live system, as Jepsen's final read does: settle (1), the coordinators' view (1b,
process `drain-live/coordinator`), then the reads (2, 2b), no subscriptions (consuming
would change what the cold drain finds). What the live system shows must be what it
shows after the restart: the checker judges both reads and both views (docs/checks.md,
"Live and cold final reads"), so state a broker holds in memory that disagrees with
durable state (a cache, a listener that stopped, a horizon that did not move, a
coordinator that stopped finishing a transaction) is an anomaly, not something the
restart quietly repairs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import RunConfig
from harness.errors import OperationError
from harness.history import HistoryRecorder, OpF, OpType
from harness.history.events import Event, read_events
from harness.history.positions import ledger_entry
from harness.history.reader import HistoryFormatError
from harness.history.schema import DRAIN_WRITER, LIVE_DRAIN_WRITER, UNFINISHED_TXN_STATES
from harness.target import ClusterInfo
from orchestrator.load.horizons import HeldHorizon, held_horizons
from orchestrator.load.txn_headers import txn_bits, v5_header_states
from orchestrator.load.undeliverable import (
    UndeliverableEnd,
    aborted_transactions,
    undeliverable_end,
)
from workloads.api import delivery_extra
from workloads.payload import PayloadError, decode
from workloads.topology import SubscriptionPlan, Topology

log = logging.getLogger(__name__)

IDLE_S = 2.0                 # a subscription silent this long (after settling) is empty
COORDINATOR_WAKE_S = 60.0    # connecting every coordinator (a v4 coordinator replays its log as it loads), at most
MAX_TXN_STATES = 2000        # transactions whose coordinator view the drain asks for, at most
TXN_STATE_REASK_S = 1.0      # an unfinished coordinator state is asked again this often (for checks.abort_bound_s)
LIVE_WRITER = LIVE_DRAIN_WRITER   # the live reads' writer and process prefix (`drain-live/r<k>`)
THREADS = 4
READ_STALL_S = 10.0          # a read round that brings nothing for this long is stuck
UNANSWERED_PAUSE_S = 0.5     # before asking again after a round the broker did not answer (growing)
PROBE_AFTER_S = 3.0          # a read silent this long asks the owner whether its next entry is lost
# A v4 transaction buffer in these states (TopicTransactionBufferState) has not finished its recovery:
# its partition gives readers nothing yet.
RECOVERING_BUFFER_STATES = ("None", "Initializing")
MAX_LOST_RUNS = 20           # runs of lost entries skipped per partition before giving up
MAX_PROBES = 2000            # positions probed per partition
MAX_REASONS = 3
RECEIVER_QUEUE = 1000
REREAD_AFTER_S = 5.0         # a topic missing committed values is read again after this
NO_PROGRESS_REREADS = 2      # re-reads that find nothing new before the drain stops re-reading (at least)
SUBSCRIPTIONS_FLOOR_S = 30.0  # the subscriptions' own time after the reads, at least (within the stretched ceiling)
LAG_FACTOR = 2.0             # late values: wait this many times the lag (and the silences) seen so far
MAX_STRETCH = 4.0            # ... but the drain's deadline never passes this many times its budget
MAX_PAST_END = 100_000       # messages a reader takes after the broker's stated end, at most
LAST_ID_LOSSES = 2           # connections lost on GET_LAST_MESSAGE_ID before a terminated topic is read without it
LAST_ID_UNANSWERED = 4       # rounds without an answer to it before the same (a slow broker is silent too)
LAST_ID_FAILURES = 3         # error answers to it before the same (3.3 answers UnknownError, "worth a retry")
_sleep = time.sleep          # the settle wait (tests replace it)
_monotonic = time.monotonic  # the drain's clock (tests replace it)


@dataclass(frozen=True)
class DrainResult:
    """What the drain achieved. `complete` only when every topic and subscription was done."""

    complete: bool
    reason: str
    topics: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lost: list[LostRun] = field(default_factory=list)
    held: list[HeldHorizon] = field(default_factory=list)
    undeliverable: list[UndeliverableEnd] = field(default_factory=list)   # stale ends (orchestrator/load/undeliverable.py)
    last_id_refused: list[str] = field(default_factory=list)     # topics read to their end of topic instead (1d) ...
    last_id_unanswered: list[str] = field(default_factory=list)  # ... after a closed connection, no answer,
    last_id_failed: list[str] = field(default_factory=list)      # ... or an error answer


@dataclass(frozen=True)
class LostRun:
    """Consecutive entries of one partition that its owner acknowledged and can no longer return."""

    topic: str               # the logical topic
    segment: str             # the concrete topic or partition
    first: tuple[int, int]   # (ledger, entry)
    last: tuple[int, int]
    count: int
    reason: str              # the owner's answer for the first of them

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "segment": self.segment, "first": f"{self.first[0]}:{self.first[1]}",
                "last": f"{self.last[0]}:{self.last[1]}", "count": self.count, "reason": self.reason}


def positions_after(ledgers: Any, after: tuple[int, int] | None, limit: int) -> list[tuple[int, int]]:
    """The positions after `after` (None: from the first) in internalStats' ledger list, at most `limit`."""
    out: list[tuple[int, int]] = []
    rows = sorted((int(r["ledgerId"]), int(r.get("entries") or 0)) for r in ledgers or []
                  if isinstance(r, dict) and "ledgerId" in r)
    for ledger_id, entries in rows:
        if after is not None and ledger_id < after[0]:
            continue
        first = after[1] + 1 if after is not None and ledger_id == after[0] else 0
        for entry_id in range(first, entries):
            if len(out) >= limit:
                return out
            out.append((ledger_id, entry_id))
    return out


# ---- settling ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unsettled:
    """A transaction of the load that may still be open, and until when at most (run clock)."""

    txn: str | None          # None: an open whose id is unknown (info or cut short)
    until_ns: int


TXN_FS = (OpF.TXN_OPEN, OpF.TXN_COMMIT, OpF.TXN_ABORT)


def unsettled_transactions(history_dir: Path, skip: Iterable[Path], ttl_s: float, now_ns: int) -> list[Unsettled]:
    """Transactions in the histories that did not end with an ok commit or abort.

    A transaction opened ok at t may be open until t + ttl. An open that completed
    `info`, or was invoked and never completed (the writer died), may have created a
    transaction whose id nobody knows: until its completion + ttl, or, with no
    completion, until `now_ns` + ttl.
    """
    ttl_ns = int(ttl_s * 1e9)
    opened: dict[str, int] = {}
    ended: set[str] = set()
    unknown: list[int] = []
    pending: dict[tuple[str, str], Event] = {}        # (writer, process) -> its open invocation
    try:
        for op in read_events(history_dir, exclude={p.stem for p in skip}, fs=TXN_FS):
            if op.type is OpType.INVOKE:
                pending[op.writer, op.process] = op
                continue
            pending.pop((op.writer, op.process), None)
            if op.f is OpF.TXN_OPEN:
                if op.type is OpType.OK and op.txn:
                    opened[op.txn] = op.time_ns
                elif op.type is OpType.INFO:
                    unknown.append(op.time_ns)
            elif op.type is OpType.OK and op.txn:
                ended.add(op.txn)
    except HistoryFormatError as err:
        raise RuntimeError(f"cannot tell which transactions may be open: {err}") from None
    unknown.extend(now_ns for op in pending.values() if op.f is OpF.TXN_OPEN)
    out = [Unsettled(txn, at + ttl_ns) for txn, at in opened.items() if txn not in ended]
    out.extend(Unsettled(None, at + ttl_ns) for at in unknown)
    return sorted(out, key=lambda u: u.until_ns)


def committed_values(history_dir: Path, skip: Iterable[Path]) -> dict[str, set[str]]:
    """Per topic, the values the load's histories show sent ok outside a transaction or in one
    whose commit returned ok: what the final reads must eventually show.

    Only the drain's waiting uses it (how long re-reading is worth it); the checker decides
    from the histories on its own.
    """
    sent: list[tuple[str, str, str | None]] = []
    committed: set[str] = set()
    try:
        for op in read_events(history_dir, exclude={p.stem for p in skip}, fs=(OpF.SEND, OpF.TXN_COMMIT)):
            if op.type is not OpType.OK:
                continue
            if op.f is OpF.SEND and op.topic and op.value is not None:
                sent.append((op.topic, op.value, op.txn))
            elif op.f is OpF.TXN_COMMIT and op.txn:
                committed.add(op.txn)
    except HistoryFormatError:
        return {}           # no expectation: the drain reads once, as it would without one
    out: dict[str, set[str]] = {}
    for topic, value, txn in sent:
        if txn is None or txn in committed:
            out.setdefault(topic, set()).add(value)
    return out


# ---- the drain -----------------------------------------------------------------------------------

class _Drain:
    def __init__(self, cluster: ClusterInfo, config: RunConfig, topology: Topology, recorder: HistoryRecorder,
                 timeout_s: float, client: Any = None, admin: Any = None, *, live: bool = False,
                 txn_states: Any = None) -> None:
        self.live = live
        self.prefix = LIVE_WRITER if live else DRAIN_WRITER
        self.cluster = cluster
        self.config = config
        self.topology = topology
        self.recorder = recorder
        self.timeout_s = timeout_s
        self.start_budget()
        self.stretched_s = 0.0                               # how far late values moved the deadline
        self.client = client
        self.admin = admin
        # Who answers `txn-state`: the v5 headers in the store where the run names its address
        # (orchestrator.load.txn_headers), else the admin API's coordinators.
        self.txn_states = txn_states if txn_states is not None else admin
        self.idle_s = IDLE_S
        self.lock = threading.Lock()
        self.read_done: list[str] = []
        self.subs_done: list[tuple[str, str]] = []
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.lost: list[LostRun] = []
        self.held: list[HeldHorizon] = []
        self.undeliverable: list[UndeliverableEnd] = []
        self.last_id_refused: list[str] = []
        self.waited_for_buffers: set[str] = set()         # topics whose read waited on a recovering buffer
        self.last_id_unanswered: list[str] = []
        self.last_id_failed: list[str] = []
        self._aborted: set[str] | None = None
        self.first_reads: list[tuple[str, str]] = []      # (process, topic) read to their end once
        self.unsettled: list[Unsettled] = []
        self.expected: dict[str, set[str]] = {}
        self.read_values: dict[str, set[str]] = {}
        self.read_ids: dict[str, set[str]] = {}

    def start_budget(self) -> None:
        """The reads' time starts now: the wait for unfinished transactions to time out and the
        questions to their coordinators have bounds of their own and do not eat it (on 2.10.5 a
        25 s wait left a drain 67 s for topics a cold restart took 25-50 s each to load)."""
        started = _monotonic()
        self.deadline = started + self.timeout_s
        self.ceiling = started + self.timeout_s * MAX_STRETCH   # the deadline stretched for late values, at most

    def remaining(self) -> float:
        return self.deadline - _monotonic()

    def stretch_for(self, lag_s: float) -> None:
        """Committed values just arrived `lag_s` after a topic's first read: keep time for the
        ones still missing to arrive as late again (`LAG_FACTOR`), up to the ceiling."""
        with self.lock:
            wanted = min(self.ceiling, _monotonic() + LAG_FACTOR * lag_s + NO_PROGRESS_REREADS * REREAD_AFTER_S)
            if wanted > self.deadline:
                self.stretched_s += wanted - self.deadline
                self.deadline = wanted

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    # ---- 1. settle ------------------------------------------------------------------------

    def settle(self) -> bool:
        clock = self.recorder.clock
        now = clock.now_ns()
        try:
            unsettled = unsettled_transactions(self.recorder.file_path.parent, [self.recorder.file_path],
                                               self.config.workload.txn_timeout_s, now)
        except RuntimeError as err:
            self.problem(str(err))
            return False
        self.unsettled = unsettled
        if not unsettled:
            return True
        margin_ns = int(self.config.checks.abort_bound_s * 1e9)
        last = unsettled[-1]
        wait_s = (last.until_ns + margin_ns - now) / 1e9
        which = f"transaction {last.txn}" if last.txn else "a transaction whose open had no known outcome"
        if wait_s > self.remaining():
            self.problem(f"{len(unsettled)} transaction(s) of the load may still be open; {which} only times out "
                         f"in {wait_s:.0f}s (workload.txn_timeout_s {self.config.workload.txn_timeout_s:.0f}) and "
                         f"the drain has {max(0.0, self.remaining()):.0f}s; raise phases.drain_timeout_s or lower "
                         "workload.txn_timeout_s")
            return False
        if wait_s > 0:
            self.notes.append(f"waited {wait_s:.1f}s for {len(unsettled)} unfinished transaction(s) to time out")
            _sleep(wait_s)
        return True

    # ---- 1b. the coordinators' view ------------------------------------------------------

    def wake_coordinators(self) -> None:
        """Connect every transaction coordinator before asking about transactions or reading.

        Why: a v4 broker loads a coordinator only when a client connects to it, and only then
        replays its log and finishes the commits and aborts it had in flight; every transactional
        Java client connects to all of them when it starts. After a cold restart (or a fault that
        moved a coordinator) with the load gone, nobody did: the drain read partitions whose
        commit markers a loaded coordinator would write, and its questions were answered
        "coordinator not found", once read as "the transaction ended" (the release matrix of
        2026-12-02; `Admin.transaction_metadata`). A coordinator that does not connect in time
        is noted; its transactions' states are then UNKNOWN, which the checker does not judge.
        """
        connect = getattr(self.client, "connect_coordinators", None)
        if connect is None or self.remaining() <= 0:
            return
        try:
            found = connect(timeout_s=max(1.0, min(COORDINATOR_WAKE_S, self.remaining())))
        except Exception as err:   # no coordinator to connect (transactions off) or discovery failed
            self.notes.append(f"could not connect the transaction coordinators ({type(err).__name__}: {err})")
            return
        missing = {tc: why for tc, why in found.items() if why is not None}
        if missing:
            self.notes.append(f"connected {len(found) - len(missing)} of {len(found)} transaction coordinators; "
                              + "; ".join(f"coordinator {tc}: {why}" for tc, why in sorted(missing.items())))

    def ask_coordinators(self) -> None:
        """Record each unsettled transaction's state as its coordinator sees it (`txn-state`).

        Why the unfinished ones are asked again: a coordinator the drain just connected (a cold
        restart, or one that moved) replays its log and only then finishes the commits and aborts it
        had in flight, while already answering the admin API: real 5.0.1's answer, ABORTING, arrived
        0.03 s after its abort's last log entry (chaos-sessions, 2026-12-04), which the checker
        would have held against it. So a reading of a state that is not an end is taken again every
        `TXN_STATE_REASK_S` for `checks.abort_bound_s` (the bound the checker holds a coordinator
        to), each reading its own event; the checker judges each pass's latest.
        """
        asked = [u.txn for u in self.unsettled if u.txn][:MAX_TXN_STATES]
        source = self.txn_states
        if not asked or source is None or not hasattr(source, "transaction_metadata"):
            return
        pending = self._read_txn_states(source, asked)
        if pending is None:
            return
        again_s = max(TXN_STATE_REASK_S, self.config.checks.abort_bound_s)
        for _ in range(math.ceil(again_s / TXN_STATE_REASK_S)):
            if not pending or self.remaining() <= TXN_STATE_REASK_S:
                break
            _sleep(TXN_STATE_REASK_S)
            found = self._read_txn_states(source, pending)
            if found is None:
                return
            pending = found
        asked_whom = (f"read the headers of {len(asked)} transaction(s) the load left unfinished from the metadata "
                      f"store ({source.url})" if hasattr(source, "read_all") else
                      f"asked the coordinators about {len(asked)} transaction(s) the load left unfinished")
        if pending:
            asked_whom += f"; {len(pending)} still unfinished after asking again for {again_s:g} s"
        self.notes.append(asked_whom)

    def _read_txn_states(self, source: Any, txns: list[str]) -> list[str] | None:
        """Read and record the state of each of `txns`; the ones whose answer is not an end
        (None when the drain ran out of time)."""
        if hasattr(source, "read_all"):   # the store's headers: one session for all of them
            ids = [bits for bits in (txn_bits(txn) for txn in txns) if bits is not None]
            source.read_all(ids, timeout_s=max(1.0, min(source.timeout_s, self.remaining())))
        unfinished: list[str] = []
        for txn in txns:
            if self.remaining() <= 0:
                self.problem(f"no time left to ask the coordinators about {len(txns)} unfinished transaction(s)")
                return None
            extra: dict[str, Any] = {}
            error = None
            try:
                bits = txn_bits(txn)
                if bits is None:
                    raise ValueError(f"{txn!r} is not a transaction id of the form most:least")
                found = source.transaction_metadata(*bits)
                extra = {"status": "NOT_FOUND"} if found is None else \
                    {"status": str(found.get("status")), "metadata": found}
            except Exception as err:  # the coordinator could not answer: the checker cannot judge this one
                extra, error = {"status": "UNKNOWN"}, f"{type(err).__name__}: {err}"
            self.recorder.event(f"{self.prefix}/coordinator", OpF.TXN_STATE, txn=txn, extra=extra, error=error)
            if extra["status"] in UNFINISHED_TXN_STATES:
                unfinished.append(txn)
        return unfinished

    # ---- 2. reads -------------------------------------------------------------------------

    def read_topic(self, index: int, topic: str) -> None:
        from harness.client import (
            LastMessageIdFailedError,
            LastMessageIdLostError,
            LastMessageIdUnansweredError,
            ReadIncompleteError,
        )

        process = f"{self.prefix}/r{index}"
        if self.remaining() <= 0:
            self.problem(f"{topic}: not read (no time left)")
            return
        asked = _monotonic()
        try:
            reader = self.client.create_reader(topic, receiver_queue_size=RECEIVER_QUEUE,
                                               timeout_s=max(0.1, self.remaining()))
        except OperationError as err:
            self.problem(f"{topic}: could not open a reader ({err})")
            return
        last: dict[str, tuple[int, int]] = {}
        lost_parts: list[str] = []
        try:
            silent_s, unanswered, ask_last = 0.0, 0, True
            last_id_failed = {LastMessageIdLostError: 0, LastMessageIdUnansweredError: 0}
            failed_answers = 0
            while True:
                round_s = max(0.1, min(self._round_s(), self.remaining()))
                try:
                    messages = reader.read_to_end(timeout_s=round_s, ask_last=ask_last)
                except ReadIncompleteError as err:
                    # a round ended before the end; go on while messages keep coming
                    self._first_delivery(topic, asked, last, err.messages)
                    self._record_reads(process, topic, err.messages, last)
                    silent_s = 0.0 if err.messages else silent_s + round_s
                    if err.messages and self.remaining() > 0:
                        continue
                    if self.remaining() > 0 and self._next_is_lost(topic, err.missing, last):
                        lost_parts = list(err.missing)   # each read on alone, past what is lost
                        break
                    if silent_s < READ_STALL_S and self.remaining() > 0:
                        continue
                    if self.remaining() > 0 and self._buffers_recovering(topic, err.missing):
                        silent_s = 0.0     # not stuck: held until the buffer is ready; the stall counts from then
                        continue
                    if self.remaining() > 0 and self._ends_undeliverable(
                            topic, err.missing, last, getattr(reader, "subscription", None)):
                        break
                    why = "in time" if self.remaining() <= 0 else f"(nothing arrived for {silent_s:.0f}s)"
                    self.problem(f"{topic}: the read did not reach the end of {', '.join(err.missing)} {why}")
                    return
                except (LastMessageIdLostError, LastMessageIdUnansweredError) as err:
                    kind = type(err)
                    last_id_failed[kind] += 1
                    enough = LAST_ID_LOSSES if kind is LastMessageIdLostError else LAST_ID_UNANSWERED
                    if last_id_failed[kind] >= enough and self._all_terminated(reader):
                        ask_last = False
                        self._note_last_id_refused(topic, last_id_failed[kind], closed=kind is LastMessageIdLostError)
                    elif self.remaining() <= 0:
                        raise
                    else:
                        unanswered += 1
                        time.sleep(min(UNANSWERED_PAUSE_S * unanswered, max(0.0, self.remaining())))
                    continue
                except OperationError as err:
                    cause = err
                    if isinstance(err, LastMessageIdFailedError):
                        # answered with an error (3.3 says UnknownError, which reads as "retry"): a
                        # terminated topic is read to its end of topic after LAST_ID_FAILURES of them (1d);
                        # any other topic as any failed read
                        cause = err.cause
                        failed_answers += 1
                        if failed_answers >= LAST_ID_FAILURES and self.remaining() > 0 \
                                and self._all_terminated(reader):
                            ask_last = False
                            self._note_last_id_failed(topic, failed_answers, cause)
                            continue
                    # Unanswered (GET_LAST_MESSAGE_ID, a lookup), or a partition's consumer not attached
                    # yet (NotReadyError; a retriable setup answer): a real broker loading its topics after
                    # a restart can take longer than one round. Ask again while the drain has time.
                    if (cause.definite and not _worth_asking_again(cause)) or self.remaining() <= 0:
                        raise
                    unanswered += 1
                    time.sleep(min(UNANSWERED_PAUSE_S * unanswered, max(0.0, self.remaining())))
                    continue
                self._first_delivery(topic, asked, last, messages)
                self._record_reads(process, topic, messages, last)
                self._listen_past_end(reader, process, topic, last)
                break
        except OperationError as err:
            self.problem(f"{topic}: reading failed ({err})")
            return
        finally:
            with contextlib.suppress(Exception):
                reader.close(1.0)
        for part in lost_parts:
            if not self._read_part(process, topic, part, last.get(part)):
                return
        with self.lock:
            self.first_reads.append((process, topic))

    def _all_terminated(self, reader: Any) -> bool:
        """Whether the owner says every partition of `reader`'s topic is terminated (admin
        internalStats' managed-ledger `state`); no answer is no evidence."""
        if self.admin is None:
            return False
        parts = [child.topic for child in getattr(getattr(reader, "consumer", None), "consumers", ())]
        try:
            return bool(parts) and all(
                str(self.admin.internal_stats(part).get("state", "")).lower() == "terminated" for part in parts)
        except Exception:   # no answer is no evidence
            return False

    def _note_last_id_refused(self, topic: str, times: int, *, closed: bool) -> None:
        what = "closed the connection each time the reader asked" if closed else "did not answer when the reader asked"
        with self.lock:
            (self.last_id_refused if closed else self.last_id_unanswered).append(topic)
            self.notes.append(
                f"{topic}: the broker {what} for the last message id (GET_LAST_MESSAGE_ID, {times} times); every "
                "partition is terminated, so the read runs to REACHED_END_OF_TOPIC instead (on a terminated topic "
                "loaded again: apache/pulsar#24063, fixed in 3.0.11, 3.3.6 and 4.0.4: "
                "docs/findings/historical/terminated-topic-unreadable-after-reload.md)")

    def _note_last_id_failed(self, topic: str, times: int, error: OperationError) -> None:
        with self.lock:
            self.last_id_failed.append(topic)
            self.notes.append(
                f"{topic}: the broker answered the last message id (GET_LAST_MESSAGE_ID, {times} times) with an "
                f"error ({error}); "
                "every partition is terminated, so the read runs to REACHED_END_OF_TOPIC instead (3.3 on a "
                "terminated topic loaded again: docs/findings/historical/terminated-topic-unreadable-after-reload.md)")

    def settle_topic(self, process: str, topic: str) -> None:
        """After every topic's first read: wait for `topic`'s late values, then explain what is
        still missing. Why after: re-reading one topic for its late values while others wait for a
        thread spent the time of topics never read (5.0.1's v5 in a bench: four topics re-read for
        20 s each, 21 topics and subscriptions unread, verdict unknown)."""
        if not self._await_late_values(process, topic):
            return
        self._explain_missing(topic)
        with self.lock:
            self.read_done.append(topic)

    def _buffers_recovering(self, topic: str, parts: list[str]) -> list[str]:
        """The silent partitions of `topic` whose transaction buffer is still recovering (its owner's
        `transactionBufferStats` state `None` or `Initializing`), noted once per topic.

        Why: a v4 partition loaded again (a cold restart) holds every reader until its transaction
        buffer has replayed its snapshot and log; on 3.1.0 after chaos-sessions' restart one
        partition's took 18 s, the read was called stuck after 12 s of nothing and the verdict was
        unknown (docs/results.md, `#2026-12-04-matrix`). Such a read is waiting, not stuck: it goes
        on while the drain has time, and its stall counts from the buffer's readiness."""
        if self.admin is None or topic.startswith("topic://") or not parts \
                or not hasattr(self.admin, "transaction_buffer_stats"):
            return []
        recovering = []
        for part in parts:
            try:
                state = self.admin.transaction_buffer_stats(part).get("state")
            except Exception:    # no answer, or no state in it, is no evidence of a recovery
                continue
            if isinstance(state, str) and state in RECOVERING_BUFFER_STATES:
                recovering.append(part)
        if recovering:
            with self.lock:
                if topic not in self.waited_for_buffers:
                    self.waited_for_buffers.add(topic)
                    self.notes.append(f"{topic}: a read silent for {READ_STALL_S:.0f}s waited on, the transaction "
                                      f"buffer of {', '.join(recovering)} still recovering")
        return recovering

    def _ends_undeliverable(self, topic: str, parts: list[str], last: Mapping[str, tuple[int, int]],
                            subscription: str | None = None) -> bool:
        """Whether every stuck partition of `topic` is read to the end of what a reader is given,
        its stated end past it being markers and aborted messages, or entries the reader's cursor
        (`subscription`) read past (orchestrator/load/undeliverable.py)."""
        if self.admin is None or topic.startswith("topic://") or not parts:
            return False     # v5 segments: no getMessageById here
        with self.lock:
            if self._aborted is None:
                self._aborted = aborted_transactions(self.recorder.file_path.parent, [self.recorder.file_path])
            aborted = self._aborted
        ends = [undeliverable_end(self.admin, part, last.get(part), aborted, subscription=subscription)
                for part in parts]
        found = [end for end in ends if isinstance(end, UndeliverableEnd)]
        if len(found) < len(parts):
            why = "; ".join(f"{part}: {end}" for part, end in zip(parts, ends, strict=True) if isinstance(end, str))
            with self.lock:
                self.notes.append(f"{topic}: a read stopped short of the broker's last message id ({why})")
            return False
        with self.lock:
            self.undeliverable.extend(found)
            for end in found:
                if end.seen_by_cursor:
                    self.notes.append(
                        f"{end.partition}: read to the last entry a reader is given; the owner could not show the "
                        f"entries after it, but the reader's cursor had read past {_at(end.horizon or end.end)} "
                        "and the broker gave it none of them")
                    continue
                self.notes.append(
                    f"{end.partition}: read to the last entry a reader is given; the broker's last message id "
                    f"{end.end[0]}:{end.end[1]} lies past it, behind {end.markers} transaction marker(s) and "
                    f"{end.aborted} aborted message(s) (a Reader's hasMessageAvailable stays true there)")
        return True

    def _first_delivery(self, topic: str, asked: float, last: Mapping[str, Any], messages: Sequence[Any]) -> None:
        """A topic's first messages, `asked` (monotonic) being when its reader was asked for: a
        broker that took long to serve them (a cold restart loading the topic and recovering its
        transaction buffer: 25-50 s a topic on 2.10.5 under chaos) will be as slow with the topics
        still to be read, so the deadline follows, as it does for late values (`stretch_for`)."""
        if last or not messages:
            return
        waited_s = _monotonic() - asked
        if waited_s > READ_STALL_S:
            self.stretch_for(waited_s)
            with self.lock:
                self.notes.append(f"{topic}: the first messages came {waited_s:.0f}s after the reader was asked for")

    def _explain_missing(self, topic: str) -> None:
        """Committed values still missing from a v4 topic: ask its partitions' owners what holds
        their read horizons (orchestrator/load/horizons.py), and note it; the verdict does not depend on it."""
        with self.lock:
            missing = self.expected.get(topic, set()) - self.read_values.get(topic, set())
        if not missing or self.admin is None or topic.startswith("topic://") or self.remaining() <= 0:
            return
        try:
            count = self.admin.partitions(topic)
        except Exception:
            return
        parts = [f"{topic}-partition-{i}" for i in range(count)] if count > 0 else [topic]
        found = held_horizons(self.admin, parts)
        with self.lock:
            self.held.extend(found)
            for held in found:
                self.notes.append(held.describe() + (" (nobody will end it: every committed value behind it "
                                                     "stays invisible)" if held.stuck_for_good else ""))

    def _await_late_values(self, process: str, topic: str) -> bool:
        """Read `topic` again while committed values are missing and re-reads find more; False
        when values were still arriving as time ran out (the topic is not settled).

        A broker can make a committed transaction readable long after its commit returned:
        Pulsar 5.0.1's v5 segments on ZooKeeper apply decisions one at a time and lag by tens
        of seconds under load (docs/findings/v5-segment-visibility-lag.md), so one read right
        after the load would count late values as lost. The drain reads again every
        `REREAD_AFTER_S` while that brings new values, and stops after `NO_PROGRESS_REREADS`
        re-reads that bring none, or `LAG_FACTOR` times the longest interval (in re-reads)
        between two late arrivals (a value lost for good costs that much waiting, not more). Each late
        arrival stretches the drain's deadline (`stretch_for`). Late values are recorded like any
        read and noted with how late they were.
        """
        with self.lock:
            missing = self.expected.get(topic, set()) - self.read_values.get(topic, set())
        if not missing:
            return True
        started, idle, late, quiet_allowed, last_lag_s = _monotonic(), 0, 0, NO_PROGRESS_REREADS, 0.0
        while missing and idle < quiet_allowed and self.remaining() > REREAD_AFTER_S:
            _sleep(REREAD_AFTER_S)
            found = self._reread(process, topic) & missing
            late += len(found)
            missing -= found
            if found:
                # values came `idle + 1` re-reads after the last ones: the next may take LAG_FACTOR times that
                quiet_allowed = max(quiet_allowed, math.ceil(LAG_FACTOR * (idle + 1)))
                idle, last_lag_s = 0, _monotonic() - started
                self.stretch_for(last_lag_s)
            else:
                idle += 1
        unsettled = bool(missing) and idle < quiet_allowed    # values may still have been on their way
        if late or unsettled:
            with self.lock:
                self.notes.append(f"{topic}: {late} committed value(s) became readable only on re-reads up to "
                                  f"{last_lag_s:.0f}s after the first read (late visibility: "
                                  "docs/findings/v5-segment-visibility-lag.md)"
                                  + (f"; {len(missing)} still missing" if missing else "")
                                  + (f"; the drain's deadline was stretched by {self.stretched_s:.0f}s for them"
                                     if self.stretched_s else ""))
        if unsettled:
            self.problem(f"{topic}: not settled: {len(missing)} committed value(s) still missing while late ones "
                         f"were still arriving ({late} so far, the last {last_lag_s:.0f}s after the first read) "
                         f"when the drain's time ran out ({self.timeout_s:.0f}s, stretched to at most "
                         f"{self.timeout_s * MAX_STRETCH:.0f}s); raise phases.drain_timeout_s")
        return not unsettled

    def _reread(self, process: str, topic: str) -> set[str]:
        """One fresh read of `topic` from the earliest message; records what was not read before
        and returns those values."""
        from harness.client import ReadIncompleteError

        try:
            reader = self.client.create_reader(topic, receiver_queue_size=RECEIVER_QUEUE,
                                               timeout_s=max(0.1, min(READ_STALL_S, self.remaining())))
        except OperationError:
            return set()
        try:
            try:
                messages = list(reader.read_to_end(timeout_s=max(0.1, min(READ_STALL_S, self.remaining())),
                                                   ask_last=topic not in {*self.last_id_refused, *self.last_id_unanswered,
                                                                               *self.last_id_failed}))
            except ReadIncompleteError as err:
                messages = list(err.messages)
            except OperationError:
                return set()
            messages += self._until_quiet(reader)
        finally:
            with contextlib.suppress(Exception):
                reader.close(1.0)
        with self.lock:
            known = set(self.read_ids.get(topic, set()))
        fresh = [m for m in messages if f"{m.segment or topic}@{m.msg_id}" not in known]
        self._record_reads(process, topic, fresh)
        return {v for v in (_value_of(m)[0] for m in fresh) if v is not None}

    def _until_quiet(self, reader: Any) -> list[Any]:
        """What `reader` still receives until `idle_s` pass without a message (at most
        `MAX_PAST_END` messages, never past the drain's deadline)."""
        read_next = getattr(reader, "read_next", None)
        got: list[Any] = []
        quiet_until = time.monotonic() + self.idle_s
        while read_next is not None and len(got) < MAX_PAST_END and self.remaining() > 0:
            wait_s = min(quiet_until - time.monotonic(), self.remaining())
            if wait_s <= 0:
                break
            try:
                message = read_next(timeout_s=wait_s)
            except OperationError as err:
                # the read already reached the end the broker named: a connection lost while only
                # listening past it ends the listening, not the read (2.10.5 after its cold restart)
                with self.lock:
                    self.notes.append(f"listening past the stated end stopped: {err}")
                break
            if message is None:
                break
            got.append(message)
            quiet_until = time.monotonic() + self.idle_s
        return got

    def _listen_past_end(self, reader: Any, process: str, topic: str, last: dict[str, tuple[int, int]]) -> None:
        """Keep the reader listening for `idle_s` after it reached the end the broker named.

        The end is the broker's `GET_LAST_MESSAGE_ID` answer, and an answer can be stale: on
        Pulsar 5.0.1's v5 segments it stays at its first value after transactional commits
        (docs/findings/v5-stale-last-message-id.md), so a read that trusts it stops early and
        every later committed value looks lost. What still arrives is readable and belongs
        to the final reads; that it arrived past the stated end is noted, so the broker's
        stale answer stays visible in every run it happens in. Bounded by `idle_s` of silence,
        `MAX_PAST_END` messages and the drain's deadline.
        """
        past = self._until_quiet(reader)
        if not past:
            return
        self._record_reads(process, topic, past, last)
        parts = sorted({m.segment or topic for m in past})
        with self.lock:
            self.notes.append(f"{topic}: {len(past)} message(s) arrived after the end the broker named "
                              f"(GET_LAST_MESSAGE_ID) on {', '.join(parts)}: its answer lagged the data "
                              "(docs/findings/v5-stale-last-message-id.md)")

    def _round_s(self) -> float:
        """How long one read round waits: short when the owner can be asked about lost entries."""
        return PROBE_AFTER_S if self.admin is not None else READ_STALL_S

    # ---- 2b. lost entries -----------------------------------------------------------------

    def _next_is_lost(self, topic: str, parts: list[str], last: dict[str, tuple[int, int]]) -> bool:
        """Whether the owner of one of `parts` says an entry ahead of the last one read is lost."""
        if self.admin is None or topic.startswith("topic://"):
            return False     # v5 segments: no getMessageById here; a stuck read stays a doubt
        return any(self._lost_ahead(part, last.get(part)) is not None for part in parts)

    def _probe(self, part: str, position: tuple[int, int]) -> bool | None:
        """True: the owner says the entry is lost; False: it is readable; None: no evidence."""
        try:
            answer = self.admin.stored_entry(part, *position)
        except Exception:
            return None
        if answer.found:
            return False
        return True if answer.non_recoverable else None

    def _lost_ahead(self, part: str, after: tuple[int, int] | None) -> tuple[int, int] | None:
        """The first lost entry after `after` on `part`, within MAX_PROBES positions, or None.

        A broker reads entries in batches, so one lost entry stops a read some entries
        before it. Per ledger ahead this asks for the next entry and the last one; when the
        last is lost, a binary search finds where its lost tail starts (a store that lost
        writes loses the tail of a ledger). Only entries the owner itself says are lost count.
        """
        try:
            stats = self.admin.internal_stats(part)
        except Exception:   # no answer is no evidence
            return None
        by_ledger: dict[int, list[tuple[int, int]]] = {}
        for position in positions_after(stats.get("ledgers"), after, MAX_PROBES):
            by_ledger.setdefault(position[0], []).append(position)
        for positions in by_ledger.values():
            first = self._probe(part, positions[0])
            if first is None:
                return None
            if first:
                return positions[0]
            last = self._probe(part, positions[-1])
            if last is None:
                return None
            if not last:
                continue
            lo, hi = 0, len(positions) - 1          # positions[lo] readable, positions[hi] lost
            for _ in range(64):                     # bounded: a binary search
                if hi - lo <= 1:
                    break
                mid = (lo + hi) // 2
                lost = self._probe(part, positions[mid])
                if lost is None:
                    return None
                lo, hi = (lo, mid) if lost else (mid, hi)
            return positions[hi]
        return None

    def _lost_run(self, part: str, after: tuple[int, int] | None, *,
                  limit: int = MAX_PROBES) -> tuple[list[tuple[tuple[int, int], str]], bool]:
        """The lost entries right after `after` on `part` (with the owner's answers), and whether a
        readable entry follows them. Empty when the next entry is not lost, or nobody says so."""
        try:
            stats = self.admin.internal_stats(part)
        except Exception:   # no answer is no evidence
            return [], False
        run: list[tuple[tuple[int, int], str]] = []
        for position in positions_after(stats.get("ledgers"), after, min(limit, MAX_PROBES)):
            try:
                answer = self.admin.stored_entry(part, *position)
            except Exception:
                return run, False
            if answer.found:
                return run, True
            if not answer.non_recoverable:
                return run, False
            run.append((position, answer.reason))
        return run, False

    def _read_part(self, process: str, topic: str, part: str, after: tuple[int, int] | None) -> bool:
        """Read `part` (a partition or plain topic) on from `after` to its end, recording and
        skipping runs of lost entries; True when its end was reached.

        Up to a lost entry the reader has one permit, so the broker reads one entry at a
        time and delivers every readable entry before the lost one (a batch read that
        includes a lost entry fails whole), skipping markers and aborted messages: when
        those lie between, the reader's cursor, not its last message, shows where it stopped."""
        from harness.client import ReadIncompleteError
        from harness.wire import MessageId

        stuck_before: tuple[int, int] | None = None   # the lost run starts after this, not after `after`
        for _ in range(MAX_LOST_RUNS + 1):
            run, more = self._lost_run(part, stuck_before or after)
            stuck_before = None
            if run:
                lost = LostRun(topic, part, run[0][0], run[-1][0], len(run), run[0][1])
                with self.lock:
                    self.lost.append(lost)
                    self.notes.append(f"{part}: {lost.count} acknowledged entries lost ({lost.first[0]}:"
                                      f"{lost.first[1]}..{lost.last[0]}:{lost.last[1]}): {lost.reason}")
                after = run[-1][0]
                if not more:
                    return True
            if self.remaining() <= 0:
                self.problem(f"{topic}: no time left to read {part} on from {after}")
                return False
            ahead = self._lost_ahead(part, after)
            start = MessageId.EARLIEST if after is None else MessageId(after[0], after[1], -1, -1)
            try:
                reader = self.client.create_reader(part, start=start,
                                                   receiver_queue_size=1 if ahead is not None else RECEIVER_QUEUE,
                                                   timeout_s=max(0.1, self.remaining()))
            except OperationError as err:
                self.problem(f"{topic}: could not open a reader of {part} ({err})")
                return False
            last: dict[str, tuple[int, int]] = {}
            subscription = getattr(reader, "subscription", None)
            try:
                silent_s = 0.0
                while True:
                    # asked before the round: when nothing arrives in it, the broker had already
                    # dispatched or skipped everything before this position
                    cursor_at = self._read_position(part, subscription) if ahead is not None else None
                    round_s = max(0.1, min(PROBE_AFTER_S, self.remaining()))
                    try:
                        messages = reader.read_to_end(timeout_s=round_s)
                    except ReadIncompleteError as err:
                        self._record_reads(process, topic, err.messages, last, segment=part)
                        after = last.get(part, after)
                        silent_s = 0.0 if err.messages else silent_s + round_s
                        if self.remaining() <= 0:
                            self.problem(f"{topic}: the read of {part} did not reach its end in time")
                            return False
                        if err.messages:
                            continue
                        if self._lost_run(part, after, limit=1)[0]:
                            break          # at a lost run: record it and read on after it
                        if cursor_at is not None and (after is None or cursor_at > after) and \
                                self._lost_run(part, _before(cursor_at), limit=1)[0]:
                            # the reader's cursor is stuck at a lost entry, past entries no reader
                            # is given (transaction markers, aborted messages): the lost run starts there
                            stuck_before = _before(cursor_at)
                            break
                        if silent_s < READ_STALL_S:
                            continue
                        self.problem(f"{topic}: the read of {part} stopped after {after} "
                                     f"(nothing arrived for {silent_s:.0f}s)")
                        return False
                    self._record_reads(process, topic, messages, last, segment=part)
                    return True
            except OperationError as err:
                self.problem(f"{topic}: reading {part} failed ({err})")
                return False
            finally:
                with contextlib.suppress(Exception):
                    reader.close(1.0)
        self.problem(f"{topic}: {part} has more than {MAX_LOST_RUNS} runs of lost entries; not read to the end")
        return False

    def _read_position(self, part: str, subscription: str | None) -> tuple[int, int] | None:
        """Where the broker's cursor of a reader's `subscription` on `part` reads next (internalStats'
        `cursors[...].readPosition`), or None when it does not say."""
        if subscription is None:
            return None
        try:
            cursor = (self.admin.internal_stats(part).get("cursors") or {}).get(subscription) or {}
        except Exception:   # no answer is no evidence
            return None
        return ledger_entry(cursor.get("readPosition")) if isinstance(cursor, dict) else None

    def _record_reads(self, process: str, topic: str, messages: list[Any],
                      last: dict[str, tuple[int, int]] | None = None, *, segment: str | None = None) -> None:
        """`read` events; `last` gets each partition's last (ledger, entry); `segment` names the
        partition when the reader read it as a topic of its own."""
        for message in messages:
            part = segment or message.segment
            position = ledger_entry(message.msg_id) if last is not None else None
            if last is not None and position is not None:
                last[part or topic] = position
            value, extra = _value_of(message)
            self.recorder.event(process, OpF.READ, topic=topic, segment=part, key=message.key,
                                value=value, msg_id=message.msg_id, extra=extra)
            with self.lock:
                self.read_ids.setdefault(topic, set()).add(f"{part or topic}@{message.msg_id}")
                if value is not None:
                    self.read_values.setdefault(topic, set()).add(value)

    # ---- 3. subscriptions -----------------------------------------------------------------

    def consume(self, index: int, sub: SubscriptionPlan) -> None:
        process = f"{self.prefix}/s{index}"
        if self.remaining() <= 0:
            self.problem(f"{sub.name!r} on {sub.topic}: not consumed (no time left)")
            return
        try:
            consumer = self.client.subscribe(sub.topic, sub.name, sub_type=sub.sub_type.value, consumer_name="drain",
                                             receiver_queue_size=RECEIVER_QUEUE,
                                             timeout_s=max(0.1, self.remaining()))
        except OperationError as err:
            self.problem(f"{sub.name!r} on {sub.topic}: could not subscribe ({err})")
            return
        try:
            emptied = self._consume(process, sub, consumer)
        finally:
            with contextlib.suppress(Exception):
                consumer.close(1.0)
        if emptied:
            with self.lock:
                self.subs_done.append((sub.topic, sub.name))
            self._note_backlog(sub)

    def _consume(self, process: str, sub: SubscriptionPlan, consumer: Any) -> bool:
        while True:
            remaining = self.remaining()
            if remaining <= 0:
                self.problem(f"{sub.name!r} on {sub.topic}: messages were still arriving at the drain's deadline")
                return False
            wait = min(self.idle_s, remaining)
            message = consumer.receive(wait)
            if message is None:
                if wait < self.idle_s:
                    self.problem(f"{sub.name!r} on {sub.topic}: the deadline came before {self.idle_s:.0f}s "
                                 "without a delivery")
                    return False
                return True
            value, extra = _value_of(message)
            self.recorder.event(process, OpF.RECEIVE, topic=sub.topic, segment=message.segment,
                                subscription=sub.name, key=message.key, value=value, msg_id=message.msg_id,
                                extra={**delivery_extra(message, self.recorder.clock.base_ns), **(extra or {})})
            inv = self.recorder.invoke(process, OpF.ACK, topic=sub.topic, segment=message.segment,
                                       subscription=sub.name, key=message.key, value=value,
                                       msg_id=message.msg_id)
            try:
                consumer.acknowledge(message, timeout_s=max(0.1, min(self.config.workload.op_timeout_s,
                                                                     self.remaining())))
            except OperationError as err:
                self.recorder.complete_with_error(inv, err)
            else:
                self.recorder.ok(inv)

    def _note_backlog(self, sub: SubscriptionPlan) -> None:
        backlog = subscription_backlog(self.admin, self.topology, sub)
        if backlog:
            with self.lock:
                self.notes.append(f"{sub.name!r} on {sub.topic}: {backlog} entries still in the broker's backlog "
                                  f"after {self.idle_s:.0f}s without a delivery")

    # ---- all of it ------------------------------------------------------------------------

    def keep_time_for_subscriptions(self) -> None:
        """The subscriptions are consumed after every read: when slow reads (a cold restart's topic
        loads, 24-36 s a topic on 2.10.5) left them less than `SUBSCRIPTIONS_FLOOR_S`, the deadline
        moves to give them that, never past the ceiling. Without it 2.10.5's drains read every topic
        and then consumed no subscription ("no time left"), and the verdict was unknown."""
        with self.lock:
            wanted = min(self.ceiling, _monotonic() + SUBSCRIPTIONS_FLOOR_S)
            if wanted > self.deadline:
                self.stretched_s += wanted - self.deadline
                self.deadline = wanted

    def _run_all(self, pool: ThreadPoolExecutor, jobs: list[tuple[Any, ...]]) -> None:
        futures = [pool.submit(*job) for job in jobs]
        for future in futures:
            try:
                future.result()
            except Exception as err:  # a bug or a history write failure: incomplete, with the reason
                self.problem(f"{type(err).__name__}: {err}")

    def run(self) -> DrainResult:
        if self.settle():
            self.wake_coordinators()
            self.ask_coordinators()
            self.start_budget()
            self.expected = committed_values(self.recorder.file_path.parent, [self.recorder.file_path])
            reads: list[tuple[Any, ...]] = [(self.read_topic, i, t) for i, t in enumerate(self.topology.topics)]
            consumes: list[tuple[Any, ...]] = [] if self.live else [
                (self.consume, i, s) for i, s in enumerate(self.topology.subscription_plans)]
            # the subscriptions after the reads: by then what the brokers will make visible is
            # visible (late values included), so an idle subscription is an empty one
            with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="drain") as pool:
                self._run_all(pool, reads)
                # late values only once every topic was read: the first reads come first
                order = {t: i for i, t in enumerate(self.topology.topics)}
                settles: list[tuple[Any, ...]] = [(self.settle_topic, process, topic) for process, topic
                                                  in sorted(self.first_reads, key=lambda pt: order.get(pt[1], 0))]
                self._run_all(pool, settles)
                if consumes:
                    self.keep_time_for_subscriptions()
                self._run_all(pool, consumes)
        topics = [t for t in self.topology.topics if t in set(self.read_done)]
        subs = [s for s in self.topology.subscriptions if s in set(self.subs_done)]
        wanted_subs = [] if self.live else self.topology.subscriptions
        complete = not self.problems and len(topics) == len(self.topology.topics) and \
            len(subs) == len(wanted_subs)
        if complete and self.live:
            reason = f"read {len(topics)} topic(s) to the end on the live system"
        elif complete:
            reason = (f"read {len(topics)} topic(s) to the end and consumed {len(subs)} subscription(s) until "
                      f"{self.idle_s:.0f}s of silence")
        else:
            missing = len(self.topology.topics) - len(topics) + len(wanted_subs) - len(subs)
            shown = self.problems[:MAX_REASONS]
            more = len(self.problems) - len(shown)
            reason = "; ".join(shown) + (f"; and {more} more" if more > 0 else "") if shown else \
                f"{missing} topic(s)/subscription(s) not finished"
        return DrainResult(complete, reason, topics, subs, list(self.notes), list(self.lost), list(self.held),
                           list(self.undeliverable), list(self.last_id_refused), list(self.last_id_unanswered),
                           list(self.last_id_failed))


def _worth_asking_again(err: OperationError) -> bool:
    """A definite read failure that only says "not yet": a consumer not attached within the round
    (2.10.5 after a cold restart: every topic's first reader, its transaction buffer recovering)
    or a setup answer the client marks retriable (ServiceNotReady, MetadataError, ...)."""
    from harness.client.errors import NotReadyError

    return isinstance(err, NotReadyError) or bool(getattr(err, "retriable", False))


def _at(position: tuple[int, int]) -> str:
    return f"{position[0]}:{position[1]}"


def _before(position: tuple[int, int]) -> tuple[int, int]:
    """The position just before `position` in its ledger ((ledger, -1) before its first entry),
    as `positions_after` takes it."""
    return (position[0], position[1] - 1)


def _value_of(message: Any) -> tuple[str | None, dict[str, Any] | None]:
    try:
        return decode(message.data).value, None
    except PayloadError as err:
        return None, {"payload_error": str(err)}


def subscription_backlog(admin: Any, topology: Topology, sub: SubscriptionPlan) -> int | None:
    """The subscription's backlog in entries from the admin stats, or None when unknown."""
    if admin is None:
        return None
    plan = topology.topic_plan(sub.topic)
    try:
        if plan.segments > 0:
            stats = [admin.scalable_topic_stats(sub.topic)]
        elif plan.partitions > 0:
            stats = [admin.topic_stats(f"{sub.topic}-partition-{i}") for i in range(plan.partitions)]
        else:
            stats = [admin.topic_stats(sub.topic)]
    except Exception:  # unknown is an honest answer; the drain does not depend on it
        return None
    total = 0
    for stat in stats:
        found = _backlog_in(stat, sub.name)
        if found is None:
            return None
        total += found
    return total


def _backlog_in(stats: Any, subscription: str) -> int | None:
    if not isinstance(stats, dict):
        return None
    subs = stats.get("subscriptions")
    if isinstance(subs, dict) and isinstance(subs.get(subscription), dict):
        backlog = subs[subscription].get("msgBacklog")
        return int(backlog) if isinstance(backlog, int | float) else None
    segments = stats.get("segments")
    if isinstance(segments, dict):
        segments = list(segments.values())
    if isinstance(segments, list) and segments:
        parts = [_backlog_in(s, subscription) for s in segments]
        if any(p is None for p in parts):
            return None
        return sum(p for p in parts if p is not None)
    return None


def drain(cluster: ClusterInfo, config: RunConfig, topology: Topology, recorder: HistoryRecorder,
          timeout_s: float, *, client: Any = None, admin: Any = None, live: bool = False,
          txn_states: Any = None) -> DrainResult:
    """Final reads and subscriptions consumed until empty, within `timeout_s` (see the module docstring).

    `live`: the live reads before a cold restart: settle, ask the coordinators and read every
    topic, nothing else.

    `client` and `admin` default to a new `harness.client.PulsarClient` and
    `AdminClient` for the cluster, `txn_states` (who answers `txn-state`) to the v5 headers in
    the store where a v5 run names the store's address (orchestrator.load.txn_headers), else
    the admin (tests pass fakes).
    """
    own_client = client is None
    if own_client:
        from harness.client import PulsarClient

        client = PulsarClient(cluster.service_url, txn_path=config.path.value,
                              operation_timeout_s=max(1.0, min(config.workload.op_timeout_s, timeout_s)),
                              listener_name=cluster.listener_name)
    if admin is None and cluster.admin_url:
        from harness.client.admin import AdminClient

        admin = AdminClient(cluster.admin_url, timeout_s=10.0)
    try:
        if txn_states is None:
            txn_states = v5_header_states(config.path, cluster.settings)
        result = _Drain(cluster, config, topology, recorder, timeout_s, client, admin, live=live,
                        txn_states=txn_states).run()
    finally:
        if own_client:
            with contextlib.suppress(Exception):
                client.close(2.0)
    for note in result.notes:
        print(f"drain: {note}", file=sys.stderr, flush=True)
    return result
