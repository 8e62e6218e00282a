"""Topic names, the service URL, Murmur3 and the two routing rules."""

from __future__ import annotations

import pytest

from harness.client.hashing import murmur3_32, partition_for_key, segment_hash
from harness.client.scalable import SegmentLayout
from harness.client.topics import (
    SegmentName,
    ServiceUrl,
    normalize_topic,
    partition_name,
    segment_name,
)
from harness.wire import commands


@pytest.mark.parametrize(("data", "expected"), [
    (b"", 0x00000000),
    (b"hello", 0x248BFA47),
    (b"The quick brown fox jumps over the lazy dog", 0x2E4FF723),
    (b"a", 0x3C2569B2),
    (b"abcd", 0x43ED676A),
])
def test_murmur3_matches_reference_vectors(data: bytes, expected: int) -> None:
    assert murmur3_32(data) == expected


def test_segment_hash_is_the_high_half_of_the_raw_hash() -> None:
    assert segment_hash("hello") == 0x248B
    assert 0 <= segment_hash("anything") <= 0xFFFF


def test_partition_routing_masks_the_sign_bit_like_java() -> None:
    # 0x2E4FF723 has bit 31 clear; a hash with bit 31 set must still route non-negatively.
    key = next(k for k in (f"k{i}" for i in range(1000)) if murmur3_32(k.encode()) >> 31)
    expected = (murmur3_32(key.encode()) & 0x7FFFFFFF) % 7
    assert partition_for_key(key, 7) == expected
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for_key("k", 0)


@pytest.mark.parametrize(("given", "expected"), [
    ("orders", "persistent://public/default/orders"),
    ("t/ns/orders", "persistent://t/ns/orders"),
    ("persistent://t/ns/orders", "persistent://t/ns/orders"),
    ("topic://t/ns/orders", "topic://t/ns/orders"),
    ("segment://t/ns/orders/0000-7fff-1", "segment://t/ns/orders/0000-7fff-1"),
])
def test_topic_names_are_normalized(given: str, expected: str) -> None:
    assert normalize_topic(given) == expected


@pytest.mark.parametrize("bad", ["", "a/b", "bogus://t/ns/x", "topic://t/ns", " x"])
def test_bad_topic_names_are_refused_with_the_shape(bad: str) -> None:
    with pytest.raises(ValueError):
        normalize_topic(bad)


def test_partition_and_segment_names() -> None:
    assert partition_name("persistent://t/n/x", 3) == "persistent://t/n/x-partition-3"
    name = segment_name("topic://t/n/x", 0, 0x7FFF, 1)
    assert name == "segment://t/n/x/0000-7fff-1"
    assert SegmentName.parse(name) == SegmentName("topic://t/n/x", 0, 0x7FFF, 1)
    with pytest.raises(ValueError, match="topic://"):
        segment_name("persistent://t/n/x", 0, 1, 0)


def test_service_url_parsing_names_the_fix() -> None:
    assert ServiceUrl.parse("pulsar://a:1,b:2").hosts == (("a", 1), ("b", 2))
    with pytest.raises(ValueError, match="HTTP URL"):
        ServiceUrl.parse("http://localhost:8080")
    with pytest.raises(ValueError, match="TLS"):
        ServiceUrl.parse("pulsar+ssl://localhost:6651")
    with pytest.raises(ValueError, match="not a number"):
        ServiceUrl.parse("pulsar://localhost:port")


def _layout() -> SegmentLayout:
    dag = commands.segment_dag(3, [
        commands.segment_info(0, 0x0000, 0xFFFF, sealed=True, child_ids=[1, 2]),
        commands.segment_info(1, 0x0000, 0x7FFF, parent_ids=[0], child_ids=[3]),
        commands.segment_info(2, 0x8000, 0xFFFF, parent_ids=[0], child_ids=[3], sealed=True),
        commands.segment_info(3, 0x8000, 0xFFFF, parent_ids=[2]),
    ])
    return SegmentLayout.from_proto(dag, "topic://t/n/x")


def test_layout_routes_keys_by_hash_range_over_active_segments() -> None:
    layout = _layout()
    assert [s.segment_id for s in layout.active] == [1, 3]
    for key in ("hello", "a", "b", "c", "orders-17"):
        expected = 1 if segment_hash(key) <= 0x7FFF else 3
        assert layout.route(key).segment_id == expected
    assert layout.segments[1].topic == "segment://t/n/x/0000-7fff-1"


def test_layout_topological_order_puts_parents_first() -> None:
    order = [s.segment_id for s in _layout().topological()]
    assert order.index(0) < order.index(1) < order.index(3)
    assert order.index(2) < order.index(3)
