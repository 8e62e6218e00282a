"""The three transaction paths txnbench compares."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class TxnPath(StrEnum):
    """A transaction implementation under test.

    V4 is PIP-31 (coordinator log, in-stream markers, pending-ack log),
    V4_BATCHED is V4 with PIP-160 batched log writes, V5 is PIP-473
    (metadata-driven transactions on PIP-460 scalable topics).
    """

    V4 = "v4"
    V4_BATCHED = "v4-batched"
    V5 = "v5"

    @property
    def uses_scalable_topics(self) -> bool:
        return self is TxnPath.V5


ALL_PATHS: tuple[TxnPath, ...] = (TxnPath.V4, TxnPath.V4_BATCHED, TxnPath.V5)


#: What turns v4 into v4-batched, by Pulsar's setting names: PIP-160's batched writers of the
#: coordinator log and the pending-ack log with their default knobs. One copy for every target
#: (the embedded brokers and real Pulsar), so both run v4-batched the same way.
PIP_160_BATCHED_WRITES: Mapping[str, object] = MappingProxyType({
    "transactionLogBatchedWriteEnabled": True,
    "transactionLogBatchedWriteMaxRecords": 512,
    "transactionLogBatchedWriteMaxSize": 4 * 1024 * 1024,
    "transactionLogBatchedWriteMaxDelayInMillis": 1,
    "transactionPendingAckBatchedWriteEnabled": True,
    "transactionPendingAckBatchedWriteMaxRecords": 512,
    "transactionPendingAckBatchedWriteMaxSize": 4 * 1024 * 1024,
    "transactionPendingAckBatchedWriteMaxDelayInMillis": 1,
})
