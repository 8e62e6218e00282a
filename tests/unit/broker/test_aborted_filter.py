"""Which entries a dispatcher's filter lets through around aborted transactions (no sockets).

Why: the twenty-first planted bug (`txnbenchBugSharedDispatchKeepsAborted`) makes the Shared
dispatcher skip transaction markers but not the entries of aborted transactions. This pins the
correct filter on both kinds of dispatcher and shows the guarded branch is what changes it.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from embedded import planted_bugs
from embedded.broker.dispatcher import Dispatcher, SharedDispatcher, SingleActiveDispatcher
from embedded.broker.entry import Entry, EntryInfo
from embedded.broker.position import Position
from harness.wire import TxnId
from tests.unit.broker.test_single_active_dispatch import L, Ledger

ABORTED, COMMITTED = TxnId(0, 1), TxnId(0, 2)


def subscription(auto_acked: list[Position]) -> SimpleNamespace:
    """Entries of an aborted transaction, a committed one and a plain message, none acknowledged."""
    cursor = SimpleNamespace(mark_delete_position=Position(L, -1), is_acked=lambda p: False,
                             batch_ack_set=lambda p: None)
    pending = SimpleNamespace(is_pending=lambda p: False, pending_ack_set=lambda p: None)
    topic = SimpleNamespace(
        name=SimpleNamespace(partition_index=-1), ledger=Ledger(3),
        broker=SimpleNamespace(settings=SimpleNamespace(int=lambda key: 100)),
        transaction_buffer=SimpleNamespace(max_read_position=lambda: Position(L, 99),
                                           is_aborted=lambda txn, p: txn == ABORTED))
    return SimpleNamespace(topic=topic, cursor=cursor, pending_ack=pending, name="s",
                           acknowledge_internally=lambda acks: auto_acked.extend(p for p, _ in acks))


ENTRIES = [Entry(Position(L, 0), b"", EntryInfo(1, ABORTED)), Entry(Position(L, 1), b"", EntryInfo(1, COMMITTED)),
           Entry(Position(L, 2), b"", EntryInfo(1))]


def passed(kind: str, planted: bool) -> tuple[list[int], list[int]]:
    """(entry ids the filter lets through, entry ids it acknowledges on the subscription's behalf)."""
    async def run() -> tuple[list[int], list[int]]:
        auto: list[Position] = []
        sub = subscription(auto)
        dispatcher: Dispatcher = (SharedDispatcher(sub) if kind == "shared"   # type: ignore[arg-type]
                                  else SingleActiveDispatcher(sub, failover=True))   # type: ignore[arg-type]
        out = dispatcher._filter(ENTRIES)
        return [e.position.entry_id for e, _ in out], [p.entry_id for p in auto]
    planted_bugs.activate([planted_bugs.SHARED_DISPATCH_KEEPS_ABORTED] if planted else [])
    try:
        return asyncio.run(run())
    finally:
        planted_bugs.activate(())


@pytest.mark.parametrize("kind", ["shared", "single-active"])
def test_an_aborted_transactions_entry_is_skipped_and_acknowledged_for_the_subscription(kind: str) -> None:
    assert passed(kind, planted=False) == ([1, 2], [0])


def test_the_planted_bug_lets_a_shared_dispatcher_deliver_an_aborted_entry() -> None:
    assert passed("shared", planted=True) == ([0, 1, 2], [])


def test_the_planted_bug_leaves_the_single_active_dispatcher_alone() -> None:
    assert passed("single-active", planted=True) == ([1, 2], [0])
