"""Constant-throughput pacing: intended starts on a fixed schedule, lag charged, nothing skipped."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.unit.workloads.conftest import Harness, ManualClock
from workloads.atomic import AtomicProduce
from workloads.session import Pacer

PACED = """
load:
  rate_per_user: 10
workload:
  kind: atomic-produce
  topics: 2
  topics_per_txn: 1
  messages_per_txn: 2
  abort_ratio: 0.0
"""

MS = 1_000_000


def first_invokes(h: Harness) -> list[dict]:
    return [op for op in h.ops() if op["f"] == "txn-open" and op["type"] == "invoke"]


def test_pacer_schedule_is_fixed_from_the_first_slot() -> None:
    clock = ManualClock(5_000 * MS)
    pacer = Pacer(4.0, clock)  # type: ignore[arg-type]
    assert [pacer.next_slot() for _ in range(3)] == [5_000 * MS, 5_250 * MS, 5_500 * MS]
    with pytest.raises(ValueError):
        Pacer(0.0, clock)  # type: ignore[arg-type]


def test_early_iterations_wait_for_their_slot(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(PACED)
    user = AtomicProduce(h.ctx)
    t0 = h.clock.now
    for _ in range(3):
        user.step()
    assert h.stop.waits == pytest.approx([0.1, 0.1])
    starts = [op["extra"]["intended_ns"] for op in first_invokes(h)]
    assert starts == [t0, t0 + 100 * MS, t0 + 200 * MS]
    assert [op["time_ns"] for op in first_invokes(h)] == starts      # on time: no lag


def test_a_stall_makes_later_iterations_late_and_their_ops_carry_the_intended_start(
        make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(PACED)
    user = AtomicProduce(h.ctx)
    t0 = h.clock.now
    user.step()                              # slot t0, on time
    h.clock.advance(0.35)                    # a stall: the next iteration starts 350 ms later
    user.step()                              # slot t0+100: 250 ms late
    user.step()                              # slot t0+200: 150 ms late (runs at once, no skip)
    user.step()                              # slot t0+300: 50 ms late
    user.step()                              # slot t0+400: early again, waits 50 ms
    opens = first_invokes(h)
    assert [op["extra"]["intended_ns"] for op in opens] == [t0 + k * 100 * MS for k in range(5)]
    assert [op["time_ns"] - op["extra"]["intended_ns"] for op in opens] == [0, 250 * MS, 150 * MS,
                                                                           50 * MS, 0]
    assert h.stop.waits == pytest.approx([0.05])
    # every invocation of a late iteration carries the same lag, completions carry it too
    late_txn = [op for op in h.ops() if op["type"] == "invoke" and op["f"] == "send"][2:4]
    assert all(op["time_ns"] - op["extra"]["intended_ns"] == 250 * MS for op in late_txn)


def test_closed_loop_records_no_intended_start(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(PACED.replace("  rate_per_user: 10\n", "  users: 1\n"))
    user = AtomicProduce(h.ctx)
    user.step()
    user.step()
    assert all((op["extra"] or {}).get("intended_ns") is None for op in h.ops())
    assert h.stop.waits == []


def test_stop_during_the_wait_ends_the_iteration(make_harness: Callable[[str], Harness]) -> None:
    h = make_harness(PACED)
    user = AtomicProduce(h.ctx)
    user.step()
    original = h.stop.wait

    def stop_while_waiting(timeout: float | None = None) -> bool:
        h.stop.set()
        return original(timeout)

    h.stop.wait = stop_while_waiting  # type: ignore[method-assign]
    user.step()
    assert len(first_invokes(h)) == 1
