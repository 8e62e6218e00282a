"""Bounded waiting for tests: poll a condition, never sleep blindly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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


def wait_for(condition: Callable[[], object], timeout_s: float = 10.0, interval_s: float = 0.02) -> bool:
    """True as soon as `condition()` holds, False after `timeout_s` (for `assert wait_for(...)`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return False


def run(coro_fn: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """Run `coro_fn()` in a fresh event loop, bounded."""
    return asyncio.run(asyncio.wait_for(coro_fn(), timeout))


async def eventually(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Await until `predicate()` holds, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        await asyncio.sleep(0.01)


async def eventually_async(read: Callable[[], Awaitable[Any]], check: Callable[[Any], bool], timeout: float = 10.0,
                           what: str = "condition") -> Any:
    """Poll an async `read()` until `check(value)` holds (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await read()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s (last: {value!r:.200})")
        await asyncio.sleep(0.02)
