"""`TransactionCoordinatorV5`: the metadata-driven coordinator of PIP-473 (Pulsar 5.0).

Theory of operation:

* Leadership: coordinator partition N is led by whoever holds the ephemeral
  `/txn/tc/leader/<N>` (`LeaderElection`); every broker is a candidate for every
  partition ("elect-all"), so a partition fails over to any live broker as soon as the
  dead leader's session expires. Nothing is replayed on takeover: the new leader reads
  the id counter and serves. The partition count is fixed at cluster bring-up
  (`/txn/tc/parallelism`); a broker configured differently refuses to start.
* Discovery: WATCH_TC_ASSIGNMENTS answers with the full partition -> leader snapshot
  and pushes a new full snapshot on every leader change this broker sees (a partition
  mid-election is left out and the snapshot re-pushed shortly after).
* NEW_TXN (leader only): draw `least` from the CAS counter `/txn/tc-seq/<tcId>`, create
  the header OPEN with its deadline index entry.
* ADD_PARTITION_TO_TXN / ADD_SUBSCRIPTION_TO_TXN: accepted, nothing to do; participants
  record themselves with op records when the write or ack happens.
* END_TXN: one CAS of the header OPEN -> COMMITTED/ABORTED (moving it from the deadline
  index to the final-state index): the linearization point. Then the decision is
  published to each participant found through `idx:ops-by-txn` (one segment event per
  written segment, one subscription event per acked (segment, subscription)); no RPC to
  participants. A retry of a decided transaction re-publishes (idempotent). The client
  is answered once the events are written, as Pulsar 5.0's `endTransaction` completes
  (`updateHeader(...).thenCompose(fanOutEvents)`); `txnbenchV5AnswerEndTxnAfterCas`
  answers after the CAS and publishes behind it, as the PIP text says. A metadata failure
  before anything was written is answered TransactionCoordinatorNotFound (the client
  resends); one once the CAS was sent is UnknownError (`DecisionUncertain`: it may have
  landed, and the client must not take the attempt for "not applied").
* Sweeps, run by the leader of partition 0: abort transactions past their deadline
  (`idx:txn-by-deadline`), and garbage-collect transactions finalized more than the
  retention window ago (`idx:txn-by-final-state`): with no op records left, delete the
  header; with leftovers, either force-delete them and the header (the PIP text) or
  re-publish the decision and keep the header (Pulsar 5.0), per `txnbenchV5GcLeftoverOps`.
  Every transition is a CAS, so a stale sweeper is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from embedded import planted_bugs
from embedded.broker.tasks import spawn
from embedded.broker.topic_name import TopicName
from embedded.broker.txn_api import BrokerContext, ClientChannel, TxnError
from embedded.broker.v5.settings import GcLeftoverOps, V5Settings
from embedded.broker.v5.txn import keys
from embedded.broker.v5.txn.ids import SequenceAllocator
from embedded.broker.v5.txn.metrics import V5Metrics
from embedded.broker.v5.txn.records import (
    OpKind,
    RecordError,
    TcLeader,
    TxnEvent,
    TxnHeader,
    TxnState,
)
from embedded.broker.v5.txn.store import TxnMetadataStore
from embedded.metadata.election import LeaderElection, Leadership, Role
from embedded.metadata.model import (
    MUST_NOT_EXIST,
    BadVersion,
    EventType,
    KeyNotFound,
    MetadataError,
    MetadataUnavailable,
    Notification,
)
from harness.wire import Command, ServerError, TxnAction, TxnId, commands

if TYPE_CHECKING:
    from embedded.metadata.backend import WatchHandle as Watch

log = logging.getLogger(__name__)

ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
DEFAULT_TXN_TIMEOUT_MS = 60_000
_PUSH_RETRIES = 40
_PUSH_PAUSE_S = 0.25
_GC_PARALLELISM = 32   # header collections of one GC sweep in flight at once


class ParallelismMismatch(RuntimeError):
    """This broker's coordinator count differs from the one the cluster was brought up with."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _unavailable(what: str, err: Exception) -> TxnError:
    # the client re-resolves the coordinator and resends on TransactionCoordinatorNotFound: only
    # for a request that changed nothing (the client takes that answer for "not applied")
    return TxnError(ServerError.TransactionCoordinatorNotFound,
                    f"{what}: the metadata store did not answer ({err}); retry")


