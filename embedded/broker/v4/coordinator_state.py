"""One transaction coordinator's state, without I/O (Pulsar's MLTransactionMetadataStore bookkeeping).

Theory of operation. A coordinator (TC id = `TxnId.most`) keeps every transaction that
has not ended in `txns`, keyed by its sequence number (`TxnId.least`), with its state,
its participants (produced partitions, acked subscriptions), its deadline and the log
positions of its records. Every change is first appended to the coordinator log; this
module decides what may change and applies changes, and replays the log after a crash.

States and transitions (PIP-31; the persisted ones are Pulsar's `TxnStatus`):

    OPEN --commit--> COMMITTING --all participants done--> COMMITTED (removed)
    OPEN --abort---> ABORTING   --all participants done--> ABORTED   (removed)
    OPEN --deadline passed--> TIME_OUT --ABORTING logged--> ABORTING --> ABORTED

TIME_OUT is in memory only: the sweeper has claimed the transaction for a timeout abort
and the ABORTING record is being written, so no client request can slip in between.
Writing COMMITTING or ABORTING is the decision: after it, the transaction is completed
that way, also by a new coordinator after a crash. A finished transaction is forgotten
and all its records are deleted from the log (later END_TXN: TransactionNotFound, as
in Pulsar).

Replay follows MLTransactionMetadataStore: NEW creates, ADD_* and UPDATE extend a
known transaction, records of unknown transactions are deleted, COMMITTED/ABORTED
remove the transaction and delete its records. Every record carries the highest
sequence handed out so far (`max_local_txn_id`), so the sequence never goes back, even
when all the records it came from were deleted (the caller also reads the log's last
entry for this).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from embedded import planted_bugs
from embedded.broker.txn_api import TxnError
from embedded.broker.v4.batched_writer import LogPosition
from embedded.broker.v4.records import TransactionMetadataOp, TxnStatus
from harness.wire import ServerError, TxnAction, TxnId

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 60_000


class TxnState(enum.Enum):
    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"
    TIME_OUT = "TIME_OUT"

    @property
    def status(self) -> TxnStatus | None:
        """The persisted `TxnStatus` (None for TIME_OUT, which is never logged)."""
        return _STATUS.get(self)

    @classmethod
    def of(cls, status: int) -> TxnState:
        return _FROM_STATUS[TxnStatus(status)]


_STATUS = {TxnState.OPEN: TxnStatus.OPEN, TxnState.COMMITTING: TxnStatus.COMMITTING,
           TxnState.COMMITTED: TxnStatus.COMMITTED, TxnState.ABORTING: TxnStatus.ABORTING,
           TxnState.ABORTED: TxnStatus.ABORTED}
_FROM_STATUS = {v: k for k, v in _STATUS.items()}

TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.OPEN: frozenset({TxnState.COMMITTING, TxnState.ABORTING, TxnState.TIME_OUT}),
    TxnState.TIME_OUT: frozenset({TxnState.ABORTING}),
    TxnState.COMMITTING: frozenset({TxnState.COMMITTED}),
    TxnState.ABORTING: frozenset({TxnState.ABORTED}),
    TxnState.COMMITTED: frozenset(),
    TxnState.ABORTED: frozenset(),
}


def ending_state(action: TxnAction) -> TxnState:
    return TxnState.COMMITTING if action is TxnAction.COMMIT else TxnState.ABORTING


def final_state(action: TxnAction) -> TxnState:
    return TxnState.COMMITTED if action is TxnAction.COMMIT else TxnState.ABORTED


class EndDecision(enum.Enum):
    START = "start"     # OPEN: log the decision, then complete it
    JOIN = "join"       # the same decision is already made: wait for (or re-drive) its completion


@dataclass
class TxnMeta:
    txn: TxnId
    state: TxnState
    opened_ms: int
    timeout_ms: int
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    log_positions: list[LogPosition] = field(default_factory=list)
    timed_out: bool = False
    #: in memory only: the planted bug V4_RECOVERY_DROPS_EXPIRED_TIMEOUTS took it out of the sweeper's
    #: reach (2.10.5's timeout tracker dropping it at a load)
    timeout_dropped: bool = False
    decision_logged: bool = False
    done_participants: set[str] = field(default_factory=set)

    @property
    def deadline_ms(self) -> int:
        return self.opened_ms + self.timeout_ms

    @property
    def action(self) -> TxnAction | None:
        if self.state in (TxnState.COMMITTING, TxnState.COMMITTED):
            return TxnAction.COMMIT
        if self.state in (TxnState.ABORTING, TxnState.ABORTED, TxnState.TIME_OUT):
            return TxnAction.ABORT
        return None

    def participants(self) -> list[str]:
        """Participant keys: `p:<topic>` per produced partition, `s:<topic>/<sub>` per acked subscription."""
        return [f"p:{p}" for p in self.partitions] + [f"s:{t}\n{s}" for t, s in self.subscriptions]

    def to_json(self) -> dict[str, Any]:
        """Pulsar's TransactionMetadata admin view."""
        return {"txnId": f"({self.txn.most},{self.txn.least})", "status": self.state.value,
                "openTimestamp": self.opened_ms, "timeoutAt": self.timeout_ms,
                "producedPartitions": list(self.partitions),
                "ackedPartitions": [{"topic": t, "subscription": s} for t, s in self.subscriptions]}


