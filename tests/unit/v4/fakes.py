"""In-memory stand-ins for the broker pieces the v4 path uses (no processes, no sockets).

`FakeStorage` is what survives a crash: the ledgers of every managed ledger and the
last *persisted* state of every cursor. `FakeFactory.crash()` forgets every open
managed ledger (nothing is flushed), so the next `open` sees only what was durable,
starting a new ledger as the real managed ledger does. Cursors keep their state with
the real `CursorState`, persisted by `flush()` and `close()` only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embedded.broker.config import Settings
from embedded.broker.entry import PLAIN, Entry, EntryInfo
from embedded.broker.managed_ledger.api import (
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
    ManagedLedgerTerminated,
)
from embedded.broker.managed_ledger.cursor_state import CursorState
from embedded.broker.metrics import BrokerMetrics
from embedded.broker.position import Position
from embedded.broker.topic_name import TopicName
from embedded.broker.txn_api import OwnerInfo, PeerUnavailable, TxnAck
from embedded.broker.v4.metrics import V4Metrics
from embedded.broker.v4.settings import V4Settings
from harness.wire import Command


@dataclass
class StoredLog:
    ledgers: list[tuple[int, list[tuple[bytes, EntryInfo]]]] = field(default_factory=list)
    cursors: dict[str, dict[str, Any]] = field(default_factory=dict)
    terminated: Position | None = None


class FakeStorage:
    def __init__(self) -> None:
        self.logs: dict[str, StoredLog] = {}
        self.next_ledger_id = 10
        self.appends_by_kind: dict[str, int] = {}

    def new_ledger_id(self) -> int:
        self.next_ledger_id += 1
        return self.next_ledger_id


class FakeCursor:
    def __init__(self, ml: FakeLedger, name: str, state: CursorState) -> None:
        self.ml = ml
        self._name = name
        self.state = state
        self.flushes = 0
        self.closed = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def durable(self) -> bool:
        return True

    @property
    def mark_delete_position(self) -> Position:
        return self.state.mark_delete

    def is_acked(self, position: Position) -> bool:
        return self.state.is_acked(position)

    def batch_ack_set(self, position: Position) -> list[int] | None:
        return self.state.batch_ack_set(position)

    def acknowledge(self, acks: Sequence[tuple[Position, Sequence[int] | None]]) -> bool:
        moved = False
        for position, ack_set in acks:
            moved = self.state.ack(position, ack_set) or moved
        return moved

    def acknowledge_cumulative(self, position: Position, ack_set: Sequence[int] | None = None) -> bool:
        return self.state.ack_cumulative(position, ack_set)

    async def flush(self) -> None:
        self.flushes += 1
        self.persist()

    def persist(self) -> None:
        if not self.ml.gone:
            self.ml.stored.cursors[self._name] = self.state.to_json()


class FakeLedger:
    def __init__(self, name: str, config: ManagedLedgerConfig, storage: FakeStorage) -> None:
        self.name = name
        self.config = config
        self.storage = storage
        self.stored = storage.logs.setdefault(name, StoredLog())
        self.stored.ledgers = [(lid, entries) for lid, entries in self.stored.ledgers if entries]
        self.current = storage.new_ledger_id()
        self.stored.ledgers.append((self.current, []))
        self._listeners: list[Callable[[Position, EntryInfo], None]] = []
        self._cursors: dict[str, FakeCursor] = {}
        self.gone = False          # crashed or closed: this instance writes nothing more
        self.fenced = False
        self.fail_appends: BaseException | None = None
        self.appends = 0

    # ---- positions ----------------------------------------------------------------------------

    def _entries(self, ledger_id: int) -> list[tuple[bytes, EntryInfo]] | None:
        for lid, entries in self.stored.ledgers:
            if lid == ledger_id:
                return entries
        return None

    @property
    def last_confirmed(self) -> Position:
        for lid, entries in reversed(self.stored.ledgers):
            if entries:
                return Position(lid, len(entries) - 1)
        return Position(self.stored.ledgers[0][0], -1)

    @property
    def terminated_position(self) -> Position | None:
        return self.stored.terminated

    async def metadata_unchanged(self) -> bool:
        """No later instance opened this log (each open adds its own ledger to the stored list last)."""
        return bool(self.stored.ledgers) and self.stored.ledgers[-1][0] == self.current

    def next_position(self, position: Position) -> Position:
        ids = [lid for lid, _ in self.stored.ledgers]
        if position.ledger_id == self.current:
            return Position(self.current, position.entry_id + 1)
        entries = self._entries(position.ledger_id)
        if entries is not None and position.entry_id + 1 < len(entries):
            return Position(position.ledger_id, position.entry_id + 1)
        for lid in ids:
            if lid > position.ledger_id and (lid == self.current or self._entries(lid)):
                return Position(lid, 0)
        return Position(position.ledger_id, position.entry_id + 1)

    def ledger_infos(self) -> list[dict[str, Any]]:
        return [{"ledgerId": lid, "entries": len(entries), "open": lid == self.current}
                for lid, entries in self.stored.ledgers]

    # ---- writing ------------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[Position, EntryInfo], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[Position, EntryInfo], None]) -> None:
        self._listeners.remove(listener)

    def append(self, data: bytes, info: EntryInfo = PLAIN) -> asyncio.Future[Position]:
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        if self.stored.terminated is not None:
            future.set_exception(ManagedLedgerTerminated(f"{self.name} was terminated"))
            return future
        if self.fenced:
            future.set_exception(ManagedLedgerFenced(f"{self.name} is fenced"))
            return future
        if self.gone:
            future.set_exception(ManagedLedgerError(f"{self.name} is closed"))
            return future
        if self.fail_appends is not None:
            future.set_exception(self.fail_appends)
            return future
        self.appends += 1
        kind = self.config.kind.value
        self.storage.appends_by_kind[kind] = self.storage.appends_by_kind.get(kind, 0) + 1

        def confirm() -> None:
            entries = self._entries(self.current)
            assert entries is not None
            entries.append((bytes(data), info))
            position = Position(self.current, len(entries) - 1)
            for listener in list(self._listeners):
                listener(position, info)
            if not future.done():
                future.set_result(position)

        asyncio.get_running_loop().call_soon(confirm)
        return future

    async def terminate(self) -> Position:
        self.stored.terminated = self.last_confirmed
        return self.stored.terminated

    # ---- reading ------------------------------------------------------------------------------

    async def read(self, start: Position, max_entries: int, *, max_position: Position | None = None) -> list[Entry]:
        limit = self.last_confirmed if max_position is None else min(max_position, self.last_confirmed)
        out: list[Entry] = []
        for lid, entries in self.stored.ledgers:
            for eid, (data, info) in enumerate(entries):
                position = Position(lid, eid)
                if position < start or position > limit:
                    continue
                out.append(Entry(position, data, info))
                if len(out) >= max_entries:
                    return out
        return out

    async def read_entry(self, position: Position) -> Entry:
        entries = self._entries(position.ledger_id)
        if entries is None or not 0 <= position.entry_id < len(entries):
            raise ManagedLedgerError(f"no entry at {position}")
        data, info = entries[position.entry_id]
        return Entry(position, data, info)

    def all_data(self) -> list[bytes]:
        return [data for _, entries in self.stored.ledgers for data, _ in entries]

    # ---- cursors ------------------------------------------------------------------------------

    async def open_cursor(self, name: str, *, initial_position: Position | None = None) -> FakeCursor:
        cursor = self._cursors.get(name)
        if cursor is None:
            saved = self.stored.cursors.get(name)
            if saved is not None:
                state = CursorState.from_json(saved, self.next_position)
            else:
                start = initial_position if initial_position is not None else self.last_confirmed
                state = CursorState(start, self.next_position)
            cursor = self._cursors[name] = FakeCursor(self, name, state)
            cursor.persist()
        return cursor

    def cursors(self) -> Mapping[str, FakeCursor]:
        return dict(self._cursors)

    async def delete_cursor(self, name: str) -> None:
        self._cursors.pop(name, None)

    async def close(self) -> None:
        for cursor in self._cursors.values():
            cursor.persist()
        self.gone = True

    async def delete(self) -> None:
        self.gone = True


class FakeFactory:
    def __init__(self, storage: FakeStorage | None = None) -> None:
        self.storage = storage or FakeStorage()
        self.open_ledgers: dict[str, FakeLedger] = {}
        self.opens = 0

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> FakeLedger:
        existing = self.open_ledgers.get(name)
        if existing is not None and not existing.gone:
            return existing
        self.opens += 1
        ml = self.open_ledgers[name] = FakeLedger(name, config or ManagedLedgerConfig(), self.storage)
        return ml

    async def exists(self, name: str) -> bool:
        return name in self.storage.logs

    async def delete(self, name: str) -> None:
        self.storage.logs.pop(name, None)

    def crash(self) -> FakeFactory:
        """Every open managed ledger is lost without flushing; a new factory on the same storage."""
        for ml in self.open_ledgers.values():
            ml.gone = True
        return FakeFactory(self.storage)


class FakeOwnership:
    def __init__(self) -> None:
        self.owned: set[TopicName] = set()
        self.listeners: list[Any] = []
        self.released: list[TopicName] = []
        self.claimable: set[TopicName] = set()

    def is_owned(self, topic: TopicName) -> bool:
        return topic in self.owned

    def owned_topics(self) -> list[TopicName]:
        return list(self.owned)

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    async def ensure_owner(self, topic: TopicName) -> OwnerInfo:
        """Ours when `claimable` names it (a record of our earlier session), else broker 1's."""
        if topic in self.claimable and topic not in self.owned:
            self.owned.add(topic)
            for listener in self.listeners:
                listener.on_owned(topic)
        broker_id = 0 if topic in self.owned else 1
        return OwnerInfo(broker_id, f"pulsar://127.0.0.1:{6650 + broker_id}", "")

    async def release(self, topic: TopicName) -> None:
        self.owned.discard(topic)
        self.released.append(topic)


