"""A small future: one result or exception, waited for with a timeout, callbacks on completion.

Why not `concurrent.futures.Future`: that one allocates a `Condition` (an RLock and a
waiter list) per future; a client makes one future per request, so this one is a
single lock used as a latch, and only when someone has to wait: most futures of the load
(a request's answer already read, a registration already done) complete before anyone
waits on them, and under gevent a lock is a Python semaphore object whose allocation was
~2% of the load process (issue #27). Completion, callback registration and the latch's
creation are ordered by one module-wide guard held for a few instructions. Callbacks run
in the completing thread (usually a connection's reader thread): they must be quick and
never block.
"""

from __future__ import annotations

import _thread
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


def raw_lock() -> threading.Lock:
    """The interpreter's own lock, also after gevent's monkey-patching replaced `threading.Lock`.

    For critical sections that never wait (no I/O on a socket, no sleep, no other lock that
    can block): patched, a `threading.Lock` is gevent's, whose acquire is Python code, and the
    load process took one about a hundred times per transaction (issue #27); the C lock costs a
    few tens of nanoseconds. Under gevent it is safe because such a section never switches
    greenlets, so no greenlet can find it held; with real threads it is an ordinary lock.
    """
    global _allocate
    if _allocate is None:   # asked once: gevent's get_original is slow, and a lock is made per transaction
        monkey = sys.modules.get("gevent.monkey")
        if monkey is not None and monkey.is_module_patched("threading"):
            _allocate = monkey.get_original("_thread", "allocate_lock")
        else:
            _allocate = _thread.allocate_lock
    return _allocate()


_allocate: Callable[[], Any] | None = None
_GUARD = raw_lock()


class FutureTimeout(Exception):
    """`Future.result` waited `timeout_s` without an outcome."""


class Future(Generic[T]):
    """The eventual result of one operation."""

    __slots__ = ("_callbacks", "_done", "_error", "_latch", "_result")

    def __init__(self) -> None:
        self._latch: threading.Lock | None = None   # made (held) by the first waiter that must block
        self._done = False
        self._result: T | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] | None = None

    def done(self) -> bool:
        """Whether a result or an exception is set."""
        return self._done

    def set_result(self, value: T) -> bool:
        """Complete with `value`; False (and no change) if already complete."""
        return self._complete(value, None)

    def set_exception(self, error: BaseException) -> bool:
        """Complete with `error`; False (and no change) if already complete."""
        return self._complete(None, error)

    def _complete(self, value: T | None, error: BaseException | None) -> bool:
        with _GUARD:
            if self._done:
                return False
            self._result = value
            self._error = error
            self._done = True
            callbacks = self._callbacks
            self._callbacks = None
            latch = self._latch
        if latch is not None:
            latch.release()
        if callbacks:
            for callback in callbacks:
                self._run(callback)
        return True

    def _run(self, callback: Callable[[Future[T]], None]) -> None:
        try:
            callback(self)
        except Exception:  # a user's callback must not break the reader thread
            log.exception("future callback %r failed", callback)

    def add_done_callback(self, callback: Callable[[Future[T]], None]) -> None:
        """Call `callback(self)` on completion (at once, here, if already complete)."""
        with _GUARD:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        self._run(callback)

    def wait(self, timeout_s: float | None) -> bool:
        """Wait for completion; returns whether it completed."""
        if self._done:
            return True
        with _GUARD:
            if self._done:
                return True
            latch = self._latch
            if latch is None:
                latch = self._latch = threading.Lock()
                latch.acquire()   # released once, by the completion
        if timeout_s is None:
            acquired = latch.acquire()
        else:
            acquired = latch.acquire(timeout=max(0.0, timeout_s))
        if acquired:
            latch.release()  # let other waiters through
        return self._done

    def result(self, timeout_s: float | None = None) -> T:
        """The result, raising the exception if one was set.

        Raises:
            FutureTimeout: no outcome within `timeout_s`.
        """
        if not self.wait(timeout_s):
            raise FutureTimeout(f"no result within {timeout_s}s")
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]

    def exception(self) -> BaseException | None:
        """The exception of a completed future, or None."""
        return self._error


def completed(value: T) -> Future[T]:
    """A future that already holds `value`."""
    future: Future[T] = Future()
    future.set_result(value)
    return future


def failed(error: BaseException) -> Future[T]:
    """A future that already holds `error`."""
    future: Future[T] = Future()
    future.set_exception(error)
    return future
