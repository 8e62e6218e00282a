"""Spans per request: how many durable writes and round trips lie one after another on its path.

Theory of operation. A request a broker serves (NEW_TXN, a transactional SEND or ACK,
END_TXN, ADD_PARTITION_TO_TXN, END_TXN_ON_PARTITION, ...) runs inside a `Span`
(`run(name, coro)`), held in a context variable, so every coroutine it awaits and every
task it spawns while it is open sees it. The places that leave the process record one
call each into the current span with its start and end: the metadata client (a read or
a write), a managed-ledger append (from the call to its confirmation, whichever task
writes it), a cursor flush, and a request to another broker (whose own work is its own
span there: END_TXN_ON_PARTITION, ...).

The *depth* of a span is the length of the longest chain of its calls that do not
overlap in time: calls issued in parallel overlap and count once, calls that waited for
each other add up. The greedy earliest-end choice gives that maximum exactly (interval
scheduling). `writes` is the depth over durable writes (metadata writes, ledger appends,
cursor flushes); `round_trips` the depth over every call. Both are measured, not derived
from the code: a write that a refactoring moved off the path stops counting.

A span closed before a call it spawned ended ignores that call (background work is not
on the request's path). The process's sink (the broker's metrics) gets every closed span.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Coroutine, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class CallKind(enum.Enum):
    METADATA_READ = "metadata-read"
    METADATA_WRITE = "metadata-write"
    LEDGER_APPEND = "ledger-append"
    CURSOR_FLUSH = "cursor-flush"
    PEER = "peer"

    @property
    def durable_write(self) -> bool:
        return self in (CallKind.METADATA_WRITE, CallKind.LEDGER_APPEND, CallKind.CURSOR_FLUSH)


@dataclass
class Span:
    name: str
    started: float
    calls: list[tuple[float, float, CallKind]] = field(default_factory=list)
    open: bool = True

    def record(self, kind: CallKind, started: float, ended: float) -> None:
        if self.open:
            self.calls.append((started, ended, kind))

    @property
    def writes(self) -> int:
        return chain_depth((s, e) for s, e, k in self.calls if k.durable_write)

    @property
    def round_trips(self) -> int:
        return chain_depth((s, e) for s, e, _ in self.calls)


def chain_depth(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals that pairwise do not overlap (one waited for the other)."""
    depth, last_end = 0, float("-inf")
    for start, end in sorted(intervals, key=lambda i: i[1]):
        if start >= last_end:
            depth += 1
            last_end = end
    return depth


_CURRENT: ContextVar[Span | None] = ContextVar("txnbench_span", default=None)
_sink: Callable[[Span], None] | None = None


def set_sink(sink: Callable[[Span], None] | None) -> None:
    """Where closed spans go (the broker's metrics); None drops them."""
    global _sink
    _sink = sink


def current() -> Span | None:
    return _CURRENT.get()


async def run(name: str, coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` as request `name` inside a fresh span."""
    span = Span(name, time.monotonic())
    token = _CURRENT.set(span)
    try:
        return await coro
    finally:
        span.open = False
        _CURRENT.reset(token)
        if _sink is not None:
            _sink(span)


def record(kind: CallKind, started: float, span: Span | None = None) -> None:
    """One call of `kind` that began at `started` ends now (in the current span unless given)."""
    target = span if span is not None else _CURRENT.get()
    if target is not None:
        target.record(kind, started, time.monotonic())


def track_future(kind: CallKind, future: asyncio.Future[Any]) -> None:
    """Record `future` as a call of the current span, ending when the future does."""
    span = _CURRENT.get()
    if span is None:
        return
    started = time.monotonic()
    future.add_done_callback(lambda _f: span.record(kind, started, time.monotonic()))
