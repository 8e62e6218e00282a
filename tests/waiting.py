"""Bounded waiting for tests: poll a condition, never sleep blindly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.02,
               message: str = "condition") -> T:
    """Return the first truthy value of `condition()`, or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as err:  # the condition may fail while a service is coming up
            last_error = err
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise AssertionError(f"{message} not met within {timeout_s}s{detail}")
        time.sleep(interval_s)
