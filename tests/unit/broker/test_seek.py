"""A seek against a consumer that resubscribes at once (no sockets).

The C++ client reconnects as soon as the seek closes its consumer and clears its receive
queue when the seek's response arrives. A consumer added before that response would get
messages the client then drops while the broker counts them as delivered: after
`consumer.seek(earliest)` nothing came back (a CI failure of
tests/cluster/test_broker_clients.py::test_negative_ack_and_seek_redeliver).
Pulsar holds such a subscribe until the reset ends (PersistentSubscription.addConsumer).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from embedded.broker.consumer import Consumer
from embedded.broker.position import Position
from embedded.broker.subscription import Subscription, SubscriptionBusy
from harness.wire import SubType
from tests.unit.broker.test_consumer import Cnx as RecordingCnx


class SlowCursor:
    """A cursor whose flush waits until the test lets it go."""

    def __init__(self) -> None:
        self.mark_delete_position = Position(1, 5)
        self.release = asyncio.Event()
        self.flushing = asyncio.Event()

    def reset(self, mark_delete: Position) -> None:
        self.mark_delete_position = mark_delete

    async def flush(self) -> None:
        self.flushing.set()
        await self.release.wait()


class Cnx(RecordingCnx):
    def forget_consumer(self, consumer: Consumer) -> None:
        return None


class Dispatcher:
    """The consumers list a Shared dispatcher keeps; nothing is dispatched."""

    def __init__(self) -> None:
        self.consumers: list[Consumer] = []
        self.resets = 0

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        self.consumers.remove(consumer)

    def reset(self) -> None:
        self.resets += 1


def subscription(cursor: SlowCursor) -> Subscription:
    provider = SimpleNamespace(create=lambda sub: SimpleNamespace())
    broker = SimpleNamespace(txn_registry=SimpleNamespace(pending_ack_provider=lambda domain: provider))
    topic = SimpleNamespace(broker=broker, name=SimpleNamespace(domain="persistent"))
    sub = Subscription(topic, "s", cursor, durable=True)  # type: ignore[arg-type]
    sub.sub_type, sub.dispatcher = SubType.Shared, Dispatcher()  # type: ignore[assignment]
    return sub


def consumer(sub: Subscription, consumer_id: int) -> Consumer:
    return Consumer(sub, Cnx(), consumer_id, f"c{consumer_id}",  # type: ignore[arg-type]
                    sub_type=SubType.Shared, priority=0, metadata={}, track_pending=True)


async def seek_and_resubscribe() -> list[str]:
    cursor = SlowCursor()
    sub = subscription(cursor)
    await sub.add_consumer(consumer(sub, 1))
    order: list[str] = []

    async def seek() -> None:
        await sub.reset_to(Position(1, 0))
        order.append("seek answered")   # what the connection does right after the reset

    async def resubscribe() -> None:
        await sub.add_consumer(consumer(sub, 2))
        order.append("consumer added")

    seeking = asyncio.create_task(seek())
    await cursor.flushing.wait()         # the old consumer is closed; the reset is persisting
    adding = asyncio.create_task(resubscribe())
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == [] and [c.consumer_id for c in sub.consumers] == []
    cursor.release.set()
    await asyncio.wait_for(asyncio.gather(seeking, adding), timeout=5)
    assert [c.consumer_id for c in sub.consumers] == [2]
    assert cursor.mark_delete_position == Position(1, -1)
    return order


def test_a_consumer_that_subscribes_during_a_seek_is_added_after_its_answer() -> None:
    assert asyncio.run(seek_and_resubscribe()) == ["seek answered", "consumer added"]


def test_a_second_seek_during_a_seek_is_refused() -> None:
    async def two_seeks() -> None:
        cursor = SlowCursor()
        sub = subscription(cursor)
        first = asyncio.create_task(sub.reset_to(Position(1, 0)))
        await cursor.flushing.wait()
        with pytest.raises(SubscriptionBusy, match="Failed to fence"):
            await asyncio.wait_for(sub.reset_to(Position(1, 3)), timeout=5)
        cursor.release.set()
        await asyncio.wait_for(first, timeout=5)
        await asyncio.wait_for(sub.reset_to(Position(1, 2)), timeout=5)   # free again once it ended
        assert cursor.mark_delete_position == Position(1, 1)

    asyncio.run(two_seeks())
