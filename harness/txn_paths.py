"""The three transaction paths txnbench compares."""

from __future__ import annotations

from enum import StrEnum


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
