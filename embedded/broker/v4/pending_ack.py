"""The v4 pending-ack handle of a subscription, on its pending-ack log (Pulsar's PendingAckHandleImpl + MLPendingAckStore).

Theory of operation. See `pending_ack_state` for the rules. The durable part is a log
of `PendingAckMetadataEntry` records on the managed ledger
`<topic>-<subscription>__transaction_pending_ack` (kind `pending-ack`, cursor
`__pending_ack_state`), written through a `TxnLogBufferedWriter` (PIP-160 batching when
`transactionPendingAckBatchedWriteEnabled`).

* A transactional ack is checked for conflicts and held at once (so a concurrent ack
  of the same message conflicts), then its ACK record is logged and the ack answered.
  If the log write fails the hold stays (Pulsar keeps it too: the outcome is unknown,
  the transaction will end by commit, abort or timeout).
* END_TXN_ON_SUBSCRIPTION logs COMMIT or ABORT, then a commit applies the held acks to
  the cursor, an abort makes the messages deliverable again (they are redelivered).
  Once the cursor has persisted a commit, all the transaction's records are deleted
  from the log (by batch index when batched).
* Recovery (the topic is loaded by a new owner): replay the log; transactions with a
  COMMIT record are applied to the cursor again (idempotent), the others stay held
  until their END_TXN_ON_SUBSCRIPTION comes.
* The log is opened lazily, on the first transactional ack of the subscription, or at
  load time when it exists. Non-durable subscriptions (readers) take no transactional acks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from embedded import planted_bugs
from embedded.broker.managed_ledger.api import CursorClosed, ManagedLedgerConfig, ManagedLedgerError
from embedded.broker.position import Position
from embedded.broker.topic_name import TopicDomain, TopicName
from embedded.broker.txn_api import SubscriptionServices, TxnAck, TxnError, batch_size_of
from embedded.broker.v4.batched_writer import LogPosition, TxnLogBufferedWriter
from embedded.broker.v4.metrics import V4Metrics
from embedded.broker.v4.pending_ack_state import (
    AckState,
    HeldAck,
    PendingAckState,
    TxnAcks,
    acked_bits,
)
from embedded.broker.v4.record_log import RecordLog
from embedded.broker.v4.records import (
    AckType,
    PendingAckMetadataEntry,
    PendingAckOp,
    pending_ack_record,
)
from embedded.broker.v4.settings import V4Settings
from embedded.ledger.model import LedgerKind
from harness.wire import ServerError, TxnAction, TxnId

log = logging.getLogger(__name__)

PENDING_ACK_SUFFIX = "__transaction_pending_ack"
PENDING_ACK_CURSOR = "__pending_ack_state"
_U64 = (1 << 64) - 1


def pending_ack_log_name(topic: TopicName, subscription: str) -> str:
    return TopicName(TopicDomain.PERSISTENT, topic.tenant, topic.namespace_part,
                     f"{topic.local_name}-{subscription}{PENDING_ACK_SUFFIX}").persistence_name


class PendingAckHandleImpl:
    def __init__(self, subscription: SubscriptionServices, settings: V4Settings, metrics: V4Metrics) -> None:
        self.subscription = subscription
        self.settings = settings
        self.metrics = metrics
        self.state = PendingAckState()
        self.status = "None"
        self.log: RecordLog | None = None
        self._opening: asyncio.Future[RecordLog] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    @property
    def _name(self) -> str:
        return pending_ack_log_name(self.subscription.topic.name, self.subscription.name)

    # ---- the log ------------------------------------------------------------------------------

    async def recover(self) -> None:
        if not self.subscription.cursor.durable:
            self.status = "Ready"
            return
        self.status = "Initializing"
        if await self.subscription.topic.broker.managed_ledgers.exists(self._name):
            store = await self._store()
            ended: list[tuple[TxnId, TxnAction, LogPosition]] = []

            def handle(at: LogPosition, data: bytes) -> None:
                try:
                    record = PendingAckMetadataEntry.FromString(data)
                except Exception as err:
                    log.error("%s: unreadable pending-ack record at %s (%s); skipped", self._name, at, err)
                    return
                self._replay(record, at, ended)

            count = await store.replay(handle)
            for txn, action, at in ended:
                self._finish(txn, action, at, replaying=True)
            log.info("%s: pending acks recovered from %d records: %d transactions hold acks", self._name, count,
                     len(self.state.txns))
        self.status = "Ready"

    def _replay(self, record: Any, at: LogPosition, ended: list[tuple[TxnId, TxnAction, LogPosition]]) -> None:
        txn = TxnId(record.txnid_most_bits, record.txnid_least_bits)
        op = PendingAckOp(record.pending_ack_op)
        if op is PendingAckOp.ACK:
            acks = [HeldAck(Position(m.ledgerId, m.entryId), tuple(w & _U64 for w in m.ack_set) or None,
                            m.batch_size) for m in record.pending_ack_metadata]
            if record.ack_type == AckType.Cumulative and acks:
                self.state.hold_cumulative(txn, acks[-1])
            else:
                cursor = self.subscription.cursor
                if planted_bugs.on(planted_bugs.V4_PENDING_ACK_REPLAY_DROPS_OPEN):
                    # DELIBERATE FAULT (txnbench self-test): the filter is inverted
                    self.state.hold_individual(txn, [a for a in acks if cursor.is_acked(a.position)])
                else:
                    self.state.hold_individual(txn, [a for a in acks if not cursor.is_acked(a.position)])
            self.state.record(txn, at)
            return
        if (op is PendingAckOp.ABORT and record.ack_type == AckType.Cumulative and self.state.cumulative is not None
                and planted_bugs.on(planted_bugs.V4_REPLAYED_ABORT_CLEARS_ANY_CUMULATIVE)):
            # DELIBERATE FAULT (txnbench self-test), half two: a replayed cumulative ABORT clears the
            # pending cumulative ack whoever holds it (Pulsar's handleAbort): its holder's commit then
            # finds nothing to apply and is answered OK
            holder = self.state.cumulative[0]
            if holder != txn:
                self.state.release(holder)
                return
        ended.append((txn, TxnAction.COMMIT if op is PendingAckOp.COMMIT else TxnAction.ABORT, at))

    async def _store(self) -> RecordLog:
        if self.log is not None:
            return self.log
        if self._closed:
            raise TxnError(ServerError.ServiceNotReady, f"subscription {self.subscription.name} is closing")
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
        try:
            return await asyncio.shield(self._opening)
        except TxnError:
            self._opening = None
            raise
        except Exception as err:
            self._opening = None
            raise TxnError(ServerError.ServiceNotReady, f"{self._name}: cannot open the pending-ack log ({err})") from None

    async def _open(self) -> RecordLog:
        config = ManagedLedgerConfig(kind=LedgerKind.PENDING_ACK, max_entries_per_ledger=self.settings.max_entries_per_ledger,
                                     trim_consumed=True)
        ml = await self.subscription.topic.broker.managed_ledgers.open(self._name, config)
        cursor = await ml.open_cursor(PENDING_ACK_CURSOR, initial_position=Position.EARLIEST)
        writer = TxnLogBufferedWriter(ml, self.settings.pending_ack_batching,
                                      metrics=self.metrics.broker.pending_ack_batched,
                                      metrics_label=self.metrics.broker_label)
        self.log = RecordLog(ml, cursor, writer)
        return self.log

    async def _append(self, record: Any) -> LogPosition:
        store = await self._store()
        try:
            return await store.append(record.SerializeToString())
        except ManagedLedgerError as err:
            raise TxnError(ServerError.PersistenceError, f"{self._name}: writing the pending-ack log failed ({err})") \
                from None

    # ---- acknowledgements ---------------------------------------------------------------------

    def _check_durable(self, txn: TxnId) -> None:
        if not self.subscription.cursor.durable:
            raise TxnError(ServerError.NotAllowedError,
                           f"transaction {txn}: subscription {self.subscription.name} is not durable (a reader); "
                           "transactional acknowledgements need a durable subscription")
        if self._closed:
            raise TxnError(ServerError.ServiceNotReady, f"subscription {self.subscription.name} is closing")

    async def individual_ack(self, txn: TxnId, acks: Sequence[TxnAck]) -> None:
        self._check_durable(txn)
        held: list[HeldAck] = []
        for ack in acks:
            if ack.ack_set is None:
                held.append(HeldAck(ack.position))
            else:
                size = await batch_size_of(self.subscription, ack)
                held.append(HeldAck(ack.position, tuple(w & _U64 for w in ack.ack_set), size))
        self.state.check_individual(txn, held, self.subscription.cursor)
        self.state.hold_individual(txn, held)
        record = pending_ack_record(PendingAckOp.ACK, txn.most, txn.least, AckType.Individual,
                                    [(h.position.ledger_id, h.position.entry_id, h.ack_set, h.batch_size) for h in held])
        at = await self._append(record)
        self._remember(txn, at)

    async def cumulative_ack(self, txn: TxnId, ack: TxnAck) -> None:
        self._check_durable(txn)
        position = ack.position
        self.state.check_cumulative(txn, position, self.subscription.cursor, ack.ack_set)
        if ack.ack_set is None:
            held = HeldAck(position)
        else:   # a batch message: the indexes after it stay (Pulsar keeps the AckSetPosition)
            held = HeldAck(position, tuple(w & _U64 for w in ack.ack_set), await batch_size_of(self.subscription, ack))
        self.state.hold_cumulative(txn, held)
        record = pending_ack_record(PendingAckOp.ACK, txn.most, txn.least, AckType.Cumulative,
                                    [(position.ledger_id, position.entry_id, held.ack_set, held.batch_size)])
        at = await self._append(record)
        self._remember(txn, at)

    def _remember(self, txn: TxnId, at: LogPosition) -> None:
        if not self.state.record(txn, at) and self.log is not None:
            self.log.delete([at])   # the transaction ended while its ACK record was being written

    def check_plain_ack(self, positions: Sequence[Position], cumulative: bool) -> None:
        return None   # Pulsar does not check plain acks against pending ones

    def is_pending(self, position: Position) -> bool:
        return self.state.is_pending(position)

    def held_cumulatively(self, position: Position) -> bool:
        return self.state.covered_by_cumulative(position) or self.state.cumulative_batch_at(position)

    def pending_ack_set(self, position: Position) -> Sequence[int] | None:
        return self.state.held_bits(position)

    def ack_state(self, position: Position) -> AckState:
        return self.state.state_of(position, self.subscription.cursor)

    # ---- ending transactions ------------------------------------------------------------------

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        if txn in self.state.txns:   # else nothing of it is held here (already ended, or it never acked here)
            await self._end(txn, action)
        elif (action is TxnAction.ABORT and self.state.cumulative is not None
              and planted_bugs.on(planted_bugs.V4_REPLAYED_ABORT_CLEARS_ANY_CUMULATIVE)):
            # DELIBERATE FAULT (txnbench self-test), half one: the abort of a transaction that holds
            # nothing here (its cumulative ack was refused) is logged while another holds the cumulative
            # ack, as Pulsar's internalAbortTxn does
            await self._append(pending_ack_record(PendingAckOp.ABORT, txn.most, txn.least, AckType.Cumulative))
        if low_watermark is not None:
            self._low_watermark(txn.most, low_watermark)

    async def _end(self, txn: TxnId, action: TxnAction) -> None:
        held = self.state.txns.get(txn)
        if held is None:
            return
        op = PendingAckOp.COMMIT if action is TxnAction.COMMIT else PendingAckOp.ABORT
        cumulative = held.cumulative is not None
        record = pending_ack_record(op, txn.most, txn.least, AckType.Cumulative if cumulative else AckType.Individual)
        at = await self._append(record)
        self._finish(txn, action, at, replaying=False)

    def _low_watermark(self, tc_id: int, low_watermark: int) -> None:
        """Abort what a coordinator says has ended but whose END_TXN_ON_SUBSCRIPTION never came (handleLowWaterMark)."""
        for stale in [t for t in self.state.txns if t.most == tc_id and t.least <= low_watermark]:
            log.warning("%s: %s is below its coordinator's low watermark %d; aborting its pending acks", self._name,
                        stale, low_watermark)
            self._spawn(self._end(stale, TxnAction.ABORT))

    def _finish(self, txn: TxnId, action: TxnAction, at: LogPosition, *, replaying: bool) -> None:
        released = self.state.release(txn)
        if released is None:
            if self.log is not None:
                self.log.delete([at])
            return
        if action is TxnAction.COMMIT:
            self._apply(released)
        elif not replaying:
            self._release(released)
        self.subscription.wake()
        self._spawn(self._forget(released, at, action is TxnAction.COMMIT))

    def _apply(self, acks: TxnAcks) -> None:
        cursor = self.subscription.cursor
        if acks.individual and planted_bugs.on(planted_bugs.V4_COMMIT_ACKS_WHOLE_BATCH):
            # DELIBERATE FAULT (txnbench self-test): a commit acknowledges the whole entry of every
            # batch-index ack, the batch's other messages with it
            cursor.acknowledge([(p, None) for p in sorted(acks.individual)])
        elif acks.individual:
            cursor.acknowledge([(p, _limited(a)) for p, a in sorted(acks.individual.items())])
        if acks.cumulative is not None:
            cursor.acknowledge_cumulative(acks.cumulative.position, _limited(acks.cumulative))

    def _release(self, acks: TxnAcks) -> None:
        positions = sorted(acks.individual)
        if acks.cumulative is not None:
            positions.append(acks.cumulative.position)
        if positions:
            self.subscription.redeliver(positions)

    async def _forget(self, acks: TxnAcks, at: LogPosition, committed: bool) -> None:
        """Delete the transaction's records once what they protect is durable elsewhere."""
        if committed and planted_bugs.on(planted_bugs.V4_PENDING_ACK_FORGETS_EARLY):
            # DELIBERATE FAULT (txnbench self-test): the records are deleted, and the deletion
            # made durable, before the subscription's cursor has persisted the acks
            if self.log is not None:
                self.log.delete([*acks.log_positions, at])
                with contextlib.suppress(Exception):
                    await self.log.cursor.flush()
            return
        if committed:
            try:
                await self.subscription.cursor.flush()
            except CursorClosed:
                return   # not persisted: keep the records, the next owner replays them
        if self.log is not None:
            self.log.delete([*acks.log_positions, at])

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- closing and stats --------------------------------------------------------------------

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 2.0)
        if self._opening is not None and not self._opening.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._opening), 5.0)
        if self.log is not None:
            with contextlib.suppress(Exception):
                await self.log.close()
        self.status = "Close"

    def stats(self) -> dict[str, Any]:
        return {"state": self.status, "ongoingTxnSize": len(self.state.txns),
                "pendingAckPositions": len(self.state.whole) + len(self.state.partial),
                "cumulativePendingAck": str(self.state.cumulative[1].position) if self.state.cumulative else None,
                "batchedWriteEnabled": self.settings.pending_ack_batching.enabled}


def _limited(ack: HeldAck) -> list[int] | None:
    """The ack set to apply to the cursor: unacknowledged bits of this ack, only within the batch."""
    if ack.ack_set is None:
        return None
    acked = acked_bits(ack.ack_set, ack.batch_size)
    limit = [(1 << 64) - 1] * len(acked)
    if ack.batch_size % 64:
        limit[-1] = (1 << (ack.batch_size % 64)) - 1
    return [(~a) & m for a, m in zip(acked, limit, strict=True)]


class PendingAckHandleProvider:
    def __init__(self, settings: V4Settings, metrics: V4Metrics) -> None:
        self.settings = settings
        self.metrics = metrics

    def create(self, subscription: SubscriptionServices) -> PendingAckHandleImpl:
        return PendingAckHandleImpl(subscription, self.settings, self.metrics)
