"""Dispatchers: read a subscription's entries and send them to its consumers.

Theory of operation. Each subscription with consumers has one dispatcher task. It
sleeps on an event; it is woken when permits arrive (FLOW), consumers come or go,
entries are to be redelivered, or the topic's read horizon moves (the transaction
buffer's change callback: no polling). Each round reads at most
`dispatcherMaxReadBatchSize` entries (never more entries than permits) from
`read_position`, never past the horizon `min(last confirmed, max_read_position)`,
filters them, and sends them:

* already acknowledged entries are skipped;
* marker entries and entries of aborted transactions are skipped and acknowledged on
  the subscription's behalf (Pulsar's `individualAcknowledgeMessageIfNeeded`);
* entries held by a pending individual transactional ack are skipped (their batch
  indexes held by a transaction are masked out of the MESSAGE's ack set); what a
  pending cumulative ack covers is not (Pulsar's `filterEntriesForConsumer` asks
  `getPositionInPendingAck`, which knows individual acks only), so a single active
  consumer's rewound cursor delivers it again, in order.

Shared (`SharedDispatcher`) sends round-robin in runs of at most
`dispatcherMaxRoundRobinBatchSize` entries per consumer, keeps what each consumer has
not acknowledged, and replays a leaving consumer's unacknowledged entries (and
explicitly redelivered ones) before new ones, with a redelivery count. Exclusive and
Failover (`SingleActiveDispatcher`) send everything to one active consumer; when it
changes, or it asks for redelivery, the dispatcher rewinds to the mark-delete
position. A rewind or reset bumps `_epoch`, so a read that was in flight meanwhile is
discarded rather than delivered from a stale position.

When a terminated topic has been read to its end, consumers get REACHED_END_OF_TOPIC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from sortedcontainers import SortedSet

from embedded import planted_bugs
from embedded.broker.consumer import Consumer
from embedded.broker.dispatch_policy import (
    active_consumer_index,
    mask_ack_set,
    next_shared_consumer,
    to_signed_words,
)
from embedded.broker.entry import Entry
from embedded.broker.position import Position

if TYPE_CHECKING:
    from embedded.broker.subscription import Subscription

log = logging.getLogger(__name__)

_PAUSES = (0.05, 0.1, 0.2, 0.5, 1.0)
#: Pulsar's activeConsumerFailoverDelayTimeMillis, as the planted FAILOVER_TAKEOVER_BEFORE_REWIND waits it
_TAKEOVER_REWIND_DELAY_S = 1.0


class Dispatcher:
    shared = False
    """A Shared subscription's dispatcher (round robin over many consumers), not a single active one."""

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.topic = subscription.topic
        self.ml = subscription.topic.ledger
        self.cursor = subscription.cursor
        settings = subscription.topic.broker.settings
        self.read_batch = max(1, settings.int("dispatcherMaxReadBatchSize"))
        self.round_robin_batch = max(1, settings.int("dispatcherMaxRoundRobinBatchSize"))
        self.consumers: list[Consumer] = []
        self.read_position = self.ml.next_position(self.cursor.mark_delete_position)
        self._epoch = 0
        self._wake = asyncio.Event()
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    # ---- waking and the loop ------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        failures = 0
        while not self._closed:   # bounded by the subscription's life
            await self._wake.wait()
            self._wake.clear()
            try:
                again = await self.dispatch_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failures += 1
                log.warning("%s/%s: dispatch failed (%s); retrying", self.topic.name, self.subscription.name, err)
                await asyncio.sleep(_PAUSES[min(failures - 1, len(_PAUSES) - 1)])
                again = True
            if again:
                self._wake.set()
                await asyncio.sleep(0)   # let producers and other subscriptions run between rounds

    async def close(self) -> None:
        self._closed = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task

    def horizon(self) -> Position:
        limit = self.topic.transaction_buffer.max_read_position()
        last = self.ml.last_confirmed
        return limit if limit < last else last

    def rewind(self) -> None:
        """Read again from the entry after the mark-delete position."""
        self._epoch += 1
        self.read_position = self.ml.next_position(self.cursor.mark_delete_position)
        self.wake()

    # ---- filtering ----------------------------------------------------------------------------

    def _filter(self, entries: list[Entry]) -> list[tuple[Entry, list[int] | None]]:
        cursor = self.cursor
        tb = self.topic.transaction_buffer
        pending_ack = self.subscription.pending_ack
        out: list[tuple[Entry, list[int] | None]] = []
        auto: list[tuple[Position, None]] = []
        for entry in entries:
            position = entry.position
            if cursor.is_acked(position):
                continue
            info = entry.info
            aborted = info.txn is not None and tb.is_aborted(info.txn, position)
            if aborted and self.shared and planted_bugs.on(planted_bugs.SHARED_DISPATCH_KEEPS_ABORTED):
                aborted = False   # DELIBERATE FAULT (txnbench self-test): a Shared read skips markers only
            if info.marker or aborted:
                auto.append((position, None))
                continue
            if pending_ack.is_pending(position):
                continue
            ack_set = cursor.batch_ack_set(position)
            held = pending_ack.pending_ack_set(position)
            if held:
                masked = mask_ack_set(ack_set, held, info.num_messages)
                if not any(masked):
                    continue
                ack_set = to_signed_words(masked)
            elif ack_set is not None:
                ack_set = to_signed_words(ack_set)
            out.append((entry, ack_set))
        if auto:
            self.subscription.acknowledge_internally(auto)
        return out

    def _check_end_of_topic(self) -> None:
        """At the end when nothing readable lies between the read position and where the topic was
        terminated: a cursor left in a ledger no longer in the list (an empty segment loaded again
        writes a new empty ledger each time) sits at a position below the end with nothing after
        it, and comparing positions kept such a sealed parent from ever releasing its children."""
        end = self.ml.terminated_position
        if end is None:
            return
        start = self.ml.normalize(self.read_position)
        if start <= end and self.ml.entries_from(start, end) > 0:
            return
        for consumer in self.consumers:
            consumer.reached_end_of_topic()

    # ---- to implement -------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def remove_consumer(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        raise NotImplementedError

    def redeliver_positions(self, positions: list[Position]) -> None:
        raise NotImplementedError

    def on_acked(self, positions: list[Position]) -> None:
        return None

    async def dispatch_once(self) -> bool:
        raise NotImplementedError

    def reset(self) -> None:
        """After a seek: forget in-flight and redelivery state, read from the cursor again."""
        self.rewind()