class DecisionUncertain(MetadataUnavailable):
    """END_TXN failed after its header CAS was sent: the transaction may be (or is) decided.

    Answered UnknownError, as Pulsar's `BrokerServiceException.getClientErrorCode` answers
    a metadata-store exception, never TransactionCoordinatorNotFound: the client would take
    that for "not applied", and its retry, once the GC collected the header, would get
    TransactionNotFound and report a committed transaction as failed.
    """


class TransactionCoordinatorV5:
    def __init__(self, broker: BrokerContext, store: TxnMetadataStore, settings: V5Settings,
                 metrics: V5Metrics) -> None:
        self.broker = broker
        self.client = broker.metadata
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.parallelism = settings.parallelism
        self._elections: dict[int, LeaderElection] = {}
        self._allocators = {p: SequenceAllocator(self.client, p, blocks=settings.id_blocks)
                            for p in range(self.parallelism)}
        self._watchers: dict[tuple[int, int], ClientChannel] = {}
        self._last_pushed: dict[int, str] | None = None
        self._push_task: asyncio.Task[None] | None = None
        self._push_again = False
        self._sweeper: asyncio.Task[None] | None = None
        self._leader_watch: Watch | None = None
        self._leader_gone_at: dict[int, float] = {}
        self._closed = False

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        await self._verify_parallelism()
        me = TcLeader(str(self.broker.broker_id), self.broker.advertised_service_url, None,
                      self.broker.advertised_web_url).to_json()
        self._leader_watch = await self.client.watch(keys.TC_LEADER_PREFIX + "/", self._on_leader_keys)
        for partition in range(self.parallelism):
            election = LeaderElection(self.client, keys.tc_leader(partition), me,
                                      on_change=functools.partial(self._on_change, partition))
            self._elections[partition] = election
            await election.start()
        self._sweeper = spawn(self._sweep_loop(), "v5 coordinator sweeps")
        log.info("v5 coordinator started: %d partitions, sweeps every %.3fs (timeouts) / %.3fs (GC), GC retention "
                 "%.3fs, leftover op records: %s", self.parallelism, self.settings.timeout_sweep_interval_s,
                 self.settings.gc_interval_s, self.settings.gc_retention_s, self.settings.gc_leftover_ops.value)

    async def stop(self) -> None:
        self._closed = True
        for task in (self._sweeper, self._push_task):
            if task is not None:
                task.cancel()
        for election in self._elections.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(election.stop(resign=True), 2.0)
        if self._leader_watch is not None:
            with contextlib.suppress(Exception):
                await self._leader_watch.cancel()

    async def _verify_parallelism(self) -> None:
        wanted = str(self.parallelism)
        got = await self.client.get_or_none(keys.TC_PARALLELISM_KEY)
        if got is None:
            with contextlib.suppress(BadVersion):
                await self.client.put(keys.TC_PARALLELISM_KEY, wanted, expected_version=MUST_NOT_EXIST)
            got = await self.client.get_or_none(keys.TC_PARALLELISM_KEY)
        stored = (got.value or "").strip() if got is not None else wanted
        if stored != wanted:
            raise ParallelismMismatch(
                f"transactionCoordinatorScalableTopicsParallelism is {wanted} on broker {self.broker.broker_id} but "
                f"the cluster was brought up with {stored} ({keys.TC_PARALLELISM_KEY}); the value is fixed for the "
                "cluster's life: configure every broker with the same value")

    # ---- leadership ---------------------------------------------------------------------------

    def is_leader(self, partition: int) -> bool:
        election = self._elections.get(partition)
        return election is not None and election.is_leader

    def leaders(self) -> dict[int, str]:
        """partition -> the leader's service URL, for the partitions with a known leader."""
        out: dict[int, str] = {}
        for partition, election in self._elections.items():
            value = election.current.leader_value
            if value:
                try:
                    out[partition] = TcLeader.from_json(value).broker_service_url
                except RecordError as err:
                    log.warning("coordinator %d: unreadable leader record: %s", partition, err)
        return out

    def _on_leader_keys(self, events: list[Notification]) -> None:
        for event in events:
            if event.type is EventType.DELETED:
                with contextlib.suppress(ValueError):
                    self._leader_gone_at[int(event.key.rsplit("/", 1)[1])] = time.monotonic()

    async def _on_change(self, partition: int, leadership: Leadership) -> None:
        label = str(partition)
        allocator = self._allocators[partition]
        allocator.reset()
        if leadership.role is Role.LEADER:
            self.metrics.leader.set(1, coordinator_id=label)
            self.metrics.leader_acquired.inc(coordinator_id=label)
            gone = self._leader_gone_at.pop(partition, None)
            if gone is not None:
                self.metrics.election_seconds.observe(time.monotonic() - gone)
            started = time.monotonic()
            with contextlib.suppress(MetadataUnavailable, MetadataError):
                await allocator.prime()
            took = time.monotonic() - started
            self.metrics.broker.txn_recovery_seconds.set(took, coordinator_id=label)
            log.info("coordinator %d: leading (ready in %.1f ms, nothing to replay)", partition, took * 1000)
        else:
            self.metrics.leader.set(0, coordinator_id=label)
        self._schedule_push()

    # ---- discovery (WATCH_TC_ASSIGNMENTS) -----------------------------------------------------

    def _snapshot(self, watch_id: int, leaders: dict[int, str]) -> Command:
        return commands.watch_tc_assignments_update(watch_id, parallelism=self.parallelism, leaders=leaders)

    async def watch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        key = (id(channel), watch_id)
        self._watchers[key] = channel
        channel.add_close_listener(lambda: self._watchers.pop(key, None))
        leaders = self.leaders()
        channel.send(self._snapshot(watch_id, leaders))
        if len(leaders) < self.parallelism:
            self._schedule_push()

    async def unwatch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        self._watchers.pop((id(channel), watch_id), None)

    def _schedule_push(self) -> None:
        if self._closed:
            return
        if self._push_task is not None and not self._push_task.done():
            self._push_again = True
            return
        self._push_task = spawn(self._push_loop(), "pushing coordinator assignments")

    async def _push_loop(self) -> None:
        for _ in range(_PUSH_RETRIES):   # bounded: re-push while a partition is mid-election
            self._push_again = False
            leaders = self.leaders()
            if leaders != self._last_pushed:
                self._last_pushed = leaders
                for (channel_key, watch_id), channel in list(self._watchers.items()):
                    if channel.closed:
                        self._watchers.pop((channel_key, watch_id), None)
                        continue
                    channel.send(self._snapshot(watch_id, leaders))
            if len(leaders) == self.parallelism and not self._push_again:
                return
            await asyncio.sleep(_PUSH_PAUSE_S)

    # ---- client commands ----------------------------------------------------------------------

    def _check_partition(self, tc_id: int) -> None:
        if not 0 <= tc_id < self.parallelism:
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"coordinator {tc_id} does not exist: the cluster has {self.parallelism} "
                           "(transactionCoordinatorScalableTopicsParallelism)")

    def _not_leader(self, tc_id: int) -> TxnError:
        leader = self.leaders().get(tc_id, "none yet")
        return TxnError(ServerError.TransactionCoordinatorNotFound,
                        f"coordinator {tc_id} is not led by broker {self.broker.broker_id} (leader: {leader}); "
                        "follow WATCH_TC_ASSIGNMENTS to the leader")

    async def tc_client_connect(self, tc_id: int) -> None:
        self._check_partition(tc_id)
        if self.is_leader(tc_id):
            return
        if self.broker.ownership.is_owned(TopicName.parse(ASSIGN_TOPIC).partition(tc_id)):
            return   # a v4-style client found us through the assign topic (Pulsar accepts either)
        raise self._not_leader(tc_id)

    async def new_txn(self, tc_id: int, timeout_ms: int) -> TxnId:
        self._check_partition(tc_id)
        if not self.is_leader(tc_id):
            raise self._not_leader(tc_id)
        timeout = timeout_ms if timeout_ms > 0 else DEFAULT_TXN_TIMEOUT_MS
        for _ in range(3):   # bounded: an existing header means the counter was behind (should not happen)
            try:
                least = await self._allocators[tc_id].next()
                txn = TxnId(tc_id, least)
                await self.store.create_header(txn, TxnHeader(TxnState.OPEN, timeout, _now_ms()))
            except BadVersion:
                log.error("coordinator %d: header of a freshly drawn id exists; drawing another", tc_id)
                self._allocators[tc_id].reset()
                continue
            except (MetadataUnavailable, MetadataError) as err:
                raise _unavailable(f"opening a transaction on coordinator {tc_id}", err) from None
            self.metrics.broker.txn_created.inc(coordinator_id=str(tc_id))
            return txn
        raise TxnError(ServerError.UnknownError, f"coordinator {tc_id}: could not draw a fresh transaction id")

    async def add_partitions(self, txn: TxnId, partitions: Sequence[str]) -> None:
        return None   # participants record themselves (op records) when they write

    async def add_subscriptions(self, txn: TxnId, subscriptions: Sequence[tuple[str, str]]) -> None:
        return None

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None:
        try:
            await self.finish(txn, TxnState.for_action(action))
        except DecisionUncertain as err:
            raise TxnError(ServerError.UnknownError, f"ending {txn}: {err}") from None
        except (MetadataUnavailable, MetadataError) as err:
            raise _unavailable(f"ending {txn}", err) from None

    async def finish(self, txn: TxnId, decision: TxnState, *, timed_out: bool = False) -> bool:
        """CAS the header to `decision` and publish it; True when this call decided it."""
        cas = self.metrics.broker.txn_md_header_cas
        for _ in range(5):   # bounded: each round either decides or sees a concurrent change
            got = await self.store.get_header(txn)
            if got is None:
                cas.inc(result="reject")
                raise TxnError(ServerError.TransactionNotFound, f"transaction {txn} does not exist (never opened, or "
                                                                "collected after it ended)")
            header, version = got
            if header.state is decision:
                await self._publish_decided(txn, decision)   # a retry: the previous fan-out may not have happened
                return False
            if header.state.terminal:
                cas.inc(result="reject")
                raise TxnError(ServerError.InvalidTxnStatus,
                               f"transaction {txn} is already {header.state.value}; it cannot become {decision.value}")
            try:
                await self.store.update_header(txn, header.finalize(decision, _now_ms()), version)
            except BadVersion:
                cas.inc(result="conflict")
                continue
            except MetadataUnavailable as err:
                raise DecisionUncertain(f"the header CAS to {decision.value} got no answer ({err}); "
                                        "the outcome is unknown") from None
            cas.inc(result="ok")
            label = str(txn.most)
            publish_later = self.settings.answer_end_txn_after_cas and not timed_out
            if decision is TxnState.COMMITTED:
                self.metrics.broker.txn_committed.inc(coordinator_id=label)
            else:
                self.metrics.broker.txn_aborted.inc(coordinator_id=label)
                if timed_out:
                    self.metrics.broker.txn_timeout.inc(coordinator_id=label)
            if publish_later:   # the PIP text: the client is answered once the CAS landed
                spawn(self._publish_quietly(txn, decision), f"publishing the decision of {txn}")
            else:               # Pulsar 5.0: endTransaction completes after the events are written
                await self._publish_decided(txn, decision)
            return True
        raise TxnError(ServerError.InvalidTxnStatus, f"transaction {txn}: its header kept changing; retry")

    async def _publish_decided(self, txn: TxnId, decision: TxnState) -> None:
        try:
            await self.publish(txn, decision)
        except (MetadataUnavailable, MetadataError) as err:
            raise DecisionUncertain(f"{txn} is {decision.value} but publishing the decision failed ({err}); the "
                                    "participants' reconcile or the GC re-drive delivers it") from None

    async def _publish_quietly(self, txn: TxnId, decision: TxnState) -> None:
        try:
            await self.publish(txn, decision)
        except (MetadataUnavailable, MetadataError) as err:
            log.info("publishing the decision of %s failed (%s); the participants' reconcile or the GC re-drive "
                     "delivers it", txn, err)

    async def publish(self, txn: TxnId, decision: TxnState) -> None:
        """One decision event per participant recorded in the transaction's op records."""
        ops = await self.store.ops_by_txn(txn)
        segments = {s.op.segment for s in ops if s.op.kind is OpKind.WRITE}
        subscriptions = {(s.op.segment, s.op.subscription or "") for s in ops if s.op.kind is OpKind.ACK}
        event = TxnEvent(txn, decision)
        sub_event = event
        if planted_bugs.on(planted_bugs.V5_FANOUT_COMMITS_SUBSCRIPTIONS):
            sub_event = TxnEvent(txn, TxnState.COMMITTED)   # DELIBERATE FAULT (txnbench self-test)
        await asyncio.gather(*(self.store.publish_segment_event(seg, event) for seg in segments),
                             *(self.store.publish_subscription_event(seg, sub, sub_event) for seg, sub in subscriptions))
        if segments:
            self.metrics.fan_out_events.inc(len(segments), kind="segment")
        if subscriptions:
            self.metrics.fan_out_events.inc(len(subscriptions), kind="subscription")

    # ---- sweeps -------------------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        s = self.settings
        now = time.monotonic()
        next_timeouts, next_gc = now + s.timeout_sweep_interval_s, now + s.gc_interval_s
        while not self._closed:   # bounded by the coordinator's life
            await asyncio.sleep(max(0.005, min(next_timeouts, next_gc) - time.monotonic()))
            now = time.monotonic()
            sweeper = self.is_leader(0)
            if not sweeper:
                self.metrics.broker.txn_md_outstanding_ops.set(0)
                self.metrics.broker.txn_active.values.clear()
            if now >= next_timeouts:
                next_timeouts = now + s.timeout_sweep_interval_s
                if sweeper:
                    await self._guarded("timeout sweep", self.sweep_timeouts())
            if now >= next_gc:
                next_gc = now + s.gc_interval_s
                if sweeper:
                    await self._guarded("GC sweep", self.sweep_gc())

    async def _guarded(self, what: str, work: Awaitable[object]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("%s failed (%s); the next one retries", what, err)

    async def sweep_timeouts(self) -> int:
        """Abort every OPEN transaction past its deadline; returns how many this sweep aborted."""
        self.metrics.timeout_sweeps.inc()
        now = _now_ms()
        open_txns = await self.store.open_by_deadline()
        active = Counter(str(t.most) for t, _ in open_txns)
        gauge = self.metrics.broker.txn_active
        gauge.values.clear()
        for label, count in active.items():
            gauge.set(count, coordinator_id=label)
        self.metrics.broker.txn_md_outstanding_ops.set(await self.store.count_ops())
        aborted = 0
        for txn, deadline in open_txns:
            if deadline > now:
                break
            try:
                if await self.finish(txn, TxnState.ABORTED, timed_out=True):
                    aborted += 1
                    log.info("aborted %s: past its deadline by %d ms", txn, now - deadline)
            except TxnError:
                pass   # decided meanwhile by its client
        return aborted

    async def sweep_gc(self) -> int:
        """Collect transactions finalized before the retention window; returns headers deleted.

        As Pulsar 5.0's `gcFinalized`, the candidates of one sweep are collected concurrently
        (here at most `_GC_PARALLELISM` at a time), not one after another: a sweep must keep
        up with the rate transactions are decided.
        """
        self.metrics.gc_sweeps.inc()
        cutoff = _now_ms() - int(self.settings.gc_retention_s * 1000)
        if planted_bugs.on(planted_bugs.V5_GC_RETENTION_UNITS):
            cutoff = _now_ms() - int(self.settings.gc_retention_s)   # DELIBERATE FAULT: seconds taken as ms
        limit = asyncio.Semaphore(_GC_PARALLELISM)

        async def one(txn: TxnId, version: int, state: TxnState) -> int:
            async with limit:
                return await self._gc_one(txn, version, state)

        deleted = 0
        for state in (TxnState.COMMITTED, TxnState.ABORTED):
            candidates = await self.store.finalized_before(state, cutoff)
            deleted += sum(await asyncio.gather(*(one(t, v, state) for t, v in candidates)))
        return deleted

    async def _gc_one(self, txn: TxnId, version: int, state: TxnState) -> int:
        leftovers = await self.store.ops_by_txn(txn)
        if leftovers:
            if self.settings.gc_leftover_ops is GcLeftoverOps.REDRIVE:
                self.metrics.gc_redrives.inc()
                log.info("GC: %s (%s) still has %d op records; re-publishing its decision", txn,
                         state.value, len(leftovers))
                await self.publish(txn, state)
                return 0
            count = await self.store.delete_ops_of(txn)
            self.metrics.gc_forced_ops.inc(count)
            log.warning("GC: %s (%s) still had %d op records after the retention window; force-deleted "
                        "them (a participant that has not materialized the decision loses them)", txn,
                        state.value, count)
        with contextlib.suppress(BadVersion, KeyNotFound):
            if await self.store.delete_header(txn, version):
                self.metrics.gc_headers_deleted.inc()
                return 1
        return 0
