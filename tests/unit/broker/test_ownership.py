"""Topic ownership across a lost metadata session, as Pulsar's brokers keep it (reconnect policy).

A broker whose session is lost (paused, or cut off from the store) keeps serving what it owns
and revalidates each record on its next session (Pulsar's `ResourceLockImpl.revalidate`):
acquired again when gone, replaced when ours from the old session, dropped (listeners told)
when another broker took it over. Meanwhile it never CAS-deletes with a lost session's
version. No sockets: an in-memory store with ZooKeeper-like per-record versions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from embedded.broker.metrics import BrokerMetrics
from embedded.broker.ownership import OwnershipService, owner_key
from embedded.broker.topic_name import TopicName
from embedded.metadata.model import (
    MUST_NOT_EXIST,
    BadVersion,
    GetResult,
    InvalidOptions,
    KeyNotFound,
    MetadataUnavailable,
    PutResult,
    Version,
)

TOPIC = TopicName.parse("persistent://public/default/t-partition-0")


class MemoryStore:
    """Records with per-record versions (ZooKeeper's: a new record starts at 0), ephemeral ones
    tied to a session; `reachable` False makes every call raise MetadataUnavailable.

    ZooKeeper's rule for ephemeral records, as `ZkMetadataClient` enforces it: one is only
    created (a versioned put of one raises InvalidOptions), since a znode's setData keeps the
    session that created it, whose expiry would still delete it."""

    def __init__(self) -> None:
        self.records: dict[str, tuple[str, int, int | None]] = {}   # key -> (value, version, session)
        self.next_session = 100
        self.reachable = True
        self.deletes: list[tuple[str, int | None]] = []

    def open_session(self) -> int:
        self.next_session += 1
        return self.next_session

    def expire(self, session: int) -> None:
        self.records = {k: r for k, r in self.records.items() if r[2] != session}

    def _check(self) -> None:
        if not self.reachable:
            raise MetadataUnavailable("the store is out of reach")

    def get(self, key: str) -> GetResult:
        self._check()
        if key not in self.records:
            raise KeyNotFound(key)
        value, version, session = self.records[key]
        return GetResult(key, value, Version(version, 0, 0, version, session is not None, session))

    def put(self, key: str, value: str, expected: int | None, session: int | None) -> PutResult:
        self._check()
        if session is not None and expected is not None and expected != MUST_NOT_EXIST:
            raise InvalidOptions(f"{key!r}: an ephemeral record is only created; its version is its owner's")
        current = self.records.get(key)
        if expected == MUST_NOT_EXIST and current is not None:
            raise BadVersion(key)
        if expected is not None and expected != MUST_NOT_EXIST and (current is None or current[1] != expected):
            raise BadVersion(key)
        version = 0 if current is None else current[1] + 1
        self.records[key] = (value, version, session)
        return PutResult(key, Version(version, 0, 0, version, session is not None, session))

    def delete(self, key: str, expected: int | None) -> None:
        self._check()
        self.deletes.append((key, expected))
        current = self.records.get(key)
        if current is None:
            raise KeyNotFound(key)
        if expected is not None and current[1] != expected:
            raise BadVersion(key)
        del self.records[key]


class BrokerClient:
    """One broker's metadata client on the shared store: its own session, lost on demand."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.session: int | None = None
        self.listeners: list[Callable[[int], None]] = []

    @property
    def current_session(self) -> int | None:
        return self.session

    async def session_id(self) -> int:
        self.store._check()
        if self.session is None:
            self.session = self.store.open_session()
        return self.session

    def add_session_listener(self, callback: Callable[[int], None]) -> None:
        self.listeners.append(callback)

    def lose_session(self) -> None:
        lost, self.session = self.session, None
        assert lost is not None
        for listener in self.listeners:
            listener(lost)

    async def get(self, key: str) -> GetResult:
        return self.store.get(key)

    async def put(self, key: str, value: str, *, expected_version: int | None = None,
                  ephemeral: bool = False) -> PutResult:
        session = await self.session_id() if ephemeral else None
        return self.store.put(key, value, expected_version, session)

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        self.store.delete(key, expected_version)
        return True


class Listener:
    def __init__(self) -> None:
        self.released: list[TopicName] = []

    def on_owned(self, topic: TopicName) -> None:
        return None

    def on_released(self, topic: TopicName) -> None:
        self.released.append(topic)


def broker(store: MemoryStore, broker_id: int) -> tuple[OwnershipService, BrokerClient, Listener]:
    client = BrokerClient(store)
    service = OwnershipService(client, broker_id, f"pulsar://b{broker_id}", f"http://b{broker_id}",  # type: ignore[arg-type]
                               BrokerMetrics())
    listener = Listener()
    service.add_listener(listener)
    return service, client, listener


async def settle(service: OwnershipService) -> None:
    for _ in range(200):   # bounded: the revalidation loop finishes or we give up
        task = service._revalidating
        if task is None or task.done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("revalidation did not finish")


async def taken_over_while_away(store: MemoryStore, zombie: OwnershipService, zombie_client: BrokerClient,
                                 other: OwnershipService) -> None:
    """The zombie owns TOPIC, loses its session (cut off), the store expires it, and `other` takes
    TOPIC over; the zombie has not revalidated yet."""
    await zombie.try_acquire(TOPIC)
    old = zombie_client.session
    assert old is not None
    store.reachable = False
    zombie_client.lose_session()
    store.expire(old)
    store.reachable = True
    await other.try_acquire(TOPIC)


def owner_id(store: MemoryStore) -> int:
    return int(json.loads(store.records[owner_key(TOPIC)][0])["broker_id"])


def test_a_lost_session_keeps_the_topic_served_and_a_new_owner_takes_it_away() -> None:
    async def run() -> None:
        store = MemoryStore()
        zombie, zombie_client, told = broker(store, 0)
        other, _, _ = broker(store, 1)
        await zombie.try_acquire(TOPIC)
        old_session = zombie_client.session
        assert old_session is not None
        store.reachable = False                       # cut off from the store (or paused) ...
        zombie_client.lose_session()
        assert zombie.is_owned(TOPIC) and not zombie.is_confirmed(TOPIC)   # ... still serving
        assert told.released == []
        store.expire(old_session)                     # the store expires the session ...
        await asyncio.sleep(0.05)                     # revalidation retries while out of reach
        assert zombie.is_owned(TOPIC)
        store.reachable = True
        await other.try_acquire(TOPIC)                # ... and another broker takes the topic over
        await settle(zombie)
        assert not zombie.is_owned(TOPIC)
        assert told.released == [TOPIC]
        assert owner_id(store) == 1
        await zombie.close()

    asyncio.run(run())


@pytest.mark.parametrize("expired_first", [True, False], ids=["store-expired-it", "declared-lost-first"])
def test_our_record_of_a_lost_session_is_acquired_again_on_the_next_session(expired_first: bool) -> None:
    """Whether the store expired the old session (nobody took the record) or the client declared it
    lost first (our stale record still there), the next session holds the topic again."""
    async def run() -> None:
        store = MemoryStore()
        service, client, told = broker(store, 0)
        await service.try_acquire(TOPIC)
        old = client.session
        assert old is not None
        if expired_first:
            store.expire(old)
        client.lose_session()
        await settle(service)
        assert service.is_confirmed(TOPIC) and told.released == []
        assert store.records[owner_key(TOPIC)][2] == client.session != old
        await service.close()

    asyncio.run(run())


def test_releasing_under_a_lost_session_never_deletes_the_new_owners_record() -> None:
    """The new owner's record may carry the version number our lost one had (ZooKeeper starts
    every znode at 0): a CAS delete with it would remove the new owner's ownership."""
    async def run() -> None:
        store = MemoryStore()
        zombie, zombie_client, _ = broker(store, 0)
        other, _, _ = broker(store, 1)
        await taken_over_while_away(store, zombie, zombie_client, other)   # its record: version 0, as ours was
        await zombie.release(TOPIC)      # e.g. its managed ledger was fenced: it lets the topic go
        assert store.deletes == [] and owner_id(store) == 1
        await zombie.close()

    asyncio.run(run())


def test_the_shutdown_policy_gives_every_topic_up_at_once() -> None:
    """`zookeeperSessionExpiredPolicy=shutdown`: Pulsar's broker exits on a lost session; here it
    gives up what it owned at once, listeners told, and revalidates nothing."""
    async def run() -> None:
        store = MemoryStore()
        client = BrokerClient(store)
        service = OwnershipService(client, 0, "pulsar://b0", "http://b0", BrokerMetrics(),  # type: ignore[arg-type]
                                   shutdown_on_session_loss=True)
        told = Listener()
        service.add_listener(told)
        await service.try_acquire(TOPIC)
        client.lose_session()
        assert not service.is_owned(TOPIC)
        await asyncio.sleep(0.01)
        assert told.released == [TOPIC] and service._revalidating is None
        await service.close()

    asyncio.run(run())


@pytest.mark.parametrize("path", ["lookup-take-over", "acquire"])
def test_a_restarted_broker_takes_its_predecessors_record_over_before_that_session_expires(path: str) -> None:
    """A broker killed and started again (same id, new session) finds its old process's record,
    whose session the store has not expired yet (a kill: nobody closed it). It must serve the
    topic at once, as Pulsar's `ResourceLockImpl.revalidate` does (delete the stale lock by
    version, create it anew), and the old session's expiry must not take the new record along.
    Found in chaos run 20261127-163805-chaos-chaos (v4, ZooKeeper): a versioned put was refused
    ("an ephemeral record is only created"), so broker 1, restarted, answered
    TransactionCoordinatorNotFound for coordinators 0-2 until its killed predecessor's session
    expired, and three commits stalled 30 s."""
    async def run() -> None:
        store = MemoryStore()
        before, old_client, _ = broker(store, 1)
        await before.try_acquire(TOPIC)
        old_session = old_client.session
        assert old_session is not None                 # ... then kill -9: the session lingers
        after, new_client, _ = broker(store, 1)
        stale = await after.owner_of(TOPIC)
        assert stale is not None and stale.session_id == old_session
        got = await (after.take_over(TOPIC, stale) if path == "lookup-take-over" else after.try_acquire(TOPIC))
        assert got.broker_id == 1 and after.is_confirmed(TOPIC)
        assert store.records[owner_key(TOPIC)][2] == new_client.session != old_session
        assert store.deletes == [(owner_key(TOPIC), stale.version_id)]   # by CAS on the stale version
        store.expire(old_session)                      # the killed process's session ends at last
        assert store.records[owner_key(TOPIC)][2] == new_client.session
        await after.close()

    asyncio.run(run())


class GatedClient(BrokerClient):
    """A client whose next ephemeral put waits until the test opens the gate: a release can
    then run while a revalidation's put is in flight."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.gate: asyncio.Event | None = None
        self.waiting = asyncio.Event()

    async def put(self, key: str, value: str, *, expected_version: int | None = None,
                  ephemeral: bool = False) -> PutResult:
        gate, self.gate = self.gate, None
        if ephemeral and gate is not None:
            self.waiting.set()
            await asyncio.wait_for(gate.wait(), 5)
        return await super().put(key, value, expected_version=expected_version, ephemeral=ephemeral)


async def owning(client: BrokerClient) -> tuple[OwnershipService, int]:
    """Broker 0 on `client`, owning TOPIC; returns it and the session it acquired under."""
    service = OwnershipService(client, 0, "pulsar://b0", "http://b0", BrokerMetrics())  # type: ignore[arg-type]
    await service.try_acquire(TOPIC)
    assert client.session is not None
    return service, client.session


@pytest.mark.parametrize("expired_first", [True, False], ids=["record-gone", "stale-record-replaced"])
def test_a_topic_released_while_its_record_is_revalidated_leaves_no_record(expired_first: bool) -> None:
    """Unloaded (released) while the revalidation of a lost session re-creates its record: the
    new record must not outlive the release. Left behind, it names this broker under its live
    session while the broker no longer serves the topic: lookups send clients here and the broker
    refuses them ("not served by broker 0 (owner: broker 0)") for the session's whole life.
    Seen in chaos experiment 20261127-224817-chaos-cov90-exp (v5: a segment stayed unserved until
    the drain restarted the brokers)."""
    async def run() -> None:
        store = MemoryStore()
        client = GatedClient(store)
        service, old = await owning(client)
        if expired_first:
            store.expire(old)
        gate = client.gate = asyncio.Event()
        client.lose_session()                          # revalidation starts: its put waits at the gate
        await asyncio.wait_for(client.waiting.wait(), 5)
        await service.release(TOPIC)                   # the topic is unloaded meanwhile
        gate.set()
        await settle(service)
        assert not service.is_owned(TOPIC)
        assert owner_key(TOPIC) not in store.records   # free for any broker to acquire
        other, _, _ = broker(store, 1)
        assert (await other.try_acquire(TOPIC)).broker_id == 1
        await service.close()

    asyncio.run(run())


class AnswerLostClient(BrokerClient):
    """The next ephemeral put lands in the store but its answer is lost (the store went out of
    reach before it answered): the caller sees MetadataUnavailable."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.lose_next_answer = False

    async def put(self, key: str, value: str, *, expected_version: int | None = None,
                  ephemeral: bool = False) -> PutResult:
        result = await super().put(key, value, expected_version=expected_version, ephemeral=ephemeral)
        if ephemeral and self.lose_next_answer:
            self.lose_next_answer = False
            raise MetadataUnavailable("the answer was lost")
        return result


def test_a_topic_released_after_a_revalidation_put_whose_answer_was_lost_leaves_no_record() -> None:
    """The revalidation's put landed, its answer did not; before the next round the topic is
    released. The record of the live session must go with the release."""
    async def run() -> None:
        store = MemoryStore()
        client = AnswerLostClient(store)
        service, old = await owning(client)
        store.expire(old)
        client.lose_next_answer = True
        client.lose_session()
        for _ in range(100):   # bounded: until the landed put is in the store
            if owner_key(TOPIC) in store.records:
                break
            await asyncio.sleep(0.01)
        assert store.records[owner_key(TOPIC)][2] == client.session != old
        await service.release(TOPIC)
        await settle(service)
        assert not service.is_owned(TOPIC)
        assert owner_key(TOPIC) not in store.records
        await service.close()

    asyncio.run(run())


class LoadedState(Listener):
    """A listener that can tell whether what it loaded of a topic is still current (the broker's
    and the v4 coordinators' `still_current`: their managed ledger's list unchanged)."""

    def __init__(self, current: bool | Exception) -> None:
        super().__init__()
        self.current = current
        self.asked: list[TopicName] = []

    async def still_current(self, topic: TopicName) -> bool:
        self.asked.append(topic)
        if isinstance(self.current, Exception):
            raise self.current
        return self.current


@pytest.mark.parametrize("current", [True, False, RuntimeError("no ledger list")],
                         ids=["unchanged", "changed", "cannot-tell"])
def test_a_record_gone_with_the_session_is_acquired_again_only_if_nobody_wrote_meanwhile(
        current: bool | Exception) -> None:
    """Embedded chaos-sessions (2026-12-04): broker 0's session expired, broker 1 took the topic and
    wrote to it, then broker 1's session expired too, removing its record before broker 0
    revalidated; broker 0 found the record gone, acquired it again and served the topic with its
    ledger list of before: committed values written meanwhile were unread until a restart. A gone
    record is acquired again only when what the broker loaded is unchanged; otherwise (or when
    that cannot be told) the topic is dropped, so the next lookup loads it afresh."""
    async def run() -> None:
        store = MemoryStore()
        zombie, zombie_client, _ = broker(store, 0)
        state = LoadedState(current)
        zombie.add_listener(state)
        other, other_client, _ = broker(store, 1)
        await taken_over_while_away(store, zombie, zombie_client, other)   # the other owns it for a while ...
        assert other_client.session is not None
        store.expire(other_client.session)            # ... and its session expires too: the record is gone
        await settle(zombie)
        assert state.asked == [TOPIC]
        if current is True:
            assert zombie.is_confirmed(TOPIC) and state.released == [] and owner_id(store) == 0
        else:
            assert not zombie.is_owned(TOPIC) and state.released == [TOPIC]
            assert owner_key(TOPIC) not in store.records
        await zombie.close()
        await other.close()

    asyncio.run(run())
