"""A single active consumer's dispatch around a pending cumulative transactional ack (no sockets)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from embedded.broker.dispatcher import SingleActiveDispatcher
from embedded.broker.entry import Entry, EntryInfo
from embedded.broker.position import Position
from harness.wire import commands

L = 7


def entry(e: int) -> Entry:
    meta = commands.message_metadata("p", e, 0)
    data = bytes(commands.send(1, e, meta, b"x").payload.entry)   # type: ignore[union-attr]
    return Entry(Position(L, e), data, EntryInfo(1))


class Ledger:
    def __init__(self, count: int) -> None:
        self.entries = [entry(e) for e in range(count)]
        self.last_confirmed = Position(L, count - 1)
        self.terminated_position = None

    def next_position(self, position: Position) -> Position:
        return Position(L, position.entry_id + 1)

    def normalize(self, position: Position) -> Position:
        return position

    async def read(self, start: Position, count: int, *, max_position: Position) -> list[Entry]:
        return [e for e in self.entries if start <= e.position <= max_position][:count]


class Consumer:
    available = True
    permits = 100
    priority = 0
    name = "c"

    def __init__(self) -> None:
        self.sent: list[int] = []

    def send_entries(self, run: list[tuple[Entry, int, Any]]) -> int:
        self.sent.extend(e.position.entry_id for e, _, _ in run)
        return len(run)

    def active_change(self, active: bool) -> None:
        pass


def subscription(held_up_to: int | None) -> SimpleNamespace:
    """Entries 0..5, nothing acknowledged; a transaction's pending cumulative ack up to `held_up_to`."""
    pending = SimpleNamespace(
        held_cumulatively=lambda p: held_up_to is not None and p.entry_id <= held_up_to,
        is_pending=lambda p: False, pending_ack_set=lambda p: None)
    cursor = SimpleNamespace(mark_delete_position=Position(L, -1), is_acked=lambda p: False,
                             batch_ack_set=lambda p: None)
    topic = SimpleNamespace(
        name=SimpleNamespace(partition_index=-1), ledger=Ledger(6),
        broker=SimpleNamespace(settings=SimpleNamespace(int=lambda key: 100)),
        transaction_buffer=SimpleNamespace(max_read_position=lambda: Position(L, 99), is_aborted=lambda t, p: False))
    return SimpleNamespace(topic=topic, cursor=cursor, pending_ack=pending, name="s",
                           acknowledge_internally=lambda acks: None)


def test_dispatch_stops_before_what_a_pending_cumulative_ack_holds() -> None:
    """After a rewind (a move, a reconnect, a failover) while a transaction's cumulative ack up to
    entry 2 commits: sending 0-2 again hands the consumer what the commit is about to acknowledge
    (processed twice), skipping them sends 3-5 first (a cumulative ack then covers unseen ones).
    Pulsar sends them again; the model waits for the transaction to end."""
    async def run() -> tuple[list[int], list[int]]:
        held = subscription(held_up_to=2)
        dispatcher = SingleActiveDispatcher(held, failover=True)   # type: ignore[arg-type]
        consumer = Consumer()
        dispatcher.add_consumer(consumer)   # type: ignore[arg-type]
        await dispatcher.dispatch_once()
        waiting = list(consumer.sent)
        held.pending_ack.held_cumulatively = lambda p: False   # the transaction ended (aborted)
        while await dispatcher.dispatch_once():
            pass
        await dispatcher.close()
        return waiting, consumer.sent

    waiting, after = asyncio.run(run())
    assert waiting == []
    assert after == [0, 1, 2, 3, 4, 5]


def test_dispatch_goes_on_up_to_a_pending_cumulative_ack_further_on() -> None:
    async def run() -> list[int]:
        dispatcher = SingleActiveDispatcher(subscription(held_up_to=None), failover=False)   # type: ignore[arg-type]
        consumer = Consumer()
        dispatcher.add_consumer(consumer)   # type: ignore[arg-type]
        while await dispatcher.dispatch_once():
            pass
        await dispatcher.close()
        return consumer.sent

    assert asyncio.run(run()) == [0, 1, 2, 3, 4, 5]


def _hand_over(monkeypatch: Any) -> tuple[list[int], list[int], list[int]]:
    """A (priority 0) is sent entries 0-2 (its permits) and closes; B (priority 1) takes over.
    What A was sent, what B was sent before the rewind could have come, and all B was sent."""
    monkeypatch.setattr("embedded.broker.dispatcher._TAKEOVER_REWIND_DELAY_S", 0.05)

    async def run() -> tuple[list[int], list[int], list[int]]:
        dispatcher = SingleActiveDispatcher(subscription(held_up_to=None), failover=True)   # type: ignore[arg-type]
        a, b = Consumer(), Consumer()
        a.name, a.permits, b.name, b.priority = "a", 3, "b", 1
        dispatcher.add_consumer(a)   # type: ignore[arg-type]
        dispatcher.add_consumer(b)   # type: ignore[arg-type]
        await dispatcher.dispatch_once()
        dispatcher.remove_consumer(a)   # type: ignore[arg-type]
        while await dispatcher.dispatch_once():
            pass
        first = list(b.sent)
        await asyncio.sleep(0.1)   # past the planted bug's late rewind
        while await dispatcher.dispatch_once():
            pass
        await dispatcher.close()
        return a.sent, first, b.sent

    return asyncio.run(run())


def test_failover_hand_over_sends_the_new_consumer_everything_unacknowledged_first(monkeypatch: Any) -> None:
    """The model rewinds at the hand-over: B's first message is the first one nobody acknowledged."""
    old, first, _ = _hand_over(monkeypatch)
    assert old == [0, 1, 2]
    assert first == [0, 1, 2, 3, 4, 5]


def test_planted_failover_takeover_before_rewind_sends_later_entries_first(monkeypatch: Any) -> None:
    """The planted bug (Pulsar's behaviour, docs/findings/failover-takeover-skips-unacked.md): B is
    sent what follows A's entries, and 0-2 only after the late rewind, by when a cumulative ack of
    B's first message would have covered them."""
    from embedded import planted_bugs

    planted_bugs.activate([planted_bugs.FAILOVER_TAKEOVER_BEFORE_REWIND])
    try:
        old, first, every = _hand_over(monkeypatch)
    finally:
        planted_bugs.activate(())
    assert old == [0, 1, 2]
    assert first == [3, 4, 5]
    assert every == [3, 4, 5, 0, 1, 2, 3, 4, 5]
