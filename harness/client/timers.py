"""Time: deadlines, bounded exponential backoff, and one timer thread per client.

Theory of operation. Every blocking wait in the client has a `Deadline`; every retry
loop draws its delays from a `Backoff` and stops at a deadline or an attempt cap, so
no loop is unbounded. Timed work (batch flushes, keep-alive, send-timeout sweeps) runs
on one `Scheduler` thread per client: a heap of due times under a `Condition`. The
callbacks must be short and must not block on the network for long (they may write to
a socket); anything that waits (reconnects) starts its own thread. Everything here
uses `threading` and `time` only, so gevent's monkey-patching makes it cooperative.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point in `time.monotonic()` time."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The deadline `seconds` from now."""
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return time.monotonic() >= self.at

    def earlier(self, seconds: float) -> Deadline:
        """This deadline, or `seconds` from now if that comes first."""
        return Deadline(min(self.at, time.monotonic() + seconds))


class Backoff:
    """Exponential backoff from `initial_s` doubling to `max_s` (Java's `Backoff` without jitter)."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._next = initial_s

    def next(self) -> float:
        """The next delay."""
        delay = self._next
        self._next = min(self._next * 2, self.max_s)
        return delay

    def reset(self) -> None:
        """Start again from `initial_s`."""
        self._next = self.initial_s


class TimerHandle:
    """A scheduled callback; `cancel()` stops it (and a repeating one for good)."""

    __slots__ = ("callback", "cancelled", "interval")

    def __init__(self, callback: Callable[[], None], interval: float | None) -> None:
        self.callback = callback
        self.interval = interval
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run (again)."""
        self.cancelled = True


class Scheduler:
    """One daemon thread running callbacks at their due time.

    Started lazily on the first `call_later`; `stop()` ends it (pending callbacks are
    dropped). Exceptions in callbacks are logged and do not stop the thread.
    """

    def __init__(self, name: str = "txnbench-client-timer") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` once after `delay_s`."""
        return self._add(delay_s, TimerHandle(callback, None))

    def call_every(self, interval_s: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` every `interval_s` (first run after one interval)."""
        if interval_s <= 0:
            raise ValueError(f"interval must be > 0, got {interval_s}")
        return self._add(interval_s, TimerHandle(callback, interval_s))

    def _add(self, delay_s: float, handle: TimerHandle) -> TimerHandle:
        with self._cond:
            if self._stopped:
                handle.cancelled = True
                return handle
            heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._counter), handle))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return handle

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    if not self._heap:
                        self._cond.wait(1.0)
                        continue
                    due, _, handle = self._heap[0]
                    wait = due - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._heap)
                        break
                    self._cond.wait(wait)
            if handle.cancelled:
                continue
            try:
                handle.callback()
            except Exception:  # a failing callback must not stop every other timer
                log.exception("timer callback %r failed", handle.callback)
            if handle.interval is not None and not handle.cancelled:
                with self._cond:
                    if not self._stopped:
                        heapq.heappush(self._heap, (time.monotonic() + handle.interval,
                                                    next(self._counter), handle))

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread; pending callbacks never run."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)


def spawn(target: Callable[[], None], name: str) -> threading.Thread:
    """Start a daemon thread (a greenlet under gevent) running `target`."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread
