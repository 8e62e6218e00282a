"""Cursor state: individual and cumulative acks, batch ack sets, mark-delete across ledgers."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from embedded.broker.managed_ledger.cursor_state import CursorState
from embedded.broker.managed_ledger.ranges import PositionRangeSet
from embedded.broker.position import Position as P

# Two closed ledgers (10 entries in ledger 1, ledger 2 empty, 5 in ledger 3) then ledger 4 current.
LEDGERS = {1: 10, 2: 0, 3: 5}
CURRENT = 4


def next_position(p: P) -> P:
    if p.ledger_id == CURRENT:
        return P(CURRENT, p.entry_id + 1)
    count = LEDGERS.get(p.ledger_id)
    if count is not None and p.entry_id + 1 < count:
        return P(p.ledger_id, p.entry_id + 1)
    for lid in sorted(LEDGERS):
        if lid > p.ledger_id and LEDGERS[lid] > 0:
            return P(lid, 0)
    return P(CURRENT, 0)


def fresh() -> CursorState:
    return CursorState(P(1, -1), next_position)


def test_range_set_merges_and_counts() -> None:
    s = PositionRangeSet()
    for e in (1, 3, 2, 7, 5, 6):
        s.add(P(9, e))
    assert list(s.ranges()) == [(9, 1, 3), (9, 5, 7)]
    assert len(s) == 6 and s.range_count == 2
    s.add(P(9, 4))
    assert list(s.ranges()) == [(9, 1, 7)] and len(s) == 7
    assert not s.add(P(9, 4))
    s.remove_through(P(9, 3))
    assert list(s.ranges()) == [(9, 4, 7)] and len(s) == 4
    assert s.count_in_ledger(9, 5, 100) == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30)), max_size=60),
       st.tuples(st.integers(0, 3), st.integers(-1, 30)))
def test_range_set_matches_a_plain_set(adds: list[tuple[int, int]], cut: tuple[int, int]) -> None:
    s, model = PositionRangeSet(), set()
    for ledger, entry in adds:
        s.add(P(ledger, entry))
        model.add(P(ledger, entry))
    assert len(s) == len(model)
    s.remove_through(P(*cut))
    model = {p for p in model if p > P(*cut)}
    assert len(s) == len(model)
    assert all(p in s for p in model)
    assert sorted((lid, e) for lid, a, b in s.ranges() for e in range(a, b + 1)) == \
        sorted((p.ledger_id, p.entry_id) for p in model)


def test_individual_acks_move_mark_delete_when_contiguous() -> None:
    c = fresh()
    assert not c.ack(P(1, 1))
    assert c.mark_delete == P(1, -1)
    assert c.is_acked(P(1, 1)) and not c.is_acked(P(1, 0))
    assert c.ack(P(1, 0))
    assert c.mark_delete == P(1, 1)
    assert len(c.acked) == 0


def test_mark_delete_crosses_empty_ledgers() -> None:
    c = fresh()
    for e in range(10):
        c.ack(P(1, e))
    assert c.mark_delete == P(1, 9)
    c.ack(P(3, 1))
    assert c.mark_delete == P(1, 9)
    c.ack(P(3, 0))
    assert c.mark_delete == P(3, 1)


def test_batch_ack_sets_are_anded_until_empty() -> None:
    c = fresh()
    # a batch of 4 at (1, 0): client acks index 1, then 0 and 3, then 2
    assert not c.ack(P(1, 0), [0b1101])
    assert c.batch_ack_set(P(1, 0)) == [0b1101]
    assert not c.is_acked(P(1, 0))
    c.ack(P(1, 0), [0b0110])
    assert c.batch_ack_set(P(1, 0)) == [0b0100]
    assert c.ack(P(1, 0), [0b1011])
    assert c.is_acked(P(1, 0)) and c.batch_ack_set(P(1, 0)) is None
    assert c.mark_delete == P(1, 0)


def test_cumulative_ack_with_ack_set_keeps_the_partial_batch() -> None:
    c = fresh()
    c.ack(P(1, 5))
    assert not c.ack_cumulative(P(1, 3), [0b1100]) or c.mark_delete == P(1, 2)
    assert c.mark_delete == P(1, 2)
    assert c.batch_ack_set(P(1, 3)) == [0b1100]
    assert c.is_acked(P(1, 5))
    c.ack_cumulative(P(1, 4))
    assert c.mark_delete == P(1, 5)
    assert c.batch_ack_set(P(1, 3)) is None


def test_cumulative_ack_behind_mark_delete_is_ignored() -> None:
    c = fresh()
    c.ack_cumulative(P(1, 6))
    assert not c.ack_cumulative(P(1, 2))
    assert c.mark_delete == P(1, 6)


def test_json_round_trip_and_truncation() -> None:
    c = fresh()
    for e in (2, 4, 6, 8):
        c.ack(P(1, e))
    c.ack(P(3, 2), [0b01])
    restored = CursorState.from_json(c.to_json(), next_position)
    assert restored.mark_delete == c.mark_delete
    assert list(restored.acked.ranges()) == list(c.acked.ranges())
    assert restored.batch_ack_set(P(3, 2)) == [0b01]
    truncated = CursorState.from_json(c.to_json(max_ranges=2), next_position)
    assert list(truncated.acked.ranges()) == [(1, 2, 2), (1, 4, 4)]
    assert c.individually_deleted_text() == "[(1:1..1:2],(1:3..1:4],(1:5..1:6],(1:7..1:8]]"


def test_random_acks_end_with_everything_acknowledged() -> None:
    rng = random.Random(7)
    positions = [P(1, e) for e in range(10)] + [P(3, e) for e in range(5)] + [P(4, e) for e in range(20)]
    rng.shuffle(positions)
    c = fresh()
    for p in positions:
        c.ack(p)
    assert c.mark_delete == P(4, 19)
    assert len(c.acked) == 0
