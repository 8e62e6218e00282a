"""One builder at a time for a cached artifact (targets/cache_lock.py); no process starts here.

`flock` locks belong to an open file, so two `building` calls in one process contend as two
processes would.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from targets.cache_lock import building


def test_a_held_lock_makes_the_second_builder_wait_then_fail_naming_the_lock(tmp_path: Path) -> None:
    said: list[str] = []
    lock = tmp_path / "entry.lock"
    with building(lock, "the jars", said.append, wait_s=5):
        started = time.monotonic()
        with (pytest.raises(EnvironmentProblem, match=r"held .*entry\.lock for more than 0 s while building the jars"),
              building(lock, "the jars", said.append, wait_s=0.3)):
            pass
        assert time.monotonic() - started >= 0.3
    assert said == [f"waiting for another txnbench process that is building the jars (lock: {lock})"]


def test_the_second_builder_goes_on_once_the_first_is_done(tmp_path: Path) -> None:
    lock, order = tmp_path / "entry.lock", []
    holding = threading.Event()

    def first() -> None:
        with building(lock, "x", lambda _: None, wait_s=5):
            holding.set()
            time.sleep(0.4)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    assert holding.wait(5)
    with building(lock, "x", lambda _: None, wait_s=5):
        order.append("second in")
    thread.join(5)
    assert order == ["first done", "second in"]
