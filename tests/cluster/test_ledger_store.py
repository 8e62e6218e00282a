"""The ledger store as a real process: kill -9 durability, fencing, group commit, ids, metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedded.ledger.client import (
    BlockingLedgerClient,
    Fenced,
    LedgerClient,
    LedgerClosed,
    LedgerState,
    LedgerUnavailable,
)
from tests.cluster.conftest import running
from tests.waiting import eventually, run
from tools.launch import LedgerProcess


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[LedgerProcess]:
    yield from running(LedgerProcess(tmp_path / "ledger"))


def test_every_acknowledged_append_survives_kill_9(ledger: LedgerProcess) -> None:
    acked: dict[int, dict[int, bytes]] = {}

    async def load_until_killed() -> None:
        client = LedgerClient(ledger.address, request_timeout=5, connect_attempts=1)
        await client.connect()
        ids = [await client.create_ledger("data", f"topic-{i}") for i in range(4)]
        for ledger_id in ids:
            acked[ledger_id] = {}

        async def appender(worker: int) -> None:
            ledger_id = ids[worker % len(ids)]
            for i in range(100_000):   # ends when the store dies
                payload = f"w{worker}-{i}-".encode() * 16
                try:
                    entry_id = await client.append(ledger_id, payload)
                except LedgerUnavailable:
                    return
                acked[ledger_id][entry_id] = payload

        workers = [asyncio.create_task(appender(w)) for w in range(16)]
        await eventually(lambda: sum(map(len, acked.values())) >= 3000, what="3000 acknowledged appends", timeout=20)
        ledger.kill()                                   # mid-load: appends are in flight
        await asyncio.wait_for(asyncio.gather(*workers), 30)
        await client.close()

    run(load_until_killed)
    assert ledger.popen is not None and ledger.popen.returncode == -9
    ledger.start()
    with BlockingLedgerClient(ledger.address) as client:
        for ledger_id, entries in acked.items():
            info = client.info(ledger_id)
            assert info.state is LedgerState.OPEN
            assert info.last_entry_id >= max(entries)   # unacknowledged appends may have landed too
            stored = client.read(ledger_id, 0, info.last_entry_id)
            missing = [e for e, payload in entries.items() if stored[e] != payload]
            assert not missing, f"ledger {ledger_id}: acknowledged entries lost or changed: {missing[:10]}"
    assert ledger.metric("txnbench_ledger_recovered_entries") >= sum(map(len, acked.values()))


def test_fencing_stops_the_writer_and_the_reader_sees_every_acknowledged_entry(ledger: LedgerProcess) -> None:
    async def scenario() -> None:
        writer = LedgerClient(ledger.address)
        recoverer = LedgerClient(ledger.address)
        await writer.connect()
        await recoverer.connect()
        ledger_id = await writer.create_ledger("txn-log", "tc-0")
        acked: list[int] = []
        fenced_at: list[int] = []

        async def write() -> None:
            for i in range(100_000):
                try:
                    acked.append(await writer.append(ledger_id, b"record-%d" % i))
                except Fenced:
                    fenced_at.append(i)
                    return

        writers = [asyncio.create_task(write()) for _ in range(8)]   # pipelined, in flight at fence time
        await eventually(lambda: len(acked) >= 500, what="500 appends before fencing", timeout=20)
        last = await recoverer.fence(ledger_id)
        await asyncio.wait_for(asyncio.gather(*writers), 20)
        assert len(fenced_at) == 8                         # every writer was stopped
        assert max(acked) <= last                          # nothing acknowledged beyond the fence
        assert sorted(acked) == list(range(len(acked)))    # ... and nothing skipped
        entries = await recoverer.read(ledger_id, 0, last)
        assert len(entries) == last + 1
        assert await recoverer.close_ledger(ledger_id) == last
        with pytest.raises(LedgerClosed):
            await writer.append(ledger_id, b"after close")
        await writer.close()
        await recoverer.close()

    run(scenario)


def test_concurrent_appends_share_fsyncs(ledger: LedgerProcess) -> None:
    syncs_before = ledger.metric("bookie_journal_JOURNAL_SYNC_count")
    adds_before = ledger.metric("bookkeeper_server_ADD_ENTRY_count")

    async def load() -> None:
        async with LedgerClient(ledger.address) as client:
            ledger_id = await client.create_ledger("pending-ack", "sub")

            async def appender() -> None:
                for _ in range(30):
                    await client.append(ledger_id, bytes(256))

            await asyncio.gather(*[appender() for _ in range(64)])

    run(load)
    syncs = ledger.metric("bookie_journal_JOURNAL_SYNC_count") - syncs_before
    adds = ledger.metric("bookkeeper_server_ADD_ENTRY_count") - adds_before
    assert adds == 64 * 30
    assert syncs <= adds / 4, f"{syncs} fsyncs for {adds} appends: group commit is not grouping"
    assert ledger.metric("txnbench_ledger_entries_total", kind="pending-ack") == adds
    assert ledger.metric("txnbench_ledger_bytes_total", kind="pending-ack") == adds * 256


@pytest.mark.parametrize("restart", ["sigterm", "kill-9"])
def test_ledger_ids_are_never_reused_after_a_restart(ledger: LedgerProcess, restart: str) -> None:
    with BlockingLedgerClient(ledger.address) as client:
        created = [client.create_ledger("cursor", f"c{i}") for i in range(4)]
        client.delete_ledger(created[-1])
        client.delete_ledger(created[-2])
    if restart == "sigterm":
        assert ledger.stop() == 0
    else:
        ledger.kill()
    ledger.start()
    with BlockingLedgerClient(ledger.address) as client:
        assert [i.ledger_id for i in client.list_ledgers()] == created[:2]
        assert client.create_ledger("cursor", "after restart") == created[-1] + 1


def test_metrics_and_health(ledger: LedgerProcess) -> None:
    with BlockingLedgerClient(ledger.address) as client:
        ledger_id = client.create_ledger("tb-snapshot", "snap")
        client.append(ledger_id, b"abc")
        client.read(ledger_id, 0, 0)
    assert ledger.healthy()
    text = ledger.metrics_text()
    for name in ("bookkeeper_server_ADD_ENTRY_count", "bookkeeper_server_READ_ENTRY_count", "bookie_WRITE_BYTES",
                 "bookie_journal_JOURNAL_SYNC_count", "txnbench_ledger_entries_total",
                 "txnbench_ledger_bytes_total", "txnbench_ledger_append_latency_seconds_bucket",
                 "txnbench_ledger_open_ledgers"):
        assert f"\n{name}" in text, name
    assert ledger.metric("bookkeeper_server_ADD_ENTRY_count") == 1
    assert ledger.metric("bookkeeper_server_READ_ENTRY_count") == 1
    assert ledger.metric("bookie_WRITE_BYTES") == 3
    assert ledger.metric("txnbench_ledger_bytes_total", kind="tb-snapshot") == 3
    assert ledger.metric("txnbench_ledger_open_ledgers") == 1
