"""In-process stand-ins for the broker around the v5 components, over a real metadata store.

The metadata service runs in this process on 127.0.0.1 (no child processes), so the
coordinator, transaction buffer and pending-ack store run their real metadata I/O;
only the broker (ownership, managed ledger, cursor, dispatcher) is faked, with just
what the components use.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedded.broker.config import Settings
from embedded.broker.entry import PLAIN, EntryInfo
from embedded.broker.metrics import BrokerMetrics
from embedded.broker.position import Position
from embedded.broker.topic_name import TopicName
from embedded.broker.txn_api import BrokerInfo, OwnerInfo
from embedded.broker.v5.settings import V5Settings
from embedded.broker.v5.txn.coordinator import TransactionCoordinatorV5
from embedded.broker.v5.txn.metrics import V5Metrics
from embedded.broker.v5.txn.store import TxnMetadataStore
from embedded.metadata.client import MetadataClient
from embedded.metadata.server import MetadataService

SEGMENT = TopicName.parse("segment://public/default/orders/0000-ffff-0")


@asynccontextmanager
async def metadata_service(data_dir: Path) -> AsyncIterator[str]:
    service = MetadataService({"name": "metadata", "host": "127.0.0.1", "data_dir": str(data_dir),
                               "rpc_port": 0, "http_port": 0})
    await service.start()
    try:
        yield f"127.0.0.1:{service.rpc.port}"
    finally:
        await service.stop()


class FakeOwnership:
    def is_owned(self, topic: TopicName) -> bool:
        return False

    async def owner_of(self, topic: TopicName) -> OwnerInfo | None:
        return None


@dataclass
class FakeBroker:
    broker_id: int
    metadata: MetadataClient
    settings: Settings
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    ownership: FakeOwnership = field(default_factory=FakeOwnership)

    @property
    def advertised_service_url(self) -> str:
        return f"pulsar://127.0.0.1:{6650 + self.broker_id}"

    @property
    def advertised_web_url(self) -> str:
        return f"http://127.0.0.1:{8080 + self.broker_id}"

    def live_brokers(self) -> Mapping[int, BrokerInfo]:
        return {}


@dataclass
class Node:
    """One broker's v5 parts over its own metadata session."""

    broker: FakeBroker
    settings: V5Settings
    store: TxnMetadataStore
    metrics: V5Metrics
    coordinator: TransactionCoordinatorV5


async def start_node(address: str, broker_id: int, overrides: Mapping[str, Any] | None = None) -> Node:
    raw = {"transactionCoordinatorScalableTopicsParallelism": 2, "txnbenchV5TimeoutSweepIntervalMillis": 3_600_000,
           "txnbenchV5GcIntervalMillis": 3_600_000, "txnbenchV5GcRetentionMillis": 0, **(overrides or {})}
    settings = Settings(raw)
    client = MetadataClient(address, session_timeout_ms=2000, client_name=f"broker-{broker_id}")
    await client.connect()
    broker = FakeBroker(broker_id, client, settings)
    v5 = V5Settings.from_settings(settings)
    metrics = V5Metrics(broker.metrics)
    store = TxnMetadataStore(client, broker.metrics)
    coordinator = TransactionCoordinatorV5(broker, store, v5, metrics)   # type: ignore[arg-type]
    await coordinator.start()
    return Node(broker, v5, store, metrics, coordinator)


async def stop_node(node: Node) -> None:
    await node.coordinator.stop()
    await node.broker.metadata.close()


class FakeLedger:
    """A managed ledger in memory: positions (1, 0), (1, 1) ...; listeners before the future."""

    def __init__(self, name: str = "fake") -> None:
        self.name = name
        self.entries: list[tuple[Position, bytes, EntryInfo]] = []
        self.listeners: list[Callable[[Position, EntryInfo], None]] = []
        self._ids = itertools.count()
        self.terminated_position: Position | None = None

    @property
    def last_confirmed(self) -> Position:
        return self.entries[-1][0] if self.entries else Position(1, -1)

    def first_position(self) -> Position:
        return Position(1, 0)

    def append(self, data: bytes, info: EntryInfo = PLAIN) -> asyncio.Future[Position]:
        position = Position(1, next(self._ids))
        self.entries.append((position, data, info))
        for listener in self.listeners:
            listener(position, info)
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        future.set_result(position)
        return future


@dataclass
class FakeTopic:
    name: TopicName
    ledger: FakeLedger


class FakeCursor:
    durable = True

    def __init__(self) -> None:
        self.mark_delete_position = Position(1, -1)
        self.acked: set[Position] = set()
        self.flushes = 0

    def is_acked(self, position: Position) -> bool:
        return position <= self.mark_delete_position or position in self.acked

    def batch_ack_set(self, position: Position) -> list[int] | None:
        return None

    def acknowledge(self, acks: Sequence[tuple[Position, Sequence[int] | None]]) -> bool:
        for position, ack_set in acks:
            if not ack_set:
                self.acked.add(position)
        return False

    def acknowledge_cumulative(self, position: Position, ack_set: Sequence[int] | None = None) -> bool:
        self.mark_delete_position = max(self.mark_delete_position, position)
        return True

    async def flush(self) -> None:
        self.flushes += 1


@dataclass
class FakeSubscription:
    topic: FakeTopic
    name: str
    cursor: FakeCursor = field(default_factory=FakeCursor)
    redelivered: list[Position] = field(default_factory=list)
    wakes: int = 0

    def redeliver(self, positions: Sequence[Position]) -> None:
        self.redelivered.extend(positions)

    def wake(self) -> None:
        self.wakes += 1
