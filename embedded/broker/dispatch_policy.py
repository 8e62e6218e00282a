"""Which consumer gets the next entries, without I/O.

Shared (PersistentDispatcherMultipleConsumers): round-robin over consumers that have
permits, restricted to the highest priority (lowest `priority_level`) among them.
Failover (PersistentDispatcherSingleActiveConsumer): consumers sorted by priority
level then name; a partition's active consumer is `partition % n`, a non-partitioned
topic's is the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class ConsumerView(Protocol):
    @property
    def available(self) -> bool: ...

    @property
    def priority(self) -> int: ...

    @property
    def name(self) -> str: ...


def next_shared_consumer(consumers: Sequence[ConsumerView], start: int) -> int | None:
    """Index of the next consumer (from `start`, wrapping) with permits at the best priority level."""
    levels = [c.priority for c in consumers if c.available]
    if not levels:
        return None
    best = min(levels)
    n = len(consumers)
    for k in range(n):
        i = (start + k) % n
        c = consumers[i]
        if c.available and c.priority == best:
            return i
    return None


def active_consumer_index(consumers: Sequence[ConsumerView], partition_index: int) -> int | None:
    """Index (into `consumers`) of the active consumer of a single-active subscription."""
    if not consumers:
        return None
    order = sorted(range(len(consumers)), key=lambda i: (consumers[i].priority, consumers[i].name))
    pick = partition_index % len(order) if partition_index >= 0 else 0
    return order[pick]


def mask_ack_set(ack_set: Sequence[int] | None, held: Sequence[int], batch_size: int) -> list[int]:
    """The deliverable bits: unacknowledged (`ack_set`, all when None) and not held by a transaction."""
    words = (batch_size + 63) // 64
    if ack_set is None:
        base = [(1 << 64) - 1] * words
        if batch_size % 64:
            base[-1] = (1 << (batch_size % 64)) - 1
    else:
        base = list(ack_set) + [0] * max(0, words - len(ack_set))
    out = []
    for i, word in enumerate(base):
        hold = held[i] if i < len(held) else 0
        out.append(word & ~hold & ((1 << 64) - 1))
    return out


def to_signed_words(words: Sequence[int]) -> list[int]:
    """Bit-set words as protobuf int64 values (Java's long[] of BitSet.toLongArray)."""
    return [w - (1 << 64) if w >= (1 << 63) else w for w in words]
