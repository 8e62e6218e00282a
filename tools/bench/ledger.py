"""Measure the ledger store: appends/s and fsyncs per append, reads/s, recovery time.

    python -m tools.bench.ledger [--appenders 1,8,64] [--entry-bytes 256] [--seconds 5]
                                    [--recovery-mb 100] [--work-dir DIR]

Starts its own store process (`tools.launch.LedgerProcess`) in a temporary directory,
drives it with one `LedgerClient` connection (as one broker would), and reads the
store's /metrics before and after each step, so fsyncs per append are the store's
own count. Each appender owns one ledger (as each topic does) and keeps one append
in flight. Recovery is timed on a journal written directly with the store's own
journal code (the same bytes the server writes, much faster to produce), from
process start to /health 200. Prints a Markdown table; numbers depend on the machine
and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from embedded.ledger.book import LedgerBook
from embedded.ledger.client import LedgerClient
from embedded.ledger.journal import Journal
from embedded.ledger.model import LedgerKind, LedgerMetadata
from embedded.ledger.records import encode_record
from tools.launch import LedgerProcess


@dataclass(frozen=True)
class AppendResult:
    appenders: int
    appends: int
    seconds: float
    fsyncs: float
    p50_ms: float
    p99_ms: float

    @property
    def per_second(self) -> float:
        return self.appends / self.seconds


async def measure_appends(proc: LedgerProcess, appenders: int, entry_bytes: int, seconds: float) -> AppendResult:
    async with LedgerClient(proc.address) as client:
        ledgers = [await client.create_ledger(LedgerKind.DATA, f"bench-{appenders}-{i}") for i in range(appenders)]
        payload = bytes(entry_bytes)
        latencies: list[float] = []
        syncs_before = proc.metric("bookie_journal_JOURNAL_SYNC_count")
        adds_before = proc.metric("bookkeeper_server_ADD_ENTRY_count")
        deadline = time.perf_counter() + seconds

        async def appender(ledger_id: int) -> None:
            for _ in range(10_000_000):   # bounded by the deadline
                started = time.perf_counter()
                if started >= deadline:
                    return
                await client.append(ledger_id, payload)
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*[appender(ledger_id) for ledger_id in ledgers])
        elapsed = time.perf_counter() - started
        adds = proc.metric("bookkeeper_server_ADD_ENTRY_count") - adds_before
        syncs = proc.metric("bookie_journal_JOURNAL_SYNC_count") - syncs_before
    quantiles = statistics.quantiles(latencies, n=100)
    return AppendResult(appenders, int(adds), elapsed, syncs, quantiles[49] * 1000, quantiles[98] * 1000)


async def fill_ledger(proc: LedgerProcess, entries: int, entry_bytes: int) -> int:
    async with LedgerClient(proc.address) as client:
        ledger_id = await client.create_ledger(LedgerKind.DATA, "bench-read")
        payload = bytes(entry_bytes)
        for start in range(0, entries, 500):
            await asyncio.gather(*[client.append(ledger_id, payload) for _ in range(min(500, entries - start))])
    return ledger_id


async def measure_reads(proc: LedgerProcess, ledger_id: int, entries: int, batch: int) -> tuple[float, float]:
    """(entries/s reading `batch` at a time, entries/s reading one at a time)."""
    async with LedgerClient(proc.address) as client:
        started = time.perf_counter()
        for first in range(0, entries, batch):
            await client.read(ledger_id, first, min(first + batch, entries) - 1)
        batched = entries / (time.perf_counter() - started)
        single_count = min(entries, 5000)
        started = time.perf_counter()
        for entry_id in range(single_count):
            await client.read(ledger_id, entry_id, entry_id)
        single = single_count / (time.perf_counter() - started)
    return batched, single


def fdatasync_probe(directory: Path, writes: int = 300, size: int = 300) -> float:
    """Median microseconds of write+fdatasync appending to a file: the disk's floor for one group commit."""
    path = directory / "fdatasync-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    samples = []
    try:
        for i in range(writes):
            started = time.perf_counter()
            os.pwrite(fd, bytes(size), i * size)
            os.fdatasync(fd)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(samples) * 1e6


