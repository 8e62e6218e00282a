"""The clients against an in-process ledger service on loopback (no child processes)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from embedded.ledger.client import (
    BlockingLedgerClient,
    Fenced,
    InvalidRequest,
    LedgerClient,
    LedgerClosed,
    LedgerKind,
    LedgerState,
    LedgerUnavailable,
    NoSuchEntry,
    NoSuchLedger,
)
from embedded.ledger.model import MAX_ENTRY_BYTES
from embedded.ledger.server import LedgerService, LedgerServiceConfig
from embedded.rpc import AsyncRpcClient, RpcError, RpcServer


def _service(tmp_path: Path) -> LedgerService:
    return LedgerService(LedgerServiceConfig(name="ledger", data_dir=tmp_path / "data", rpc_port=0, http_port=0))


def with_service(tmp_path: Path, body: Callable[[LedgerService, str], Awaitable[None]]) -> None:
    async def main() -> None:
        service = _service(tmp_path)
        await service.start()
        try:
            await body(service, f"127.0.0.1:{service.rpc_port}")
        finally:
            await service.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def _block_journal(service: LedgerService) -> threading.Event:
    """Hold the journal writer thread until the returned event is set (bounded)."""
    release = threading.Event()
    assert service.store is not None
    service.store._writer.submit(release.wait, 20)
    return release


def test_typed_errors(tmp_path: Path) -> None:
    async def body(service: LedgerService, address: str) -> None:
        async with LedgerClient(address) as client:
            with pytest.raises(NoSuchLedger):
                await client.append(999, b"x")
            ledger = await client.create_ledger(LedgerKind.DATA, "t")
            await client.append(ledger, b"x")
            with pytest.raises(NoSuchEntry):
                await client.read(ledger, 0, 1)
            assert await client.fence(ledger) == 0
            with pytest.raises(Fenced):
                await client.append(ledger, b"y")
            assert await client.close_ledger(ledger) == 0
            with pytest.raises(LedgerClosed):
                await client.append(ledger, b"y")
            with pytest.raises(ValueError, match="topic"):
                await client.create_ledger("topic", "t")      # refused before sending
            with pytest.raises(InvalidRequest, match="kind"):
                await client._call("create", metadata={"kind": "topic", "name": "t"})
            with pytest.raises(InvalidRequest, match="ledger_id"):
                await client._call("append", b"x", ledger_id="1")
            with pytest.raises(InvalidRequest, match="exceeds the limit"):
                await client.append(ledger, bytes(MAX_ENTRY_BYTES + 1))
            info = await client.info(ledger)
            assert (info.state, info.last_entry_id, info.metadata.kind) == (LedgerState.CLOSED, 0, LedgerKind.DATA)
            await client.delete_ledger(ledger)
            assert await client.list_ledgers() == []

    with_service(tmp_path, body)


def test_pipelined_appends_get_ids_in_call_order(tmp_path: Path) -> None:
    async def body(service: LedgerService, address: str) -> None:
        async with LedgerClient(address) as client:
            ledger = await client.create_ledger("txn-log", "tc-0")
            answered: list[int] = []

            def note_answer(i: int) -> Callable[[asyncio.Future[int]], None]:
                return lambda _: answered.append(i)

            calls = []
            for i in range(300):
                call = asyncio.ensure_future(client.append(ledger, b"%d" % i))
                call.add_done_callback(note_answer(i))
                calls.append(call)
            ids = await asyncio.gather(*calls)
            assert ids == list(range(300))
            assert answered == list(range(300))                  # answered in call order
            assert await client.read(ledger, 0, 299) == [b"%d" % i for i in range(300)]
            assert service.stats.journal_syncs.get() < 300 / 2   # they shared fsyncs

    with_service(tmp_path, body)


def test_reads_larger_than_one_answer_are_reassembled(tmp_path: Path) -> None:
    async def body(service: LedgerService, address: str) -> None:
        async with LedgerClient(address) as client:
            ledger = await client.create_ledger("data", "big")
            entries = [bytes([i]) * (MAX_ENTRY_BYTES - i) for i in range(4)]   # > 16 MB in total
            for entry in entries:
                await client.append(ledger, entry)
            assert await client.read(ledger, 0, 3) == entries
            assert service.stats.requests.get(op="read", result="ok") >= 2

    with_service(tmp_path, body)


def test_lost_connection_is_unavailable_then_reconnects(tmp_path: Path) -> None:
    async def body(service: LedgerService, address: str) -> None:
        async with LedgerClient(address, request_timeout=5, connect_attempts=2) as client:
            ledger = await client.create_ledger("data", "t")
            release = _block_journal(service)
            in_flight = [asyncio.ensure_future(client.append(ledger, b"%d" % i)) for i in range(5)]
            assert service.store is not None
            for _ in range(200):   # bounded: until the server has accepted all five
                if service.store.book.ledgers[ledger].last_pushed == 4:
                    break
                await asyncio.sleep(0.01)
            assert service.rpc is not None
            port = service.rpc.port
            await service.rpc.close()                    # the connection drops with appends in flight
            outcomes = await asyncio.gather(*in_flight, return_exceptions=True)
            assert all(isinstance(o, LedgerUnavailable) for o in outcomes), outcomes
            with pytest.raises(LedgerUnavailable, match="cannot connect"):
                await client.info(ledger)
            release.set()
            service.rpc = RpcServer(service.rpc.handlers, port=port)
            await service.rpc.start()
            info = await client.info(ledger)             # transparently reconnected
            assert client.reconnects == 1
            for _ in range(200):                         # "unknown" appends did happen here
                if info.last_entry_id == 4:
                    break
                await asyncio.sleep(0.01)
                info = await client.info(ledger)
            assert info.last_entry_id == 4

    with_service(tmp_path, body)


def test_timeout_is_unavailable(tmp_path: Path) -> None:
    async def body(service: LedgerService, address: str) -> None:
        async with LedgerClient(address, request_timeout=0.3) as client:
            ledger = await client.create_ledger("cursor", "c")
            release = _block_journal(service)
            try:
                with pytest.raises(LedgerUnavailable, match="outcome unknown"):
                    await client.append(ledger, b"x")
            finally:
                release.set()

    with_service(tmp_path, body)


def test_unreachable_store_fails_after_bounded_attempts() -> None:
    async def main() -> None:
        client = LedgerClient("127.0.0.1:1", connect_attempts=2, connect_timeout=0.5)
        with pytest.raises(LedgerUnavailable, match="is the ledger store running"):
            await client.connect()

    asyncio.run(asyncio.wait_for(main(), 30))
    blocking = BlockingLedgerClient("127.0.0.1:1", timeout=0.5)
    with pytest.raises(LedgerUnavailable):
        blocking.connect(attempts=2)
    with pytest.raises(ValueError, match=r"127\.0\.0\.1:PORT"):
        LedgerClient("localhost")


def test_blocking_client(tmp_path: Path) -> None:
    async def body(service: LedgerService, address: str) -> None:
        def use() -> None:
            with BlockingLedgerClient(address) as client:
                client.connect()
                ledger = client.create_ledger("pending-ack", "sub")
                assert [client.append(ledger, b"e%d" % i) for i in range(3)] == [0, 1, 2]
                assert client.read(ledger, 1, 2) == [b"e1", b"e2"]
                assert client.recover_ledger(ledger) == 2
                with pytest.raises(LedgerClosed):
                    client.append(ledger, b"late")
                assert client.info(ledger).state is LedgerState.CLOSED
                assert [i.ledger_id for i in client.list_ledgers("pending-ack")] == [ledger]
                assert client.list_ledgers("data") == []
                client.delete_ledger(ledger)
                with pytest.raises(NoSuchLedger):
                    client.info(ledger)

        await asyncio.to_thread(use)

    with_service(tmp_path, body)


def test_unknown_op_is_a_definite_error(tmp_path: Path) -> None:
    async def body(service: LedgerService, address: str) -> None:
        rpc = AsyncRpcClient("127.0.0.1", int(address.rsplit(":", 1)[1]))
        await rpc.connect()
        with pytest.raises(RpcError, match="UnknownOp"):
            await rpc.call("compact")
        await rpc.close()

    with_service(tmp_path, body)


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    good = {"name": "ledger", "host": "127.0.0.1", "data_dir": str(tmp_path), "rpc_port": 0, "http_port": 0}
    assert LedgerServiceConfig.from_dict({**good, "parent_pid": 7}).parent_pid == 7
    with pytest.raises(SystemExit, match="missing"):
        LedgerServiceConfig.from_dict({k: v for k, v in good.items() if k != "rpc_port"})
    with pytest.raises(SystemExit, match="binds 127"):
        LedgerServiceConfig.from_dict({**good, "host": "0.0.0.0"})
    with pytest.raises(SystemExit, match="http_port"):
        LedgerServiceConfig.from_dict({**good, "http_port": "8080"})
