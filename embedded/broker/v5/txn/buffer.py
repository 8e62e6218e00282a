"""`MetadataTransactionBuffer`: the PIP-473 transaction buffer of a `segment://` topic.

Theory of operation (Pulsar 5.0's `MetadataTransactionBuffer`):

* Publish: the header state is read cache-first (a decided transaction is refused with
  TransactionConflict, the PIP's late-write rule), then one op record is written
  *before* the managed-ledger append, so no entry of the segment is ever without a
  record that recovery can find. Appends are issued in the order the SENDs arrived,
  whatever order their op writes complete in (the producer's log order).
* Nothing is written to the data ledger to commit or abort, so a sealed (terminated)
  segment never blocks the end of a transaction.
* Visibility (`SegmentVisibility`): dispatchers read up to just before the first entry
  of the lowest OPEN transaction; aborted transactions' entries are skipped. Listeners
  are told whenever the horizon moves or an abort makes entries skippable, so
  dispatchers wake up instead of polling (the review's dispatcher point).
* Decisions arrive as segment events. Materializing one is metadata work only: the
  in-memory state first (entries become visible at once), then for an abort the durable
  aborted record (`isTxnAborted` must keep answering after the header is collected),
  the watermark, and the deletion of this segment's op records of the transaction.
* Recovery reads the watermark, the aborted records and the segment's op records
  (`idx:writes-by-segment`) with their headers; no log is replayed. Transactions that
  were OPEN pin the horizon at the watermark until they are decided.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from embedded import planted_bugs
from embedded.broker.entry import EntryInfo
from embedded.broker.position import Position
from embedded.broker.tasks import spawn
from embedded.broker.txn_api import ChangeListener, ChangeListeners, TopicServices, TxnError
from embedded.broker.v5.settings import V5Settings
from embedded.broker.v5.txn import keys
from embedded.broker.v5.txn.metrics import V5Metrics
from embedded.broker.v5.txn.participant import Participant
from embedded.broker.v5.txn.records import OpKind, SegmentWatermark, TxnOp, TxnState
from embedded.broker.v5.txn.store import TxnMetadataStore
from embedded.broker.v5.txn.visibility import SegmentVisibility
from embedded.metadata.model import BadVersion, MetadataError, MetadataUnavailable
from harness.wire import ServerError, TxnAction, TxnId

log = logging.getLogger(__name__)


def _conflict(txn: TxnId, state: TxnState, segment: str) -> TxnError:
    return TxnError(ServerError.TransactionConflict,
                    f"{txn} is already {state.value}; a write to {segment} after the transaction ended is refused")


class MetadataTransactionBuffer(Participant):
    def __init__(self, topic: TopicServices, store: TxnMetadataStore, settings: V5Settings,
                 metrics: V5Metrics) -> None:
        self._topic = topic
        self._segment = str(topic.name)
        super().__init__(self._segment, store, settings, keys.segment_events_parent(self._segment))
        self._ml = topic.ledger
        self._metrics = metrics
        self._listeners = ChangeListeners()
        self._vis = SegmentVisibility(self._ml.last_confirmed)
        self._ready = False
        self._issue_tail: asyncio.Future[None] | None = None
        self._watermark: Position | None = None
        self._watermark_version = -1
        self._watermark_task: asyncio.Task[None] | None = None
        self._watermark_again = False
        self.committed = 0
        self.aborted = 0

    # ---- recovery -----------------------------------------------------------------------------

    async def recover(self) -> None:
        await self.feed.start()
        store, segment = self.store, self._segment
        found = await store.get_watermark(segment)
        if found is not None:
            mark, self._watermark_version = found
            self._watermark = Position(mark.ledger_id, mark.entry_id)
        vis = SegmentVisibility(self._ml.last_confirmed, pin=self._watermark or Position.EARLIEST)
        for txn in await store.aborted_of(segment):
            if planted_bugs.on(planted_bugs.V5_RECOVERY_FORGETS_ABORTED):
                break   # DELIBERATE FAULT (txnbench self-test): the aborted records are not read
            vis.recovered_aborted(txn)
        txns = {op.txn for op in await store.writes_by_segment(segment) if op.op.kind is OpKind.WRITE}
        headers = await asyncio.gather(*(store.get_header(t) for t in txns))
        decided: list[tuple[TxnId, TxnState]] = []
        for txn, got in zip(txns, headers, strict=True):
            state = got[0].state if got is not None else TxnState.ABORTED
            vis.recovered(txn, state)
            if state.terminal:
                decided.append((txn, state))
            else:
                self.track(txn)
        vis.finish_recovery()
        self._vis = vis
        self._ready = True
        log.info("%s: recovered (watermark %s, %d open, %d decided to clean up, %d aborted)", segment,
                 self._watermark, vis.recovered_open_count, len(decided), vis.aborted_count)
        for txn, state in decided:
            spawn(self._cleanup_quietly(txn, state), f"{segment}: cleaning up {txn}")
        self.feed.ready()
        self.start_reconciling()

    async def _cleanup_quietly(self, txn: TxnId, state: TxnState) -> None:
        try:
            await self.materialize(txn, state)
        except (MetadataUnavailable, MetadataError) as err:
            log.info("%s: cleanup of %s failed (%s); the reconcile or GC retries", self._segment, txn, err)

    # ---- publishing ---------------------------------------------------------------------------

    async def append(self, txn: TxnId, data: bytes, info: EntryInfo) -> Position:
        loop = asyncio.get_running_loop()
        previous, issued = self._issue_tail, loop.create_future()
        self._issue_tail = issued
        try:
            await self._authorize(txn)
            try:
                key = await self.store.append_op(txn, TxnOp.write(self._segment))
            except (MetadataUnavailable, MetadataError) as err:
                raise TxnError(ServerError.MetadataError,
                               f"recording the write of {txn} on {self._segment} failed: {err}") from None
            state = self._vis.state_of(txn)
            if state is not None and state.terminal:   # decided while the op record was written
                spawn(self.store.delete_key(key), f"dropping the late op record {key}")
                raise _conflict(txn, state, self._segment)
            if previous is not None:
                await asyncio.shield(previous)
            future = self._ml.append(data, info)
        finally:
            if not issued.done():
                issued.set_result(None)
        return await future

    async def _authorize(self, txn: TxnId) -> None:
        if not self._ready:
            raise TxnError(ServerError.ServiceNotReady, f"the transaction buffer of {self._segment} is recovering")
        state = self._vis.state_of(txn)
        if state is None:
            try:
                got = await self.store.get_header(txn)
            except (MetadataUnavailable, MetadataError) as err:
                raise TxnError(ServerError.MetadataError, f"reading the header of {txn} failed: {err}") from None
            state = self._vis.state_of(txn) or (got[0].state if got is not None else TxnState.ABORTED)
        if state.terminal:
            raise _conflict(txn, state, self._segment)
        self._vis.begin(txn)
        self.track(txn)

    def on_entry_added(self, position: Position, info: EntryInfo) -> None:
        if self._vis.entry_added(position, info.txn):
            self._listeners.fire()
        if info.txn is None and self._ready:
            self._schedule_watermark()

    # ---- what dispatchers ask ------------------------------------------------------------------

    def max_read_position(self) -> Position:
        return self._vis.horizon

    def is_aborted(self, txn: TxnId, position: Position) -> bool:
        return self._vis.is_aborted(txn)

    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        self._listeners.remove(listener)

    # ---- decisions ----------------------------------------------------------------------------

    async def apply(self, txn: TxnId, decision: TxnState) -> None:
        if planted_bugs.on(planted_bugs.V5_SEALED_SEGMENT_STOPS_LISTENING) and self._ml.terminated_position is not None:
            # DELIBERATE FAULT (txnbench self-test): a sealed segment ignores decisions
            log.info("%s: sealed; ignoring the decision of %s", self._segment, txn)
            return
        effect = self._vis.decide(txn, decision)
        if effect.horizon_moved or effect.aborted:
            self._listeners.fire()
        if effect.applied:
            if decision is TxnState.COMMITTED:
                self.committed += 1
            else:
                self.aborted += 1
            self._metrics.decisions.inc(participant="buffer", decision=decision.value)
        if decision is TxnState.ABORTED:
            last = effect.last_position or self._ml.last_confirmed
            await self.store.put_aborted(self._segment, txn, last)
        self._schedule_watermark()
        mine = [s for s in await self.store.ops_of(txn)
                if s.op.kind is OpKind.WRITE and s.op.segment == self._segment]
        await asyncio.gather(*(self.store.delete_key(s.key) for s in mine))
        self._vis.forget(txn)
        self.untrack(txn)

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        raise TxnError(ServerError.NotAllowedError,
                       f"{self._segment} is a segment topic: it learns transaction outcomes from the metadata store "
                       "(PIP-473), END_TXN_ON_PARTITION is not used on the v5 path")

    # ---- the watermark ------------------------------------------------------------------------

    def _schedule_watermark(self) -> None:
        """Persist the resolved-below position, one write at a time, coalescing requests."""
        if self.closed:
            return
        if self._watermark_task is not None and not self._watermark_task.done():
            self._watermark_again = True
            return
        self._watermark_task = spawn(self._persist_watermark(), f"{self._segment}: watermark")

    async def _persist_watermark(self) -> None:
        for _ in range(100):   # bounded: each round writes at most once
            self._watermark_again = False
            target = self._vis.watermark()
            if target is not None and (self._watermark is None or target > self._watermark):
                try:
                    self._watermark_version = await self.store.put_watermark(
                        self._segment, SegmentWatermark(target.ledger_id, target.entry_id), self._watermark_version)
                    self._watermark = target
                except BadVersion:
                    found = await self.store.get_watermark(self._segment)
                    if found is not None:
                        mark, self._watermark_version = found
                        self._watermark = Position(mark.ledger_id, mark.entry_id)
                    self._watermark_again = True
                except (MetadataUnavailable, MetadataError) as err:
                    log.info("%s: persisting the watermark failed (%s); the next change retries", self._segment, err)
                    return
            if not self._watermark_again or self.closed:
                return

    # ---- lifecycle ----------------------------------------------------------------------------

    async def close(self) -> None:
        await self.stop_participating()
        if self._watermark_task is not None:
            self._watermark_task.cancel()

    def stats(self) -> dict[str, Any]:
        return {"state": "Ready" if self._ready else "Initializing", "kind": "metadata (PIP-473)",
                "maxReadPosition": str(self._vis.horizon), "lastEntry": str(self._vis.last_entry),
                "ongoingTxnCount": len(self._vis.open_transactions()),
                "recoveredOpenTxnCount": self._vis.recovered_open_count,
                "abortedTxnCount": self._vis.aborted_count, "committed": self.committed, "aborted": self.aborted,
                "watermark": str(self._watermark) if self._watermark else None}


class MetadataTransactionBufferProvider:
    def __init__(self, store: TxnMetadataStore, settings: V5Settings, metrics: V5Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics

    def create(self, topic: TopicServices) -> MetadataTransactionBuffer:
        return MetadataTransactionBuffer(topic, self.store, self.settings, self.metrics)
