"""What each toxic does to the chunks of one stream.

Theory of operation. A link (one direction of one connection) pushes each chunk it
reads through its proxy's current chain of toxics for that direction, one chunk at a
time and in order, so bytes never overtake each other whatever the toxics do. A
behaviour receives the chunk and `forward`, a continuation that carries a chunk
through the rest of the chain to the socket; it may delay (`ctx.pause_until`),
split, truncate or drop the chunk, or end the link by raising `CloseLink` (flush and
close, as a FIN) or `ResetLink` (both sockets reset, as a RST). End of stream goes
through `on_eof` the same way.

A wait is cut short when its toxic is removed or updated; the behaviour then lets
the data it holds go on at once, as Toxiproxy does ("don't drop any data on the
floor"). Because chunks are stamped with the time they were read, a latency toxic
delays each chunk by its own latency without adding up the delays of earlier ones.

Per-link state (the toxicity roll, bytes counted, bandwidth debt) is a `ToxicState`
kept by the link, so it survives updates of the toxic and changes of the chain.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from faultproxy.toxics import Toxic
from harness.toxiproxy.model import ToxicType


@dataclass(frozen=True)
class Chunk:
    data: bytes
    stamp: float  # loop time at which it was read, or was due out of a delaying toxic


Forward = Callable[[Chunk], Awaitable[None]]
ForwardEof = Callable[[], Awaitable[None]]


class CloseLink(Exception):
    """End this link as a close would: what went through is delivered, then FIN."""


class ResetLink(Exception):
    """End the connection with a reset (RST) on both sockets."""


@dataclass
class ToxicState:
    """One toxic's state on one link."""

    type: ToxicType
    revision: int
    applies: bool            # the toxicity roll for this link and this revision
    transmitted: int = 0     # limit_data: bytes let through
    debt_s: float = 0.0      # bandwidth: time owed before the next piece may go
    timer: object | None = field(default=None, repr=False)  # timeout: the close timer handle


class LinkContext(Protocol):
    rng: random.Random

    def now(self) -> float: ...

    async def pause_until(self, deadline: float | None, toxic: Toxic) -> bool:
        """Wait until `deadline` (None: until the toxic changes). False if the toxic was
        removed or updated meanwhile, True if the time ran out."""
        ...


class Behaviour:
    """Default: pass data and end of stream through unchanged."""

    #: Toxiproxy closes the connections a toxic of this kind was applied to when it is removed.
    closes_on_removal = False

    def close_after_s(self, toxic: Toxic) -> float | None:
        """Seconds after which the link closes while this toxic applies (None: never)."""
        return None

    async def on_data(self, toxic: Toxic, state: ToxicState, chunk: Chunk,
                      ctx: LinkContext, forward: Forward) -> None:
        await forward(chunk)

    async def on_eof(self, toxic: Toxic, state: ToxicState, ctx: LinkContext,
                     forward_eof: ForwardEof) -> None:
        await forward_eof()


class Latency(Behaviour):
    async def on_data(self, toxic: Toxic, state: ToxicState, chunk: Chunk,
                      ctx: LinkContext, forward: Forward) -> None:
        delay_ms = toxic.attr("latency")
        jitter = toxic.attr("jitter")
        if jitter > 0:
            delay_ms += ctx.rng.randrange(-jitter, jitter)
        due = chunk.stamp + delay_ms / 1000.0
        if await ctx.pause_until(due, toxic):
            chunk = Chunk(chunk.data, due)
        await forward(chunk)


class Bandwidth(Behaviour):
    """At most `rate` KB/s, sent in pieces of at most 100 ms worth, as Toxiproxy does.

    Rate 0 holds the data until the toxic is changed or removed (in Toxiproxy a rate
    of 0 stalls the stream the same way).
    """

    MAX_CREDIT_S = 0.1  # oversleeping earns at most this much burst later

    async def on_data(self, toxic: Toxic, state: ToxicState, chunk: Chunk,
                      ctx: LinkContext, forward: Forward) -> None:
        rate = toxic.attr("rate")
        if rate == 0:
            await ctx.pause_until(None, toxic)
            await forward(chunk)
            return
        bytes_per_s = rate * 1000.0
        piece_size = max(1, rate * 100)
        data = chunk.data
        for start in range(0, len(data), piece_size):
            piece = data[start:start + piece_size]
            state.debt_s += len(piece) / bytes_per_s
            began = ctx.now()
            if state.debt_s > 0 and not await ctx.pause_until(began + state.debt_s, toxic):
                await forward(Chunk(data[start:], chunk.stamp))
                return
            state.debt_s = max(-self.MAX_CREDIT_S, state.debt_s - (ctx.now() - began))
            await forward(Chunk(piece, chunk.stamp))