PeerHandler = Callable[[TopicName, Command], Command]


class FakePeers:
    """request_owner answers through `handler(topic, command)`; it may raise PeerUnavailable."""

    def __init__(self, handler: PeerHandler | None = None) -> None:
        self.handler = handler
        self.requests: list[tuple[str, Command]] = []
        self._ids = 0

    async def request(self, broker_id: int, build: Callable[[int], Command], *,
                      timeout_s: float | None = None) -> Command:
        raise PeerUnavailable("no peers in unit tests")

    async def request_owner(self, topic: TopicName, build: Callable[[int], Command], *,
                            timeout_s: float | None = None) -> Command:
        self._ids += 1
        command = build(self._ids)
        self.requests.append((str(topic), command))
        await asyncio.sleep(0)
        if self.handler is None:
            raise PeerUnavailable("no handler")
        return self.handler(topic, command)


class FakeBroker:
    def __init__(self, settings: Mapping[str, Any] | None = None, *, factory: FakeFactory | None = None,
                 peers: FakePeers | None = None) -> None:
        self.broker_id = 0
        self.txn_path = "v4"
        self.cluster_name = "test"
        self.settings = Settings({"transactionCoordinatorEnabled": True, **dict(settings or {})})
        self.metrics = BrokerMetrics()
        self.managed_ledgers = factory or FakeFactory()
        self.ownership = FakeOwnership()
        self.peers = peers or FakePeers()


