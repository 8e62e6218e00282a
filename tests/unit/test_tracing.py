"""Spans per request: sequential calls add up, parallel ones count once, background work is not on the path."""

from __future__ import annotations

import asyncio
import time

from embedded import tracing
from embedded.tracing import CallKind, Span, chain_depth


def test_chain_depth_counts_calls_that_waited_for_each_other() -> None:
    assert chain_depth([]) == 0
    assert chain_depth([(0, 1), (1, 2), (2, 3)]) == 3          # one after another
    assert chain_depth([(0, 2), (0.5, 2.5), (1, 3)]) == 1      # all in parallel
    assert chain_depth([(0, 1), (1, 2), (1, 2.2), (2.5, 3)]) == 3   # a fan-out in the middle counts once


def test_a_request_span_sees_what_it_awaits_and_what_it_spawned_but_not_later_work() -> None:
    spans: list[Span] = []
    tracing.set_sink(spans.append)
    late: list[asyncio.Future[None]] = []

    async def call(kind: CallKind, seconds: float) -> None:
        started = time.monotonic()
        await asyncio.sleep(seconds)
        tracing.record(kind, started)

    async def request() -> None:
        await call(CallKind.METADATA_READ, 0.01)                        # header read
        await call(CallKind.METADATA_WRITE, 0.01)                       # op record
        await asyncio.gather(call(CallKind.METADATA_WRITE, 0.02),       # two events in parallel
                             call(CallKind.METADATA_WRITE, 0.02))
        late.append(asyncio.ensure_future(call(CallKind.METADATA_WRITE, 0.05)))   # background, after the answer

    async def main() -> None:
        await tracing.run("END_TXN", request())
        await asyncio.wait_for(late[0], 5)

    try:
        asyncio.run(main())
    finally:
        tracing.set_sink(None)
    (span,) = spans
    assert span.name == "END_TXN"
    assert span.writes == 2 and span.round_trips == 3
    assert len(span.calls) == 4   # the background write ended after the span closed
