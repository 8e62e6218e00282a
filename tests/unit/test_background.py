"""analysis.background: work in a thread of its own, its result or error in the caller's, and a stop."""

from __future__ import annotations

import threading

import pytest

from analysis.background import Background


def test_the_result_comes_back_from_the_thread_that_made_it() -> None:
    ran_in: list[str] = []

    def work(_stop: threading.Event) -> int:
        ran_in.append(threading.current_thread().name)
        return 42

    assert Background(work, name="worker-under-test").result() == 42
    assert ran_in == ["worker-under-test"]


def test_what_the_work_raised_is_raised_to_the_caller() -> None:
    def work(_stop: threading.Event) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        Background(work, name="failing").result()


def test_stop_ends_work_that_looks_at_its_event() -> None:
    began = threading.Event()

    def work(stop: threading.Event) -> str:
        began.set()
        if not stop.wait(10):
            return "never told to stop"
        raise InterruptedError("stopped")

    background = Background(work, name="stoppable")
    assert began.wait(10)
    assert background.stop(10)
    with pytest.raises(InterruptedError):
        background.result()


def test_stop_waits_no_longer_than_it_is_told_for_work_that_does_not_look() -> None:
    release = threading.Event()
    background = Background(lambda _stop: release.wait(10), name="deaf")
    assert not background.stop(0.05)
    release.set()
    assert background.result() is True
