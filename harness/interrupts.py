"""Ctrl-C deferred while a step that must not be cut in half runs (a heal, a teardown, a write).

Why one place: the nemesis finishes a heal, a run tears its cluster down and a shrink writes its
record before a Ctrl-C is obeyed; three copies of this drifted apart (one forgot the main-thread
check). Off the main thread Python cannot install a handler, and the step runs as it is.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigint_deferred() -> Iterator[list[int]]:
    """Hold SIGINT for the block; yields the list of Ctrl-Cs received meanwhile (one entry each),
    so the caller can say so or act on it afterwards. The previous handler is restored."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: received.append(1))
    except ValueError:   # an embedded interpreter that refuses handlers
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)
