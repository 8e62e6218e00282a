"""A typed façade over the metadata client for the PIP-473 layout (Pulsar's `TxnMetadataStore`).

It attaches the partition keys, sequence-key deltas and secondary indexes of `keys`
to every write, decodes records, and counts what PIP-473 asks to be counted: op
records written and the latency of index range queries. Header CAS outcomes are
counted by the coordinator, which knows why a CAS failed.

Errors are the metadata client's: `KeyNotFound`, `BadVersion` (a lost CAS),
`MetadataUnavailable` (no answer: a write's outcome is unknown).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from embedded.broker.position import Position
from embedded.broker.v5.txn import keys
from embedded.broker.v5.txn.records import (
    AbortedTxnRecord,
    SegmentWatermark,
    TxnEvent,
    TxnHeader,
    TxnOp,
    TxnState,
)
from embedded.metadata.model import MUST_NOT_EXIST, KeyNotFound
from embedded.metadata.state import prefix_end
from harness.wire import TxnId

if TYPE_CHECKING:
    from embedded.broker.metrics import BrokerMetrics
    from embedded.metadata.backend import MetadataBackend

APPEND = (1,)   # the sequence-key delta of every append-only stream


@dataclass(frozen=True)
class StoredOp:
    key: str
    txn: TxnId
    op: TxnOp


@dataclass(frozen=True)
class Versioned:
    key: str
    version_id: int


class TxnMetadataStore:
    def __init__(self, client: MetadataBackend, metrics: BrokerMetrics) -> None:
        self.client = client
        self.metrics = metrics

    @contextmanager
    def _index_query(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.metrics.txn_md_index_query.observe(time.monotonic() - started)

    # ---- headers ------------------------------------------------------------------------------

    async def get_header(self, txn: TxnId) -> tuple[TxnHeader, int] | None:
        try:
            result = await self.client.get(keys.header(txn))
        except KeyNotFound:
            return None
        return TxnHeader.from_json(result.value), result.version.version_id

    async def create_header(self, txn: TxnId, header: TxnHeader) -> int:
        """Create the header (BadVersion if it exists); returns its version."""
        result = await self.client.put(keys.header(txn), header.to_json(), expected_version=MUST_NOT_EXIST,
                                       partition_key=keys.txn_key(txn), secondary_indexes=header.index())
        return result.version.version_id

    async def update_header(self, txn: TxnId, header: TxnHeader, expected_version: int) -> int:
        """CAS the header (BadVersion on a concurrent change); the index moves with the state."""
        result = await self.client.put(keys.header(txn), header.to_json(), expected_version=expected_version,
                                       partition_key=keys.txn_key(txn), secondary_indexes=header.index())
        return result.version.version_id

    async def delete_header(self, txn: TxnId, expected_version: int) -> bool:
        return await self.client.delete(keys.header(txn), expected_version=expected_version)

    # ---- op records ---------------------------------------------------------------------------

    async def append_op(self, txn: TxnId, op: TxnOp) -> str:
        """Append one op record (`/txn/op/<txnId>-<seq20>`); returns its key."""
        result = await self.client.put(keys.op_parent(txn), op.to_json(), partition_key=keys.txn_key(txn),
                                       sequence_keys_deltas=APPEND, secondary_indexes=op.index(txn))
        self.metrics.txn_md_op_writes.inc()
        return result.key

    async def ops_of(self, txn: TxnId) -> list[StoredOp]:
        """Every op record of `txn`, by key range in its own partition (participants' cleanup)."""
        low, high = keys.op_range(txn)
        records = await self.client.range_scan(low, high)
        return [StoredOp(r.key, txn, TxnOp.from_json(r.value)) for r in records]

    async def ops_by_txn(self, txn: TxnId) -> list[StoredOp]:
        """Every op record of `txn` through `idx:ops-by-txn` (the coordinator's fan-out and GC)."""
        low, high = keys.exact_range(keys.txn_key(txn))
        with self._index_query():
            records = await self.client.range_scan(low, high, use_index=keys.IDX_OPS_BY_TXN)
        return [StoredOp(r.key, txn, TxnOp.from_json(r.value)) for r in records]

    async def writes_by_segment(self, segment: str) -> list[StoredOp]:
        low, high = keys.exact_range(keys.segment_key(segment))
        with self._index_query():
            records = await self.client.range_scan(low, high, use_index=keys.IDX_WRITES_BY_SEGMENT)
        return [StoredOp(r.key, keys.txn_of_op(r.key), TxnOp.from_json(r.value)) for r in records]

    async def acks_by_subscription(self, segment: str, subscription: str) -> list[StoredOp]:
        low, high = keys.exact_range(keys.ack_index_key(segment, subscription))
        with self._index_query():
            records = await self.client.range_scan(low, high, use_index=keys.IDX_ACKS_BY_SEGMENT_SUBSCRIPTION)
        return [StoredOp(r.key, keys.txn_of_op(r.key), TxnOp.from_json(r.value)) for r in records]

    async def delete_key(self, key: str) -> bool:
        return await self.client.delete(key)

    async def delete_ops_of(self, txn: TxnId) -> int:
        """Force-delete every op record of `txn` (one range delete in its partition)."""
        low, high = keys.op_range(txn)
        return await self.client.delete_range(low, high)

    async def count_ops(self) -> int:
        return len(await self.client.list(keys.OP_PREFIX + "/", prefix_end(keys.OP_PREFIX + "/")))

    # ---- decision events ----------------------------------------------------------------------

    async def publish_segment_event(self, segment: str, event: TxnEvent) -> str:
        result = await self.client.put(keys.segment_events_parent(segment), event.to_json(),
                                       partition_key=keys.segment_key(segment), sequence_keys_deltas=APPEND)
        return result.key

    async def publish_subscription_event(self, segment: str, subscription: str, event: TxnEvent) -> str:
        result = await self.client.put(keys.subscription_events_parent(segment, subscription), event.to_json(),
                                       partition_key=keys.ack_index_key(segment, subscription),
                                       sequence_keys_deltas=APPEND)
        return result.key

    async def get_event(self, key: str) -> tuple[TxnEvent, int] | None:
        try:
            result = await self.client.get(key)
        except KeyNotFound:
            return None
        return TxnEvent.from_json(result.value), result.version.version_id

    async def pending_events(self, parent: str, after: str | None = None) -> list[Versioned]:
        """The event records of `parent` (after key `after` when given), keys only."""
        prefix = keys.sequence_watch_prefix(parent)
        low = prefix if after is None else after + "\x00"
        records = await self.client.range_scan(low, prefix_end(prefix), include_value=False)
        return [Versioned(r.key, r.version.version_id) for r in records if keys.is_sequence_key(parent, r.key)]

    async def delete_event(self, key: str, version_id: int) -> None:
        """Delete a processed event unless it was replaced (a restarted sequence reuses keys)."""
        with contextlib.suppress(KeyNotFound):
            await self.client.delete(key, expected_version=version_id)

    # ---- per-segment visibility state ---------------------------------------------------------

    async def get_watermark(self, segment: str) -> tuple[SegmentWatermark, int] | None:
        try:
            result = await self.client.get(keys.watermark(segment))
        except KeyNotFound:
            return None
        return SegmentWatermark.from_json(result.value), result.version.version_id

    async def put_watermark(self, segment: str, watermark: SegmentWatermark, expected_version: int) -> int:
        result = await self.client.put(keys.watermark(segment), watermark.to_json(),
                                       expected_version=expected_version, partition_key=keys.segment_key(segment))
        return result.version.version_id

    async def put_aborted(self, segment: str, txn: TxnId, last: Position) -> None:
        record = AbortedTxnRecord(last.ledger_id, last.entry_id)
        await self.client.put(keys.aborted(segment, txn), record.to_json(), partition_key=keys.segment_key(segment),
                              secondary_indexes={keys.IDX_TXN_ABORTED_BY_POSITION: keys.aborted_index_key(
                                  segment, last.ledger_id, last.entry_id)})

    async def aborted_of(self, segment: str) -> list[TxnId]:
        low, high = keys.aborted_index_range(segment)
        with self._index_query():
            found = await self.client.list(low, high, use_index=keys.IDX_TXN_ABORTED_BY_POSITION)
        return [keys.txn_of_aborted(k) for k in found]

    # ---- coordinator sweeps -------------------------------------------------------------------

    async def open_by_deadline(self) -> list[tuple[TxnId, int]]:
        """Every OPEN transaction and its deadline (ms), lowest deadline first."""
        with self._index_query():
            records = await self.client.range_scan("", "~", use_index=keys.IDX_TXN_BY_DEADLINE,
                                                   include_value=False)
        return [(keys.txn_of_header(r.key), int(r.secondary_key or 0)) for r in records]

    async def finalized_before(self, state: TxnState, cutoff_ms: int) -> list[tuple[TxnId, int]]:
        """Transactions finalized to `state` at or before `cutoff_ms`, with their header versions."""
        low = f"{state.value}:"
        high = keys.final_state_key(state.value, cutoff_ms) + "\x00"
        with self._index_query():
            records = await self.client.range_scan(low, high, use_index=keys.IDX_TXN_BY_FINAL_STATE,
                                                   include_value=False)
        return [(keys.txn_of_header(r.key), r.version.version_id) for r in records]
