"""One piece of work in a thread of its own, which the caller can tell to stop.

Why: a large check converts its history with Arrow while Spark's driver JVM starts; the JVM's
start (some seconds) does not need the copy, so the two overlap instead of adding up
(analysis.check). The thread is a daemon: an interrupted process never waits for it at exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Background"]

T = TypeVar("T")


class Background(Generic[T]):
    """`work(stop)` running in a thread; `result()` waits for it, `stop()` asks it to end.

    `work` should look at `stop` now and then and end when it is set (e.g. raise); what it
    returns or raises comes back from `result()`, in the caller's thread."""

    def __init__(self, work: Callable[[threading.Event], T], *, name: str) -> None:
        self._stop = threading.Event()
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = work(self._stop)
            except BaseException as err:  # handed to the caller by result()
                self._error = err
            finally:
                self._done.set()

        threading.Thread(target=run, name=name, daemon=True).start()

    def result(self) -> T:
        """What the work returned; raises what it raised."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def stop(self, wait_s: float) -> bool:
        """Ask the work to end, and wait for it up to `wait_s`; whether it ended."""
        self._stop.set()
        return self._done.wait(wait_s)
