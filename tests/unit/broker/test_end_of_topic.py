"""When a dispatcher tells its consumers that a terminated topic was read to its end (no sockets).

Why: a v5 segment split off with no message written to it, loaded again (each load of an empty
segment drops the empty ledger it wrote and writes a new one) and then sealed by a merge, kept
its subscription's read position in a ledger that is no longer in the list, below the position
it was terminated at, with nothing to read in between. Comparing positions said "not at the end",
so the segment never sent REACHED_END_OF_TOPIC and the merged child, held until its parents end,
never delivered a message (embedded chaos.yaml v5: undelivered 169).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from embedded.broker.dispatcher import SingleActiveDispatcher
from embedded.broker.managed_ledger.ledger import ManagedLedger
from embedded.broker.managed_ledger.metadata import LedgerRecord, MlInfo
from embedded.broker.position import Position
from tests.unit.broker.test_single_active_dispatch import Consumer as DispatchedTo


class StoredList:
    """The metadata store holding one managed ledger's list."""

    def __init__(self, info: MlInfo) -> None:
        self.info = info

    async def read(self, name: str) -> tuple[MlInfo, int]:
        return self.info, 3

    async def update(self, name: str, info: MlInfo, version: int) -> int:
        self.info = info
        return version + 1


class Ledgers:
    async def delete_ledger(self, ledger_id: int) -> None:
        pass


class Consumer(DispatchedTo):
    """A consumer that hears REACHED_END_OF_TOPIC."""

    def __init__(self) -> None:
        super().__init__()
        self.told_end = False

    def reached_end_of_topic(self) -> None:
        self.told_end = True


def told_end(ledgers: list[LedgerRecord], terminated: Position, read_from: Position) -> bool:
    """Whether a consumer reading a terminated managed ledger from `read_from` is told it ended."""
    async def run() -> bool:
        ml = ManagedLedger("segment/t", SimpleNamespace(kind=SimpleNamespace(value="segment")),  # type: ignore[arg-type]
                           ledgers=Ledgers(), store=StoredList(MlInfo(ledgers, terminated)),  # type: ignore[arg-type]
                           cache=None, metrics=None)  # type: ignore[arg-type]
        await ml.open()
        topic = SimpleNamespace(name=SimpleNamespace(partition_index=-1), ledger=ml,
                                broker=SimpleNamespace(settings=SimpleNamespace(int=lambda key: 100)))
        subscription = SimpleNamespace(topic=topic, name="verify",
                                       cursor=SimpleNamespace(mark_delete_position=read_from))
        dispatcher = SingleActiveDispatcher(subscription, failover=False)   # type: ignore[arg-type]
        dispatcher.read_position = read_from
        consumer = Consumer()
        dispatcher.consumers.append(consumer)   # type: ignore[arg-type]
        dispatcher._check_end_of_topic()
        return consumer.told_end
    return asyncio.run(run())


def test_a_read_position_in_a_ledger_gone_from_the_list_with_nothing_after_it_is_the_end() -> None:
    # the sealed parent: its only ledgers held nothing, the cursor still names the first one
    assert told_end([], Position(1036, -1), Position(881, 0))
    assert told_end([LedgerRecord(1032, 0), LedgerRecord(1036, 0)], Position(1036, -1), Position(881, 0))


def test_entries_left_before_the_termination_are_not_the_end() -> None:
    assert not told_end([LedgerRecord(881, 3)], Position(881, 2), Position(881, 1))
    assert not told_end([LedgerRecord(900, 2)], Position(900, 1), Position(881, 0))   # moved on to ledger 900


def test_reading_past_the_last_entry_is_the_end() -> None:
    assert told_end([LedgerRecord(881, 3)], Position(881, 2), Position(881, 3))