class SlowClose(Behaviour):
    async def on_eof(self, toxic: Toxic, state: ToxicState, ctx: LinkContext,
                     forward_eof: ForwardEof) -> None:
        await ctx.pause_until(ctx.now() + toxic.attr("delay") / 1000.0, toxic)
        await forward_eof()


class Timeout(Behaviour):
    """Drops every chunk; the link closes `timeout` ms after the toxic took hold (0: never).

    Removing the toxic closes the connections it applied to (Toxiproxy's `Cleanup`):
    their streams lost data, so they cannot go on.
    """

    closes_on_removal = True

    def close_after_s(self, toxic: Toxic) -> float | None:
        timeout = toxic.attr("timeout")
        return timeout / 1000.0 if timeout > 0 else None

    async def on_data(self, toxic: Toxic, state: ToxicState, chunk: Chunk,
                      ctx: LinkContext, forward: Forward) -> None:
        return None


class ResetPeer(Behaviour):
    """`timeout` ms after the first data (or end of stream) arrives, reset the connection."""

    async def on_data(self, toxic: Toxic, state: ToxicState, chunk: Chunk,
                      ctx: LinkContext, forward: Forward) -> None:
        if await ctx.pause_until(ctx.now() + toxic.attr("timeout") / 1000.0, toxic):
            raise ResetLink()
        await forward(chunk)

    async def on_eof(self, toxic: Toxic, state: ToxicState, ctx: LinkContext,
                     forward_eof: ForwardEof) -> None:
        if await ctx.pause_until(ctx.now() + toxic.attr("timeout") / 1000.0, toxic):
            raise ResetLink()
        await forward_eof()


def slice_bounds(length: int, average: int, variation: int, rng: random.Random) -> list[tuple[int, int]]:
    """Toxiproxy's slicing: halve (+/- variation) until a piece is within average + variation.

    `average > variation >= 0` (validated with the toxic) keeps every cut inside its piece.
    """
    pieces: list[tuple[int, int]] = []
    pending = [(0, length)]
    while pending:
        start, end = pending.pop()
        if (end - start) - average <= variation:
            pieces.append((start, end))
            continue
        mid = start + (end - start) // 2
        if variation > 0:
            mid += rng.randrange(-variation, variation)
        pending.append((mid, end))
        pending.append((start, mid))
    return pieces


class Slicer(Behaviour):
    async def on_data(self, toxic: Toxic, state: ToxicState, chunk: Chunk,
                      ctx: LinkContext, forward: Forward) -> None:
        gap_s = toxic.attr("delay") / 1_000_000.0
        data = chunk.data
        for start, end in slice_bounds(len(data), toxic.attr("average_size"),
                                       toxic.attr("size_variation"), ctx.rng):
            await forward(Chunk(data[start:end], chunk.stamp))
            if not await ctx.pause_until(ctx.now() + gap_s, toxic):
                if end < len(data):
                    await forward(Chunk(data[end:], chunk.stamp))
                return


class LimitData(Behaviour):
    async def on_data(self, toxic: Toxic, state: ToxicState, chunk: Chunk,
                      ctx: LinkContext, forward: Forward) -> None:
        limit = toxic.attr("bytes")
        remaining = max(0, limit - state.transmitted)
        if remaining and chunk.data:
            piece = chunk.data[:remaining]
            await forward(Chunk(piece, chunk.stamp))
            state.transmitted += len(piece)
        if limit - state.transmitted <= 0:
            raise CloseLink()


BEHAVIOURS: dict[ToxicType, Behaviour] = {
    ToxicType.LATENCY: Latency(),
    ToxicType.BANDWIDTH: Bandwidth(),
    ToxicType.SLOW_CLOSE: SlowClose(),
    ToxicType.TIMEOUT: Timeout(),
    ToxicType.RESET_PEER: ResetPeer(),
    ToxicType.SLICER: Slicer(),
    ToxicType.LIMIT_DATA: LimitData(),
}
