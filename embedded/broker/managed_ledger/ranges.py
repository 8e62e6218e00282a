"""A set of positions stored as inclusive entry ranges per ledger (Pulsar's LongPairRangeSet).

Individually acknowledged messages usually come in runs, so a cursor keeps them as
ranges: adding the next position of a run extends it, and two runs that meet merge.
Per ledger the ranges are two sorted lists (starts, ends) searched with bisect.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from sortedcontainers import SortedDict

from embedded.broker.position import Position


class PositionRangeSet:
    def __init__(self) -> None:
        self._ledgers: SortedDict = SortedDict()   # ledger id -> ([starts], [ends])
        self._count = 0
        self._range_count = 0

    def __len__(self) -> int:
        """Number of positions in the set."""
        return self._count

    @property
    def range_count(self) -> int:
        return self._range_count

    def __bool__(self) -> bool:
        return self._count > 0

    def __contains__(self, position: Position) -> bool:
        found = self._ledgers.get(position.ledger_id)
        if found is None:
            return False
        starts, ends = found
        i = bisect_right(starts, position.entry_id) - 1
        return i >= 0 and ends[i] >= position.entry_id

    def range_end(self, position: Position) -> int | None:
        """The last entry id of the range holding `position`, or None when it is not in the set."""
        found = self._ledgers.get(position.ledger_id)
        if found is None:
            return None
        starts, ends = found
        i = bisect_right(starts, position.entry_id) - 1
        if i >= 0 and ends[i] >= position.entry_id:
            return ends[i]
        return None

    def add(self, position: Position) -> bool:
        """Add one position; False when it was already there."""
        return self.add_range(position.ledger_id, position.entry_id, position.entry_id) > 0

    def add_range(self, ledger_id: int, first: int, last: int) -> int:
        """Add entries first..last of a ledger; returns how many were new."""
        if last < first:
            return 0
        found = self._ledgers.get(ledger_id)
        if found is None:
            self._ledgers[ledger_id] = ([first], [last])
            self._count += last - first + 1
            self._range_count += 1
            return last - first + 1
        starts, ends = found
        # ranges that overlap or touch [first, last]: i .. j-1
        i = bisect_right(ends, first - 2)          # first range ending at or after first-1
        j = bisect_right(starts, last + 1)         # ranges starting at or before last+1
        if i >= j:
            starts.insert(i, first)
            ends.insert(i, last)
            self._count += last - first + 1
            self._range_count += 1
            return last - first + 1
        new_first = min(first, starts[i])
        new_last = max(last, ends[j - 1])
        covered = sum(ends[k] - starts[k] + 1 for k in range(i, j))
        del starts[i:j]
        del ends[i:j]
        starts.insert(i, new_first)
        ends.insert(i, new_last)
        added = (new_last - new_first + 1) - covered
        self._count += added
        self._range_count -= (j - i) - 1
        return added

    def remove_through(self, position: Position) -> None:
        """Remove every position at or before `position`."""
        for ledger_id in list(self._ledgers.irange(maximum=position.ledger_id)):
            starts, ends = self._ledgers[ledger_id]
            if ledger_id < position.ledger_id:
                self._count -= sum(e - s + 1 for s, e in zip(starts, ends, strict=True))
                self._range_count -= len(starts)
                del self._ledgers[ledger_id]
                continue
            cut = position.entry_id
            while starts and starts[0] <= cut:
                if ends[0] <= cut:
                    self._count -= ends[0] - starts[0] + 1
                    self._range_count -= 1
                    del starts[0]
                    del ends[0]
                else:
                    self._count -= cut - starts[0] + 1
                    starts[0] = cut + 1
            if not starts:
                del self._ledgers[ledger_id]

    def clear(self) -> None:
        self._ledgers.clear()
        self._count = 0
        self._range_count = 0

    def ranges(self) -> Iterator[tuple[int, int, int]]:
        """(ledger id, first entry, last entry) in order."""
        for ledger_id, (starts, ends) in self._ledgers.items():
            for first, last in zip(starts, ends, strict=True):
                yield ledger_id, first, last

    def count_in_ledger(self, ledger_id: int, first: int, last: int) -> int:
        """How many set positions lie in entries first..last of a ledger."""
        found = self._ledgers.get(ledger_id)
        if found is None or last < first:
            return 0
        total = 0
        for s, e in zip(*found, strict=True):
            lo, hi = max(s, first), min(e, last)
            if lo <= hi:
                total += hi - lo + 1
        return total

    def __repr__(self) -> str:
        return "PositionRangeSet(" + ", ".join(f"{lid}:{a}..{b}" for lid, a, b in self.ranges()) + ")"
