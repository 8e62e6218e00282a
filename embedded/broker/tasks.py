"""Background tasks that are kept referenced until done and whose failures are logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

_running: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any], what: str = "background task") -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coro)
    _running.add(task)

    def done(t: asyncio.Task[Any]) -> None:
        _running.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("%s failed", what, exc_info=t.exception())

    task.add_done_callback(done)
    return task
