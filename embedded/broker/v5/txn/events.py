"""A participant's decision-event stream: new records of one sequence, none missed.

Theory of operation (Pulsar's `subscribeSequence` on a non-Oxia backend). The
coordinator appends `TxnEvent`s with sequence keys under the participant's parent
(`/txn/segment-events/<segment>` or `/txn/subscription-events/<segment>:<sub>`). The
feed watches the parent's key range and reports every *created* key; because watch
events can be missed while the connection is down, it also lists what is pending
(`catch_up`) at start and after every resync. The same record may therefore be
reported more than once, and a key can come back with a new version once its
sequence restarted (the store restarts an emptied sequence at 1): consumers key their
work by (key, version) and delete a record only at the version they processed.

Events queue up until `ready()` is called, so a participant can subscribe before it
recovers and still see everything published meanwhile.

As in Pulsar 5.0, consumed events stay in the store unless the model-only
`txnbenchV5DeleteConsumedEvents` is on (`replay_backlog`). Then the stream only grows,
so the feed keeps a cursor (the highest key it reported) and a resync lists only what
follows it. The first listing only places the cursor: what was published before the
watch started is covered by the participant's recovery, which reads the op records and
their headers after the watch is in place (a header decided before that read is seen
there; one decided after it publishes its event after the watch started).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from embedded import planted_bugs
from embedded.broker.tasks import spawn
from embedded.broker.v5.txn import keys
from embedded.broker.v5.txn.store import TxnMetadataStore, Versioned
from embedded.metadata.model import EventType, MetadataError, MetadataUnavailable, Notification

if TYPE_CHECKING:
    from embedded.metadata.backend import WatchHandle as Watch

log = logging.getLogger(__name__)


class EventFeed:
    def __init__(self, store: TxnMetadataStore, parent: str, on_event: Callable[[Versioned], None], *,
                 replay_backlog: bool = True) -> None:
        self.store = store
        self.parent = parent
        self.on_event = on_event
        self.replay_backlog = replay_backlog
        self._after: str | None = None   # the highest key reported (replay_backlog off)
        self._positioned = False
        self._watch: Watch | None = None
        self._queued: list[Versioned] | None = []
        self._closed = False

    async def start(self) -> None:
        self._watch = await self.store.client.watch(keys.sequence_watch_prefix(self.parent), self._on_events,
                                                    on_resync=self._on_resync)

    def ready(self) -> None:
        """Deliver what queued up, then everything as it comes; list the backlog once."""
        queued, self._queued = self._queued or [], None
        for item in queued:
            self.on_event(item)
        self._catch_up_soon()

    async def stop(self) -> None:
        self._closed = True
        if self._watch is not None:
            with contextlib.suppress(Exception):
                await self._watch.cancel()

    def _deliver(self, item: Versioned) -> None:
        if self._closed:
            return
        if self._after is None or item.key > self._after:
            self._after = item.key
        if self._queued is not None:
            self._queued.append(item)
        else:
            self.on_event(item)

    def _on_events(self, events: list[Notification]) -> None:
        for event in events:
            if event.type is EventType.CREATED and keys.is_sequence_key(self.parent, event.key):
                self._deliver(Versioned(event.key, event.version_id))

    def _on_resync(self) -> None:
        if planted_bugs.on(planted_bugs.V5_NO_CATCH_UP_AFTER_RESYNC):
            # DELIBERATE FAULT (txnbench self-test): as Pulsar 5.0.1's `subscribeSequence` on ZooKeeper, a
            # watch set again after a reconnect reports what is created from then on, and what was created
            # while the connection was down is never listed (docs/findings/v5-decision-missed-at-session-loss.md)
            return
        self._catch_up_soon()

    def _catch_up_soon(self) -> None:
        if not self._closed:
            spawn(self.catch_up(), f"catching up on {self.parent}")

    async def catch_up(self) -> None:
        """Report every event record still present (bounded retries; a later resync tries again)."""
        for attempt in range(5):
            if self._closed:
                return
            after = None if self.replay_backlog else self._after
            try:
                pending = await self.store.pending_events(self.parent, after)
            except (MetadataUnavailable, MetadataError) as err:
                log.info("listing events of %s failed (%s); retrying", self.parent, err)
                await asyncio.sleep(0.2 * (attempt + 1))
                continue
            if not self.replay_backlog and not self._positioned:
                self._positioned = True   # only place the cursor (see the module docstring)
                if pending and (self._after is None or pending[-1].key > self._after):
                    self._after = pending[-1].key
                return
            for item in pending:
                self._deliver(item)
            return
