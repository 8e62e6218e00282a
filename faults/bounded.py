"""Run a blocking call with a deadline, from a thread that must not hang.

Every call the nemesis makes is bounded underneath (HTTP timeouts, bounded waits in
ProcessControl), but a bound that depends on every callee being right is not a
bound. `call_bounded` runs the call in a daemon thread and stops waiting at the
deadline; the call itself cannot be cancelled, so it may still finish later, which
is why every heal is idempotent and heals run under one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ActionTimeout(TimeoutError):
    """The call did not return within its bound; its effect is unknown."""


def call_bounded(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as err:  # handed to the caller's thread
            error.append(err)

    thread = threading.Thread(target=target, name=f"bounded: {what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ActionTimeout(f"{what} did not finish within {timeout_s:g} s")
    if error:
        raise error[0]
    return result[0]
