"""A participant's event feed across a lost connection, with and without the planted bug.

Why: Pulsar 5.0.1 loses decision events created while a broker's metadata session was gone
(docs/findings/v5-decision-missed-at-session-loss.md). Our feed lists what is pending after
every resync; `txnbenchBugV5NoCatchUpAfterResync` plants 5.0.1's behaviour, and these tests
show the feed tells the two apart. A real in-process metadata store; the lost connection is
the watch cancelled while the event is published, then set again and the resync called, as
the metadata client does after a reconnect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedded import planted_bugs
from embedded.broker.v5.txn import keys
from embedded.broker.v5.txn.events import EventFeed
from embedded.broker.v5.txn.records import TxnEvent, TxnState
from embedded.broker.v5.txn.store import Versioned
from harness.wire import TxnId
from tests.unit.v5.fakes import SEGMENT, metadata_service, start_node, stop_node
from tests.waiting import run


@pytest.fixture(autouse=True)
def nothing_planted_after() -> Iterator[None]:
    yield
    planted_bugs.activate(())


@pytest.mark.parametrize("planted", [False, True], ids=["catch-up", "planted-bug"])
def test_an_event_published_while_the_watch_was_gone_is_listed_at_the_resync(tmp_path: Path, planted: bool) -> None:
    async def main() -> set[str]:
        async with metadata_service(tmp_path) as address:
            node = await start_node(address, 0)
            # after the in-process servers started: each switches the planted set to its own config's
            planted_bugs.activate([planted_bugs.V5_NO_CATCH_UP_AFTER_RESYNC] if planted else [])
            try:
                parent = keys.segment_events_parent(str(SEGMENT))
                heard: list[Versioned] = []
                feed = EventFeed(node.store, parent, heard.append)
                await feed.start()
                feed.ready()
                await asyncio.sleep(0.5)   # the first listing (of nothing) is done
                first = await node.store.publish_segment_event(str(SEGMENT),
                                                               TxnEvent(TxnId(0, 1), TxnState.COMMITTED))
                for _ in range(100):   # bounded: 5 s
                    if heard:
                        break
                    await asyncio.sleep(0.05)
                assert {h.key for h in heard} == {first}, "an event published while the watch is up is heard"

                assert feed._watch is not None
                await feed._watch.cancel()   # the connection is gone: nothing is notified
                missed = await node.store.publish_segment_event(str(SEGMENT),
                                                                TxnEvent(TxnId(1, 1), TxnState.ABORTED))
                await feed.start()           # the client sets the watch again ...
                feed._on_resync()            # ... and says events may have been missed
                for _ in range(40):          # bounded: 2 s
                    if missed in {h.key for h in heard}:
                        break
                    await asyncio.sleep(0.05)
                await feed.stop()
                return {first, missed} & {h.key for h in heard} | ({"same key"} if first == missed else set())
            finally:
                await stop_node(node)

    heard = run(main)
    assert len(heard) == (1 if planted else 2), (
        "5.0.1's behaviour: the event created while the watch was gone is never listed" if planted
        else "the catch-up lists the missed event")
