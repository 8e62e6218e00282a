"""Consumer bookkeeping: permits counted in messages, pending entries, the unacked-messages block."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from embedded.broker.consumer import Consumer
from embedded.broker.entry import Entry, EntryInfo
from embedded.broker.position import Position
from harness.wire import CommandType, SubType, commands


class Cnx:
    closed = False
    remote = "test"
    understands_end_of_topic = True

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, command: Any) -> None:
        self.sent.append(command)


def make(max_unacked: int = 0, *, sub_type: SubType = SubType.Shared,
         epoch: int | None = None) -> tuple[Consumer, Cnx, SimpleNamespace]:
    woken = SimpleNamespace(count=0)
    dispatcher = SimpleNamespace(wake=lambda: setattr(woken, "count", woken.count + 1))
    counters = SimpleNamespace(dispatched=lambda n, size: None)
    subscription = SimpleNamespace(topic=SimpleNamespace(counters=counters), dispatcher=dispatcher)
    cnx = Cnx()
    consumer = Consumer(subscription, cnx, 3, "c", sub_type=sub_type, priority=0, metadata={},  # type: ignore[arg-type]
                        track_pending=sub_type is SubType.Shared, max_unacked=max_unacked, epoch=epoch)
    return consumer, cnx, woken


def entry(e: int, messages: int = 1) -> Entry:
    meta = commands.message_metadata("p", e, 0, num_messages_in_batch=messages)
    data = bytes(commands.send(1, e, meta, b"x").payload.entry)   # type: ignore[union-attr]
    return Entry(Position(1, e), data, EntryInfo(messages))


def test_permits_are_counted_in_messages_and_may_go_negative() -> None:
    consumer, cnx, _ = make()
    consumer.permits = 5
    assert consumer.send_entries([(entry(0, 3), 0, None), (entry(1, 4), 2, [0b1010])]) == 7
    assert consumer.permits == -2 and not consumer.available
    assert [c.type for c in cnx.sent] == [CommandType.MESSAGE, CommandType.MESSAGE]
    assert cnx.sent[1].body.redelivery_count == 2 and list(cnx.sent[1].body.ack_set) == [0b1010]
    assert consumer.pending == {Position(1, 0): 3, Position(1, 1): 4}
    consumer.acked([Position(1, 0)])
    assert consumer.unacked_messages == 4
    assert consumer.take_pending() == [Position(1, 1)] and consumer.unacked_messages == 0


def test_max_unacked_blocks_until_half_are_acknowledged() -> None:
    consumer, _, woken = make(max_unacked=4)
    consumer.permits = 100
    consumer.send_entries([(entry(e), 0, None) for e in range(4)])
    assert consumer.blocked and not consumer.available
    consumer.acked([Position(1, 0)])
    assert consumer.blocked                       # 3 unacked: not below half yet
    consumer.acked([Position(1, 1), Position(1, 2)])
    assert not consumer.blocked and consumer.available and woken.count == 1


def test_failover_messages_carry_the_consumer_epoch_a_redelivery_raised() -> None:
    """PIP-84: the client drops what carries an epoch older than its own, so what the broker
    sends after a redelivery must carry the redelivery's epoch, and a late, lower one
    (a redelivery overtaken by another) must not lower it."""
    consumer, cnx, _ = make(sub_type=SubType.Failover, epoch=0)
    consumer.permits = 10
    consumer.send_entries([(entry(0), 0, None)])
    consumer.raise_epoch(2)
    consumer.raise_epoch(1)
    consumer.send_entries([(entry(0), 1, None)])
    assert [c.body.consumer_epoch for c in cnx.sent] == [0, 2]


def test_shared_messages_carry_no_consumer_epoch() -> None:
    consumer, cnx, _ = make(epoch=0)
    consumer.permits = 10
    consumer.raise_epoch(3)
    consumer.send_entries([(entry(0), 0, None)])
    assert not cnx.sent[0].body.HasField("consumer_epoch")
