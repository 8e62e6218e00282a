"""The search, without runs: cut after the first anomaly, delta debugging, shorter windows.

Every function takes `fails(candidate) -> bool`, which the shrink answers with real runs (and may
stop by raising: the budget, Ctrl-C); here the steps are pure, so their logic is tested with a fake.

* `cut_after`: the faults injected after the first unexpected anomaly (plus a margin) cannot have
  caused it; one run checks that the rest still fails (a cause can come after the evidence, e.g. a
  crash losing a committed write, and then the cut is refused).
* `ddmin`: Zeller's delta debugging (Zeller and Hildebrandt, "Simplifying and isolating
  failure-inducing input", 2002): try halves, then quarters ..., keep a subset or a complement that
  still fails, until no single fault can be removed (1-minimal). It never tries the empty schedule:
  a bug that shows without faults is not a chaos finding, and the run to show it is the scenario
  without its faults section.
* `shorten`: halve each kept fault's window while the run still fails (longest first), down to
  `MIN_FOR_S`; instant kinds and restarts at once have no window to shorten.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

from orchestrator.shrink.schedule import MIN_FOR_S, ShrinkFault

T = TypeVar("T")


def cut_after(faults: Sequence[ShrinkFault], limit_s: float) -> tuple[ShrinkFault, ...]:
    """The faults injected at or before `limit_s` (seconds into the faults phase)."""
    return tuple(f for f in faults if f.start_s <= limit_s)


def ddmin(items: Sequence[T], fails: Callable[[tuple[T, ...]], bool]) -> tuple[T, ...]:
    """A 1-minimal subsequence of `items` (assumed to fail) for which `fails` holds."""
    current = tuple(items)
    n = 2
    while len(current) >= 2:
        chunks = _split(current, n)
        reduced = _first_failing(chunks, fails)
        if reduced is not None:
            current, n = reduced, 2
            continue
        if n > 2:   # with two chunks, each complement is the other chunk, tried already
            complements = [tuple(x for x in current if x not in chunk) for chunk in chunks]
            reduced = _first_failing(complements, fails)
            if reduced is not None:
                current, n = reduced, max(n - 1, 2)
                continue
        if n >= len(current):
            break
        n = min(len(current), 2 * n)
    return current


def _first_failing(candidates: Sequence[tuple[T, ...]], fails: Callable[[tuple[T, ...]], bool]) -> tuple[T, ...] | None:
    for candidate in candidates:
        if fails(candidate):
            return candidate
    return None


def _split(items: tuple[T, ...], n: int) -> list[tuple[T, ...]]:
    """`items` in `n` contiguous chunks as even as possible (the first ones one longer)."""
    size, extra = divmod(len(items), n)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(items[start:end])
        start = end
    return [c for c in chunks if c]


def shorten(faults: Sequence[ShrinkFault], fails: Callable[[tuple[ShrinkFault, ...]], bool],
            floor_s: float = MIN_FOR_S) -> tuple[ShrinkFault, ...]:
    """Each healable fault's window halved while `fails` holds, the longest first, not below `floor_s`."""
    current = tuple(faults)
    order = sorted((f for f in current if f.healable and f.for_s > floor_s), key=lambda f: (-f.for_s, f.fault_id))
    for fault_id in (f.fault_id for f in order):
        while True:
            fault = next(f for f in current if f.fault_id == fault_id)
            shorter = round(fault.for_s / 2, 1)
            if shorter < floor_s or shorter >= fault.for_s:
                break
            candidate = tuple(dataclasses.replace(f, for_s=shorter) if f.fault_id == fault_id else f for f in current)
            if not fails(candidate):
                break
            current = candidate
    return current
