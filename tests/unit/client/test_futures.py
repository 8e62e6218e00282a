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
