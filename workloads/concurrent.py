"""A user's transactions in the background, on greenlets in the load process.

Theory of operation. A workload is written against `threading`; in the load process gevent
has patched it (workloads.runner), so a thread here is a greenlet: cheap, and switching only
where the client waits for the network. Tests run the same code on real threads.

A transaction's sends in flight together need no thread each (workloads.sends); a helper
thread per send (`run_all`, here before issue #27) cost a large share of the load process.

* `Background` is one user's transactions still finishing after the user moved on
  (`workload.txn_pipeline`): at most `slots` of them; `acquire` waits for a free slot (bounded
  by the stop flag and a timeout), `spawn` runs a finisher that frees its slot when done, and
  `join` waits for all of them, bounded, before the user is closed (the history must not be
  closed under a finisher still writing).

Every wait is bounded: a finisher's own operation timeouts bound it, and the joins add a
grace. An exception a background finisher raises (never an OperationError: `Session.op`
records those) is handed to `on_error`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

#: Seconds past an operation's own timeouts a join waits before it calls it stuck.
JOIN_GRACE_S = 10.0


class StuckError(RuntimeError):
    """Operations did not end within their timeouts plus a grace: a bug, not an outcome."""


class Task(Protocol):
    """A started call that can be joined: a thread, or a greenlet under gevent."""

    def join(self, timeout: float | None = None) -> Any: ...

    def is_alive(self) -> bool: ...


class _Greenlet:
    """A greenlet seen as a `Task` (gevent's Greenlet has `join` and `dead`, not `is_alive`)."""

    __slots__ = ("_greenlet",)

    def __init__(self, greenlet: Any) -> None:
        self._greenlet = greenlet

    def join(self, timeout: float | None = None) -> None:
        self._greenlet.join(timeout)

    def is_alive(self) -> bool:
        return not self._greenlet.dead


def _gevent_patched() -> bool:
    """Whether gevent patched `threading` in this process (the load process does, tests need not)."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("threading"))


def start_task(target: Callable[[], None], name: str) -> Task:
    """Run `target` at once beside the caller: a bare greenlet once gevent patched `threading`.

    Why not always `threading.Thread`: patched, each thread is still a greenlet, but its start
    builds a thread object, its locks and events, and waits for a switch until the new greenlet
    ran (about 6% of the load process's CPU with a transaction's sends in flight together, the
    peer-2 profile). `target` must catch its own exceptions (both callers here do), as a thread's would.
    """
    if _gevent_patched():
        import gevent

        return _Greenlet(gevent.spawn(target))
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


class Background:
    """One user's finishers (transactions ending after the user moved on), at most `slots` at once."""

    def __init__(self, slots: int, on_error: Callable[[BaseException], None]) -> None:
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)
        self._threads: list[Task] = []
        self._lock = threading.Lock()
        self._on_error = on_error
        self.most_in_flight = 0
        self._in_flight = 0

    def acquire(self, stopping: threading.Event, timeout_s: float) -> bool:
        """A free slot within `timeout_s`; False when none came (or the load is stopping)."""
        if not stopping.is_set() and self._free.acquire(blocking=False):
            return True   # the common case: a free slot, no timed wait
        step = 0.05
        waited = 0.0
        while not stopping.is_set():
            if self._free.acquire(timeout=step):
                return True
            waited += step
            if waited >= timeout_s:
                return False
        return False

    def release(self) -> None:
        """Give back a slot `acquire` took that no finisher was spawned for."""
        self._free.release()

    def spawn(self, finisher: Callable[[], None]) -> None:
        """Run `finisher` in the background on a slot `acquire` took; the slot frees when it ends."""
        def run() -> None:
            try:
                finisher()
            except BaseException as exc:  # handed on: a thread has no caller
                self._on_error(exc)
            finally:
                with self._lock:
                    self._in_flight -= 1
                self._free.release()

        with self._lock:
            if len(self._threads) >= 2 * self.slots:   # forget ended finishers now and then, not per spawn
                self._threads = [t for t in self._threads if t.is_alive()]
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
        task = start_task(run, "txnbench-txn")
        with self._lock:
            self._threads.append(task)

    def join(self, timeout_s: float) -> bool:
        """Wait for every finisher, `timeout_s` in all; True when none is left running."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return False
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            return not self._threads
