"""The segment DAG: initial tiling, split and merge, invariants, and the JSON form."""

from __future__ import annotations

import pytest

from embedded.broker.v5.scalable.layout import (
    MAX_HASH,
    HashRange,
    LayoutError,
    SegmentLayout,
    SegmentState,
)


def test_initial_segments_tile_the_hash_space() -> None:
    for count in (1, 2, 3, 7, 16):
        layout = SegmentLayout.initial(count, now_ms=5)
        layout.check()
        assert layout.epoch == 0 and layout.next_segment_id == count
        sizes = [s.hash_range.size for s in layout.active]
        assert sum(sizes) == MAX_HASH + 1 and max(sizes) - min(sizes) <= 1
    assert SegmentLayout.initial(1, 0).segments[0].descriptor == "0000-ffff-0"
    with pytest.raises(LayoutError):
        SegmentLayout.initial(0, 0)


def test_split_seals_the_parent_and_halves_its_range() -> None:
    layout = SegmentLayout.initial(2, 0).split(1, now_ms=77)
    layout.check()
    parent = layout.segments[1]
    assert parent.state is SegmentState.SEALED and parent.child_ids == (2, 3)
    assert (parent.sealed_at_epoch, parent.sealed_at_ms) == (1, 77)
    low, high = layout.segments[2], layout.segments[3]
    assert (low.hash_range, high.hash_range) == (HashRange(0x8000, 0xBFFF), HashRange(0xC000, 0xFFFF))
    assert low.parent_ids == (1,) and low.created_at_epoch == 1
    assert layout.epoch == 1 and layout.next_segment_id == 4
    assert [s.segment_id for s in layout.active] == [0, 2, 3]
    with pytest.raises(LayoutError, match="sealed"):
        layout.split(1, 0)
    with pytest.raises(LayoutError, match="does not exist"):
        layout.split(9, 0)


def test_merge_needs_adjacent_active_segments() -> None:
    layout = SegmentLayout.initial(4, 0)
    with pytest.raises(LayoutError, match="not adjacent"):
        layout.merge(0, 2, 1)
    merged = layout.merge(1, 2, now_ms=9)
    merged.check()
    child = merged.segments[4]
    assert child.parent_ids == (1, 2) and child.hash_range == HashRange(0x4000, 0xBFFF)
    assert merged.segments[1].child_ids == (4,) and merged.segments[2].child_ids == (4,)
    assert merged.ancestors(4) == [merged.segments[1], merged.segments[2]]
    with pytest.raises(LayoutError, match="itself"):
        merged.merge(0, 0, 1)
    with pytest.raises(LayoutError, match="active"):
        merged.merge(1, 0, 1)


def test_routing_follows_the_active_segments() -> None:
    layout = SegmentLayout.initial(1, 0).split(0, 1).split(2, 2)   # 0 -> 1, 2; then 2 -> 3, 4
    assert layout.route(0x0000).segment_id == 1
    assert layout.route(0x8000).segment_id == 3
    assert layout.route(0xBFFF).segment_id == 3
    assert layout.route(0xC000).segment_id == 4
    assert [s.segment_id for s in layout.ancestors(4)] == [0, 2]


def test_a_one_value_segment_cannot_split() -> None:
    with pytest.raises(LayoutError, match="one hash value"):
        HashRange(5, 5).halves()
    with pytest.raises(LayoutError):
        HashRange(3, 2)


def test_json_round_trip_matches_pulsar_field_names() -> None:
    layout = SegmentLayout.initial(2, 3, {"team": "x"}).merge(0, 1, 4)
    data = layout.to_json()
    assert set(data) == {"epoch", "nextSegmentId", "segments", "properties"}
    assert data["segments"]["2"]["hashRange"] == {"start": 0, "end": MAX_HASH}
    assert data["segments"]["0"]["state"] == "SEALED"
    assert SegmentLayout.from_json(data) == layout
    with pytest.raises(LayoutError, match="malformed"):
        SegmentLayout.from_json({"epoch": 1})
