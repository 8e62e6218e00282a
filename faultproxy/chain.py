"""The toxics of one proxy: two ordered chains (upstream, downstream) with live links.

Theory of operation. A proxy has one `ToxicChain` per stream; every live link of
that stream reads the chain as it is when each chunk moves on, so adding, updating or
removing a toxic affects live connections at once, as in Toxiproxy. New toxics go
to the end of their chain. Each mutation (1) swaps in a fresh `changed` event and
sets the old one, which wakes every wait inside a toxic so it can re-check whether
its toxic is still current, and (2) calls each subscribed link synchronously, so
per-link state (toxicity rolls, close timers) is in step with the chain before any
chunk moves again. Toxic names are unique across both chains of a proxy.
Everything runs on one event loop; nothing here awaits, so no lock is needed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from faultproxy.errors import toxic_exists, toxic_not_found
from faultproxy.toxics import Toxic, parse_toxic, updated_toxic
from harness.toxiproxy.model import Stream


class ChainListener(Protocol):
    def chain_changed(self) -> None: ...


class ToxicChain:
    """The ordered toxics of one stream of one proxy."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._toxics: tuple[Toxic, ...] = ()
        self._changed = asyncio.Event()
        self._listeners: set[ChainListener] = set()

    @property
    def toxics(self) -> tuple[Toxic, ...]:
        return self._toxics

    @property
    def changed(self) -> asyncio.Event:
        """Set at the next mutation; read it again after each wake-up."""
        return self._changed

    def subscribe(self, listener: ChainListener) -> None:
        self._listeners.add(listener)

    def unsubscribe(self, listener: ChainListener) -> None:
        self._listeners.discard(listener)

    def find(self, name: str) -> Toxic | None:
        return next((t for t in self._toxics if t.name == name), None)

    def next_after(self, applied: frozenset[int]) -> Toxic | None:
        """The first toxic in chain order that a chunk has not been through yet."""
        return next((t for t in self._toxics if t.uid not in applied), None)

    def is_current(self, toxic: Toxic) -> bool:
        return any(t.uid == toxic.uid and t.revision == toxic.revision for t in self._toxics)

    def append(self, toxic: Toxic) -> None:
        self._toxics = (*self._toxics, toxic)
        self._notify()

    def replace(self, toxic: Toxic) -> None:
        self._toxics = tuple(toxic if t.uid == toxic.uid else t for t in self._toxics)
        self._notify()

    def remove(self, name: str) -> None:
        self._toxics = tuple(t for t in self._toxics if t.name != name)
        self._notify()

    def clear(self) -> None:
        if self._toxics:
            self._toxics = ()
            self._notify()

    def _notify(self) -> None:
        old, self._changed = self._changed, asyncio.Event()
        old.set()
        for listener in list(self._listeners):
            listener.chain_changed()


class ToxicCollection:
    """Both chains of a proxy, with the API's operations on toxics."""

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self.chains = {stream: ToxicChain(stream) for stream in Stream}
        self._on_change = on_change

    def all(self) -> list[Toxic]:
        """Upstream toxics first, then downstream, each in chain order (Toxiproxy's order)."""
        return [*self.chains[Stream.UPSTREAM].toxics, *self.chains[Stream.DOWNSTREAM].toxics]

    def to_json(self) -> list[dict[str, Any]]:
        return [t.to_json() for t in self.all()]

    def get(self, name: str) -> Toxic:
        for chain in self.chains.values():
            toxic = chain.find(name)
            if toxic is not None:
                return toxic
        raise toxic_not_found(name)

    def add(self, body: object) -> Toxic:
        toxic = parse_toxic(body)
        if any(chain.find(toxic.name) for chain in self.chains.values()):
            raise toxic_exists(toxic.name)
        self.chains[toxic.stream].append(toxic)
        self._on_change()
        return toxic

    def update(self, name: str, body: object) -> Toxic:
        toxic = updated_toxic(self.get(name), body)
        self.chains[toxic.stream].replace(toxic)
        self._on_change()
        return toxic

    def remove(self, name: str) -> None:
        toxic = self.get(name)
        self.chains[toxic.stream].remove(name)
        self._on_change()

    def reset(self) -> None:
        for chain in self.chains.values():
            chain.clear()
        self._on_change()