def write_journal(data_dir: Path, total_bytes: int, entry_bytes: int, ledgers: int = 64,
                  batch_bytes: int = 4 * 1024 * 1024) -> int:
    """Write a journal of about `total_bytes` of entries spread over `ledgers`; returns entries written."""
    book = LedgerBook()
    journal = Journal(data_dir / "journal", {}, next_seq=1)
    (data_dir / "journal").mkdir(parents=True, exist_ok=True)
    creates = [book.create(LedgerMetadata(LedgerKind.DATA, f"recovery-{i}")) for i in range(ledgers)]
    for record in creates:
        book.confirm(record)
    journal.write_batch([encode_record(r) for r in creates], book.next_ledger_id)
    payload = bytes(entry_bytes)
    written = 0
    per_batch = max(1, batch_bytes // (entry_bytes + 21))
    for _ in range(total_bytes // (per_batch * entry_bytes) + 1):
        records = []
        for i in range(per_batch):
            entry = book.append(creates[i % ledgers].ledger_id, payload)
            book.confirm(entry)
            records.append(encode_record(entry))
        journal.write_batch(records, book.next_ledger_id)
        written += per_batch
        if written * entry_bytes >= total_bytes:
            break
    journal.close()
    return written


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure_recovery(work_dir: Path, megabytes: int, entry_bytes: int) -> tuple[int, float, float, float, float]:
    """(entries, journal MB, seconds until healthy, seconds the store reports for replay, RSS MB after)."""
    proc = LedgerProcess(work_dir / "recovery")
    entries = write_journal(proc.data_dir, megabytes * 1024 * 1024, entry_bytes)
    size = sum(p.stat().st_size for p in (proc.data_dir / "journal").iterdir()) / 1e6
    started = time.perf_counter()
    proc.start(timeout_s=600)
    healthy = time.perf_counter() - started
    replay = proc.metric("txnbench_ledger_recovery_seconds")
    rss = resident_mb(proc.pid) if proc.pid is not None else float("nan")
    proc.stop()
    return entries, size, healthy, replay, rss


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appenders", default="1,8,64")
    parser.add_argument("--entry-bytes", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--read-entries", type=int, default=50_000)
    parser.add_argument("--recovery-mb", type=int, default=100, help="0 skips the recovery measurement")
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    try:
        proc = LedgerProcess(work_dir / "store", log_level="WARNING")
        proc.start()
        print(f"disk: one appending write+fdatasync takes {fdatasync_probe(work_dir):.0f} us (median of 300)\n")
        try:
            print(f"| appenders | appends/s | fsyncs/append | p50 ms | p99 ms |  ({args.entry_bytes}-byte entries, "
                  f"{args.seconds:.0f} s each)")
            print("|---|---|---|---|---|")
            for appenders in (int(a) for a in args.appenders.split(",")):
                r = asyncio.run(measure_appends(proc, appenders, args.entry_bytes, args.seconds))
                print(f"| {r.appenders} | {r.per_second:,.0f} | {r.fsyncs / max(r.appends, 1):.3f} "
                      f"| {r.p50_ms:.2f} | {r.p99_ms:.2f} |", flush=True)
            print(f"\ndisk after the appends: {fdatasync_probe(work_dir):.0f} us per write+fdatasync")
            ledger_id = asyncio.run(fill_ledger(proc, args.read_entries, args.entry_bytes))
            batched, single = asyncio.run(measure_reads(proc, ledger_id, args.read_entries, 100))
            print(f"\nreads of {args.read_entries:,} x {args.entry_bytes} B from the entry cache: "
                  f"{batched:,.0f} entries/s 100 at a time, {single:,.0f} entries/s one at a time")
            proc.stop()
            proc.start()    # the entry cache starts empty: every entry is pread from the journal
            batched, single = asyncio.run(measure_reads(proc, ledger_id, args.read_entries, 100))
            print(f"the same after a restart (pread per entry; the OS page cache is warm): "
                  f"{batched:,.0f} entries/s 100 at a time, {single:,.0f} entries/s one at a time")
        finally:
            proc.stop()
        if args.recovery_mb:
            entries, size, healthy, replay, rss = measure_recovery(work_dir, args.recovery_mb, args.entry_bytes)
            print(f"\nrecovery: {entries:,} entries, {size:,.0f} MB journal: healthy after {healthy:.1f} s "
                  f"(replay {replay:.1f} s, {entries / max(replay, 1e-9):,.0f} entries/s); "
                  f"store RSS after recovery {rss:,.0f} MB")
    finally:
        if args.work_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
