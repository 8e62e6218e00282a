"""The store's RPC surface and the asyncio client, with the service in this process (loopback only)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from embedded.metadata.client import MetadataClient
from embedded.metadata.election import LeaderElection, Role
from embedded.metadata.model import (
    BadVersion,
    Comparison,
    EventType,
    InvalidOptions,
    KeyNotFound,
    MetadataError,
    MetadataUnavailable,
    Notification,
    SessionExpired,
)
from embedded.metadata.server import ConfigError, MetadataConfig, MetadataService
from tests.unit.v5.fakes import metadata_service
from tests.waiting import eventually, run


def service(data_dir: Path, rpc_port: int = 0) -> MetadataService:
    return MetadataService({"name": "metadata", "host": "127.0.0.1", "data_dir": str(data_dir),
                            "rpc_port": rpc_port, "http_port": 0})


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="`rpc_port` must be a port"):
        MetadataConfig.from_dict({"data_dir": "/tmp/x", "http_port": 1})
    with pytest.raises(ConfigError, match=r"`host` must be 127\.0\.0\.1"):
        MetadataConfig.from_dict({"data_dir": "/tmp/x", "rpc_port": 1, "http_port": 2, "host": "0.0.0.0"})
    with pytest.raises(ConfigError, match="`data_dir`"):
        MetadataConfig.from_dict({"rpc_port": 1, "http_port": 2})


def test_every_operation_over_the_wire(tmp_path: Path) -> None:
    async def main() -> None:
        async with metadata_service(tmp_path) as address, MetadataClient(address) as c:
            await c.ping()
            v1 = (await c.put("/t/a", "1", secondary_indexes={"ix": "b"})).version
            await c.put("/t/b", "2", secondary_indexes={"ix": "a"})
            assert (await c.get("/t/a")).value == "1"
            assert (await c.get("/t/0", comparison=Comparison.CEILING)).key == "/t/a"
            assert (await c.get("/t/a", comparison=Comparison.HIGHER, include_value=False)).value is None
            by_index = await c.get("a", use_index="ix")
            assert (by_index.key, by_index.secondary_key) == ("/t/b", "a")
            assert await c.list("a", "c", use_index="ix") == ["/t/b", "/t/a"]
            assert [r.key for r in await c.range_scan("/t/", "/t0", limit=1)] == ["/t/a"]
            assert await c.list_prefix("/t/") == ["/t/a", "/t/b"]
            seq = await c.put("/t/seq", "s", partition_key="t", sequence_keys_deltas=[1])
            assert seq.key == "/t/seq-00000000000000000001"
            with pytest.raises(BadVersion):
                await c.put("/t/a", "x", expected_version=v1.version_id + 100)
            with pytest.raises(KeyNotFound):
                await c.get("/t/none")
            with pytest.raises(InvalidOptions, match="partition_key"):
                await c.put("/t/seq", "s", sequence_keys_deltas=[1])
            with pytest.raises(InvalidOptions, match="comparison"):
                await c._call("get", idempotent=True, key="/t/a", comparison="nearest")
            with pytest.raises(MetadataError, match="UnknownOp"):
                await c._call("frobnicate", idempotent=True)
            await c.put_json("/t/j", {"b": 1, "a": [1, 2]})
            value, version = await c.get_json("/t/j")
            assert value == {"a": [1, 2], "b": 1}
            await c.put_json("/t/j", {"b": 2}, expected_version=version.version_id)
            with pytest.raises(BadVersion):
                await c.delete("/t/j", expected_version=-1)
            assert await c.delete("/t/j") is True
            assert await c.delete("/t/j") is False
            assert await c.delete_range("/t/", "/t/b") == 1
            stats = await c.stats()
            assert stats["records"] == 2 and stats["applied_lsn"] == stats["durable_lsn"]
            assert stats["indexes"] == ["ix"]

    run(main)


def test_watch_events_are_ordered_prefix_filtered_and_start_after_registration(tmp_path: Path) -> None:
    async def main() -> None:
        async with metadata_service(tmp_path) as address, MetadataClient(address) as c:
            await c.put("/w/before", "x")
            got: list[Notification] = []
            watch = await c.watch("/w/", got.extend)
            await asyncio.gather(*(c.put(f"/w/{i:02d}", "v") for i in range(20)))
            await c.put("/other", "x")
            await c.put("/w/00", "again")
            await c.delete("/w/00")
            await eventually(lambda: len(got) == 22)
            assert [e.key for e in got[:20]] == [f"/w/{i:02d}" for i in range(20)]
            assert [e.version_id for e in got] == sorted(e.version_id for e in got)
            assert [(e.type, e.key) for e in got[20:]] == [(EventType.MODIFIED, "/w/00"), (EventType.DELETED, "/w/00")]
            await watch.cancel()
            await c.put("/w/after-cancel", "x")
            await c.ping()
            assert len(got) == 22

    run(main)


def test_pipelined_writes_on_one_connection_apply_in_order(tmp_path: Path) -> None:
    async def main() -> None:
        async with metadata_service(tmp_path) as address, MetadataClient(address) as c:
            results = await asyncio.gather(*(c.put("/p/k", str(i)) for i in range(50)))
            assert [r.version.version_id for r in results] == list(range(1, 51))
            assert (await c.get("/p/k")).value == "49"

    run(main)


def test_session_close_and_expiry_through_the_client(tmp_path: Path) -> None:
    async def main() -> None:
        svc = service(tmp_path)
        await svc.start()
        addr = f"127.0.0.1:{svc.rpc.port}"
        try:
            lost: list[int] = []
            async with MetadataClient(addr, session_timeout_ms=300, on_session_lost=lost.append) as a, \
                    MetadataClient(addr) as observer:
                await a.put("/s/a", "x", ephemeral=True)
                first = a.current_session
                # keepalives (every 100 ms) hold the session for longer than its 300 ms timeout
                await eventually(lambda: svc.metrics.session_ops.get(op="session_keepalive", result="ok") >= 5, 5)
                assert (await observer.get("/s/a")).version.session_id == first and lost == []
                with pytest.raises(SessionExpired):
                    await observer._call("session_keepalive", idempotent=True, session_id=999)
                assert first is not None
                await observer._call("session_close", idempotent=False, session_id=first)
                with pytest.raises(KeyNotFound):
                    await observer.get("/s/a")
                await eventually(lambda: lost == [first], 5)   # the next keepalive hears of it
                await eventually(lambda: a.current_session not in (None, first), 5)
            with pytest.raises(MetadataUnavailable):
                await a.get("/s/a")
        finally:
            await svc.stop()

    run(main)


def test_client_rewatches_and_resyncs_after_the_service_restarts(tmp_path: Path) -> None:
    async def main() -> None:
        svc = service(tmp_path)
        await svc.start()
        port = svc.rpc.port
        got: list[Notification] = []
        resyncs: list[int] = []
        async with MetadataClient(f"127.0.0.1:{port}", session_timeout_ms=5000) as c:
            await c.watch("/r/", got.extend, on_resync=lambda: resyncs.append(1))
            await c.put("/r/eph", "x", ephemeral=True)
            sid = c.current_session
            await svc.stop()
            await eventually(lambda: not c.connected, 5)
            svc = service(tmp_path, port)
            await svc.start()
            try:
                await eventually(lambda: bool(resyncs), 10)
                await c.put("/r/new", "x")
                await eventually(lambda: any(e.key == "/r/new" for e in got), 5)
                assert (await c.get("/r/eph")).version.session_id == sid == c.current_session
            finally:
                await c.close()
                await svc.stop()

    run(main)


def test_exactly_one_leader_among_candidates(tmp_path: Path) -> None:
    async def main() -> None:
        svc = service(tmp_path)
        await svc.start()
        addr = f"127.0.0.1:{svc.rpc.port}"
        clients = [MetadataClient(addr, session_timeout_ms=600) for _ in range(3)]
        elections: list[LeaderElection] = []
        try:
            for i, c in enumerate(clients):
                await c.connect()
                e = LeaderElection(c, "/txn/tc/leader/3", f"broker-{i}")
                await e.start()
                elections.append(e)
            await eventually(lambda: sum(e.is_leader for e in elections) == 1
                             and all(e.current.role is not Role.UNKNOWN for e in elections))
            leader = next(e for e in elections if e.is_leader)
            assert {e.current.leader_value for e in elections} == {leader.value}
            await leader.client.close()   # its session closes: the key goes at once
            rest = [e for e in elections if e is not leader]
            await eventually(lambda: sum(e.is_leader for e in rest) == 1, 5)
            new = next(e for e in rest if e.is_leader)
            await eventually(lambda: all(e.current.leader_value == new.value for e in rest), 5)
        finally:
            for e in elections:
                await e.stop()
            for c in clients:
                await c.close()
            await svc.stop()

    run(main)
