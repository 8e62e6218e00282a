"""One direction of one proxied connection: read a socket, run the toxics, write the other.

Theory of operation. A link has two tasks. The reader reads chunks from the source
socket, stamps each with the time it arrived and queues it (a bounded queue, so a
slow link stops reading and TCP pushes back on the sender); end of stream or a read
error queues `None`. The processor takes one chunk at a time and carries it through
the chain of toxics of its stream (see `faultproxy.behaviours`), then writes it to
the destination and waits for the write buffer to drain. One chunk at a time is what
keeps the bytes of a stream in order under latency and jitter; the stamps taken by
the reader are what keep a stream of delayed chunks flowing rather than queueing
their delays end to end.

The chain is read afresh at every step, so toxics added, updated or removed affect
data already in flight. The link subscribes to its chain: on every change it rolls
the toxicity of new or updated toxics (once per link and revision: "the probability
per connection"), arms the close timer of a `timeout` toxic, and, when a toxic that
closes on removal (`timeout`) disappears after applying here, ends the link.

`run()` returns how the link ended; the connection decides what that means for the
sockets (close the destination, reset both, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from enum import Enum
from functools import partial

from faultproxy.behaviours import BEHAVIOURS, Chunk, CloseLink, ResetLink, ToxicState
from faultproxy.chain import ToxicChain
from faultproxy.stats import ByteCounter
from faultproxy.toxics import Toxic

READ_SIZE = 64 * 1024
QUEUE_CHUNKS = 64  # at most 4 MiB read ahead of the toxics per link


class LinkEnd(Enum):
    EOF = "eof"          # the source ended; all its data went through; close the destination
    CLOSED = "closed"    # a toxic closed the link (limit_data, timeout); close the destination
    RESET = "reset"      # reset_peer: reset both sockets
    BROKEN = "broken"    # writing to the destination failed


class Link:
    def __init__(self, chain: ToxicChain, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 received: ByteCounter, sent: ByteCounter, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self._chain = chain
        self._reader = reader
        self._writer = writer
        self._received = received
        self._sent = sent
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Chunk | None] = asyncio.Queue(QUEUE_CHUNKS)
        self._states: dict[int, ToxicState] = {}
        self._end: LinkEnd | None = None
        self._processor: asyncio.Task[LinkEnd] | None = None

    async def run(self) -> LinkEnd:
        self._chain.subscribe(self)
        self.chain_changed()
        reader = asyncio.create_task(self._read())
        self._processor = asyncio.create_task(self._process())
        if self._end is not None:
            self._processor.cancel()
        try:
            return await self._processor
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._end is not None and (me is None or not me.cancelling()):
                return self._end
            raise
        finally:
            reader.cancel()
            self._processor.cancel()
            self._chain.unsubscribe(self)
            for state in self._states.values():
                self._disarm(state)

    # -- LinkContext, for the behaviours ------------------------------------------------

    def now(self) -> float:
        return self._loop.time()

    async def pause_until(self, deadline: float | None, toxic: Toxic) -> bool:
        while self._chain.is_current(toxic):
            timeout = None
            if deadline is not None:
                timeout = deadline - self._loop.time()
                if timeout <= 0:
                    return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._chain.changed.wait(), timeout)
        return False

    # -- chain subscription -------------------------------------------------------------

    def chain_changed(self) -> None:
        current = {t.uid: t for t in self._chain.toxics}
        for uid, state in list(self._states.items()):
            toxic = current.get(uid)
            if toxic is None:
                del self._states[uid]
                self._disarm(state)
                if state.applies and BEHAVIOURS[state.type].closes_on_removal:
                    self._terminate(LinkEnd.CLOSED)
            elif toxic.revision != state.revision:
                self._disarm(state)
                state.revision = toxic.revision
                state.applies = self._roll(toxic)
                self._arm(toxic, state)
        for uid, toxic in current.items():
            if uid not in self._states:
                state = ToxicState(toxic.type, toxic.revision, self._roll(toxic))
                self._states[uid] = state
                self._arm(toxic, state)

    def _roll(self, toxic: Toxic) -> bool:
        return toxic.toxicity >= 1.0 or self.rng.random() < toxic.toxicity

    def _arm(self, toxic: Toxic, state: ToxicState) -> None:
        after = BEHAVIOURS[toxic.type].close_after_s(toxic) if state.applies else None
        if after is not None:
            state.timer = self._loop.call_later(after, self._timer_fired, toxic)

    @staticmethod
    def _disarm(state: ToxicState) -> None:
        if isinstance(state.timer, asyncio.TimerHandle):
            state.timer.cancel()
        state.timer = None

    def _timer_fired(self, toxic: Toxic) -> None:
        if self._chain.is_current(toxic):
            self._terminate(LinkEnd.CLOSED)

    def _terminate(self, end: LinkEnd) -> None:
        if self._end is None:
            self._end = end
            if self._processor is not None:
                self._processor.cancel()

    # -- data path ----------------------------------------------------------------------

    async def _read(self) -> None:
        reader, queue, loop, received = self._reader, self._queue, self._loop, self._received
        try:
            while True:
                data = await reader.read(READ_SIZE)
                if not data:
                    break
                received.add(len(data))
                await queue.put(Chunk(data, loop.time()))
        except (ConnectionError, OSError):
            pass  # a reset or broken source ends the stream like a close, as in Toxiproxy
        await queue.put(None)

    async def _process(self) -> LinkEnd:
        queue, chain = self._queue, self._chain
        try:
            while True:
                chunk = await queue.get()
                if chunk is None:
                    await self._pass_eof(frozenset())
                    return LinkEnd.EOF
                if chain.toxics:
                    await self._pass(chunk, frozenset())
                else:
                    await self._write(chunk)
        except CloseLink:
            return LinkEnd.CLOSED
        except ResetLink:
            return LinkEnd.RESET
        except (ConnectionError, OSError):
            return LinkEnd.BROKEN

    def _next(self, applied: frozenset[int]) -> tuple[Toxic, ToxicState, frozenset[int]] | None:
        while (toxic := self._chain.next_after(applied)) is not None:
            applied = applied | {toxic.uid}
            state = self._states.get(toxic.uid)
            if state is not None and state.applies:
                return toxic, state, applied
        return None

    async def _pass(self, chunk: Chunk, applied: frozenset[int]) -> None:
        step = self._next(applied)
        if step is None:
            await self._write(chunk)
            return
        toxic, state, applied = step
        await BEHAVIOURS[toxic.type].on_data(toxic, state, chunk, self,
                                             partial(self._pass, applied=applied))

    async def _pass_eof(self, applied: frozenset[int]) -> None:
        step = self._next(applied)
        if step is None:
            return  # nothing left to do: the connection closes the destination
        toxic, state, applied = step
        await BEHAVIOURS[toxic.type].on_eof(toxic, state, self, partial(self._pass_eof, applied))

    async def _write(self, chunk: Chunk) -> None:
        self._writer.write(chunk.data)
        self._sent.add(len(chunk.data))
        await self._writer.drain()
