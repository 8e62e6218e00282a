"""A topic's transaction buffer state, without I/O (Pulsar's TopicTransactionBuffer bookkeeping).

Theory of operation (PIP-31, markers in the data stream). Transactional entries are
written straight into the topic's managed ledger, among everything else. The buffer
keeps:

* `ongoing`: each open transaction with its *first* entry, in log order (insertion
  order of the dict: entries are confirmed in log order);
* `max_read`: how far dispatchers may read. With no open transaction it is the last
  confirmed entry; otherwise the position just before the first entry of the oldest
  open transaction (`previous(first)`), so nothing of an open transaction, and nothing
  after it, is delivered before the transaction ends;
* `aborted`: each aborted transaction with the position of its abort marker;
  dispatchers skip (and acknowledge) the entries of these transactions;
* `low_watermarks`: per coordinator, the sequence below which every transaction has
  ended (sent with END_TXN_ON_PARTITION); an append of a transaction at or below it is
  refused, and an open transaction that falls below it is aborted (Pulsar's
  handleLowWaterMark);
* `changes`: how often `max_read` moved forward since the last snapshot.

An entry of a transaction already aborted never becomes ongoing (it is skipped anyway).
A commit or abort marker removes its transaction from `ongoing`; an abort adds it to
`aborted`. The snapshot is `max_read` and `aborted` (Pulsar's TransactionBufferSnapshot,
with its field names): replaying the ledger after the snapshot's `max_read` rebuilds
everything else, because every open transaction's entries lie after it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from embedded import planted_bugs
from embedded.broker.position import Position
from harness.wire import MarkerType, TxnAction, TxnId

PreviousPosition = Callable[[Position], Position]


class TbState(enum.Enum):
    NONE = "None"
    INITIALIZING = "Initializing"
    READY = "Ready"
    NO_SNAPSHOT = "NoSnapshot"    # no transaction ever wrote here: the first one takes a snapshot first
    CLOSED = "Close"


class BufferState:
    def __init__(self, previous: PreviousPosition, last_confirmed: Position) -> None:
        self.previous = previous
        self.ongoing: dict[TxnId, Position] = {}
        self.aborted: dict[TxnId, Position] = {}
        self.max_read = last_confirmed
        self.low_watermarks: dict[int, int] = {}
        self.changes = 0
        self.committed_count = 0
        self.aborted_count = 0

    # ---- the read horizon ---------------------------------------------------------------------

    def _set_max_read(self, position: Position) -> bool:
        if position == self.max_read:
            return False
        if position > self.max_read:
            self.changes += 1
        self.max_read = position
        return True

    def recompute(self, last_confirmed: Position) -> bool:
        """Set `max_read` from `ongoing` (or `last_confirmed`); returns whether it moved."""
        if self.ongoing:
            first = next(iter(self.ongoing.values()))
            return self._set_max_read(self.previous(first))
        return self._set_max_read(last_confirmed)

    def on_entry(self, position: Position, txn: TxnId | None, marker: bool) -> bool:
        """A confirmed entry (log order); returns whether `max_read` moved."""
        if txn is not None and not marker:
            if txn in self.ongoing or txn in self.aborted:
                return False
            self.ongoing[txn] = position
            if len(self.ongoing) == 1:
                return self._set_max_read(self.previous(position))
            return False
        if not self.ongoing:
            return self._set_max_read(position)
        return False

    def on_end(self, txn: TxnId, action: TxnAction, marker: Position, last_confirmed: Position) -> bool:
        """A commit/abort marker of `txn` is durable at `marker`; returns whether `max_read` moved."""
        self.ongoing.pop(txn, None)
        if action is TxnAction.ABORT:
            self.aborted[txn] = marker
            self.aborted_count += 1
        else:
            self.committed_count += 1
        return self.recompute(last_confirmed)

    def is_aborted(self, txn: TxnId) -> bool:
        return txn in self.aborted

    # ---- low watermarks -----------------------------------------------------------------------

    def raise_low_watermark(self, tc_id: int, low_watermark: int) -> None:
        if low_watermark > self.low_watermarks.get(tc_id, -1):
            self.low_watermarks[tc_id] = low_watermark

    def below_low_watermark(self, txn: TxnId) -> bool:
        return txn.least <= self.low_watermarks.get(txn.most, -1)

    def stale_first(self) -> TxnId | None:
        """The oldest open transaction when its coordinator says it has ended (to abort here)."""
        if not self.ongoing:
            return None
        first = next(iter(self.ongoing))
        return first if self.below_low_watermark(first) else None

    # ---- recovery -----------------------------------------------------------------------------

    def replay(self, position: Position, txn: TxnId | None, marker_type: int | None) -> None:
        """One entry read back after the snapshot (markers carry their type)."""
        if txn is None:
            return
        if marker_type is None:
            if txn not in self.ongoing and txn not in self.aborted:
                self.ongoing[txn] = position
            return
        self.ongoing.pop(txn, None)
        if planted_bugs.on(planted_bugs.V4_BUFFER_REPLAY_ABORT_AS_COMMIT):
            return   # DELIBERATE FAULT (txnbench self-test): every marker read as a commit
        if marker_type == MarkerType.TXN_ABORT:
            self.aborted[txn] = position

    # ---- snapshots ----------------------------------------------------------------------------

    def snapshot(self, topic: str, sequence_id: int) -> dict[str, Any]:
        """Pulsar's TransactionBufferSnapshot."""
        return {
            "topicName": topic,
            "sequenceId": sequence_id,
            "maxReadPositionLedgerId": self.max_read.ledger_id,
            "maxReadPositionEntryId": self.max_read.entry_id,
            "aborts": [{"txnIdMostBits": t.most, "txnIdLeastBits": t.least, "ledgerId": p.ledger_id,
                        "entryId": p.entry_id} for t, p in self.aborted.items()],
        }

    def restore(self, snapshot: dict[str, Any]) -> Position:
        """Take the aborted set from a snapshot; returns the position to replay after."""
        self.aborted = {TxnId(int(a["txnIdMostBits"]), int(a["txnIdLeastBits"])):
                        Position(int(a["ledgerId"]), int(a["entryId"])) for a in snapshot.get("aborts", [])}
        return Position(int(snapshot["maxReadPositionLedgerId"]), int(snapshot["maxReadPositionEntryId"]))
