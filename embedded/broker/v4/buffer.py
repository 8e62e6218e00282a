"""The v4 transaction buffer of a persistent topic (Pulsar's TopicTransactionBuffer).

Theory of operation. See `buffer_state` for the bookkeeping; this module does the I/O.

* Appends: a transactional SEND is appended to the topic's own managed ledger (the
  entry carries the transaction id in its MessageMetadata, as the client sent it).
  The topic calls `on_entry_added` for every confirmed entry, in log order, which
  keeps `max_read_position` just before the oldest open transaction.
* END_TXN_ON_PARTITION appends a marker entry (MessageMetadata with `marker_type`
  TXN_COMMIT or TXN_ABORT, the transaction id, producer `pulsar.marker`, no payload,
  as Pulsar's `Markers.newTxnCommitMarker` writes it), then moves the horizon and
  tells the listeners (the dispatchers wake up). A terminated topic refuses the append,
  so the marker is never written and the request fails with PersistenceError: the
  coordinator retries forever and the transaction never completes (the stall PIP-473
  fixes; faithful on purpose).
* Snapshots: `max_read` and the aborted transactions go to a managed ledger of kind
  `tb-snapshot` (`<topic>__transaction_buffer_snapshot`) every
  `transactionBufferSnapshotMaxTransactionCount` horizon moves, or every
  `transactionBufferSnapshotMinTimeInMillis` when it moved at all. A topic no
  transaction ever wrote to has no snapshot (state NoSnapshot); the first transactional
  append takes one first, so a topic with transactional entries always has one.
* Recovery (a new owner loads the topic): read the last snapshot, then replay the
  data ledger after its `max_read` up to the last entry; the topic serves nobody until
  this is done.

Simplifications (README): the snapshot log is per topic (Pulsar keeps one compacted
system topic per namespace, written through a producer); aborted transactions are
never trimmed (data topics keep all their ledgers here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from embedded.broker.entry import EntryInfo
from embedded.broker.managed_ledger.api import (
    ManagedLedgerApi,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerTerminated,
)
from embedded.broker.position import Position
from embedded.broker.topic_name import TopicDomain, TopicName
from embedded.broker.txn_api import ChangeListener, ChangeListeners, TopicServices, TxnError
from embedded.broker.v4.buffer_state import BufferState, TbState
from embedded.broker.v4.settings import V4Settings
from embedded.ledger.model import LedgerKind
from harness.wire import (
    MarkerType,
    MessageFormatError,
    Payload,
    ServerError,
    TxnAction,
    TxnId,
    commands,
)

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = "__transaction_buffer_snapshot"
MARKER_PRODUCER = "pulsar.marker"
_U64_MINUS_ONE = (1 << 64) - 1    # Java's -1L sequence id, as the uint64 field holds it
REPLAY_READ_BATCH = 100


def snapshot_log_name(topic: TopicName) -> str:
    return TopicName(TopicDomain.PERSISTENT, topic.tenant, topic.namespace_part,
                     f"{topic.local_name}{SNAPSHOT_SUFFIX}").persistence_name


def marker_entry(txn: TxnId, action: TxnAction) -> bytes:
    marker = MarkerType.TXN_COMMIT if action is TxnAction.COMMIT else MarkerType.TXN_ABORT
    meta = commands.message_metadata(MARKER_PRODUCER, _U64_MINUS_ONE, int(time.time() * 1000), txn=txn,
                                     marker_type=marker)
    return bytes(Payload.build(meta, b"").entry)


def marker_type_of(data: bytes) -> int | None:
    try:
        meta = Payload.parse(data, verify=False).metadata
    except MessageFormatError:
        return None
    return int(meta.marker_type) if meta.HasField("marker_type") else None


def previous_position(ml: Any, position: Position) -> Position:
    """The entry before `position` (Pulsar's getPreviousPosition), across ledgers."""
    if position.entry_id > 0:
        return Position(position.ledger_id, position.entry_id - 1)
    infos = getattr(ml, "ledger_infos", None)
    if infos is not None:
        for info in reversed(infos()):
            if info["ledgerId"] < position.ledger_id and (info["entries"] or 0) > 0:
                return Position(info["ledgerId"], info["entries"] - 1)
    return Position(position.ledger_id, -1)


class TopicTransactionBuffer:
    def __init__(self, topic: TopicServices, settings: V4Settings) -> None:
        self.topic = topic
        self.settings = settings
        ml = topic.ledger
        self.ml = ml
        self.state = BufferState(lambda p: previous_position(ml, p), ml.last_confirmed)
        self.status = TbState.NONE
        self._listeners = ChangeListeners()
        self._snapshot_ml: ManagedLedgerApi | None = None
        self._snapshot_lock = asyncio.Lock()
        self._snapshot_sequence = 0
        self._snapshot_timer: asyncio.TimerHandle | None = None
        self._first_snapshot: asyncio.Future[None] | None = None
        self._lwm_abort: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.last_snapshot_ms = 0
        self.recover_start_ms = 0
        self.recover_end_ms = 0

    # ---- recovery -----------------------------------------------------------------------------

    async def recover(self) -> None:
        self.status = TbState.INITIALIZING
        self.recover_start_ms = int(time.time() * 1000)
        factory = self.topic.broker.managed_ledgers
        name = snapshot_log_name(self.topic.name)
        snapshot: dict[str, Any] | None = None
        if await factory.exists(name):
            self._snapshot_ml = await factory.open(name, self._snapshot_config())
            last = self._snapshot_ml.last_confirmed
            if last.entry_id >= 0:
                snapshot = json.loads((await self._snapshot_ml.read_entry(last)).data)
                self._snapshot_sequence = int(snapshot.get("sequenceId", 0))
        if snapshot is None:
            self.state.max_read = self.ml.last_confirmed
            self.status = TbState.NO_SNAPSHOT
        else:
            start = self.state.restore(snapshot)
            await self._replay_after(start)
            self.state.recompute(self.ml.last_confirmed)
            self.status = TbState.READY
            self._arm_snapshot_timer()
        self.state.changes = 0
        self.recover_end_ms = int(time.time() * 1000)
        log.info("%s: transaction buffer %s (max read %s, %d open, %d aborted) in %d ms", self.topic.name,
                 self.status.value, self.state.max_read, len(self.state.ongoing), len(self.state.aborted),
                 self.recover_end_ms - self.recover_start_ms)

    async def _replay_after(self, start: Position) -> None:
        last = self.ml.last_confirmed
        position = self.ml.next_position(start)
        for _ in range(10_000_000):   # bounded: each round reads at least one entry or stops
            if position > last:
                return
            entries = await self.ml.read(position, REPLAY_READ_BATCH, max_position=last)
            if not entries:
                return
            for entry in entries:
                txn = entry.info.txn
                if txn is not None:
                    marker = marker_type_of(entry.data) if entry.info.marker else None
                    self.state.replay(entry.position, txn, marker)
            position = self.ml.next_position(entries[-1].position)

    def _snapshot_config(self) -> ManagedLedgerConfig:
        return ManagedLedgerConfig(kind=LedgerKind.TB_SNAPSHOT, max_entries_per_ledger=self.settings.max_entries_per_ledger)

    # ---- the horizon --------------------------------------------------------------------------

    def on_entry_added(self, position: Position, info: EntryInfo) -> None:
        if self.state.on_entry(position, info.txn, info.marker):
            self._listeners.fire()

    def max_read_position(self) -> Position:
        if self.status in (TbState.READY, TbState.NO_SNAPSHOT):
            return self.state.max_read
        return Position.EARLIEST

    def is_aborted(self, txn: TxnId, position: Position) -> bool:
        return txn in self.state.aborted

    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        self._listeners.remove(listener)

    # ---- appends ------------------------------------------------------------------------------

    async def append(self, txn: TxnId, data: bytes, info: EntryInfo) -> Position:
        if self.status is TbState.CLOSED:
            raise TxnError(ServerError.ServiceNotReady, f"{self.topic.name} is closing")
        if self.state.below_low_watermark(txn):
            raise TxnError(ServerError.NotAllowedError, f"Transaction [{txn}] has been ended. Please use a new "
                                                        "transaction to send message.")
        if self.status is TbState.NO_SNAPSHOT:
            await self._take_first_snapshot()
        return await self.ml.append(data, info)

    async def _take_first_snapshot(self) -> None:
        """Pulsar's checkIfTBRecoverCompletely: the first transaction on a topic snapshots first."""
        if self._first_snapshot is None:
            self._first_snapshot = asyncio.ensure_future(self._snapshot())
        try:
            await asyncio.shield(self._first_snapshot)
        except Exception as err:
            self._first_snapshot = None
            raise TxnError(ServerError.PersistenceError,
                           f"{self.topic.name}: the transaction buffer snapshot could not be written ({err})") from None
        if self.status is TbState.NO_SNAPSHOT:
            self.status = TbState.READY
            self._arm_snapshot_timer()

    # ---- ending transactions ------------------------------------------------------------------

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        if self.status is TbState.CLOSED:
            raise TxnError(ServerError.ServiceNotReady, f"{self.topic.name} is closing; try again on its new owner")
        if action is TxnAction.ABORT and self.status is TbState.NO_SNAPSHOT:
            self._low_watermark(txn, low_watermark)   # nothing of it was ever written here
            return
        await self._write_marker(txn, action)
        self._low_watermark(txn, low_watermark)
        if self.state.changes >= self.settings.snapshot_max_txn_count:
            self._spawn(self._snapshot())

    async def _write_marker(self, txn: TxnId, action: TxnAction) -> None:
        try:
            position = await self.ml.append(marker_entry(txn, action), EntryInfo(1, txn, True))
        except ManagedLedgerTerminated as err:
            raise TxnError(ServerError.PersistenceError,
                           f"{self.topic.name} is terminated: the {action.name.lower()} marker of {txn} cannot be "
                           f"written ({err})") from None
        except ManagedLedgerError as err:
            raise TxnError(ServerError.PersistenceError,
                           f"{self.topic.name}: writing the {action.name.lower()} marker of {txn} failed ({err})") from None
        if self.state.on_end(txn, action, position, self.ml.last_confirmed):
            self._listeners.fire()
        elif action is TxnAction.ABORT:
            self._listeners.fire()   # its entries are skippable now

    def _low_watermark(self, txn: TxnId, low_watermark: int | None) -> None:
        if low_watermark is None:
            return
        self.state.raise_low_watermark(txn.most, low_watermark)
        stale = self.state.stale_first()
        if stale is not None and (self._lwm_abort is None or self._lwm_abort.done()):
            log.warning("%s: %s is below its coordinator's low watermark %d; aborting it here", self.topic.name,
                        stale, low_watermark)
            self._lwm_abort = asyncio.ensure_future(self._write_marker(stale, TxnAction.ABORT))
            self._lwm_abort.add_done_callback(lambda t: t.cancelled() or t.exception())

    # ---- snapshots ----------------------------------------------------------------------------

    def _arm_snapshot_timer(self) -> None:
        if self._snapshot_timer is not None or self.status is TbState.CLOSED:
            return
        interval = self.settings.snapshot_min_interval_ms / 1000.0
        self._snapshot_timer = asyncio.get_running_loop().call_later(interval, self._on_snapshot_timer)

    def _on_snapshot_timer(self) -> None:
        self._snapshot_timer = None
        if self.status is not TbState.READY:
            return
        if self.state.changes > 0:
            self._spawn(self._snapshot())
        self._arm_snapshot_timer()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("%s: transaction buffer snapshot failed: %s", self.topic.name, t.exception())

        task.add_done_callback(done)

    async def _snapshot(self) -> None:
        async with self._snapshot_lock:
            if self._snapshot_ml is None:
                self._snapshot_ml = await self.topic.broker.managed_ledgers.open(
                    snapshot_log_name(self.topic.name), self._snapshot_config())
            self._snapshot_sequence += 1
            changes = self.state.changes
            record = self.state.snapshot(str(self.topic.name), self._snapshot_sequence)
            await self._snapshot_ml.append(json.dumps(record, separators=(",", ":")).encode())
            self.state.changes = max(0, self.state.changes - changes)
            self.last_snapshot_ms = int(time.time() * 1000)

    # ---- closing and stats --------------------------------------------------------------------

    async def close(self) -> None:
        self.status = TbState.CLOSED
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
            self._snapshot_timer = None
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 2.0)
        if self._snapshot_ml is not None:
            with contextlib.suppress(Exception):
                await self._snapshot_ml.close()

    def stats(self) -> dict[str, Any]:
        """Pulsar's TransactionBufferStats."""
        return {
            "state": self.status.value,
            "maxReadPosition": str(self.state.max_read),
            "lastSnapshotTimestamps": self.last_snapshot_ms,
            "ongoingTxnSize": len(self.state.ongoing),
            "abortedTxnSize": len(self.state.aborted),
            "committedCount": self.state.committed_count,
            "abortedCount": self.state.aborted_count,
            "lowWaterMarks": {str(k): v for k, v in self.state.low_watermarks.items()},
            "recoverStartTime": self.recover_start_ms,
            "recoverEndTime": self.recover_end_ms,
        }


class TopicTransactionBufferProvider:
    def __init__(self, settings: V4Settings) -> None:
        self.settings = settings

    def create(self, topic: TopicServices) -> TopicTransactionBuffer:
        return TopicTransactionBuffer(topic, self.settings)
