"""Which segments may be removed, and in what order (pure)."""

from __future__ import annotations

from embedded.ledger.index import EntryCache, EntryIndex
from embedded.ledger.reclaim import SegmentUsage


def test_a_segment_goes_once_all_its_ledgers_are_deleted() -> None:
    usage = SegmentUsage()
    usage.note(1, 10)
    usage.note(1, 11)
    usage.note(2, 11)
    usage.note_delete(3, 10)
    assert usage.collect(active_segment=3) == []
    usage.note_delete(3, 11)
    assert usage.collect(active_segment=4) == [1, 2, 3]
    assert usage.segments() == []


def test_a_deletion_outlives_the_ledgers_other_records() -> None:
    """L: created in 1 (shared with live M), entries in 2, deleted in 3."""
    usage = SegmentUsage()
    usage.note(1, 1)      # L created
    usage.note(1, 2)      # M created, stays live
    usage.note(2, 1)      # L's entries
    usage.note_delete(3, 1)
    # 2 holds only deleted L; 3 holds L's DELETE, which must stay while segment 1 still has L's creation.
    assert usage.collect(active_segment=4) == [2]
    assert usage.collect(active_segment=4) == []
    usage.note_delete(4, 2)
    assert usage.collect(active_segment=5) == [1, 3, 4]


def test_the_active_segment_and_empty_segments() -> None:
    usage = SegmentUsage()
    usage.add_segment(1)   # e.g. a segment opened by a restart that got no writes
    usage.add_segment(2)
    assert usage.collect(active_segment=2) == [1]


def test_index_is_dense_per_ledger() -> None:
    index = EntryIndex()
    index.add(7, 0, segment=3, offset=100, size=5)
    index.add(7, 1, segment=4, offset=(1 << 39) + 1, size=0)
    assert index.get(7, 1) == (4, (1 << 39) + 1, 0)
    assert index.entries(7) == 2
    index.drop(7)
    assert index.entries(7) == 0


def test_cache_is_bounded_by_bytes_and_least_recently_used_goes_first() -> None:
    cache = EntryCache(max_bytes=100)
    for i in range(5):
        cache.put(1, i, bytes(20))
    assert cache.get(1, 0) is not None       # touch 0 so 1 is the oldest
    cache.put(1, 5, bytes(20))
    assert cache.get(1, 1) is None and cache.get(1, 0) is not None
    assert cache.bytes <= 100
    cache.put(2, 0, bytes(60))                 # larger than a quarter: not cached
    assert cache.get(2, 0) is None
