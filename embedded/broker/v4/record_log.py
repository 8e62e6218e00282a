"""A log of records on a managed ledger: the coordinator log and the pending-ack logs.

Theory of operation (Pulsar's MLTransactionLogImpl / MLPendingAckStore). The log is a
managed ledger (kind `txn-log` or `pending-ack`) with one durable cursor. Records are
appended through a `TxnLogBufferedWriter` (batched or not). A record that is no longer
needed (its transaction has ended) is *deleted* by acknowledging it on the cursor:
a whole entry by its position, a record inside a batched entry by clearing its batch
index in the entry's ack set, exactly as a consumer acknowledges one message of a
batch (PIP-160 relies on PIP-54 batch-index acknowledgement for this). When every
record of an entry is deleted the entry is acknowledged, and the cursor's
mark-delete position moves on.

Replay (recovery) reads every entry after the cursor's mark-delete position and hands
each record that is not deleted to the caller, with its `LogPosition`; so the time a
recovery takes grows with the records of transactions that have not ended, not with
the log's whole history.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from embedded import planted_bugs
from embedded.broker.managed_ledger.api import ManagedCursorApi, ManagedLedgerApi
from embedded.broker.position import Position
from embedded.broker.v4.batched_writer import LogPosition, TxnLogBufferedWriter
from embedded.broker.v4.records import decode_entry, split_entry

log = logging.getLogger(__name__)

_U64 = (1 << 64) - 1
REPLAY_READ_BATCH = 100


def remaining_words(batch_size: int, deleted: Iterable[int]) -> list[int]:
    """An ack set over `batch_size` records with the `deleted` indexes cleared (set bit: still needed)."""
    words = [_U64] * ((batch_size + 63) // 64)
    if batch_size % 64:
        words[-1] = (1 << (batch_size % 64)) - 1
    for index in deleted:
        words[index // 64] &= ~(1 << (index % 64)) & _U64
    return words


def is_live(words: list[int] | None, index: int) -> bool:
    """Whether batch index `index` is still needed under the cursor's ack set for its entry."""
    if words is None:
        return True
    word = index // 64
    return word < len(words) and bool(words[word] >> (index % 64) & 1)


class RecordLog:
    def __init__(self, ml: ManagedLedgerApi, cursor: ManagedCursorApi, writer: TxnLogBufferedWriter) -> None:
        self.ml = ml
        self.cursor = cursor
        self.writer = writer
        self.replayed_entries = 0
        self.replayed_records = 0

    @property
    def name(self) -> str:
        return self.ml.name

    def append(self, record: bytes) -> asyncio.Future[LogPosition]:
        return self.writer.append(record)

    def delete(self, positions: Iterable[LogPosition]) -> None:
        """Acknowledge records on the log's cursor; batched records by batch index."""
        whole: list[tuple[Position, None]] = []
        partial: dict[Position, tuple[int, list[int]]] = defaultdict(lambda: (0, []))
        for at in positions:
            if not at.batched:
                whole.append((at.position, None))
            else:
                size, indexes = partial[at.position]
                indexes.append(at.batch_index)
                partial[at.position] = (max(size, at.batch_size), indexes)
        acks: list[tuple[Position, list[int] | None]] = list(whole)
        for position, (size, indexes) in partial.items():
            acks.append((position, remaining_words(size, indexes)))
        if acks:
            self.cursor.acknowledge(acks)

    async def replay(self, handle: Callable[[LogPosition, bytes], None]) -> int:
        """Feed every record not yet deleted to `handle`, in log order; returns how many."""
        ml, cursor = self.ml, self.cursor
        position = ml.next_position(cursor.mark_delete_position)
        last = ml.last_confirmed
        count = 0
        for _ in range(1_000_000):   # bounded: every round reads at least one entry or stops
            if position > last:
                break
            entries = await ml.read(position, REPLAY_READ_BATCH, max_position=last)
            if not entries:
                break
            for entry in entries:
                self.replayed_entries += 1
                if cursor.is_acked(entry.position):
                    continue
                records = decode_entry(entry.data)
                if records is None:
                    handle(LogPosition(entry.position), entry.data)
                    count += 1
                    continue
                words = cursor.batch_ack_set(entry.position)
                size = len(records)
                if planted_bugs.on(planted_bugs.V4_BATCHED_REPLAY_FIRST_RECORD):
                    records = records[:1]   # DELIBERATE FAULT (txnbench self-test): one record per entry
                for index, record in enumerate(records):
                    if is_live(words, index):
                        handle(LogPosition(entry.position, index, size), record)
                        count += 1
            position = ml.next_position(entries[-1].position)
        self.replayed_records += count
        return count

    async def last_entry_records(self) -> list[bytes]:
        """The records of the log's last entry, deleted or not (the coordinator's sequence floor)."""
        last = self.ml.last_confirmed
        if last.entry_id < 0:
            return []
        entry = await self.ml.read_entry(last)
        return split_entry(entry.data)

    async def close(self) -> None:
        self.writer.close()
        await self.ml.close()
