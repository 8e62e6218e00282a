"""What a segment's dispatchers may read: the read horizon and the aborted set (no I/O).

Theory of operation (Pulsar 5.0's `MetadataTransactionBuffer`, in memory). The buffer
tracks every transaction with writes on this segment:

* `begin(txn)` before a transactional write is appended (its op record is written
  first); `entry_added` gives each confirmed entry, in log order. The first entry of
  an OPEN transaction pins the horizon just before it.
* `decide(txn, state)` applies a decision: a committed transaction stops pinning; an
  aborted one also joins the aborted set, so dispatchers skip (and acknowledge) its
  entries. Deciding twice changes nothing.
* The horizon is the entry before the lowest first entry of the OPEN transactions,
  else the last entry. After a restart the positions of transactions that were OPEN
  are unknown (op records hold no positions; they are written before the append), so
  while any of those "recovered open" transactions remain the horizon stays pinned at
  the durable watermark (or before the first entry when there is none, where Pulsar
  5.0 would expose everything up to the last entry).

Positions `(L, e - 1)` with `e = 0` mean "every entry before ledger L", which is how a
managed ledger reads up to, but not into, ledger L.
"""

from __future__ import annotations

from dataclasses import dataclass

from embedded.broker.position import Position
from embedded.broker.v5.txn.records import TxnState
from harness.wire import TxnId


@dataclass
class _Tracked:
    state: TxnState
    first: Position | None = None
    last: Position | None = None
    recovered_open: bool = False


@dataclass(frozen=True)
class DecisionEffect:
    """What applying one decision did: whether readers must look again, and the txn's last entry here."""

    applied: bool            # False: already decided (or unknown and committed): nothing to do
    horizon_moved: bool
    aborted: bool
    last_position: Position | None


def before(position: Position) -> Position:
    """The position just before `position` in read order (same ledger, entry - 1)."""
    return Position(position.ledger_id, position.entry_id - 1)


class SegmentVisibility:
    def __init__(self, last_entry: Position, *, pin: Position | None = None) -> None:
        self.last_entry = last_entry
        self._pin = pin
        self._txns: dict[TxnId, _Tracked] = {}
        self._aborted: set[TxnId] = set()
        self._recovered_open = 0
        self.horizon = pin if pin is not None else last_entry

    # ---- recovery -----------------------------------------------------------------------------

    def recovered(self, txn: TxnId, state: TxnState) -> None:
        """A transaction found in the op index at recovery, with its header's state."""
        if state is TxnState.ABORTED:
            self._aborted.add(txn)
        if txn in self._txns:
            return
        tracked = _Tracked(state, recovered_open=state is TxnState.OPEN)
        self._txns[txn] = tracked
        if tracked.recovered_open:
            self._recovered_open += 1

    def recovered_aborted(self, txn: TxnId) -> None:
        """An aborted-txn record of this segment: its entries stay skipped."""
        self._aborted.add(txn)

    def finish_recovery(self) -> None:
        self._recompute()

    # ---- writes -------------------------------------------------------------------------------

    def state_of(self, txn: TxnId) -> TxnState | None:
        if txn in self._aborted:
            return TxnState.ABORTED
        tracked = self._txns.get(txn)
        return tracked.state if tracked is not None else None

    def begin(self, txn: TxnId) -> None:
        """`txn` (known OPEN) is about to append here."""
        if txn not in self._txns and txn not in self._aborted:
            self._txns[txn] = _Tracked(TxnState.OPEN)

    def entry_added(self, position: Position, txn: TxnId | None) -> bool:
        """A confirmed entry; returns whether the horizon moved."""
        if position > self.last_entry:
            self.last_entry = position
        tracked = self._txns.get(txn) if txn is not None else None
        if tracked is not None:
            if tracked.last is None or position > tracked.last:
                tracked.last = position
            pins = tracked.state is TxnState.OPEN and not tracked.recovered_open
            if pins and (tracked.first is None or position < tracked.first):
                tracked.first = position
        return self._recompute()

    # ---- decisions ----------------------------------------------------------------------------

    def decide(self, txn: TxnId, state: TxnState) -> DecisionEffect:
        if not state.terminal:
            raise ValueError("a decision is COMMITTED or ABORTED")
        tracked = self._txns.get(txn)
        if tracked is None:
            if state is TxnState.ABORTED and txn not in self._aborted:
                self._aborted.add(txn)   # entries of an untracked txn (recovery) must stay hidden
                return DecisionEffect(True, False, True, None)
            return DecisionEffect(False, False, False, None)
        if tracked.state.terminal:
            return DecisionEffect(False, False, False, tracked.last)
        tracked.state = state
        if tracked.recovered_open:
            tracked.recovered_open = False
            self._recovered_open -= 1
        if state is TxnState.ABORTED:
            self._aborted.add(txn)
        moved = self._recompute()
        return DecisionEffect(True, moved, state is TxnState.ABORTED, tracked.last)

    def forget(self, txn: TxnId) -> None:
        """Drop a decided transaction's tracking (its records are cleaned up; aborts stay in the set)."""
        tracked = self._txns.get(txn)
        if tracked is not None and tracked.state.terminal:
            del self._txns[txn]

    # ---- queries ------------------------------------------------------------------------------

    def is_aborted(self, txn: TxnId) -> bool:
        return txn in self._aborted

    def open_transactions(self) -> list[TxnId]:
        return [t for t, tracked in self._txns.items() if tracked.state is TxnState.OPEN]

    @property
    def recovered_open_count(self) -> int:
        return self._recovered_open

    @property
    def aborted_count(self) -> int:
        return len(self._aborted)

    def watermark(self) -> Position | None:
        """A position safe to persist as resolved-below (None while pinned by recovered txns)."""
        return None if self._recovered_open else self.horizon

    def _recompute(self) -> bool:
        if self._recovered_open > 0:
            target = self._pin if self._pin is not None else self.horizon
        else:
            firsts = [t.first for t in self._txns.values() if t.state is TxnState.OPEN and t.first is not None]
            target = before(min(firsts)) if firsts else self.last_entry
        if target == self.horizon:
            return False
        self.horizon = target
        return True
