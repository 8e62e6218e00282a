"""The broker's v4 coordinators: which ones run here, and routing client requests to them.

Theory of operation (Pulsar's TransactionMetadataStoreService). Coordinator i runs on
whichever broker owns `persistent://pulsar/system/transaction_coordinator_assign-partition-i`.
A client finds it by looking that partition up (the lookup may make this broker the
owner); when this broker starts owning the partition (`on_owned`) it starts loading
coordinator i in the background, and when it stops owning it (released, session
lost) the coordinator is closed. TC_CLIENT_CONNECT_REQUEST(i) succeeds once
coordinator i is loaded here, waiting (bounded) while it replays its log; when this
broker does not own the partition the answer is TransactionCoordinatorNotFound and
the client looks the partition up again. So when the owner dies, the partition (and
with it the coordinator, recovered from its log) moves to the broker the client's
next lookup picks.

Requests carrying a TxnId go to coordinator `TxnId.most`; NEW_TXN names it.
WATCH_TC_ASSIGNMENTS is the v5 discovery and is refused here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from typing import Any

from embedded.broker.topic_name import PARTITION_SUFFIX, TopicName
from embedded.broker.txn_api import BrokerContext, ClientChannel, TxnError
from embedded.broker.v4.coordinator import TransactionCoordinator
from embedded.broker.v4.fanout import EndTxnFanOut
from embedded.broker.v4.metrics import V4Metrics
from embedded.broker.v4.settings import V4Settings
from harness.wire import ServerError, TxnAction, TxnId

log = logging.getLogger(__name__)

ASSIGN_TOPIC = TopicName.parse("persistent://pulsar/system/transaction_coordinator_assign")


def assign_partition(tc_id: int) -> TopicName:
    return ASSIGN_TOPIC.partition(tc_id)


def coordinator_of(topic: TopicName) -> int | None:
    """The coordinator id an assign-topic partition stands for, else None."""
    if topic.partitioned_base != ASSIGN_TOPIC or PARTITION_SUFFIX not in topic.local_name:
        return None
    index = topic.partition_index
    return index if index >= 0 else None


class V4CoordinatorService:
    """The LEGACY `TransactionCoordinatorService` and an ownership listener (and a broker lifecycle part)."""

    def __init__(self, broker: BrokerContext, settings: V4Settings, metrics: V4Metrics) -> None:
        self.broker = broker
        self.settings = settings
        self.metrics = metrics
        self.fanout = EndTxnFanOut(broker.peers, settings.participant_timeout_ms / 1000.0, metrics)
        self.coordinators: dict[int, TransactionCoordinator] = {}
        self._loading: dict[int, asyncio.Task[TransactionCoordinator]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        for topic in self.broker.ownership.owned_topics():
            self.on_owned(topic)

    async def stop(self) -> None:
        """A graceful stop: close every coordinator and give its assign partition up.

        As Pulsar's shutdown unloads each namespace bundle (`unloadNamespaceBundlesGracefully`:
        the bundle's ownership lock is deleted once it is unloaded), each partition is released
        as soon as its coordinator is closed, in parallel: the next lookup then makes another
        broker its owner. Keeping the records until the session closes at the end of the stop
        left coordinators unserved for the whole stop, and for the session timeout on top when
        the stop ran past its deadline and the process was killed (chaos run
        20261127-163805-chaos-chaos, v4: a 10 s stop under a slow ledger store).
        """
        self._stopped = True
        tc_ids = {*self.coordinators, *self._loading}
        tc_ids.update(tc_id for topic in self.broker.ownership.owned_topics()
                      if (tc_id := coordinator_of(topic)) is not None)
        await asyncio.gather(*(self._give_up(tc_id) for tc_id in sorted(tc_ids)), return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()

    async def _give_up(self, tc_id: int) -> None:
        """Close coordinator `tc_id`, then release its partition: also when the broker's stop
        deadline cancels the close (a coordinator still loading checks its ownership when done
        and closes itself; a stale one is fenced by the next owner's open of its log)."""
        try:
            await self.unload(tc_id)
        finally:
            if self.broker.ownership.is_owned(assign_partition(tc_id)):
                await self.broker.ownership.release(assign_partition(tc_id))

    # ---- ownership ----------------------------------------------------------------------------

    def on_owned(self, topic: TopicName) -> None:
        tc_id = coordinator_of(topic)
        if tc_id is not None and not self._stopped:
            self._spawn(self._load_quietly(tc_id))

    async def on_released(self, topic: TopicName) -> None:
        tc_id = coordinator_of(topic)
        if tc_id is not None:
            await self.unload(tc_id)

    async def still_current(self, topic: TopicName) -> bool:
        """Whether the coordinator loaded for `topic` (if any) still has its log's ledger list:
        another broker that ran it meanwhile handed out ids and wrote records unknown here."""
        tc_id = coordinator_of(topic)
        coordinator = self.coordinators.get(tc_id) if tc_id is not None else None
        record_log = getattr(coordinator, "log", None)
        return record_log is None or await record_log.ml.metadata_unchanged()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load_quietly(self, tc_id: int) -> None:
        with contextlib.suppress(Exception):
            await self.load(tc_id)

    async def load(self, tc_id: int) -> TransactionCoordinator:
        """Coordinator `tc_id`, loading it when it is not loaded (the caller checked ownership)."""
        existing = self.coordinators.get(tc_id)
        if existing is not None and existing.ready:
            return existing
        loading = self._loading.get(tc_id)
        if loading is None:
            loading = asyncio.ensure_future(self._load(tc_id))
            self._loading[tc_id] = loading
            loading.add_done_callback(functools.partial(self._loaded, tc_id))
        return await asyncio.shield(loading)

    async def _load(self, tc_id: int) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(tc_id, self.broker, self.settings, self.metrics, self.fanout,
                                             on_fenced=self._fenced)
        self.coordinators[tc_id] = coordinator
        try:
            await coordinator.load()
        except BaseException as err:
            if self.coordinators.get(tc_id) is coordinator:
                del self.coordinators[tc_id]
            log.warning("loading coordinator %d failed: %r", tc_id, err)
            raise
        if not self.broker.ownership.is_owned(assign_partition(tc_id)):   # released while replaying
            if self.coordinators.get(tc_id) is coordinator:
                del self.coordinators[tc_id]
            await coordinator.close()
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"broker {self.broker.broker_id} lost {assign_partition(tc_id)} while loading it")
        return coordinator

    def _loaded(self, tc_id: int, task: asyncio.Task[TransactionCoordinator]) -> None:
        if self._loading.get(tc_id) is task:
            del self._loading[tc_id]
        if not task.cancelled():
            task.exception()   # retrieved: a failed load is logged in _load

    async def unload(self, tc_id: int) -> None:
        loading = self._loading.get(tc_id)
        coordinator = self.coordinators.pop(tc_id, None)
        if coordinator is not None:
            await coordinator.close()
        if loading is not None and not loading.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(loading), 10.0)

    def _fenced(self, tc_id: int) -> None:
        self._spawn(self._release_fenced(tc_id))

    async def _release_fenced(self, tc_id: int) -> None:
        await self.unload(tc_id)
        with contextlib.suppress(Exception):
            await self.broker.ownership.release(assign_partition(tc_id))

    # ---- routing ------------------------------------------------------------------------------

    def _check_id(self, tc_id: int) -> None:
        count = self.settings.coordinator_count
        if not 0 <= tc_id < count:
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"there is no transaction coordinator {tc_id}: this cluster has {count} "
                           "(transactionCoordinatorCount)")

    def _serving(self, tc_id: int) -> TransactionCoordinator:
        self._check_id(tc_id)
        coordinator = self.coordinators.get(tc_id)
        if coordinator is None or not coordinator.ready:
            where = "is still recovering" if coordinator is not None else "is not served"
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"transaction coordinator {tc_id} {where} on broker {self.broker.broker_id}; look up "
                           f"{assign_partition(tc_id)} again")
        return coordinator

    # ---- TransactionCoordinatorService --------------------------------------------------------

    async def tc_client_connect(self, tc_id: int) -> None:
        self._check_id(tc_id)
        coordinator = self.coordinators.get(tc_id)
        if coordinator is not None and coordinator.ready:
            return
        partition = assign_partition(tc_id)
        if tc_id not in self._loading and not self.broker.ownership.is_owned(partition):
            await self._claim(partition)
        try:
            await asyncio.wait_for(self.load(tc_id), self.settings.tc_load_wait_ms / 1000.0)
        except TxnError:
            raise
        except Exception as err:
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"transaction coordinator {tc_id} could not be loaded on broker "
                           f"{self.broker.broker_id}: {err!r}") from None

    async def _claim(self, partition: TopicName) -> None:
        """Own `partition` if it is ours to own (as `get_topic` does for a topic), else TransactionCoordinatorNotFound.

        The case that matters: this broker restarted and its old session's owner record still
        names it; lookups (answered by any broker) send clients here, so the record is taken
        over instead of answering "not the owner" until the old session expires.
        """
        try:
            owner = await asyncio.wait_for(self.broker.ownership.ensure_owner(partition), 10.0)
        except Exception as err:
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"broker {self.broker.broker_id} cannot take {partition} ({err!r}); look it up again") from None
        if owner.broker_id != self.broker.broker_id or not self.broker.ownership.is_owned(partition):
            raise TxnError(ServerError.TransactionCoordinatorNotFound,
                           f"broker {self.broker.broker_id} does not own {partition} (broker {owner.broker_id} "
                           "does); look it up again")

    async def new_txn(self, tc_id: int, timeout_ms: int) -> TxnId:
        return await self._serving(tc_id).new_txn(timeout_ms)

    async def add_partitions(self, txn: TxnId, partitions: Sequence[str]) -> None:
        await self._serving(txn.most).add_partitions(txn, partitions)

    async def add_subscriptions(self, txn: TxnId, subscriptions: Sequence[tuple[str, str]]) -> None:
        await self._serving(txn.most).add_subscriptions(txn, subscriptions)

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None:
        await self._serving(txn.most).end_txn(txn, action)

    async def watch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        raise TxnError(ServerError.NotAllowedError,
                       "WATCH_TC_ASSIGNMENTS is the v5 coordinator discovery; v4 clients look up the partitions of "
                       f"{ASSIGN_TOPIC} (enable transactionCoordinatorScalableTopicsEnabled for v5)")

    async def unwatch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        return None

    # ---- views --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {str(tc_id): c.stats() for tc_id, c in sorted(self.coordinators.items())}
