"""`MetadataPendingAckStore`: transactional acks of one `segment://` subscription (PIP-473).

Theory of operation:

* An ack is checked against the cursor and the other holders first (`PendingAcks`,
  Pulsar's conflict rules) and refused with TransactionConflict when this store
  remembers the transaction as decided (memory only, as Pulsar 5.0's
  `MetadataPendingAckStore` leaves the check to its handle); then it is held in memory
  (the dispatcher skips or masks it) and one op record per position is written
  (`idx:acks-by-segment-subscription`).
* Late acks. A store that does not remember the decision (it was loaded after it:
  a restart, an unload) accepts an ack of a decided transaction, as 5.0 does: the ack
  is held and recorded, and the transaction is tracked as open until the header says
  otherwise (5.0: the next event on the subscription re-reads the headers of its open
  transactions; here: the reconcile). A committed transaction then applies the late
  ack with its others (the op records found); an aborted or collected one releases it.
  `txnbenchV5AckReadsHeader` (model-only, off) instead reads the header on the first
  ack of a transaction the store holds nothing for and refuses a decided one.
* A decision arrives as a subscription event. Commit is materialized as the PIP
  describes it: the acks to apply are *the op records found* for this (segment,
  subscription) and transaction, applied to the cursor and flushed before the records
  are deleted. A position held in memory with no record left (a GC sweep deleted it
  first: the review's race) is not acknowledged; it is released, made deliverable again
  and counted in `txnbench_v5_pending_ack_lost_total`. Abort releases everything the
  transaction held and makes it deliverable again.
* Recovery re-reads the index, groups the records by transaction, and holds the acks
  of OPEN transactions again (positions come from the records); decided ones are
  materialized at once.

Readers (non-durable subscriptions) take no transactional acks and touch no metadata.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from embedded.broker.position import Position
from embedded.broker.tasks import spawn
from embedded.broker.txn_api import SubscriptionServices, TxnAck, TxnError, batch_size_of
from embedded.broker.v5.settings import V5Settings
from embedded.broker.v5.txn import keys
from embedded.broker.v5.txn.acks import AckConflict, PendingAcks
from embedded.broker.v5.txn.metrics import V5Metrics
from embedded.broker.v5.txn.participant import Participant
from embedded.broker.v5.txn.records import OpKind, TxnOp, TxnState
from embedded.broker.v5.txn.store import StoredOp, TxnMetadataStore
from embedded.metadata.model import MetadataError, MetadataUnavailable
from harness.wire import ServerError, TxnAction, TxnId

log = logging.getLogger(__name__)

_DECIDED_MEMORY = 10_000   # decided transactions remembered to refuse late acks without a header read


class MetadataPendingAckStore(Participant):
    def __init__(self, subscription: SubscriptionServices, store: TxnMetadataStore, settings: V5Settings,
                 metrics: V5Metrics) -> None:
        self._sub = subscription
        self._segment = str(subscription.topic.name)
        self._subscription = subscription.name
        super().__init__(f"{self._segment}|{self._subscription}", store, settings,
                         keys.subscription_events_parent(self._segment, self._subscription))
        self._metrics = metrics
        self._acks = PendingAcks()
        self._decided: dict[TxnId, TxnState] = {}
        self._durable = subscription.cursor.durable
        self._ready = False
        self.committed = 0
        self.aborted = 0
        self.lost = 0

    # ---- recovery -----------------------------------------------------------------------------

    async def recover(self) -> None:
        if not self._durable:
            self._ready = True
            return
        await self.feed.start()
        records = await self.store.acks_by_subscription(self._segment, self._subscription)
        by_txn: dict[TxnId, list[StoredOp]] = {}
        for stored in records:
            if stored.op.kind is OpKind.ACK:
                by_txn.setdefault(stored.txn, []).append(stored)
        headers = await asyncio.gather(*(self.store.get_header(t) for t in by_txn))
        decided = []
        for (txn, ops), got in zip(by_txn.items(), headers, strict=True):
            state = got[0].state if got is not None else TxnState.ABORTED
            self._hold_recorded(txn, ops)
            if state.terminal:
                decided.append((txn, state))
            else:
                self.track(txn)
        self._ready = True
        log.info("%s: recovered %d transactions with pending acks (%d already decided)", self.name,
                 len(by_txn), len(decided))
        for txn, state in decided:
            spawn(self._apply_quietly(txn, state), f"{self.name}: applying {txn}")
        self.feed.ready()
        self.start_reconciling()
        self._sub.wake()

    def _hold_recorded(self, txn: TxnId, ops: Sequence[StoredOp]) -> None:
        for stored in ops:
            op = stored.op
            position = Position(op.ledger_id, op.entry_id)
            if op.cumulative:
                self._acks.hold_cumulative(txn, TxnAck(position, op.ack_set))
            else:
                self._acks.hold_individual(txn, [TxnAck(position, op.ack_set)])

    async def _apply_quietly(self, txn: TxnId, state: TxnState) -> None:
        try:
            await self.materialize(txn, state)
        except (MetadataUnavailable, MetadataError) as err:
            log.info("%s: applying %s failed (%s); the reconcile retries", self.name, txn, err)

    # ---- acks ---------------------------------------------------------------------------------

    async def _authorize(self, txn: TxnId) -> None:
        if not self._durable:
            raise TxnError(ServerError.NotAllowedError,
                           f"transactional acks need a durable subscription; {self._subscription} is a reader")
        if not self._ready:
            raise TxnError(ServerError.ServiceNotReady, f"the pending acks of {self.name} are recovering")
        state = self._decided.get(txn)
        if state is None and self.settings.ack_reads_header and not self._acks.holds(txn):
            # model-only (txnbenchV5AckReadsHeader): 5.0 reads no header on the ack path
            try:
                got = await self.store.get_header(txn)
            except (MetadataUnavailable, MetadataError) as err:
                raise TxnError(ServerError.MetadataError, f"reading the header of {txn} failed: {err}") from None
            state = self._decided.get(txn) or (got[0].state if got is not None else TxnState.ABORTED)
        if state is not None and state.terminal:
            raise TxnError(ServerError.TransactionConflict,
                           f"{txn} is already {state.value}; its ack on {self._subscription} is refused")

    async def individual_ack(self, txn: TxnId, acks: Sequence[TxnAck]) -> None:
        await self._authorize(txn)
        acks = [a if a.ack_set is None else TxnAck(a.position, a.ack_set, await batch_size_of(self._sub, a))
                for a in acks]
        try:
            self._acks.check_individual(txn, acks, self._sub.cursor)
        except AckConflict as err:
            raise TxnError(ServerError.TransactionConflict, f"{self.name}: {err}") from None
        self._acks.hold_individual(txn, acks)
        self.track(txn)
        ops = [TxnOp.ack(self._segment, self._subscription, a.position.ledger_id, a.position.entry_id,
                         ack_set=tuple(a.ack_set) if a.ack_set is not None else None) for a in acks]
        await self._record(txn, ops)

    async def cumulative_ack(self, txn: TxnId, ack: TxnAck) -> None:
        await self._authorize(txn)
        position = ack.position
        try:
            self._acks.check_cumulative(txn, position, self._sub.cursor, ack.ack_set)
        except AckConflict as err:
            raise TxnError(ServerError.TransactionConflict, f"{self.name}: {err}") from None
        self._acks.hold_cumulative(txn, ack)
        self.track(txn)
        await self._record(txn, [TxnOp.ack(self._segment, self._subscription, position.ledger_id,
                                           position.entry_id, cumulative=True,
                                           ack_set=tuple(ack.ack_set) if ack.ack_set is not None else None)])

    async def _record(self, txn: TxnId, ops: list[TxnOp]) -> None:
        try:
            op_keys = await asyncio.gather(*(self.store.append_op(txn, op) for op in ops))
        except (MetadataUnavailable, MetadataError) as err:
            # as Pulsar does, the acks stay held: whether they were recorded is unknown until the txn ends
            raise TxnError(ServerError.MetadataError, f"recording the ack of {txn} on {self.name} failed: {err}") \
                from None
        decided = self._decided.get(txn)
        if decided is not None:   # decided while the records were written
            cursor = self._sub.cursor
            if decided is TxnState.COMMITTED and all(
                    cursor.is_acked(Position(op.ledger_id, op.entry_id)) for op in ops):
                return   # the commit found our records and applied them
            for key in op_keys:
                spawn(self.store.delete_key(key), f"dropping the late op record {key}")
            raise TxnError(ServerError.TransactionConflict,
                           f"{txn} was {decided.value} while its ack on {self.name} was being recorded")

    def check_plain_ack(self, positions: Sequence[Position], cumulative: bool) -> None:
        return None

    def is_pending(self, position: Position) -> bool:
        return self._acks.is_pending(position, self._sub.cursor.mark_delete_position)

    def held_cumulatively(self, position: Position) -> bool:
        return self._acks.held_cumulatively(position, self._sub.cursor.mark_delete_position)

    def pending_ack_set(self, position: Position) -> Sequence[int] | None:
        return self._acks.pending_ack_set(position)

    # ---- decisions ----------------------------------------------------------------------------

    def _remember(self, txn: TxnId, decision: TxnState) -> None:
        self._decided[txn] = decision
        while len(self._decided) > _DECIDED_MEMORY:
            self._decided.pop(next(iter(self._decided)))

    async def apply(self, txn: TxnId, decision: TxnState) -> None:
        first_time = txn not in self._decided
        self._remember(txn, decision)
        mine = [s for s in await self.store.ops_of(txn)
                if s.op.kind is OpKind.ACK and s.op.segment == self._segment
                and s.op.subscription == self._subscription]
        cursor = self._sub.cursor
        held = self._acks.release(txn)
        applied: set[Position] = set()
        if decision is TxnState.COMMITTED:
            for stored in mine:
                op = stored.op
                position = Position(op.ledger_id, op.entry_id)
                if op.cumulative:   # a batch message's: up to its index (the ack set), the rest stays
                    cursor.acknowledge_cumulative(position, list(op.ack_set) if op.ack_set is not None else None)
                else:
                    cursor.acknowledge([(position, list(op.ack_set) if op.ack_set is not None else None)])
                applied.add(position)
            await cursor.flush()
            lost = [p for p in held if p not in applied and not cursor.is_acked(p)]
            if lost:
                self.lost += len(lost)
                self._metrics.lost_acks.inc(len(lost))
                log.warning("%s: %s committed but the op records of %d held acks were gone (first %s); they are "
                            "delivered again", self.name, txn, len(lost), lost[0])
                self._sub.redeliver(lost)
        elif held:
            self._sub.redeliver(held)
        if first_time:
            if decision is TxnState.COMMITTED:
                self.committed += 1
            else:
                self.aborted += 1
            self._metrics.decisions.inc(participant="pending_ack", decision=decision.value)
        self._sub.wake()
        await asyncio.gather(*(self.store.delete_key(s.key) for s in mine))
        self.untrack(txn)

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        raise TxnError(ServerError.NotAllowedError,
                       f"{self.name} is a segment subscription: it learns transaction outcomes from the metadata "
                       "store (PIP-473), END_TXN_ON_SUBSCRIPTION is not used on the v5 path")

    # ---- lifecycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        if self._durable:
            await self.stop_participating()

    def stats(self) -> dict[str, Any]:
        return {"state": "Ready" if self._ready else "Initializing", "kind": "metadata (PIP-473)",
                **self._acks.stats(), "committed": self.committed, "aborted": self.aborted, "lostAcks": self.lost}


class MetadataPendingAckProvider:
    def __init__(self, store: TxnMetadataStore, settings: V5Settings, metrics: V5Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics

    def create(self, subscription: SubscriptionServices) -> MetadataPendingAckStore:
        return MetadataPendingAckStore(subscription, self.store, self.settings, self.metrics)
