"""The brokers' metadata interface behaves the same on every backend.

`MetadataClient` (our protocol) and `OxiaMetadataClient` (the real `oxia` client over
Oxia's gRPC protocol) run the same checks against one real store process serving both
protocols, and `ZkMetadataClient` (kazoo) against a real ZooKeeper started once per
test session: typed errors, CAS, ephemeral records and the session listener, watches,
sequence keys, index range scans with their secondary keys, range deletes, and a
leader election. A difference here is a difference a broker would see.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from embedded.metadata.backend import MetadataBackend, open_metadata_client
from embedded.metadata.blocking import BlockingMetadataClient
from embedded.metadata.election import LeaderElection, Role
from embedded.metadata.model import (
    MUST_NOT_EXIST,
    BadVersion,
    Comparison,
    EventType,
    KeyNotFound,
    Notification,
    SessionExpired,
)
from embedded.metadata.oxia_client import OxiaMetadataClient
from embedded.metadata.zk_client import ZkMetadataClient
from tests.cluster.conftest import running
from tests.waiting import eventually, run
from tools.launch import StoreProcess, ZooKeeperProcess

SESSION_MS = 4_000
BACKENDS = ("ours", "oxia", "zk")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreProcess]:
    yield from running(StoreProcess(tmp_path_factory.mktemp("backends-store"), oxia=True))


@pytest.fixture
def urls(store: StoreProcess, request: pytest.FixtureRequest) -> Callable[[str], str]:
    """The `metadataStoreUrl` of each backend; ZooKeeper is started only when a test needs it."""
    def url_of(backend: str) -> str:
        if backend == "zk":
            return str(request.getfixturevalue("zookeeper").url)
        return f"oxia://{store.oxia_address}" if backend == "oxia" else store.address
    return url_of


@asynccontextmanager
async def connected(urls: Callable[[str], str], backend: str, **kw: Any) -> AsyncIterator[MetadataBackend]:
    client = open_metadata_client(urls(backend), session_timeout_ms=SESSION_MS, **kw)
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


def test_the_url_picks_the_backend(store: StoreProcess) -> None:
    assert isinstance(open_metadata_client(f"oxia://{store.oxia_address}/default", session_timeout_ms=SESSION_MS),
                      OxiaMetadataClient)
    assert isinstance(open_metadata_client("zk:127.0.0.1:2181", session_timeout_ms=SESSION_MS), ZkMetadataClient)
    with pytest.raises(ValueError, match="zk:"):
        open_metadata_client("zk:127.0.0.1", session_timeout_ms=SESSION_MS)
    with pytest.raises(ValueError, match="zk:"):
        open_metadata_client("etcd://127.0.0.1:2379", session_timeout_ms=SESSION_MS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_records_cas_and_typed_errors(urls: Callable[[str], str], backend: str) -> None:
    p = f"/{backend}/records"

    async def body() -> None:
        async with connected(urls, backend) as c:
            created = await c.put(f"{p}/a", "1", expected_version=MUST_NOT_EXIST)
            with pytest.raises(BadVersion):
                await c.put(f"{p}/a", "2", expected_version=MUST_NOT_EXIST)
            updated = await c.put(f"{p}/a", "2", expected_version=created.version.version_id)
            assert updated.version.modifications_count == 1
            assert (await c.get(f"{p}/a")).value == "2"
            assert await c.get_or_none(f"{p}/none") is None
            with pytest.raises(KeyNotFound):
                await c.get(f"{p}/none")
            await c.put_json(f"{p}/b", {"x": 1})
            assert (await c.get_json(f"{p}/b"))[0] == {"x": 1}
            assert (await c.get(f"{p}/aa", comparison=Comparison.FLOOR)).key == f"{p}/a"
            assert await c.list_prefix(f"{p}/") == [f"{p}/a", f"{p}/b"]
            assert [r.key for r in await c.range_scan(f"{p}/", f"{p}/~", limit=1)] == [f"{p}/a"]
            with pytest.raises(BadVersion):
                await c.delete(f"{p}/a", expected_version=created.version.version_id)
            assert await c.delete(f"{p}/a") is True
            assert await c.delete(f"{p}/a") is False
            assert await c.delete_range(f"{p}/", f"{p}/~") == 1
            assert await c.list_prefix(f"{p}/") == []

    run(body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequences_and_index_scans_with_secondary_keys(urls: Callable[[str], str], backend: str) -> None:
    p = f"/{backend}/seq"

    async def body() -> None:
        async with connected(urls, backend) as c:
            first = await c.put(f"{p}/ops", "a", partition_key="t1", sequence_keys_deltas=[1],
                                secondary_indexes={f"{backend}-by-deadline": "0002"})
            second = await c.put(f"{p}/ops", "b", partition_key="t1", sequence_keys_deltas=[1],
                                 secondary_indexes={f"{backend}-by-deadline": "0001"})
            assert (first.key, second.key) == (f"{p}/ops-00000000000000000001", f"{p}/ops-00000000000000000002")
            scanned = await c.range_scan("", "~", use_index=f"{backend}-by-deadline", include_value=False)
            assert [(r.key, r.secondary_key, r.value) for r in scanned] == [
                (second.key, "0001", None), (first.key, "0002", None)]
            assert await c.list("0001", "0002", use_index=f"{backend}-by-deadline") == [second.key]

    run(body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_watches_and_ephemeral_records_end_with_the_session(urls: Callable[[str], str], backend: str) -> None:
    p = f"/{backend}/eph"

    async def body() -> None:
        events: list[Notification] = []
        async with connected(urls, backend) as watcher:
            await watcher.watch(f"{p}/", events.extend)
            async with connected(urls, backend, client_name="owner") as owner:
                sid = await owner.session_id()
                assert owner.current_session == sid
                put = await owner.put(f"{p}/lock", "me", ephemeral=True)
                assert put.version.ephemeral and put.version.session_id == sid
                seen = await watcher.get(f"{p}/lock")
                assert seen.version.session_id == sid
            await eventually(lambda: [(e.type, e.key) for e in events] == [
                (EventType.CREATED, f"{p}/lock"), (EventType.DELETED, f"{p}/lock")], what="created + deleted")
            with pytest.raises(KeyNotFound):
                await watcher.get(f"{p}/lock")

    run(body)


def end_session_from_outside(client: MetadataBackend, backend: str, store: StoreProcess, sid: int) -> None:
    """As an expiry would: our store's admin call, or ZooKeeper's close of the session by its credentials."""
    if backend != "zk":
        with BlockingMetadataClient(store.address) as admin:
            admin.session_close(sid)
        return
    from kazoo.client import KazooClient
    assert isinstance(client, ZkMetadataClient)
    session_id, password = client._require().client_id
    hijack = KazooClient(hosts=client.hosts, client_id=(session_id, password))
    hijack.start(10)
    hijack.stop()   # closes the session itself: its ephemeral znodes go, its owner sees it expired
    hijack.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_session_ended_by_the_store_is_announced_and_replaced(store: StoreProcess, urls: Callable[[str], str],
                                                                backend: str) -> None:
    """The store ends the session (as an expiry would); the backend tells its listeners."""
    p = f"/{backend}/lost"

    async def body() -> None:
        lost: list[int] = []
        async with connected(urls, backend, on_session_lost=lost.append) as c:
            sid = await c.session_id()
            await c.put(f"{p}/k", "v", ephemeral=True)
            await asyncio.to_thread(end_session_from_outside, c, backend, store, sid)
            if backend != "zk":
                with pytest.raises(SessionExpired):
                    await c.put(f"{p}/k2", "v", ephemeral=True)
            # on ZooKeeper the owner learns it from the server when it reconnects (kazoo's LOST)
            await eventually(lambda: lost == [sid], what="the session listener to run")
            await eventually(lambda: c.current_session not in (None, sid), timeout=15, what="a new session")
            again = await c.put(f"{p}/k3", "v", ephemeral=True)
            assert again.version.session_id == c.current_session != sid
            if backend == "zk":
                assert await c.get_or_none(f"{p}/k") is None   # the old session's ephemeral znode went with it

    run(body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_leader_election_hands_over_when_the_leader_resigns(urls: Callable[[str], str], backend: str) -> None:
    key = f"/{backend}/leader"

    async def body() -> None:
        async with connected(urls, backend, client_name="a") as a, connected(urls, backend, client_name="b") as b:
            ea, eb = LeaderElection(a, key, "a"), LeaderElection(b, key, "b")
            await ea.start()
            await ea.wait_for(lambda s: s.role is Role.LEADER, 10)
            await eb.start()
            await eb.wait_for(lambda s: s.role is Role.FOLLOWER and s.leader_value == "a", 10)
            await ea.stop()
            await eb.wait_for(lambda s: s.role is Role.LEADER, 10)
            await eb.stop()

    run(body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_put_after_a_range_delete_of_its_folder_succeeds(urls: Callable[[str], str], backend: str) -> None:
    """On ZooKeeper the range delete removes the parent znode too; the next put must create it again."""
    p = f"/{backend}/refill"

    async def body() -> None:
        async with connected(urls, backend) as c:
            await c.put(f"{p}/x/a", "1")
            assert await c.delete_range(f"{p}/", f"{p}/~") >= 1
            await c.put(f"{p}/x/b", "2", secondary_indexes={f"{backend}-refill": "k"})
            assert (await c.get(f"{p}/x/b")).value == "2"
            assert [r.key for r in await c.range_scan("k", "l", use_index=f"{backend}-refill")] == [f"{p}/x/b"]

    run(body)


def test_a_zookeeper_paused_past_the_session_timeout_expires_the_session_by_itself(zookeeper: ZooKeeperProcess) -> None:
    """ZooKeeper's own expiry: a server paused (SIGSTOP) longer than the session timeout expires
    the session when it resumes, and its ephemeral znode goes. The client announces the loss
    once ZooKeeper has not answered for 5/6 of the timeout (Pulsar's ZKSessionWatcher), before
    the server would expire it (barring a stalled event loop on this loaded machine), exactly
    once; then it works on a new session."""
    session_s = 2.0
    outcomes: list[str] = []

    async def body(server: ZooKeeperProcess) -> None:
        lost: list[tuple[int, float]] = []
        owner = ZkMetadataClient(server.address, session_timeout_ms=int(session_s * 1000),
                                 on_session_lost=lambda s: lost.append((s, time.monotonic())))
        async with owner:
            sid = await owner.session_id()
            await owner.put("/pause/owned", "v", ephemeral=True)
            assert server.pid is not None
            os.kill(server.pid, signal.SIGSTOP)
            paused = time.monotonic()
            try:
                await eventually(lambda: bool(lost), session_s * 2, "the loss announced while paused")
                announced_after = lost[0][1] - paused
                # the server expires it at the timeout rounded up to its 0.5 s tick: 2.0-2.5 s
                assert lost[0][0] == sid and announced_after < session_s * 1.25, announced_after
                await asyncio.sleep(max(0.0, session_s * 1.5 - (time.monotonic() - paused)))   # past the timeout
            finally:
                os.kill(server.pid, signal.SIGCONT)
            await eventually(lambda: owner.current_session is not None, 20, "a session answering again")
            # ZooKeeper's expirer usually runs first on resume (a new session); a reconnect that
            # reaches it first finds the session alive, and the client closes it and opens another
            outcomes.append("renewed" if owner.renewals else "expired")
            await assert_replaced(owner, sid, lost)

    run(lambda: body(zookeeper))   # the session's ZooKeeper: paused 3 s, no other test's client is on it
    print(f"session after the pause: {outcomes[0]}")


async def assert_replaced(owner: ZkMetadataClient, sid: int, lost: list[tuple[int, float]]) -> None:
    """The lost session is never used again: its ephemeral znode is gone, the loss was announced
    once, and writes go on under a new session."""
    assert owner.current_session not in (None, sid)
    assert await owner.get_or_none("/pause/owned") is None, "the lost session's znode stayed"
    assert [s for s, _ in lost] == [sid]
    again = await owner.put("/pause/other", "v2", ephemeral=True)
    assert again.version.session_id == owner.current_session


def test_a_zookeeper_paused_short_of_the_session_timeout_gets_a_new_session(zookeeper: ZooKeeperProcess) -> None:
    """A pause between the client's 5/6 mark and the server's timeout: the server keeps the session
    and the TCP connection survives, so kazoo reports no state change at all. The client has told
    its listeners the session is lost; when the old session answers its probe again it must close
    it and open a new one, not stay without a session (CI caught this: `current_session` stayed
    None for good after a short ZooKeeper stall)."""
    session_s = 2.0

    async def body(server: ZooKeeperProcess) -> None:
        lost: list[tuple[int, float]] = []
        owner = ZkMetadataClient(server.address, session_timeout_ms=int(session_s * 1000),
                                 on_session_lost=lambda s: lost.append((s, time.monotonic())))
        async with owner:
            sid = await owner.session_id()
            await owner.put("/pause/owned", "v", ephemeral=True)
            assert server.pid is not None
            os.kill(server.pid, signal.SIGSTOP)
            try:
                # resumed as soon as the loss is announced (5/6 of 2 s), before the server's expiry
                await eventually(lambda: bool(lost), session_s * 2, "the loss announced while paused")
            finally:
                os.kill(server.pid, signal.SIGCONT)
            await eventually(lambda: owner.current_session is not None, 20, "a session answering again")
            assert owner.current_session != sid
            await assert_replaced(owner, sid, lost)

    run(lambda: body(zookeeper))


@pytest.mark.parametrize("backend", ("oxia", "zk"))
def test_the_drain_reads_a_v5_header_as_a_broker_wrote_it(urls: Callable[[str], str], backend: str) -> None:
    """orchestrator.load.txn_headers on a store a real Pulsar 5 names by address (Oxia's protocol,
    ZooKeeper): the state of each header written, None for one never written or deleted."""
    from orchestrator.load.txn_headers import HeaderStates, header_key

    most = 7 if backend == "oxia" else 8
    written = {(most, 1): "OPEN", (most, 2): "COMMITTED", (most, 3): "ABORTED"}

    async def write() -> None:
        async with connected(urls, backend) as c:
            for (m, least), state in written.items():
                await c.put_json(header_key(m, least), {"state": state, "timeout": 30.0, "owner": "broker-0"})
            await c.put_json(header_key(most, 4), {"state": "OPEN"})
            await c.delete(header_key(most, 4))

    run(write)
    reader = HeaderStates(urls(backend), timeout_s=20.0)
    reader.read_all([*written, (most, 4), (most, 5)])
    for txn, state in written.items():
        found = reader.transaction_metadata(*txn)
        assert found is not None and found["status"] == state and found["header"]["owner"] == "broker-0"
    assert reader.transaction_metadata(most, 4) is None and reader.transaction_metadata(most, 5) is None