class SharedDispatcher(Dispatcher):
    shared = True

    def __init__(self, subscription: Subscription) -> None:
        super().__init__(subscription)
        self.redelivery: SortedSet = SortedSet()
        self.redelivery_counts: dict[Position, int] = {}
        self._next = 0

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.wake()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self._replay(consumer.take_pending())

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        if positions is None:
            self._replay(consumer.take_pending())
            return
        pending = consumer.pending or {}
        chosen = [p for p in positions if p in pending]
        consumer.acked(chosen)   # no longer outstanding on that consumer
        self._replay(chosen)

    def redeliver_positions(self, positions: list[Position]) -> None:
        for consumer in self.consumers:
            if consumer.pending:
                consumer.acked([p for p in positions if p in consumer.pending])
        self._replay(positions)

    def _replay(self, positions: list[Position]) -> None:
        cursor = self.cursor
        counts = self.redelivery_counts
        for position in positions:
            if cursor.is_acked(position):
                continue
            self.redelivery.add(position)
            counts[position] = counts.get(position, 0) + 1
        if positions:
            self.wake()

    def on_acked(self, positions: list[Position]) -> None:
        if self.redelivery_counts:
            for position in positions:
                self.redelivery_counts.pop(position, None)
        if self.redelivery:
            for position in positions:
                self.redelivery.discard(position)

    def reset(self) -> None:
        self.redelivery.clear()
        self.redelivery_counts.clear()
        for consumer in self.consumers:
            consumer.take_pending()
        super().reset()

    async def dispatch_once(self) -> bool:
        consumers = self.consumers
        if not consumers:
            return False
        permits = sum(c.permits for c in consumers if c.available)
        if permits <= 0:
            return False
        horizon = self.horizon()
        epoch = self._epoch
        want = min(self.read_batch, permits)
        replay = False
        entries: list[Entry] = []
        if self.redelivery:
            chosen = list(self.redelivery.irange(maximum=horizon))[:want]
            if chosen:
                for position in chosen:
                    self.redelivery.discard(position)
                entries = await self.ml.read_positions(chosen)
                replay = True
        if not replay:
            start = self.ml.normalize(self.read_position)
            if start > horizon:
                self._check_end_of_topic()
                return False
            entries = await self.ml.read(start, want, max_position=horizon)
            if not entries:
                self._check_end_of_topic()
                return False
            if epoch == self._epoch:
                self.read_position = self.ml.next_position(entries[-1].position)
        if epoch != self._epoch:
            return True
        leftover = self._assign(self._filter(entries))
        if leftover:
            if replay:
                self.redelivery.update(e.position for e, _ in leftover)
            elif leftover[0][0].position < self.read_position:
                self.read_position = leftover[0][0].position
            return False
        return True

    def _assign(self, deliverable: list[tuple[Entry, list[int] | None]]) -> list[tuple[Entry, list[int] | None]]:
        consumers = self.consumers
        counts = self.redelivery_counts
        i = 0
        total = len(deliverable)
        while i < total:
            index = next_shared_consumer(consumers, self._next)
            if index is None:
                break
            consumer = consumers[index]
            self._next = index + 1
            run: list[tuple[Entry, int, list[int] | None]] = []
            budget = consumer.permits
            while i < total and len(run) < self.round_robin_batch and budget > 0:
                entry, ack_set = deliverable[i]
                run.append((entry, counts.get(entry.position, 0), ack_set))
                budget -= entry.info.num_messages
                i += 1
            consumer.send_entries(run)
        return deliverable[i:]


