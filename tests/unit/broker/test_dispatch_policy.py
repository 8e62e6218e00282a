"""Dispatch policy: Shared round-robin by permits and priority, Failover's active consumer, ack-set masks."""

from __future__ import annotations

from dataclasses import dataclass

from embedded.broker.dispatch_policy import (
    active_consumer_index,
    mask_ack_set,
    next_shared_consumer,
    to_signed_words,
)


@dataclass
class C:
    name: str
    permits: int = 10
    priority: int = 0

    @property
    def available(self) -> bool:
        return self.permits > 0


def test_round_robin_skips_consumers_without_permits() -> None:
    consumers = [C("a"), C("b", permits=0), C("c")]
    assert next_shared_consumer(consumers, 0) == 0
    assert next_shared_consumer(consumers, 1) == 2
    assert next_shared_consumer(consumers, 3) == 0
    consumers[0].permits = consumers[2].permits = 0
    assert next_shared_consumer(consumers, 0) is None


def test_round_robin_prefers_the_best_priority_level_with_permits() -> None:
    consumers = [C("low", priority=1), C("high-a", priority=0), C("high-b", priority=0)]
    assert [next_shared_consumer(consumers, s) for s in (0, 2, 3)] == [1, 2, 1]
    consumers[1].permits = consumers[2].permits = 0
    assert next_shared_consumer(consumers, 0) == 0


def _active(consumers: list[C], partition_index: int) -> C:
    index = active_consumer_index(consumers, partition_index)
    assert index is not None
    return consumers[index]


def test_failover_active_consumer_by_priority_then_name_and_partition() -> None:
    consumers = [C("b"), C("a"), C("c")]
    assert active_consumer_index(consumers, -1) == 1
    assert [_active(consumers, p).name for p in range(4)] == ["a", "b", "c", "a"]
    consumers.append(C("z", priority=-1))
    assert _active(consumers, -1).name == "z"
    assert active_consumer_index([], 0) is None


def test_mask_ack_set_removes_indexes_held_by_transactions() -> None:
    assert mask_ack_set(None, [0b0101], 4) == [0b1010]
    assert mask_ack_set([0b1110], [0b0010], 4) == [0b1100]
    assert mask_ack_set(None, [0], 70) == [(1 << 64) - 1, 0b111111]
    assert to_signed_words([(1 << 64) - 1, 5]) == [-1, 5]