class CoordinatorState:
    def __init__(self, tc_id: int) -> None:
        self.tc_id = tc_id
        self.sequence = 0                      # the last TxnId.least handed out
        self.txns: dict[int, TxnMeta] = {}

    # ---- queries ------------------------------------------------------------------------------

    def get(self, txn: TxnId) -> TxnMeta:
        meta = self.txns.get(txn.least) if txn.most == self.tc_id else None
        if meta is None:
            raise TxnError(ServerError.TransactionNotFound,
                           f"transaction {txn} is not open on coordinator {self.tc_id} (it may have ended)")
        return meta

    def low_watermark(self) -> int:
        """The highest sequence below every transaction not yet ended (Pulsar: firstKey - 1, else 0)."""
        if not self.txns:
            return 0
        return min(self.txns) - 1

    def expired(self, now_ms: int) -> list[TxnMeta]:
        return [m for m in self.txns.values()
                if m.state is TxnState.OPEN and not m.timeout_dropped and m.deadline_ms <= now_ms]

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.deadline_ms for m in self.txns.values() if m.state is TxnState.OPEN and not m.timeout_dropped]
        return min(deadlines) if deadlines else None

    def in_flight(self) -> list[TxnMeta]:
        """Transactions whose decision is logged but not completed (resumed after recovery)."""
        return [m for m in self.txns.values() if m.state in (TxnState.COMMITTING, TxnState.ABORTING)]

    # ---- live changes -------------------------------------------------------------------------

    def next_txn(self) -> TxnId:
        self.sequence += 1
        return TxnId(self.tc_id, self.sequence)

    def opened(self, txn: TxnId, now_ms: int, timeout_ms: int, at: LogPosition) -> TxnMeta:
        meta = TxnMeta(txn, TxnState.OPEN, now_ms, timeout_ms if timeout_ms > 0 else DEFAULT_TIMEOUT_MS,
                       log_positions=[at])
        self.txns[txn.least] = meta
        return meta

    def check_open(self, txn: TxnId, what: str) -> TxnMeta:
        meta = self.get(txn)
        if meta.state is not TxnState.OPEN:
            raise TxnError(ServerError.InvalidTxnStatus,
                           f"cannot {what} transaction {txn}: it is {meta.state.value}, not OPEN")
        return meta

    @staticmethod
    def add_partitions(meta: TxnMeta, partitions: Iterable[str]) -> list[str]:
        added = [p for p in dict.fromkeys(partitions) if p not in meta.partitions]
        meta.partitions.extend(added)
        return added

    @staticmethod
    def add_subscriptions(meta: TxnMeta, subscriptions: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        added = [s for s in dict.fromkeys(subscriptions) if s not in meta.subscriptions]
        meta.subscriptions.extend(added)
        return added

    def begin_end(self, txn: TxnId, action: TxnAction) -> tuple[TxnMeta, EndDecision]:
        """END_TXN from a client: decide in memory (OPEN -> COMMITTING/ABORTING) or join the decision made."""
        meta = self.get(txn)
        target = ending_state(action)
        if meta.state is TxnState.OPEN:
            meta.state = target
            return meta, EndDecision.START
        if meta.state is target or (meta.state is TxnState.TIME_OUT and action is TxnAction.ABORT):
            return meta, EndDecision.JOIN
        reason = "it timed out and is being aborted" if meta.state is TxnState.TIME_OUT else \
            f"it is already {meta.state.value}"
        raise TxnError(ServerError.InvalidTxnStatus, f"cannot {action.name.lower()} transaction {txn}: {reason}")

    @staticmethod
    def time_out(meta: TxnMeta) -> bool:
        """The sweeper claims an expired OPEN transaction; False when a client got there first."""
        if meta.state is not TxnState.OPEN:
            return False
        meta.state = TxnState.TIME_OUT
        meta.timed_out = True
        return True

    @staticmethod
    def decision_logged(meta: TxnMeta, at: LogPosition) -> None:
        meta.log_positions.append(at)
        meta.decision_logged = True
        if meta.state is TxnState.TIME_OUT:
            meta.state = TxnState.ABORTING

    def finished(self, meta: TxnMeta, at: LogPosition) -> list[LogPosition]:
        """COMMITTED/ABORTED is logged: forget the transaction; returns every record to delete."""
        action = meta.action
        meta.state = final_state(action if action is not None else TxnAction.ABORT)
        self.txns.pop(meta.txn.least, None)
        return [*meta.log_positions, at]

    # ---- replay -------------------------------------------------------------------------------

    def replay(self, record: Any, at: LogPosition) -> list[LogPosition]:
        """Apply one logged record; returns the log positions that can be deleted now."""
        floor = record.max_local_txn_id if record.HasField("max_local_txn_id") else 0
        least = record.txnid_least_bits
        if floor > self.sequence:
            self.sequence = floor
        op = TransactionMetadataOp(record.metadata_op)
        meta = self.txns.get(least)
        if op is TransactionMetadataOp.NEW:
            self.sequence = max(self.sequence, least)
            if meta is None:
                self.txns[least] = TxnMeta(TxnId(record.txnid_most_bits, least), TxnState.OPEN,
                                           int(record.start_time), int(record.timeout_ms) or DEFAULT_TIMEOUT_MS,
                                           log_positions=[at])
            else:
                meta.log_positions.append(at)
            return []
        if meta is None:
            return [at]   # a record of a transaction that already ended
        if op is TransactionMetadataOp.ADD_PARTITION:
            if planted_bugs.on(planted_bugs.V4_REPLAY_KEEPS_LAST_PARTITIONS):
                # DELIBERATE FAULT (txnbench self-test): assigns instead of adding
                meta.partitions[:] = list(dict.fromkeys(record.partitions))
            else:
                self.add_partitions(meta, record.partitions)
            meta.log_positions.append(at)
            return []
        if op is TransactionMetadataOp.ADD_SUBSCRIPTION:
            self.add_subscriptions(meta, [(s.topic, s.subscription) for s in record.subscriptions])
            meta.log_positions.append(at)
            return []
        new = TxnState.of(record.new_status)
        if new is meta.state:
            meta.log_positions.append(at)
            return []
        if new not in TRANSITIONS[meta.state]:
            log.warning("coordinator %d: replay: %s cannot go from %s to %s; record %s ignored",
                        self.tc_id, meta.txn, meta.state.value, new.value, at)
            return [at]
        if new in (TxnState.COMMITTED, TxnState.ABORTED):
            self.txns.pop(least, None)
            return [*meta.log_positions, at]
        meta.state = new
        meta.decision_logged = True
        meta.log_positions.append(at)
        return []
