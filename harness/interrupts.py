"""Ctrl-C deferred while a step that must not be cut in half runs (a heal, a teardown, a write),
and a SIGTERM taken as a Ctrl-C.

Why one place: the nemesis finishes a heal, a run tears its cluster down and a shrink writes its
record before a Ctrl-C is obeyed; three copies of this drifted apart (one forgot the main-thread
check). Off the main thread Python cannot install a handler, and the step runs as it is.

Why SIGTERM too: a CI job cancelled or timed out, `kill PID`, or a background run (whose shell
ignores SIGINT for it) ends with SIGTERM. Python's default for it is to die at once: no heal, no
teardown, the run left RUNNING in its manifest and its servers reaped only by their own watch of
their owner. `terminate_as_interrupt` makes it the Ctrl-C path, so it is interrupted and cleaned up.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

#: the signals a run treats as "stop, cleaning up"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def terminate_as_interrupt() -> None:
    """From now on a SIGTERM raises KeyboardInterrupt in the main thread, as a Ctrl-C does.
    A no-op off the main thread, or where SIGTERM is ignored (a caller chose that)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with contextlib.suppress(ValueError):
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
            signal.signal(signal.SIGTERM, _interrupt)


@contextlib.contextmanager
def sigint_deferred() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM for the block; yields the list of those received meanwhile (one entry
    each), so the caller can say so or act on it afterwards. The previous handlers are restored."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous: dict[signal.Signals, Any] = {}
    try:
        for stop in STOP_SIGNALS:
            previous[stop] = signal.signal(stop, lambda *_: received.append(1))
    except ValueError:   # an embedded interpreter that refuses handlers
        _restore(previous)
        yield received
        return
    try:
        yield received
    finally:
        _restore(previous)


def _restore(handlers: dict[signal.Signals, Any]) -> None:
    for stop, handler in handlers.items():
        signal.signal(stop, handler)
