"""What the two PIP-473 participants share: learning decisions and acting on each once.

Theory of operation. A participant (a segment's transaction buffer, a subscription's
pending-ack store) learns a transaction's outcome from its decision events (`EventFeed`)
and, as a safety net for events that never came (a coordinator that died between the
header CAS and the fan-out, with no client retrying END_TXN), by re-reading the
headers of transactions it has tracked as OPEN for longer than the timeout-sweep interval
(at least 5 s):
the header is the truth, the event a wake-up. A missing header reads as ABORTED, as in
Pulsar (`orElse(TxnState.ABORTED)`) - which is exactly what turns the GC race of the
PIP-473 review into lost work when a header is collected before a slow participant
read it.

A participant materializes one decision per transaction: the first one it starts
applying (`materialize`) is remembered (bounded) and any later, different one is taken
for a stale read and replaced by it, as Pulsar's `MetadataTransactionBuffer` acts on a
transaction only while it still holds it (`applyTerminalNow` returns for a transaction
it dropped). A header read can be answered after this participant applied the real
decision, deleted its op records and let the GC collect the header (a broker paused at
the wrong moment: chaos.yaml's zombie coordinator); read as ABORTED, that answer once
hid a committed transaction's entries on one segment while its other segments showed
them. The reconcile therefore also skips a transaction decided while its header was read.

Each event is handled by one task keyed by (key, version); it reads the event, waits
the configured participant delay (the "slow participant" probe), lets the subclass
`apply` the decision (idempotent), and, only with the model-only
`txnbenchV5DeleteConsumedEvents`, deletes the event record at the version it read
(Pulsar 5.0 leaves events in the store and ignores one for a transaction it does not
hold open). A failure leaves the record in place and is retried with backoff a
few times; after that the next resync or the periodic reconcile picks it up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from abc import ABC, abstractmethod
from typing import Any

from embedded import planted_bugs
from embedded.broker.tasks import spawn
from embedded.broker.v5.settings import V5Settings
from embedded.broker.v5.txn.events import EventFeed
from embedded.broker.v5.txn.records import RecordError, TxnState
from embedded.broker.v5.txn.store import TxnMetadataStore, Versioned
from embedded.metadata.model import MetadataError, MetadataUnavailable
from harness.wire import TxnId

log = logging.getLogger(__name__)

_RETRY_PAUSES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
RECONCILE_MIN_INTERVAL_S = 5.0   # the safety net re-reads headers of txns open longer than this, this often
DECISION_MEMORY = 10_000         # decisions remembered per participant, to refuse a stale, different one


class Participant(ABC):
    def __init__(self, name: str, store: TxnMetadataStore, settings: V5Settings, events_parent: str) -> None:
        self.name = name
        self.store = store
        self.settings = settings
        self.feed = EventFeed(store, events_parent, self._on_event,
                              replay_backlog=settings.delete_consumed_events)
        self.closed = False
        self._handling: set[tuple[str, int]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tracked_since: dict[TxnId, float] = {}
        self._decisions: dict[TxnId, TxnState] = {}   # the first decision materialized, oldest first
        self.stale_decisions = 0
        self._reconciler: asyncio.Task[None] | None = None
        self._delay_s = settings.delay_for(name)

    # ---- for subclasses -----------------------------------------------------------------------

    @abstractmethod
    async def apply(self, txn: TxnId, decision: TxnState) -> None:
        """Materialize `decision` for `txn` here (idempotent)."""

    def track(self, txn: TxnId) -> None:
        """`txn` is OPEN here from now on (for the periodic reconcile)."""
        self._tracked_since.setdefault(txn, time.monotonic())

    def untrack(self, txn: TxnId) -> None:
        self._tracked_since.pop(txn, None)

    def start_reconciling(self) -> None:
        if planted_bugs.on(planted_bugs.V5_NO_CATCH_UP_AFTER_RESYNC):
            # DELIBERATE FAULT (txnbench self-test): Pulsar 5.0.1 has no such safety net; a decision
            # whose event was missed waits for another event or for the GC sweep to publish it again
            return
        self._reconciler = spawn(self._reconcile_loop(), f"reconciling {self.name}")

    async def stop_participating(self) -> None:
        self.closed = True
        await self.feed.stop()
        tasks = [t for t in (self._reconciler, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def decide_slowly(self, txn: TxnId, decision: TxnState) -> None:
        """`materialize`, after the configured participant delay (0 unless probing the GC race)."""
        if self._delay_s > 0:
            await asyncio.sleep(self._delay_s)
        if not self.closed:
            await self.materialize(txn, decision)

    async def materialize(self, txn: TxnId, decision: TxnState) -> None:
        """`apply` the first decision this participant learned for `txn` (see the module docstring)."""
        await self.apply(txn, self._first_decision(txn, decision))
        self.untrack(txn)

    def decision_of(self, txn: TxnId) -> TxnState | None:
        """The decision this participant materialized (or is materializing) for `txn`, if it remembers one."""
        return self._decisions.get(txn)

    def _first_decision(self, txn: TxnId, decision: TxnState) -> TxnState:
        known = self._decisions.get(txn)
        if known is None:
            self._decisions[txn] = decision
            while len(self._decisions) > DECISION_MEMORY:   # bounded: forget the oldest
                self._decisions.pop(next(iter(self._decisions)))
            return decision
        if known is not decision:
            self.stale_decisions += 1
            log.warning("%s: %s was %s here already; a later %s (a header read answered after the header was "
                        "collected) is ignored", self.name, txn, known.value, decision.value)
        return known

    # ---- events -------------------------------------------------------------------------------

    def _on_event(self, item: Versioned) -> None:
        ident = (item.key, item.version_id)
        if self.closed or ident in self._handling:
            return
        self._handling.add(ident)
        task = asyncio.ensure_future(self._handle(item))
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._done, ident=ident))
        if planted_bugs.on(planted_bugs.V5_NO_CATCH_UP_AFTER_RESYNC):
            # the planted bug's 5.0.1 as it is (`MetadataTransactionBuffer.triggerReconcile`): any event
            # makes the participant read the headers of every transaction it holds open, the ones whose
            # events it missed included
            sweep = asyncio.ensure_future(self._reconcile(list(self._tracked_since)))
            self._tasks.add(sweep)
            sweep.add_done_callback(self._tasks.discard)

    def _done(self, task: asyncio.Task[Any], ident: tuple[str, int]) -> None:
        self._tasks.discard(task)
        self._handling.discard(ident)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: handling decision event %s failed", self.name, ident[0], exc_info=task.exception())

    async def _handle(self, item: Versioned) -> None:
        for attempt, pause in enumerate((*_RETRY_PAUSES, None)):
            try:
                got = await self.store.get_event(item.key)
                if got is None or got[1] != item.version_id:
                    return   # processed already, or replaced (its own created event follows)
                event, version = got
                if not self.settings.delete_consumed_events:
                    # Pulsar 5.0: an event is a wake-up for the transactions open here; it stays
                    # in the store, and one for a transaction this participant does not hold
                    # (applied already, a retry's re-publish, another incarnation's) is ignored
                    if event.txn in self._tracked_since:
                        await self.decide_slowly(event.txn, event.decision)
                    return
                await self.decide_slowly(event.txn, event.decision)
                await self.store.delete_event(item.key, version)
                return
            except RecordError as err:
                log.error("%s: dropping malformed event %s: %s", self.name, item.key, err)
                if self.settings.delete_consumed_events:
                    await self.store.delete_event(item.key, item.version_id)
                return
            except (MetadataUnavailable, MetadataError) as err:
                if pause is None or self.closed:
                    log.warning("%s: giving up on event %s for now (%s); a resync or the reconcile retries",
                                self.name, item.key, err)
                    return
                log.info("%s: event %s failed (%s), attempt %d; retrying", self.name, item.key, err, attempt + 1)
                await asyncio.sleep(pause)

    # ---- the safety net -----------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        interval = max(RECONCILE_MIN_INTERVAL_S, self.settings.timeout_sweep_interval_s)
        while not self.closed:   # bounded by the participant's life
            await asyncio.sleep(interval)
            now = time.monotonic()
            await self._reconcile([t for t, since in list(self._tracked_since.items()) if now - since >= interval])

    async def _reconcile(self, txns: list[TxnId]) -> None:
        """Reads the header of each of `txns` still open here and applies the decided ones."""
        for txn in txns:
            if self.closed:
                return
            if txn not in self._tracked_since:
                continue   # an event decided it while the earlier ones of this round were read
            if planted_bugs.on(planted_bugs.V5_PARTICIPANT_LOCAL_TIMEOUT):
                # DELIBERATE FAULT (txnbench self-test): a local timeout taken for the decision
                state = TxnState.ABORTED
            else:
                try:
                    got = await self.store.get_header(txn)
                except (MetadataUnavailable, MetadataError, RecordError) as err:
                    log.info("%s: reconcile of %s failed (%s)", self.name, txn, err)
                    continue
                state = got[0].state if got is not None else TxnState.ABORTED
                if txn not in self._tracked_since:
                    continue   # decided while its header was read: the answer may postdate its collection
            if state.terminal:
                log.info("%s: %s is %s but no event arrived; applying it", self.name, txn, state.value)
                try:
                    await self.decide_slowly(txn, state)
                except (MetadataUnavailable, MetadataError) as err:
                    log.info("%s: applying %s failed (%s); next round retries", self.name, txn, err)
