"""PersistentTopic: a managed ledger with producers, subscriptions and a transaction buffer.

Theory of operation. A topic is loaded by its owner only (`BrokerService.get_topic`):
open the managed ledger (fencing the previous owner's ledger), create the transaction
buffer chosen by the provider registry and let it recover, then recover every durable
cursor as a subscription. Every confirmed entry is passed to the transaction buffer
(`on_entry_added`, in log order), and whenever the buffer reports that the read
horizon moved, every dispatcher is woken.

Unloading (ownership lost, admin unload, the managed ledger fenced by a new owner)
tells every producer and consumer to reconnect (CLOSE_PRODUCER / CLOSE_CONSUMER),
stops the dispatchers, persists the cursors (bounded), closes the transaction
components and the managed ledger. Clients then look the topic up again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from embedded.broker.entry import Entry, EntryInfo, largest_batch_index
from embedded.broker.managed_ledger.api import ManagedLedgerTerminated
from embedded.broker.managed_ledger.ledger import ManagedLedger
from embedded.broker.position import Position
from embedded.broker.producer import Producer
from embedded.broker.subscription import Subscription
from embedded.broker.tasks import spawn
from embedded.broker.topic_name import TopicName
from embedded.broker.txn_api import TransactionBuffer, TxnError
from harness.wire import Command, CommandType, ServerError, TxnId, proto

if TYPE_CHECKING:
    from embedded.broker.views import TopicView

log = logging.getLogger(__name__)


class PersistentTopic:
    def __init__(self, broker: TopicView, name: TopicName, ml: ManagedLedger) -> None:
        self._broker = broker
        self._name = name
        self._ml = ml
        self.counters = broker.metrics.topic_counters(str(name))
        self.producers: dict[tuple[int, int], Producer] = {}     # (connection id, producer id)
        self._subscriptions: dict[str, Subscription] = {}
        self._tb: TransactionBuffer | None = None
        self._horizon_poll: asyncio.Task[None] | None = None   # experiment 6's polling dispatchers
        self._seen_horizon: Position | None = None
        self._subscribe_lock = asyncio.Lock()
        self.closing = False
        self.closed = False

    # ---- TopicServices ------------------------------------------------------------------------

    @property
    def name(self) -> TopicName:
        return self._name

    @property
    def ledger(self) -> ManagedLedger:
        return self._ml

    @property
    def broker(self) -> TopicView:
        return self._broker

    @property
    def transaction_buffer(self) -> TransactionBuffer:
        assert self._tb is not None, "the topic is not loaded yet"
        return self._tb

    def subscription(self, name: str) -> Subscription | None:
        return self._subscriptions.get(name)

    def subscriptions(self) -> Mapping[str, Subscription]:
        return dict(self._subscriptions)

    # ---- loading ------------------------------------------------------------------------------

    async def load(self) -> None:
        provider = self._broker.txn_registry.buffer_provider(self._name.domain)
        self._tb = provider.create(self)
        await self._tb.recover()
        self._ml.add_listener(self._on_entry_added)
        poll_ms = self._broker.settings.int("txnbenchDispatchHorizonPollMillis")
        if poll_ms > 0:
            self._seen_horizon = self.read_horizon()
            self._horizon_poll = spawn(self._poll_horizon(poll_ms / 1000.0), f"horizon poll of {self._name}")
        else:
            self._tb.add_listener(self._on_horizon_moved)
        for cursor_name in await self._ml.cursor_names():
            cursor = await self._ml.open_cursor(cursor_name)
            subscription = Subscription(self, cursor_name, cursor, durable=True)
            await subscription.init()
            self._subscriptions[cursor_name] = subscription
        self._ml.add_fenced_listener(self._on_fenced)

    def _on_entry_added(self, position: Position, info: EntryInfo) -> None:
        tb = self._tb
        if tb is not None:
            tb.on_entry_added(position, info)
            if self._horizon_poll is not None:
                self._wake_if_horizon_moved()   # an append wakes them, as the ledger would; decisions wait

    def _on_horizon_moved(self) -> None:
        for subscription in self._subscriptions.values():
            dispatcher = subscription.dispatcher
            if dispatcher is not None:
                dispatcher.wake()

    def _wake_if_horizon_moved(self) -> None:
        now = self.read_horizon()
        if now != self._seen_horizon:
            self._seen_horizon = now
            self._on_horizon_moved()

    async def _poll_horizon(self, interval_s: float) -> None:
        """Experiment 6's other design: a decision that moves the horizon is seen at the next poll.

        Runs until the topic closes (close() cancels it); a round is one in-memory
        comparison, so what the probe measures is the delivery delay it adds.
        """
        while not self.closing:
            await asyncio.sleep(interval_s)
            self._wake_if_horizon_moved()

    def _on_fenced(self, ml: ManagedLedger) -> None:
        log.warning("%s: another broker took the topic over; unloading", self._name)
        # release: if our owner record is somehow still there, drop it (CAS on our version)
        spawn(self._broker.unload_topic(self._name, release=True), f"unloading {self._name}")

    # ---- publishing ---------------------------------------------------------------------------

    def publish(self, data: bytes, info: EntryInfo) -> asyncio.Future[Position]:
        return self._ml.append(data, info)

    async def publish_txn(self, txn: TxnId, data: bytes, info: EntryInfo) -> Position:
        if self._ml.terminated_position is not None:
            raise ManagedLedgerTerminated(f"{self._name} was terminated")
        return await self.transaction_buffer.append(txn, data, info)

    def read_horizon(self) -> Position:
        limit = self.transaction_buffer.max_read_position()
        last = self._ml.last_confirmed
        return limit if limit < last else last

    # ---- subscriptions ------------------------------------------------------------------------

    async def get_or_create_subscription(self, name: str, *, durable: bool, initial_position: Position,
                                         start: Position | None) -> Subscription:
        async with self._subscribe_lock:
            existing = self._subscriptions.get(name)
            if existing is not None and not existing.closed:
                return existing
            if durable:
                cursor = await self._ml.open_cursor(name, initial_position=initial_position)
            else:
                cursor = self._ml.non_durable_cursor(name, start if start is not None else initial_position)
            subscription = Subscription(self, name, cursor, durable=durable)
            await subscription.init()
            self._subscriptions[name] = subscription
            return subscription

    def subscription_closed(self, subscription: Subscription) -> None:
        """A non-durable subscription whose last consumer left is dropped (Pulsar's Readers)."""
        if not subscription.durable and not subscription.consumers:
            if self._subscriptions.get(subscription.name) is subscription:
                del self._subscriptions[subscription.name]
            spawn(subscription.close(disconnect=False), f"closing reader {subscription.name}")

    async def unsubscribe(self, name: str) -> None:
        subscription = self._subscriptions.pop(name, None)
        if subscription is not None:
            await subscription.close(disconnect=False)
        if subscription is None or subscription.durable:
            await self._ml.delete_cursor(name)

    # ---- producers ----------------------------------------------------------------------------

    def add_producer(self, producer: Producer) -> None:
        if producer.user_provided_name:
            for other in self.producers.values():
                if other.name == producer.name and not other.closed:
                    raise TxnError(ServerError.ProducerBusy,
                                   f"producer {producer.name} is already connected to {self._name}")
        if producer.access_mode != 0 and self.producers:
            raise TxnError(ServerError.ProducerBusy,
                           f"{self._name} already has producers; an exclusive producer needs the topic to itself")
        if any(p.access_mode != 0 for p in self.producers.values()):
            raise TxnError(ServerError.ProducerFenced, f"{self._name} has an exclusive producer")
        self.producers[(producer.cnx.cnx_id, producer.producer_id)] = producer

    def remove_producer(self, producer: Producer) -> None:
        producer.closed = True
        self.producers.pop((producer.cnx.cnx_id, producer.producer_id), None)

    # ---- queries ------------------------------------------------------------------------------

    async def last_message_id(self) -> tuple[Position, int]:
        """GET_LAST_MESSAGE_ID: the last dispatchable entry and its largest batch index (-1 if none).

        As Pulsar's `getLastDispatchablePosition`: the read horizon, stepping back over marker
        entries and aborted transactional entries, which no consumer ever receives (a reader
        waiting for them would never finish).
        """
        last = await self._last_dispatchable(self.read_horizon())
        if last.entry_id < 0:
            return last, -1
        try:
            entry: Entry = await self._ml.read_entry(last)
        except Exception:
            return last, -1
        return last, largest_batch_index(entry.data)

    async def _last_dispatchable(self, horizon: Position, max_scanned: int = 10_000) -> Position:
        if horizon.entry_id < 0:
            return horizon
        tb = self.transaction_buffer
        ledgers = [(int(i["ledgerId"]), int(i["entries"] or 0)) for i in self._ml.ledger_infos()]
        scanned = 0
        for ledger_id, count in reversed(ledgers):
            if ledger_id > horizon.ledger_id or count <= 0:
                continue
            high = horizon.entry_id if ledger_id == horizon.ledger_id else count - 1
            while high >= 0:   # bounded: each round reads at most 100 entries, max_scanned in all
                low = max(0, high - 99)
                entries = await self._ml.read(Position(ledger_id, low), high - low + 1,
                                              max_position=Position(ledger_id, high))
                for entry in reversed(entries):
                    info = entry.info
                    if not (info.marker or (info.txn is not None and tb.is_aborted(info.txn, entry.position))):
                        return entry.position
                scanned += high - low + 1
                if scanned >= max_scanned:
                    return horizon
                high = low - 1
        return Position(ledgers[0][0], -1) if ledgers else horizon

    # ---- terminate, unload, delete ------------------------------------------------------------

    async def terminate(self) -> Position:
        position = await self._ml.terminate()
        for subscription in self._subscriptions.values():
            subscription.wake()
        return position

    async def close(self, *, disconnect: bool = True) -> None:
        if self.closed:
            return
        self.closing = True
        if self._horizon_poll is not None:
            self._horizon_poll.cancel()
        for producer in list(self.producers.values()):
            if disconnect and not producer.cnx.closed:
                producer.cnx.send(Command(CommandType.CLOSE_PRODUCER, proto.CommandCloseProducer(
                    producer_id=producer.producer_id, request_id=0)))
            producer.closed = True
            producer.cnx.forget_producer(producer)
        self.producers.clear()
        for subscription in list(self._subscriptions.values()):
            await subscription.close(disconnect=disconnect)
        if self._tb is not None:
            try:
                await self._tb.close()
            except Exception:
                log.exception("%s: closing the transaction buffer failed", self._name)
        await self._ml.close()
        self.closed = True

    async def delete(self) -> None:
        await self.close()
        await self._ml.delete()

    # ---- stats --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "msgInCounter": self.counters.msgs_in,
            "bytesInCounter": self.counters.bytes_in,
            "msgOutCounter": self.counters.msgs_out,
            "bytesOutCounter": self.counters.bytes_out,
            "publishers": [p.stats() for p in self.producers.values()],
            "subscriptions": {name: s.stats() for name, s in self._subscriptions.items()},
            "storageSize": None,
            "lastConfirmedEntry": str(self._ml.last_confirmed),
            "transactionBuffer": self._tb.stats() if self._tb is not None else None,
            "ownerBroker": self._broker.broker_id,
        }

    def internal_stats(self) -> dict[str, Any]:
        ml = self._ml
        return {
            "entriesAddedCounter": ml.total_entries(),
            "numberOfEntries": ml.total_entries(),
            "currentLedgerEntries": (ml.last_confirmed.entry_id + 1
                                     if ml.last_confirmed.ledger_id == ml.current_ledger_id else 0),
            "state": ml.state.value,
            "ledgers": ml.ledger_infos(),
            "lastConfirmedEntry": str(ml.last_confirmed),
            "terminatedPosition": str(ml.terminated_position) if ml.terminated_position else None,
            "cursors": self._cursor_stats(),
        }

    def _cursor_stats(self) -> dict[str, Any]:
        """internalStats' `cursors`: every durable cursor and, as in Pulsar (whose non-durable
        cursors are in the managed ledger's cursor list), each reader's; with `readPosition`.

        The drain reads a reader's `readPosition` to tell a read blocked at a lost entry
        behind transaction markers, which no reader is ever given, from one that is slow."""
        out: dict[str, Any] = {name: cursor.stats() for name, cursor in self._ml.cursors().items()}
        for name, subscription in self._subscriptions.items():
            stats = out.setdefault(name, subscription.cursor.stats())
            stats["readPosition"] = str(subscription.read_position())
        return out