class SingleActiveDispatcher(Dispatcher):
    def __init__(self, subscription: Subscription, *, failover: bool) -> None:
        super().__init__(subscription)
        self.failover = failover
        self.active: Consumer | None = None

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self._pick_active(initial=consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self._pick_active()

    def _pick_active(self, initial: Consumer | None = None) -> None:
        index = active_consumer_index(self.consumers, self.topic.name.partition_index)
        chosen = self.consumers[index] if index is not None else None
        changed = chosen is not self.active
        handed_over = changed and self.active is not None and chosen is not None
        self.active = chosen
        if self.failover:
            for consumer in self.consumers:
                if changed or consumer is initial:
                    consumer.active_change(consumer is chosen)
        if handed_over and self.failover and planted_bugs.on(planted_bugs.FAILOVER_TAKEOVER_BEFORE_REWIND):
            # DELIBERATE FAULT (txnbench self-test): the new active consumer is sent entries from
            # the read position (past what the old one was sent) and the rewind comes a second later
            self.wake()
            with contextlib.suppress(RuntimeError):   # no running loop: nothing dispatches either
                asyncio.get_running_loop().call_later(_TAKEOVER_REWIND_DELAY_S, self._late_rewind)
        elif changed:
            self.rewind()

    def _late_rewind(self) -> None:
        if not self._closed:
            self.rewind()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        if consumer is self.active:   # single consumers cannot redeliver single messages (ordering)
            self.rewind()

    def _held_from(self, entries: list[Entry]) -> int:
        """How many of `entries` come before the first one an open transaction's cumulative ack holds.

        Dispatch stops there until that transaction ends: sending it again (a rewind after a move,
        a reconnect or a failover while the transaction commits) would hand its consumer messages
        the commit is about to acknowledge, and skipping it would deliver what follows first, so a
        cumulative ack would cover messages nobody saw. Pulsar sends it again (its filter knows
        individual pending acks only), so a Failover application can process a committed message
        twice; the model keeps the order and the once, as the reference it is."""
        pending_ack = self.subscription.pending_ack
        for k, entry in enumerate(entries):
            if pending_ack.held_cumulatively(entry.position):
                return k
        return len(entries)

    def redeliver_positions(self, positions: list[Position]) -> None:
        self.rewind()

    async def dispatch_once(self) -> bool:
        consumer = self.active
        if consumer is None or not consumer.available:
            return False
        horizon = self.horizon()
        start = self.ml.normalize(self.read_position)
        if start > horizon:
            self._check_end_of_topic()
            return False
        epoch = self._epoch
        entries = await self.ml.read(start, min(self.read_batch, consumer.permits), max_position=horizon)
        if epoch != self._epoch or consumer is not self.active:
            return True
        if not entries:
            self._check_end_of_topic()
            return False
        held = self._held_from(entries)
        if held == 0:
            return False   # waits for the transaction holding it to end (its end wakes the dispatcher)
        entries = entries[:held]
        self.read_position = self.ml.next_position(entries[-1].position)
        deliverable = self._filter(entries)
        run: list[tuple[Entry, int, list[int] | None]] = []
        budget = consumer.permits
        i = 0
        while i < len(deliverable) and budget > 0:
            entry, ack_set = deliverable[i]
            run.append((entry, 0, ack_set))
            budget -= entry.info.num_messages
            i += 1
        if run:
            consumer.send_entries(run)
        if i < len(deliverable):
            self.read_position = deliverable[i][0].position
            return False
        return True
