"""The metadata store as a real process: durability under kill -9, sessions, reconnects, elections."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedded.metadata.blocking import BlockingMetadataClient
from embedded.metadata.client import MetadataClient
from embedded.metadata.election import LeaderElection, Leadership, Role
from embedded.metadata.model import (
    BadVersion,
    EventType,
    KeyNotFound,
    MetadataUnavailable,
    Notification,
    SessionExpired,
)
from harness.metrics import parse_prometheus_text
from tests.cluster.conftest import running
from tests.waiting import eventually, run
from tools.launch import StoreProcess


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreProcess]:
    yield from running(StoreProcess(tmp_path / "metadata"))


def metric(store: StoreProcess, name: str, **labels: str) -> float:
    parsed = parse_prometheus_text(store.metrics_text())
    return parsed.get((name, tuple(sorted(labels.items()))), 0.0)


def test_acknowledged_writes_survive_kill_9(store: StoreProcess) -> None:
    acked: dict[str, tuple[str, int]] = {}
    counter: list[tuple[int, int]] = []   # (value, version_id) of acknowledged CAS increments

    async def write_until_killed() -> None:
        clients = [MetadataClient(store.address, request_timeout_s=3, connect_attempts=3) for _ in range(4)]
        for c in clients:
            await c.connect()

        async def writer(client: MetadataClient, w: int) -> None:
            for i in range(100_000):   # ends when the store dies
                key, value = f"/dur/{w:02d}/{i:06d}", f"{w}:{i}"
                try:
                    result = await client.put(key, value, secondary_indexes={"by-writer": f"{w:02d}"})
                except MetadataUnavailable:
                    return
                acked[key] = (value, result.version.version_id)

        async def cas_counter(client: MetadataClient) -> None:
            version = (await client.put_json("/dur/counter", 0, expected_version=-1)).version.version_id
            for n in range(1, 100_000):
                try:
                    version = (await client.put_json("/dur/counter", n, expected_version=version)).version.version_id
                except MetadataUnavailable:
                    return
                counter.append((n, version))

        async def killer() -> None:
            await eventually(lambda: len(acked) >= 600, 30, "600 acknowledged writes")
            await asyncio.to_thread(store.kill)

        tasks = [writer(clients[w % 4], w) for w in range(16)] + [cas_counter(clients[0]), killer()]
        await asyncio.gather(*tasks)
        for c in clients:
            await c.close()

    run(write_until_killed)
    assert not store.running()
    store.start()
    with BlockingMetadataClient(store.address) as c:
        missing = [k for k, (v, ver) in acked.items()
                   if (r := c.get_or_none(k)) is None or (r.value, r.version.version_id) != (v, ver)]
        assert missing == [], f"{len(missing)} acknowledged writes lost or changed, e.g. {missing[:5]}"
        value, version = c.get_json("/dur/counter")
        last_value, last_version = counter[-1]
        # the last acknowledged increment is there, or one more that was durable but unanswered
        assert value in (last_value, last_value + 1)
        if value == last_value:
            assert version.version_id == last_version
        by_writer = c.list("03", "04", use_index="by-writer")
        assert set(by_writer) >= {k for k in acked if k.startswith("/dur/03/")}
        stats = c.stats()
        assert stats["recovery_replayed"] >= len(acked)


def test_group_commit_metrics_and_health(store: StoreProcess) -> None:
    async def burst() -> None:
        async with MetadataClient(store.address) as client:
            await asyncio.gather(*(client.put(f"/gc/{i:04d}", "v") for i in range(400)))
            await client.get("/gc/0001")
            with pytest.raises(KeyNotFound):
                await client.get("/gc/none")
            with pytest.raises(BadVersion):
                await client.put("/gc/0001", "v", expected_version=-1)
            assert await client.delete("/gc/0002") is True
            assert await client.delete("/gc/0002") is False
            assert await client.delete_range("/gc/0100", "/gc/0200") == 100

    run(burst)
    puts = metric(store, "txnbench_metadata_ops_total", op="put", cas="false", result="ok")
    fsyncs = metric(store, "txnbench_metadata_fsyncs_total")
    assert puts == 400
    assert 0 < fsyncs < puts / 2, f"{fsyncs} fsyncs for {puts} concurrent puts: group commit is not grouping"
    assert metric(store, "txnbench_metadata_ops_total", op="put", cas="true", result="conflict") == 1
    assert metric(store, "txnbench_metadata_ops_total", op="get", cas="false", result="not_found") == 1
    assert metric(store, "txnbench_metadata_ops_total", op="delete", cas="false", result="not_found") == 1
    assert metric(store, "txnbench_metadata_ops_total", op="delete_range", cas="false", result="ok") == 1
    assert metric(store, "txnbench_metadata_records") == 299
    assert metric(store, "txnbench_metadata_wal_bytes_total") > 0
    assert store.healthy()


def test_session_expiry_deletes_ephemerals_and_notifies(store: StoreProcess) -> None:
    async def main() -> None:
        events: list[Notification] = []
        async with MetadataClient(store.address) as watcher:
            await watcher.watch("/eph/", events.extend)
            tool = BlockingMetadataClient(store.address)
            sid = await asyncio.to_thread(tool.session_open, 600, "no-keepalives")
            await asyncio.to_thread(tool.put, "/eph/owned", "x", ephemeral=True, session_id=sid)
            await asyncio.to_thread(tool.put, "/eph/kept", "y")
            started = time.monotonic()
            await eventually(lambda: any(e.type is EventType.DELETED for e in events), 10, "a deleted event")
            assert time.monotonic() - started >= 0.4
            assert [(e.type, e.key) for e in events] == [
                (EventType.CREATED, "/eph/owned"), (EventType.CREATED, "/eph/kept"), (EventType.DELETED, "/eph/owned")]
            assert await watcher.list_prefix("/eph/") == ["/eph/kept"]
            with pytest.raises(SessionExpired):
                await asyncio.to_thread(tool.session_keepalive, sid)
            tool.close()

    run(main)
    assert metric(store, "txnbench_metadata_sessions_expired_total") == 1
    assert metric(store, "txnbench_metadata_notifications_total") == 3


def test_a_paused_store_costs_the_session_and_the_client_starts_a_new_one(store: StoreProcess) -> None:
    async def main() -> None:
        lost: list[int] = []
        async with MetadataClient(store.address, session_timeout_ms=800, on_session_lost=lost.append) as client:
            await client.put("/own/t1", "me", ephemeral=True)
            old = client.current_session
            assert old is not None
            assert store.pid is not None
            os.kill(store.pid, signal.SIGSTOP)
            try:
                await eventually(lambda: lost == [old], 5, "the client to declare its session lost")
            finally:
                os.kill(store.pid, signal.SIGCONT)
            with BlockingMetadataClient(store.address) as tool:
                await eventually(lambda: tool.get_or_none("/own/t1") is None, 5, "the ephemeral record to go")
            await eventually(lambda: client.current_session not in (None, old), 5, "a new session")
            again = await client.put("/own/t1", "me", ephemeral=True, expected_version=-1)
            assert again.version.session_id == client.current_session

    run(main)


def test_client_reconnects_rewatches_and_keeps_its_session_across_a_restart(store: StoreProcess) -> None:
    async def main() -> None:
        events: list[Notification] = []
        resyncs: list[float] = []
        client = MetadataClient(store.address, session_timeout_ms=6000, request_timeout_s=0.5)
        try:
            await client.connect()
            await client.watch("/rw/", events.extend, on_resync=lambda: resyncs.append(time.monotonic()))
            owned = await client.put("/rw/owned", "me", ephemeral=True)
            sid = client.current_session
            await asyncio.to_thread(store.kill)
            with pytest.raises(MetadataUnavailable):
                await client.put("/rw/while-down", "x")
            await asyncio.to_thread(store.start)
            await eventually(lambda: bool(resyncs), 10, "a resync after the reconnect")
            with BlockingMetadataClient(store.address) as tool:
                tool.put("/rw/after", "x")
            await eventually(lambda: any(e.key == "/rw/after" for e in events), 5, "the event after the restart")
            got = await client.get("/rw/owned")
            assert got.version == owned.version
            assert client.current_session == sid and client.reconnects >= 1 and client.sessions_lost == 0
        finally:
            await client.close()
        with BlockingMetadataClient(store.address) as tool:   # close() ended the session at once
            assert tool.get_or_none("/rw/owned") is None

    run(main)


def test_election_fails_over_when_the_leaders_process_dies(store: StoreProcess, tmp_path: Path) -> None:
    key = "/txn/tc/leader/0"
    with (tmp_path / "candidate-a.log").open("wb") as log:
        candidate = subprocess.Popen(
            [sys.executable, "-m", "embedded.metadata.election", "--address", store.address, "--path", key,
             "--value", '{"brokerId":"a"}', "--session-timeout-ms", "800", "--max-seconds", "60"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        async def main() -> None:
            with BlockingMetadataClient(store.address) as tool:
                await eventually(lambda: (r := tool.get_or_none(key)) is not None and "a" in (r.value or ""),
                                 15, "candidate a to lead")
            changes: list[Leadership] = []
            async with MetadataClient(store.address, session_timeout_ms=800) as client:
                election = LeaderElection(client, key, '{"brokerId":"b"}', on_change=changes.append)
                await election.start()
                await election.wait_for(lambda s: s.role is Role.FOLLOWER, 5)
                assert election.current.leader_value == '{"brokerId":"a"}'
                killed = time.monotonic()
                def kill_candidate() -> None:
                    candidate.kill()
                    candidate.wait(10)

                await asyncio.to_thread(kill_candidate)
                await election.wait_for(lambda s: s.role is Role.LEADER, 10)
                failover = time.monotonic() - killed
                assert 0.5 < failover < 3.0, f"failover took {failover:.2f}s with an 800 ms session"
                assert [(c.role, c.leader_value) for c in changes] == [
                    (Role.FOLLOWER, '{"brokerId":"a"}'), (Role.LEADER, '{"brokerId":"b"}')]
                await election.stop()
                with pytest.raises(KeyNotFound):
                    await client.get(key)

        run(main)
    finally:
        if candidate.poll() is None:
            candidate.kill()
            candidate.wait(10)


def test_a_resigning_leader_hands_over_at_once(store: StoreProcess) -> None:
    async def main() -> None:
        async with MetadataClient(store.address) as ca, MetadataClient(store.address) as cb:
            a = LeaderElection(ca, "/own/topic-1", "a")
            await a.start()
            await a.wait_for(lambda s: s.role is Role.LEADER, 5)
            b = LeaderElection(cb, "/own/topic-1", "b")
            await b.start()
            await b.wait_for(lambda s: s.role is Role.FOLLOWER and s.leader_value == "a", 5)
            started = time.monotonic()
            await a.stop()
            await b.wait_for(lambda s: s.role is Role.LEADER, 5)
            assert time.monotonic() - started < 1.0   # no session timeout to wait for
            await b.stop()

    run(main)


def test_a_second_store_on_the_same_directory_refuses_to_start(store: StoreProcess) -> None:
    twin = StoreProcess(store.base_dir)
    with pytest.raises(RuntimeError, match="in use by another metadata store"):
        twin.start(timeout_s=20)
    assert store.healthy()
