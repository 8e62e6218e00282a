"""One v4 transaction coordinator: its log, its requests, its timeouts, its recovery.

Theory of operation (Pulsar's MLTransactionMetadataStore driven by
TransactionMetadataStoreService). Coordinator i keeps its log on the managed ledger
`persistent://pulsar/system/__transaction_log_<i>` (kind `txn-log`, cursor
`transaction.subscription`). Loading opens the log (fencing the previous owner's
ledger), replays it (`CoordinatorState.replay`), and measures how long that took
(`pulsar_txn_coordinator_recovery_seconds`); then it serves requests, starts the
timeout sweeper, and completes in the background every transaction whose decision
(COMMITTING/ABORTING) was logged but not finished.

Requests (every change is logged before it is answered):

* NEW_TXN: next sequence -> NEW record -> the id.
* ADD_PARTITION_TO_TXN / ADD_SUBSCRIPTION_TO_TXN: only while OPEN; the participant
  is remembered at once (so a concurrent end includes it), then the record is logged.
* END_TXN: OPEN -> COMMITTING/ABORTING in memory, then the UPDATE record (the
  decision), then every participant is told (`EndTxnFanOut`), then COMMITTED/ABORTED
  is logged, the transaction is forgotten and its records deleted, and the client is
  answered, as Pulsar does. When a participant fails the client gets the error at
  once (its outcome is unknown), and the coordinator retries the completion every
  `txnbenchTxnEndRetryIntervalMillis` while the error is retryable. Another END_TXN
  with the same action joins the completion in progress (or re-drives it now).
* Timeouts: an OPEN transaction past its deadline becomes TIME_OUT, then ABORTING is
  logged (counted in `pulsar_txn_timeout_total`) and it is aborted like any other.

Errors: a coordinator that is not ready (loading, closed, moved) answers
TransactionCoordinatorNotFound for requests that changed nothing, so clients look it
up again; once an END_TXN's decision may be logged, failures are answered with an
error that leaves the outcome unknown. If the log is fenced (another broker took
the coordinator over), the coordinator closes itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from embedded import planted_bugs
from embedded.broker.managed_ledger.api import (
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
)
from embedded.broker.position import Position
from embedded.broker.topic_name import InvalidTopicName, TopicName
from embedded.broker.txn_api import BrokerContext, TxnError
from embedded.broker.v4.batched_writer import LogPosition, TxnLogBufferedWriter, WriterClosed
from embedded.broker.v4.coordinator_state import (
    CoordinatorState,
    EndDecision,
    TxnMeta,
    TxnState,
    ending_state,
    final_state,
)
from embedded.broker.v4.fanout import EndTxnFailed, EndTxnFanOut
from embedded.broker.v4.metrics import V4Metrics
from embedded.broker.v4.record_log import RecordLog
from embedded.broker.v4.records import TransactionMetadataEntry, TransactionMetadataOp, txn_record
from embedded.broker.v4.settings import V4Settings
from embedded.ledger.model import LedgerKind
from harness.wire import ServerError, TxnAction, TxnId

log = logging.getLogger(__name__)

TRANSACTION_LOG_PREFIX = "__transaction_log_"
TRANSACTION_LOG_CURSOR = "transaction.subscription"
MAX_END_RETRIES = 86_400   # a day at Pulsar's one retry per second: "forever" for a benchmark, yet bounded
# The planted bug V4_COMMIT_STALLS_AFTER_MARKERS (off unless a self-test switches it on): which commits it
# stalls (sequence numbers `least % PLANTED_STALL_ONE_IN == PLANTED_STALL_PICK`, so a recovered coordinator stalls the same
# ones again), and for how long (longer than any run: "never", yet bounded)
PLANTED_STALL_ONE_IN = 50
PLANTED_STALL_PICK = 17
PLANTED_STALL_S = 3600.0


def log_topic(tc_id: int) -> TopicName:
    return TopicName.parse(f"persistent://pulsar/system/{TRANSACTION_LOG_PREFIX}{tc_id}")


def wall_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorStatus(enum.Enum):
    NONE = "None"
    INITIALIZING = "Initializing"
    READY = "Ready"
    CLOSED = "Close"


class TransactionCoordinator:
    def __init__(self, tc_id: int, broker: BrokerContext, settings: V4Settings, metrics: V4Metrics,
                 fanout: EndTxnFanOut, *, on_fenced: Callable[[int], None] | None = None,
                 clock_ms: Callable[[], int] = wall_ms) -> None:
        self.tc_id = tc_id
        self.broker = broker
        self.settings = settings
        self.metrics = metrics
        self.fanout = fanout
        self.state = CoordinatorState(tc_id)
        self.status = CoordinatorStatus.NONE
        self.log: RecordLog | None = None
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        self.recovery_seconds = 0.0
        self._label = str(tc_id)
        self._on_fenced = on_fenced
        self._clock_ms = clock_ms
        self._ending: dict[int, asyncio.Task[None]] = {}
        self._retries: dict[int, asyncio.TimerHandle] = {}
        self._attempts: dict[int, int] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_wake = asyncio.Event()

    # ---- loading and closing ------------------------------------------------------------------

    async def load(self) -> None:
        """Open and replay the log; afterwards the coordinator serves requests."""
        self.status = CoordinatorStatus.INITIALIZING
        self.recover_start_ms = wall_ms()
        started = time.monotonic()
        config = ManagedLedgerConfig(kind=LedgerKind.TXN_LOG, max_entries_per_ledger=self.settings.max_entries_per_ledger,
                                     trim_consumed=False)
        ml = await self.broker.managed_ledgers.open(log_topic(self.tc_id).persistence_name, config)
        try:
            cursor = await ml.open_cursor(TRANSACTION_LOG_CURSOR, initial_position=Position.EARLIEST)
            writer = TxnLogBufferedWriter(ml, self.settings.log_batching, metrics=self.metrics.broker.tc_batched,
                                          metrics_label=self.metrics.broker_label)
            self.log = RecordLog(ml, cursor, writer)
            deletions: list[LogPosition] = []

            def handle(at: LogPosition, data: bytes) -> None:
                try:
                    record = TransactionMetadataEntry.FromString(data)
                except Exception as err:   # a record we cannot read: skip it, as Pulsar logs and goes on
                    log.error("coordinator %d: unreadable log record at %s (%s); skipped", self.tc_id, at, err)
                    return
                deletions.extend(self.state.replay(record, at))

            records = await self.log.replay(handle)
            for data in await self.log.last_entry_records():
                with contextlib.suppress(Exception):
                    record = TransactionMetadataEntry.FromString(data)
                    floor = max(record.max_local_txn_id, record.txnid_least_bits
                                if record.metadata_op == TransactionMetadataOp.NEW else 0)
                    self.state.sequence = max(self.state.sequence, floor)
            self.log.delete(deletions)
        except BaseException:
            with contextlib.suppress(Exception):
                await ml.close()
            raise
        if self.status is CoordinatorStatus.CLOSED:   # closed while loading
            await self._close_log()
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"coordinator {self.tc_id} was unloaded while recovering")
        self.recovery_seconds = time.monotonic() - started
        self.recover_end_ms = wall_ms()
        self.metrics.broker.txn_recovery_seconds.set(self.recovery_seconds, coordinator_id=self._label)
        self.status = CoordinatorStatus.READY
        self._update_active()
        log.info("coordinator %d recovered in %.3fs: %d records replayed, %d transactions not ended (%d to "
                 "complete), next sequence %d", self.tc_id, self.recovery_seconds, records, len(self.state.txns),
                 len(self.state.in_flight()), self.state.sequence + 1)
        if planted_bugs.on(planted_bugs.V4_RECOVERY_DROPS_EXPIRED_TIMEOUTS):
            # Pulsar 2.10.5's replay starts its timeout tracker before the broker registers the store,
            # and the tracker's first run drops every transaction already past its timeout
            # (docs/findings/historical/v4-timeout-lost-after-coordinator-recovery.md)
            for meta in self.state.expired(self._clock_ms()):
                meta.timeout_dropped = True
                log.info("coordinator %d: %s expired while it was down; its timeout dropped (planted bug)",
                         self.tc_id, meta.txn)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop())
        for meta in self.state.in_flight():
            self._drive(meta)

    async def close(self) -> None:
        if self.status is CoordinatorStatus.CLOSED:
            return
        was_ready = self.status is CoordinatorStatus.READY
        self.status = CoordinatorStatus.CLOSED
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        tasks = [t for t in [self._sweeper, *self._ending.values()] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        if was_ready:
            await self._close_log()
        self.metrics.broker.txn_active.values.pop((self._label,), None)
        log.info("coordinator %d closed", self.tc_id)

    async def _close_log(self) -> None:
        if self.log is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.log.close(), 5.0)

    @property
    def ready(self) -> bool:
        return self.status is CoordinatorStatus.READY

    def _check_ready(self) -> None:
        if self.status is not CoordinatorStatus.READY:
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"coordinator {self.tc_id} is {self.status.value} on broker {self.broker.broker_id}; "
                           "look up its assign-topic partition again")

    # ---- logging ------------------------------------------------------------------------------

    async def _append(self, record: Any) -> LogPosition:
        assert self.log is not None
        try:
            at = await self.log.append(record.SerializeToString())
        except ManagedLedgerFenced as err:
            self._lost(err)
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"coordinator {self.tc_id} moved to another broker ({err})") from None
        except WriterClosed as err:
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"coordinator {self.tc_id} is closing ({err})") from None
        except ManagedLedgerError as err:
            raise TxnError(ServerError.PersistenceError,
                           f"coordinator {self.tc_id}: writing the transaction log failed ({err})") from None
        self.metrics.broker.txn_append_log.inc(coordinator_id=self._label)
        return at

    def _lost(self, err: BaseException) -> None:
        log.warning("coordinator %d: its log was fenced (%s); another broker serves it now", self.tc_id, err)
        if self._on_fenced is not None:
            self._on_fenced(self.tc_id)

    def _record(self, op: TransactionMetadataOp, txn: TxnId, **fields: Any) -> Any:
        return txn_record(op, txn.most, txn.least, now_ms=self._clock_ms(), max_local_txn_id=self.state.sequence,
                          **fields)

    def _update_active(self) -> None:
        self.metrics.broker.txn_active.set(len(self.state.txns), coordinator_id=self._label)

    # ---- requests -----------------------------------------------------------------------------

    async def new_txn(self, timeout_ms: int) -> TxnId:
        self._check_ready()
        txn = self.state.next_txn()
        now = self._clock_ms()
        record = txn_record(TransactionMetadataOp.NEW, txn.most, txn.least, now_ms=now,
                            max_local_txn_id=self.state.sequence, timeout_ms=timeout_ms)
        at = await self._append(record)
        if self.status is not CoordinatorStatus.READY:
            raise TxnError(ServerError.TransactionCoordinatorNotFound, f"coordinator {self.tc_id} closed")
        self.state.opened(txn, now, timeout_ms, at)
        self.metrics.broker.txn_created.inc(coordinator_id=self._label)
        self._update_active()
        self._sweep_wake.set()
        return txn

    async def add_partitions(self, txn: TxnId, partitions: Sequence[str]) -> None:
        self._check_ready()
        for partition in partitions:
            try:
                TopicName.parse(partition)
            except InvalidTopicName as err:
                raise TxnError(ServerError.InvalidTopicName, str(err)) from None
        meta = self.state.check_open(txn, "add partitions to")
        self.state.add_partitions(meta, partitions)
        at = await self._append(self._record(TransactionMetadataOp.ADD_PARTITION, txn, partitions=partitions))
        self._remember(meta, at)

    async def add_subscriptions(self, txn: TxnId, subscriptions: Sequence[tuple[str, str]]) -> None:
        self._check_ready()
        for topic, _ in subscriptions:
            try:
                TopicName.parse(topic)
            except InvalidTopicName as err:
                raise TxnError(ServerError.InvalidTopicName, str(err)) from None
        meta = self.state.check_open(txn, "add subscriptions to")
        self.state.add_subscriptions(meta, subscriptions)
        at = await self._append(self._record(TransactionMetadataOp.ADD_SUBSCRIPTION, txn,
                                             subscriptions=subscriptions))
        self._remember(meta, at)

    def _remember(self, meta: TxnMeta, at: LogPosition) -> None:
        if self.state.txns.get(meta.txn.least) is meta:
            meta.log_positions.append(at)
        elif self.log is not None:   # it ended while the record was being written
            self.log.delete([at])

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None:
        self._check_ready()
        meta, decision = self.state.begin_end(txn, action)
        if decision is EndDecision.START:
            log.debug("coordinator %d: %s -> %s", self.tc_id, txn, meta.state.value)
        task = self._drive(meta, now=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.end_response_timeout_ms / 1000.0
        while True:
            try:
                await self._wait(task, txn)
                return
            except EndTxnFailed as err:
                # As Pulsar's TransactionMetadataStoreService: a retryable failure (a participant
                # unreachable, or refusing the marker because its topic was terminated) is retried
                # with the client's request still pending, so the client sees the commit stall
                # rather than an early error. PIP-473 exists because of this stall.
                if not err.retryable:
                    raise
                next_task = await self._next_attempt(meta, deadline, err)
                if next_task is None:
                    return
                task = next_task

    async def _next_attempt(self, meta: TxnMeta, deadline: float,
                            error: EndTxnFailed) -> asyncio.Task[None] | None:
        """The retry `_completed` schedules for `meta`, or None once a retry finished it; raises
        `error` when the coordinator stops serving it, gives up, or the answer's deadline passes."""
        loop = asyncio.get_running_loop()
        least = meta.txn.least
        while loop.time() < deadline:   # bounded by the END_TXN answer's deadline
            if self.status is not CoordinatorStatus.READY:
                raise error
            if self.state.txns.get(least) is not meta:    # a retry completed it
                return None
            running = self._ending.get(least)
            if running is not None and not running.done():
                return running
            if least not in self._retries and self._attempts.get(least, 0) > MAX_END_RETRIES:
                raise error
            await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
        raise error

    async def _wait(self, task: asyncio.Task[None], txn: TxnId) -> None:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                raise TxnError(ServerError.ServiceNotReady,
                               f"coordinator {self.tc_id} was closed while ending {txn}; the outcome is unknown "
                               "(another broker recovers it)") from None
            raise

    # ---- completing a decision ----------------------------------------------------------------

    def _drive(self, meta: TxnMeta, *, now: bool = False) -> asyncio.Task[None]:
        """The completion task of `meta` (started now if none is running)."""
        least = meta.txn.least
        task = self._ending.get(least)
        if task is not None and not task.done():
            return task
        handle = self._retries.pop(least, None)
        if handle is not None:
            handle.cancel()
        task = asyncio.get_running_loop().create_task(self._complete(meta))
        self._ending[least] = task
        task.add_done_callback(functools.partial(self._completed, meta))
        return task

    async def _complete(self, meta: TxnMeta) -> None:
        action = meta.action if meta.action is not None else TxnAction.ABORT
        target = ending_state(action)
        if not meta.decision_logged:
            expected = TxnState.OPEN.status
            record = self._record(TransactionMetadataOp.UPDATE, meta.txn, new_status=target.status,
                                  expected_status=expected)
            try:
                at = await self._append(record)
            except TxnError as err:
                if err.error is ServerError.TransactionCoordinatorNotFound:
                    raise EndTxnFailed(ServerError.ServiceNotReady, err.message, retryable=False) from None
                raise EndTxnFailed(err.error, err.message, retryable=True) from None
            self.state.decision_logged(meta, at)
            if meta.timed_out:
                self.metrics.broker.txn_timeout.inc(coordinator_id=self._label)
        await self.fanout.end(meta, action, self.state.low_watermark())
        if planted_bugs.on(planted_bugs.V4_COMMIT_STALLS_AFTER_MARKERS) and action is TxnAction.COMMIT \
                and meta.txn.least % PLANTED_STALL_ONE_IN == PLANTED_STALL_PICK:
            # DELIBERATE FAULT (txnbench self-test): every participant took its marker (none is a
            # terminated topic: a terminated one refuses it and the fan-out fails before this), yet
            # the completion never logs COMMITTED nor answers: the transaction stays COMMITTING
            log.warning("coordinator %d: %s stays COMMITTING (planted bug)", self.tc_id, meta.txn)
            await asyncio.sleep(PLANTED_STALL_S)
        record = self._record(TransactionMetadataOp.UPDATE, meta.txn, new_status=final_state(action).status,
                              expected_status=target.status)
        try:
            at = await self._append(record)
        except TxnError as err:
            retry = err.error is not ServerError.TransactionCoordinatorNotFound
            raise EndTxnFailed(ServerError.ServiceNotReady if not retry else err.error, err.message,
                               retryable=retry) from None
        deletions = self.state.finished(meta, at)
        if self.log is not None:
            self.log.delete(deletions)
        counter = self.metrics.broker.txn_committed if action is TxnAction.COMMIT else self.metrics.broker.txn_aborted
        counter.inc(coordinator_id=self._label)
        self.metrics.observe_latency(self.tc_id, self._clock_ms() - meta.opened_ms)
        self._update_active()

    def _completed(self, meta: TxnMeta, task: asyncio.Task[None]) -> None:
        least = meta.txn.least
        if self._ending.get(least) is task:
            del self._ending[least]
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            self._attempts.pop(least, None)
            return
        if self.status is not CoordinatorStatus.READY or self.state.txns.get(least) is not meta:
            return
        retryable = getattr(error, "retryable", not isinstance(error, TxnError))
        attempts = self._attempts.get(least, 0) + 1
        self._attempts[least] = attempts
        if not retryable:
            log.error("coordinator %d: ending %s failed and will not be retried until the coordinator "
                      "recovers again: %s", self.tc_id, meta.txn, error)
            return
        if attempts > MAX_END_RETRIES:
            log.error("coordinator %d: gave up retrying %s after %d attempts: %s", self.tc_id, meta.txn,
                      attempts, error)
            return
        if attempts == 1 or attempts % 30 == 0:
            log.warning("coordinator %d: ending %s failed (attempt %d), retrying every %d ms: %s", self.tc_id,
                        meta.txn, attempts, self.settings.end_retry_interval_ms, error)
        delay = self.settings.end_retry_interval_ms / 1000.0
        self._retries[least] = asyncio.get_running_loop().call_later(delay, self._retry, meta)

    def _retry(self, meta: TxnMeta) -> None:
        self._retries.pop(meta.txn.least, None)
        if self.status is CoordinatorStatus.READY and self.state.txns.get(meta.txn.least) is meta:
            self.metrics.end_retries.inc(coordinator_id=self._label)
            self._drive(meta)

    # ---- timeouts -----------------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        while self.status is CoordinatorStatus.READY:   # bounded by the coordinator's life
            deadline = self.state.next_deadline_ms()
            delay = 1.0 if deadline is None else min(1.0, max(0.0, (deadline - self._clock_ms()) / 1000.0))
            self._sweep_wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._sweep_wake.wait(), delay)
            for meta in self.state.expired(self._clock_ms()):
                if self.state.time_out(meta):
                    log.info("coordinator %d: %s timed out after %d ms; aborting it", self.tc_id, meta.txn,
                             meta.timeout_ms)
                    self._drive(meta)

    # ---- views --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Pulsar's TransactionCoordinatorStats (plus our recovery time)."""
        return {"state": self.status.value, "leastSigBits": self.state.sequence,
                "lowWaterMark": self.state.low_watermark(), "ongoingTxnSize": len(self.state.txns),
                "recoverStartTime": self.recover_start_ms, "recoverEndTime": self.recover_end_ms,
                "recoverySeconds": self.recovery_seconds,
                "batchedWriteEnabled": self.settings.log_batching.enabled,
                "logEntriesWritten": self.log.writer.entries_written if self.log else 0,
                "logRecordsWritten": self.log.writer.records_written if self.log else 0}

    def txn_metadata(self, least: int) -> dict[str, Any] | None:
        meta = self.state.txns.get(least)
        return meta.to_json() if meta is not None else None
