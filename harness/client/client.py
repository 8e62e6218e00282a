"""`PulsarClient`: the entry point that owns connections, timers and the coordinator client.

One client holds a connection pool (one connection per broker), one timer thread
(batch flushes, keep-alive, send-timeout sweeps), a lookup service and, on first use,
the transaction coordinator client of its `txn_path`. Producers, consumers and
readers made from it share all of that; `close()` closes them all.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from harness.client.config import BatchingConfig, ClientConfig
from harness.client.connection import ConnectionPool
from harness.client.consumer import Consumer, ConsumerOptions, ReceiveQueue, TopicConsumer
from harness.client.coordinator import AttemptRecord, CoordinatorClient
from harness.client.errors import AlreadyClosedError, FeatureNotSupportedError, InvalidStateError
from harness.client.handler import ClientContext
from harness.client.lookup import LookupService
from harness.client.producer import (
    Producer,
    ProducerOptions,
    partitioned_targets,
    plain_targets,
)
from harness.client.reader import Reader, reader_subscription_name
from harness.client.scalable import DagWatch, ScalableTargets, SegmentTracker
from harness.client.timers import Deadline, Scheduler
from harness.client.topics import is_scalable, normalize_topic, partition_name
from harness.client.transaction import Transaction
from harness.wire import InitialPosition, MessageId, ProducerAccessMode, SubType, TxnAction, TxnId

log = logging.getLogger(__name__)

V5_FEATURES = ("supports_scalable_topics", "supports_tc_metadata_discovery")


def _sub_type(value: SubType | str) -> SubType:
    if isinstance(value, SubType):
        return value
    names = {t.name.lower().replace("_", ""): t for t in SubType}
    found = names.get(value.lower().replace("_", "").replace("-", ""))
    if found is None:
        raise ValueError(f"subscription type {value!r} is not one of "
                         f"{', '.join(t.name for t in SubType)}")
    return found


class PulsarClient:
    """A transactional Pulsar client for the v4 (PIP-31) and v5 (PIP-473) paths.

    Args:
        service_url: `pulsar://host:port[,host:port]`.
        txn_path: "v4", "v4-batched" (same client behaviour as v4) or "v5".
        operation_timeout_s: default timeout of every operation.
        **settings: any other `ClientConfig` field (e.g. `keepalive_interval_s`).

    Blocking and thread-based (plain sockets and `threading`): use it from threads, or
    from greenlets after gevent's `monkey.patch_all()`.
    """

    def __init__(self, service_url: str, *, txn_path: str = "v4",
                 operation_timeout_s: float = 30.0, **settings: Any) -> None:
        known = {f.name for f in dataclasses.fields(ClientConfig) if f.init}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown client setting(s) {', '.join(unknown)}; the settings are "
                             f"{', '.join(sorted(known - {'service_url'}))}")
        self.config = ClientConfig(service_url, txn_path=txn_path,  # type: ignore[arg-type]
                                   operation_timeout_s=operation_timeout_s, **settings)
        self._scheduler = Scheduler()
        features = V5_FEATURES if self.config.is_v5 else ()
        self._pool = ConnectionPool(self.config, features, self._scheduler)
        self._lookup = LookupService(self.config, self._pool)
        self._ctx = ClientContext(self.config, self._pool, self._lookup, self._scheduler)
        self._coordinator = CoordinatorClient(self._ctx)
        self._lock = threading.Lock()
        self._producers: set[Producer] = set()
        self._consumers: set[Consumer] = set()
        self._closed = False
        self._sweeper = self._scheduler.call_every(1.0, self._expire_sends)

    @property
    def txn_path(self) -> str:
        """`v4` or `v5`."""
        return self.config.txn_path.value

    def _deadline(self, timeout_s: float | None) -> Deadline:
        if self._closed:
            raise AlreadyClosedError("the client is closed")
        return Deadline.after(timeout_s if timeout_s is not None
                              else self.config.operation_timeout_s)

    def _check_scalable(self, topic: str) -> None:
        if is_scalable(topic) and not self.config.is_v5:
            raise FeatureNotSupportedError(
                f"{topic} is a scalable (topic://) topic; create the client with txn_path='v5'")

    # ---- producers ------------------------------------------------------------------

    def create_producer(self, topic: str, *, producer_name: str | None = None,
                        batching: BatchingConfig | bool | None = None,
                        send_timeout_s: float | None = None,
                        access_mode: ProducerAccessMode | None = None,
                        properties: Mapping[str, str] | None = None,
                        timeout_s: float | None = None) -> Producer:
        """A producer on `topic` (short, `persistent://`, or `topic://` with txn_path v5).

        Plain and partitioned topics connect every partition now; scalable topics
        resolve the segment DAG now and connect segment producers on first use.

        Raises:
            harness.client.errors.SetupError, NotReadyError: lookup or creation failed.
        """
        deadline = self._deadline(timeout_s)
        name = normalize_topic(topic)
        self._check_scalable(name)
        if batching is True:
            batching = BatchingConfig()
        options = ProducerOptions(producer_name=producer_name, batching=batching or None,
                                  send_timeout_s=send_timeout_s, access_mode=access_mode,
                                  properties=properties)
        if is_scalable(name):
            dag = DagWatch(self._ctx, name)
            dag.start(deadline)
            producer = Producer(self._ctx, name, ScalableTargets(self._ctx, name, dag, options),
                                dag, on_close=self._forget_producer)
        else:
            partitions = self._lookup.partitioned_metadata(name, deadline)
            targets = (partitioned_targets(self._ctx, name, partitions, options, deadline)
                       if partitions > 0 else plain_targets(self._ctx, name, options, deadline))
            producer = Producer(self._ctx, name, targets, on_close=self._forget_producer)
        with self._lock:
            self._producers.add(producer)
        return producer

    def _forget_producer(self, producer: Producer) -> None:
        with self._lock:
            self._producers.discard(producer)

    def _expire_sends(self) -> None:
        now = time.monotonic()
        with self._lock:
            producers = list(self._producers)
        for producer in producers:
            producer.expire(now)
        self._coordinator.expire(now)

    # ---- consumers ------------------------------------------------------------------

    def subscribe(self, topic: str, subscription: str, *,
                  sub_type: SubType | str = SubType.Exclusive,
                  consumer_name: str | None = None,
                  initial_position: InitialPosition = InitialPosition.Earliest,
                  receiver_queue_size: int = 1000,
                  key_shared_ranges: tuple[tuple[int, int], ...] | None = None,
                  ordered_segments: bool = True,
                  timeout_s: float | None = None) -> Consumer:
        """A durable subscription on `topic`; every partition/segment is subscribed now.

        Args:
            ordered_segments: on a scalable topic, hold a child segment's messages until
                its parents reached their end (see `harness.client.scalable`).

        Raises:
            harness.client.errors.SetupError, NotReadyError: subscribing failed.
        """
        options = ConsumerOptions(sub_type=_sub_type(sub_type), consumer_name=consumer_name,
                                  initial_position=initial_position,
                                  receiver_queue_size=receiver_queue_size,
                                  key_shared_ranges=key_shared_ranges)
        return self._consumer(topic, subscription, options, ordered_segments, timeout_s)

    def create_reader(self, topic: str, *, start: MessageId = MessageId.EARLIEST,
                      receiver_queue_size: int = 1000, timeout_s: float | None = None) -> Reader:
        """A non-durable reader of `topic` from `start` (default: the earliest message)."""
        options = ConsumerOptions(sub_type=SubType.Exclusive, durable=False,
                                  start_message_id=start,
                                  initial_position=InitialPosition.Earliest,
                                  receiver_queue_size=receiver_queue_size)
        consumer = self._consumer(topic, reader_subscription_name(), options, False, timeout_s)
        return Reader(consumer)

    def _consumer(self, topic: str, subscription: str, options: ConsumerOptions,
                  ordered: bool, timeout_s: float | None) -> Consumer:
        deadline = self._deadline(timeout_s)
        name = normalize_topic(topic)
        self._check_scalable(name)
        queue = ReceiveQueue()
        if is_scalable(name):
            dag = DagWatch(self._ctx, name)
            dag.start(deadline)
            tracker = SegmentTracker(self._ctx, name, subscription, dag, options, queue,
                                     ordered=ordered)
            consumer = Consumer(self._ctx, name, subscription, options, queue, [], tracker,
                                on_close=self._forget_consumer)
            try:
                tracker.start(deadline)
            except BaseException:
                consumer.close(1.0)
                raise
        else:
            partitions = self._lookup.partitioned_metadata(name, deadline)
            topics = ([(partition_name(name, i), i) for i in range(partitions)] if partitions
                      else [(name, -1)])
            children = [
                TopicConsumer(self._ctx, concrete, subscription, logical_topic=name,
                              segment=concrete if index >= 0 else None, partition=index,
                              options=options, queue=queue)
                for concrete, index in topics
            ]
            consumer = Consumer(self._ctx, name, subscription, options, queue, children,
                                on_close=self._forget_consumer)
            try:
                for child in children:
                    child.start(deadline)
            except BaseException:
                consumer.close(1.0)
                raise
        with self._lock:
            self._consumers.add(consumer)
        return consumer

    def _forget_consumer(self, consumer: Consumer) -> None:
        with self._lock:
            self._consumers.discard(consumer)

    # ---- transactions ---------------------------------------------------------------

    def new_transaction(self, timeout_s: float = 60.0, *,
                        request_timeout_s: float | None = None) -> Transaction:
        """Open a transaction (NEW_TXN with `txn_ttl_millis` = `timeout_s`).

        The first call discovers the coordinators (v4: the assign topic's partitions;
        v5: WATCH_TC_ASSIGNMENTS).

        Raises:
            harness.errors.DefiniteError: no transaction was opened.
            harness.errors.IndeterminateError: one may have been opened (the id is lost).
        """
        if timeout_s <= 0:
            raise InvalidStateError(f"transaction timeout must be > 0 s, got {timeout_s}")
        deadline = self._deadline(request_timeout_s)
        txn_id = self._coordinator.new_txn(int(timeout_s * 1000), deadline)
        return Transaction(self._coordinator, txn_id, timeout_s, self.config)

    def abort_transaction(self, txn_id: str, timeout_s: float | None = None) -> None:
        """END_TXN ABORT for the transaction `txn_id` (`"<most>:<least>"`), which another client
        opened: a second client ending a transaction it holds no handle of, as any client may
        (Pulsar's coordinator checks no owner without authentication). An answer that the
        transaction is already aborted is success; one that it committed is a definite failure.

        Raises:
            ValueError: `txn_id` is not `<most>:<least>`.
            harness.errors.DefiniteError: the abort certainly did not happen.
            harness.errors.IndeterminateError: it may have.
        """
        txn = TxnId.parse(txn_id)
        self._coordinator.end_txn(txn, TxnAction.ABORT, self._deadline(timeout_s), AttemptRecord())

    def owner_of(self, topic: str, timeout_s: float | None = None) -> str:
        """The service URL of the broker that owns `topic` (a partition or a v5 segment) now.

        The fault injector uses it to crash the broker a transaction's commit is reaching.
        """
        return self._lookup.lookup(topic, self._deadline(timeout_s)).logical

    def coordinator_brokers(self, timeout_s: float | None = None) -> dict[int, str]:
        """tc_id -> service URL of the broker serving that coordinator now.

        The fault injector uses it to find (and kill or isolate) a coordinator.
        """
        return self._coordinator.brokers(self._deadline(timeout_s))

    def connect_coordinators(self, timeout_s: float | None = None) -> dict[int, str | None]:
        """Connect every transaction coordinator now (`CoordinatorClient.connect_all`): per
        coordinator id None once connected, else why not."""
        return self._coordinator.connect_all(self._deadline(timeout_s))

    # ---- lifecycle ------------------------------------------------------------------

    def close(self, timeout_s: float = 5.0) -> None:
        """Close producers, consumers, coordinators, connections and the timer thread."""
        if self._closed:
            return
        with self._lock:
            producers = list(self._producers)
            consumers = list(self._consumers)
        for producer in producers:
            try:
                producer.close(timeout_s)
            except Exception:
                log.exception("closing %s failed", producer.topic)
        for consumer in consumers:
            try:
                consumer.close(timeout_s)
            except Exception:
                log.exception("closing consumer on %s failed", consumer.topic)
        self._closed = True
        self._coordinator.close()
        self._sweeper.cancel()
        self._pool.close()
        self._scheduler.stop()

    def __enter__(self) -> PulsarClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
