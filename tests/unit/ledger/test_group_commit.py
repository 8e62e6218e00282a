"""Group commit with a fake sink: batching, ordering, nothing answered before its write."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from embedded.ledger.group_commit import DurableRecord, GroupCommitter, JournalFailed
from embedded.ledger.journal import BatchWritten
from embedded.ledger.records import RECORD_HEADER_SIZE, EntryRecord


class GatedSink:
    """Writes nothing; each batch waits for the test to open the gate."""

    def __init__(self, fail_on_batch: int | None = None) -> None:
        self.batches: list[list[bytes]] = []
        self.gate = threading.Event()
        self.fail_on_batch = fail_on_batch

    def write_batch(self, records: Sequence[bytes], next_ledger_id: int) -> BatchWritten:
        if not self.gate.wait(10):
            raise TimeoutError("test never opened the gate")
        self.batches.append(list(records))
        if self.fail_on_batch == len(self.batches):
            raise OSError(5, "Input/output error")
        offset = 1000 * len(self.batches)
        return BatchWritten(segment=1, body_offset=offset, seq=len(self.batches),
                            bytes_written=sum(map(len, records)), syncs=1, new_segment=False)


def test_records_arriving_during_an_fsync_share_the_next_one() -> None:
    async def main() -> None:
        sink = GatedSink()
        durable: list[DurableRecord] = []
        with ThreadPoolExecutor(1) as pool:
            committer = GroupCommitter(sink, pool, next_ledger_id=lambda: 1,
                                       on_durable=lambda recs, written: durable.extend(recs),
                                       on_fatal=lambda err: None)
            first = committer.submit(EntryRecord(1, 0, b"a"))
            await asyncio.sleep(0)            # the flusher takes the first record alone
            later = [committer.submit(EntryRecord(1, i, b"b" * i)) for i in range(1, 51)]
            await asyncio.sleep(0.05)
            assert not first.done() and not any(f.done() for f in later)   # nothing before its write
            sink.gate.set()
            await asyncio.wait_for(asyncio.gather(first, *later), 10)
        assert [len(b) for b in sink.batches] == [1, 50]
        assert [d.record.entry_id for d in durable] == list(range(51))   # type: ignore[union-attr]
        # payload offsets follow the encoded records inside the batch body
        assert durable[1].payload_offset == 2000 + RECORD_HEADER_SIZE
        assert durable[2].payload_offset == durable[1].payload_offset + RECORD_HEADER_SIZE + 1

    asyncio.run(main())


def test_batches_respect_the_byte_limit() -> None:
    async def main() -> None:
        sink = GatedSink()
        sink.gate.set()
        with ThreadPoolExecutor(1) as pool:
            committer = GroupCommitter(sink, pool, next_ledger_id=lambda: 1, on_durable=lambda r, w: None,
                                       on_fatal=lambda err: None, max_batch_bytes=3 * (RECORD_HEADER_SIZE + 10))
            await asyncio.gather(*[committer.submit(EntryRecord(1, i, bytes(10))) for i in range(7)])
        assert [len(b) for b in sink.batches] == [3, 3, 1]

    asyncio.run(main())


def test_a_failed_write_fails_everything_queued_and_is_fatal() -> None:
    async def main() -> None:
        sink = GatedSink(fail_on_batch=1)
        fatal: list[BaseException] = []
        with ThreadPoolExecutor(1) as pool:
            committer = GroupCommitter(sink, pool, next_ledger_id=lambda: 1, on_durable=lambda r, w: None,
                                       on_fatal=fatal.append)
            futures = [committer.submit(EntryRecord(1, i, b"x")) for i in range(3)]
            sink.gate.set()
            results = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(r, JournalFailed) for r in results)
        assert len(fatal) == 1 and isinstance(fatal[0], OSError)
        with pytest.raises(JournalFailed):
            committer.submit(EntryRecord(1, 3, b"x"))

    asyncio.run(main())