def v4_settings(**overrides: Any) -> V4Settings:
    return V4Settings.from_settings(Settings(overrides))


def v4_metrics(broker: FakeBroker) -> V4Metrics:
    return V4Metrics(broker.metrics, "broker-0")


# ---- topics and subscriptions --------------------------------------------------------------------


class FakeTopic:
    def __init__(self, name: str, ml: FakeLedger, broker: FakeBroker) -> None:
        self._name = TopicName.parse(name)
        self.ledger = ml
        self.broker = broker
        self.transaction_buffer: Any = None
        self._subscriptions: dict[str, FakeSubscription] = {}

    @property
    def name(self) -> TopicName:
        return self._name

    def subscription(self, name: str) -> FakeSubscription | None:
        return self._subscriptions.get(name)

    def subscriptions(self) -> Mapping[str, FakeSubscription]:
        return dict(self._subscriptions)


class FakeSubscription:
    def __init__(self, topic: FakeTopic, name: str, cursor: FakeCursor) -> None:
        self.topic = topic
        self.name = name
        self.cursor = cursor
        self.pending_ack: Any = None
        self.redelivered: list[Position] = []
        self.wakes = 0
        topic._subscriptions[name] = self

    def redeliver(self, positions: Iterable[Position]) -> None:
        self.redelivered.extend(positions)

    def wake(self) -> None:
        self.wakes += 1


def acks(*positions: Position) -> list[TxnAck]:
    return [TxnAck(p) for p in positions]
