"""Measurement windows: the phases of a run, as half-open intervals of run-clock time.

Theory of operation. The orchestrator writes one `phase` event as each phase
starts (docs/history.md); a phase lasts until the next one starts, and the last
one until the end of the history. The headline numbers come from the `steady`
phase: load is running, warm-up is over, no fault is planned. Chaos runs also
get the same numbers per load phase (`warmup`, `steady`, `faults`,
`recovery`). `drain-complete` is an event inside the drain, not a phase start,
so it is not a boundary.

When a history has no `steady` event (a hand-made history, an interrupted run)
the window is the whole span of load operations, named `all`, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.history.schema import PHASE_DRAIN_COMPLETE

__all__ = ["ALL", "LOAD_PHASES", "MEASURED", "Window", "measurement_window", "phase_windows", "predecessor"]

MEASURED = "steady"
ALL = "all"
LOAD_PHASES: tuple[str, ...] = ("warmup", "steady", "faults", "recovery")


@dataclass(frozen=True)
class Window:
    """[start_ns, end_ns) of the run clock; `open_end` when the history ended inside it."""

    name: str
    start_ns: int
    end_ns: int
    open_end: bool = False
    source: str = "phase events"

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "start_s": round(self.start_ns / 1e9, 6), "end_s": round(self.end_ns / 1e9, 6),
                "start_ns": self.start_ns, "end_ns": self.end_ns, "duration_s": round(self.duration_s, 6),
                "open_end": self.open_end, "source": self.source}


def phase_windows(marks: Sequence[tuple[str, int]], history_end_ns: int | None) -> list[Window]:
    """Every phase as a window, in start order.

    Args:
        marks: (name, time_ns) of each `phase` event, any order.
        history_end_ns: the last time_ns of the history (closes the last phase).

    A name seen twice keeps its first start (an orchestrator writes each once).
    """
    starts: dict[str, int] = {}
    for name, time_ns in sorted(marks, key=lambda m: m[1]):
        if not name or name == PHASE_DRAIN_COMPLETE or name in starts:
            continue
        starts[name] = time_ns
    ordered = sorted(starts.items(), key=lambda kv: kv[1])
    windows: list[Window] = []
    for i, (name, start) in enumerate(ordered):
        if i + 1 < len(ordered):
            windows.append(Window(name, start, ordered[i + 1][1]))
        else:
            end = max(start, history_end_ns if history_end_ns is not None else start) + 1
            windows.append(Window(name, start, end, open_end=True))
    return windows


def measurement_window(windows: Sequence[Window], load_span: tuple[int, int] | None) -> Window | None:
    """The `steady` window, or the whole load span (`all`) when there is no steady phase."""
    for w in windows:
        if w.name == MEASURED:
            return w
    if load_span is None:
        return None
    first, last = load_span
    return Window(ALL, first, last + 1, source="no steady phase event: the whole span of load operations")


def predecessor(windows: Sequence[Window], name: str) -> str | None:
    """The phase that started just before `name` (its end snapshot opens `name`)."""
    names = [w.name for w in windows]
    if name not in names:
        return None
    at = names.index(name)
    return names[at - 1] if at > 0 else None
