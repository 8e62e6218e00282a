"""A cursor's acknowledgement state, without I/O (Pulsar's ManagedCursorImpl bookkeeping).

Theory of operation. The state is three things:

* `mark_delete`: every entry at or before it is acknowledged;
* `acked`: entries after it acknowledged individually (a `PositionRangeSet`);
* `batch`: for entries partly acknowledged, the batch ack set, as Pulsar keeps it:
  words of a bit set whose set bits are the batch indexes *not yet* acknowledged.
  An ack with an ack set ANDs it in; when no bit is left the entry is acknowledged.

After every change the mark-delete position moves forward over acknowledged entries
(`_advance`), so `acked` only ever holds entries after a gap. Moving across ledgers
needs to know which entry follows which; the managed ledger supplies `next_position`.
A cumulative ack with an ack set (a partly acknowledged batch) marks everything
before that entry deleted and keeps the entry's ack set, as Pulsar does.

`to_json` is what the cursor ledger stores; at most `max_ranges` individually acked
ranges are kept (Pulsar's managedLedgerMaxUnackedRangesToPersist): what is cut off is
delivered again after a restart, never lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from embedded.broker.managed_ledger.ranges import PositionRangeSet
from embedded.broker.position import Position

NextPosition = Callable[[Position], Position]


def _and_words(a: Sequence[int], b: Sequence[int]) -> list[int]:
    n = min(len(a), len(b))
    return [a[i] & b[i] for i in range(n)]


def _all_clear(words: Sequence[int]) -> bool:
    return not any(words)


class CursorState:
    def __init__(self, mark_delete: Position, next_position: NextPosition) -> None:
        self.mark_delete = mark_delete
        self.next_position = next_position
        self.acked = PositionRangeSet()
        self.batch: dict[Position, list[int]] = {}

    # ---- queries ------------------------------------------------------------------------------

    def is_acked(self, position: Position) -> bool:
        return position <= self.mark_delete or position in self.acked

    def batch_ack_set(self, position: Position) -> list[int] | None:
        return self.batch.get(position)

    # ---- changes ------------------------------------------------------------------------------

    def ack(self, position: Position, ack_set: Sequence[int] | None = None) -> bool:
        """Acknowledge one entry (or, with `ack_set`, part of its batch). Returns whether mark-delete moved."""
        if self.is_acked(position):
            return False
        if ack_set:
            known = self.batch.get(position)
            remaining = list(ack_set) if known is None else _and_words(known, ack_set)
            if not _all_clear(remaining):
                self.batch[position] = remaining
                return False
        if self.batch:
            self.batch.pop(position, None)
        if position == self.next_position(self.mark_delete):   # the usual in-order ack
            self.mark_delete = position
            if self.acked:
                self.acked.remove_through(position)
                self._advance()
            return True
        self.acked.add(position)
        return self._advance()

    def ack_cumulative(self, position: Position, ack_set: Sequence[int] | None = None) -> bool:
        """Acknowledge everything up to `position` (with `ack_set`: before it, and part of it)."""
        if ack_set:
            known = self.batch.get(position)
            remaining = list(ack_set) if known is None else _and_words(known, ack_set)
            if not _all_clear(remaining):
                target = Position(position.ledger_id, position.entry_id - 1)
                moved = self._move_to(target)
                if position > self.mark_delete and position not in self.acked:
                    self.batch[position] = remaining
                return moved
        return self._move_to(position)

    def reset(self, mark_delete: Position) -> None:
        """Seek: forget every acknowledgement and continue after `mark_delete`."""
        self.mark_delete = mark_delete
        self.acked.clear()
        self.batch.clear()

    def _move_to(self, position: Position) -> bool:
        if position <= self.mark_delete:
            return False
        self.mark_delete = position
        self.acked.remove_through(position)
        if self.batch:
            for stale in [p for p in self.batch if p <= position]:
                del self.batch[stale]
        self._advance()
        return True

    def _advance(self) -> bool:
        moved = False
        for _ in range(self.acked.range_count + 1):   # each round consumes one range
            following = self.next_position(self.mark_delete)
            end = self.acked.range_end(following)
            if end is None:
                break
            self.mark_delete = Position(following.ledger_id, end)
            self.acked.remove_through(self.mark_delete)
            moved = True
        if moved and self.batch:
            for stale in [p for p in self.batch if p <= self.mark_delete]:
                del self.batch[stale]
        return moved

    # ---- persistence --------------------------------------------------------------------------

    def to_json(self, max_ranges: int = 10_000) -> dict[str, Any]:
        ranges = []
        for i, item in enumerate(self.acked.ranges()):
            if i >= max_ranges:
                break
            ranges.append(list(item))
        batch = [[p.ledger_id, p.entry_id, words] for p, words in sorted(self.batch.items())[:max_ranges]]
        return {"md": self.mark_delete.to_json(), "acked": ranges, "batch": batch}

    @classmethod
    def from_json(cls, data: dict[str, Any], next_position: NextPosition) -> CursorState:
        state = cls(Position.from_json(data["md"]), next_position)
        for ledger_id, first, last in data.get("acked", []):
            state.acked.add_range(int(ledger_id), int(first), int(last))
        for ledger_id, entry_id, words in data.get("batch", []):
            state.batch[Position(int(ledger_id), int(entry_id))] = [int(w) for w in words]
        state.acked.remove_through(state.mark_delete)
        state._advance()
        return state

    def individually_deleted_text(self) -> str:
        """Pulsar's stats form: `[(l:e1..l:e2]...]` with open-closed ranges."""
        parts = [f"({lid}:{first - 1}..{lid}:{last}]" for lid, first, last in self.acked.ranges()]
        return "[" + ",".join(parts) + "]"
