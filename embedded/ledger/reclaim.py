"""Which journal segments hold only deleted ledgers and can be removed (pure bookkeeping).

Theory of operation. Space is reclaimed a whole segment at a time, never by
rewriting: a segment is garbage once every ledger with a record in it is deleted.
One subtlety: a ledger's DELETE record must outlive its other records. If the
segment holding the DELETE went first and a crash followed, replay would find the
ledger's older records without the deletion and resurrect it. So a segment that
holds the DELETE of ledger L is removable only once L has no records in any other
segment. `collect()` applies both rules until nothing more is removable and returns
the segments in an order that is safe to unlink one by one (each removal keeps the
invariant for the segments still on disk). The active segment is never removed,
and it always carries the ledger-id high-water mark, so ids stay unique.

A ledger that stays open for a long time pins every segment it has records in,
together with the deleted ledgers' records that share those segments: there is no
compaction that copies live records out (BookKeeper's entry-log compaction), see
the README.
"""

from __future__ import annotations


class SegmentUsage:
    """Ledgers per segment, segments per ledger, and where each deletion is recorded."""

    def __init__(self) -> None:
        self._ledgers_of: dict[int, set[int]] = {}
        self._segments_of: dict[int, set[int]] = {}
        self._deleted_in: dict[int, int] = {}   # ledger -> segment holding its DELETE

    def add_segment(self, segment: int) -> None:
        self._ledgers_of.setdefault(segment, set())

    def note(self, segment: int, ledger_id: int) -> None:
        """A record of `ledger_id` (any kind) is durable in `segment`."""
        self._ledgers_of.setdefault(segment, set()).add(ledger_id)
        self._segments_of.setdefault(ledger_id, set()).add(segment)

    def note_delete(self, segment: int, ledger_id: int) -> None:
        self.note(segment, ledger_id)
        self._deleted_in[ledger_id] = segment

    def is_deleted(self, ledger_id: int) -> bool:
        return ledger_id in self._deleted_in

    def segments(self) -> list[int]:
        return sorted(self._ledgers_of)

    def _removable(self, segment: int) -> bool:
        for ledger_id in self._ledgers_of[segment]:
            deleted_in = self._deleted_in.get(ledger_id)
            if deleted_in is None:
                return False
            if deleted_in == segment and self._segments_of[ledger_id] != {segment}:
                return False
        return True

    def collect(self, active_segment: int) -> list[int]:
        """Forget and return the removable segments, in a safe unlink order."""
        removed: list[int] = []
        for _ in range(len(self._ledgers_of) + 1):  # each pass removes one or stops
            candidate = next((s for s in sorted(self._ledgers_of)
                              if s != active_segment and self._removable(s)), None)
            if candidate is None:
                break
            for ledger_id in self._ledgers_of.pop(candidate):
                segments = self._segments_of[ledger_id]
                segments.discard(candidate)
                if not segments:
                    del self._segments_of[ledger_id]
                    del self._deleted_in[ledger_id]
            removed.append(candidate)
        return removed
