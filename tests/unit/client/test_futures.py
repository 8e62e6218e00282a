"""The client's small future: completion, waits with and without a waiter blocking, callbacks.

The latch a waiter blocks on is made only when one has to block (issue #27), so these
cover both orders: completed before anyone waits, and completed while waiters block.
"""

from __future__ import annotations

import threading
import time

import pytest

from harness.client.futures import Future, FutureTimeout, completed, failed


def test_completed_before_any_wait_needs_no_latch() -> None:
    future: Future[int] = Future()
    assert future.set_result(7)
    assert future.wait(0) and future.wait(None)
    assert future.result(0) == 7
    assert future._latch is None  # nobody had to block


def test_a_wait_that_times_out_then_a_late_completion_is_seen() -> None:
    future: Future[int] = Future()
    started = time.monotonic()
    assert not future.wait(0.05)
    assert time.monotonic() - started >= 0.04
    with pytest.raises(FutureTimeout):
        future.result(0.01)
    assert future.set_result(3)
    assert future.wait(0) and future.result(0) == 3


def test_every_blocked_waiter_wakes_on_completion() -> None:
    future: Future[str] = Future()
    woke: list[bool] = []
    lock = threading.Lock()

    def waiter() -> None:
        ok = future.wait(5.0)
        with lock:
            woke.append(ok)

    threads = [threading.Thread(target=waiter) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5.0
    while future._latch is None and time.monotonic() < deadline:  # a waiter is blocked
        time.sleep(0.005)
    assert future._latch is not None
    future.set_exception(ValueError("boom"))
    for thread in threads:
        thread.join(5.0)
    assert woke == [True, True, True, True]
    with pytest.raises(ValueError, match="boom"):
        future.result(0)


def test_only_the_first_completion_counts_and_callbacks_run_once() -> None:
    future: Future[int] = Future()
    seen: list[int] = []
    future.add_done_callback(lambda f: seen.append(f.result(0)))
    assert future.set_result(1)
    assert not future.set_result(2)
    assert not future.set_exception(RuntimeError("late"))
    future.add_done_callback(lambda f: seen.append(f.result(0) * 10))  # already done: runs at once
    assert seen == [1, 10]
    assert future.exception() is None


def test_helpers() -> None:
    assert completed(5).result(0) == 5
    error = KeyError("k")
    assert failed(error).exception() is error


RAW_LOCK_CHILD = r"""
from gevent import monkey
monkey.patch_all()
import _thread, threading
import gevent
from harness.client.futures import Future, raw_lock
assert type(threading.Lock()) is not type(raw_lock())        # patched: gevent's lock is not the raw one
assert type(raw_lock()).__module__ == "_thread"               # the interpreter's own
# futures under gevent: many greenlets wait, one completes them all
futures = [Future() for _ in range(100)]
woke = []
waiters = [gevent.spawn(lambda f=f: woke.append(f.wait(5.0))) for f in futures]
gevent.sleep(0.01)
for f in futures:
    f.set_result(1)
gevent.joinall(waiters, timeout=10)
assert woke == [True] * 100, woke
print("OK")
"""


def test_raw_lock_is_the_interpreters_lock_also_under_gevent() -> None:
    import _thread
    import subprocess
    import sys

    from harness.client.futures import raw_lock

    assert type(raw_lock()) is type(_thread.allocate_lock())
    out = subprocess.run([sys.executable, "-c", RAW_LOCK_CHILD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OK"
