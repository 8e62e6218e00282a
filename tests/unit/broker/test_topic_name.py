"""Topic names: short forms, partitions, segments, storage names."""

from __future__ import annotations

import pytest

from embedded.broker.topic_name import InvalidTopicName, SegmentDescriptor, TopicDomain, TopicName


def test_short_forms_default_to_public_default_persistent() -> None:
    assert str(TopicName.parse("orders")) == "persistent://public/default/orders"
    assert str(TopicName.parse("acme/prod/orders")) == "persistent://acme/prod/orders"


def test_partition_index_and_base() -> None:
    name = TopicName.parse("persistent://public/default/orders-partition-7")
    assert name.partition_index == 7
    assert name.is_partition
    assert str(name.partitioned_base) == "persistent://public/default/orders"
    assert str(name.partitioned_base.partition(2)) == "persistent://public/default/orders-partition-2"
    assert TopicName.parse("persistent://public/default/orders-partition-x").partition_index == -1
    assert TopicName.parse("persistent://public/default/orders").partition_index == -1


def test_transaction_coordinator_assign_partitions() -> None:
    name = TopicName.parse("persistent://pulsar/system/transaction_coordinator_assign-partition-3")
    assert name.namespace == "pulsar/system"
    assert name.partition_index == 3


def test_segment_topics_are_stored_with_their_descriptor() -> None:
    name = TopicName.parse("segment://public/default/orders/0000-7fff-3")
    assert name.domain is TopicDomain.SEGMENT
    assert name.domain.is_stored
    assert name.segment == SegmentDescriptor(0, 0x7FFF, 3)
    assert str(name.scalable_parent) == "topic://public/default/orders"
    assert name.partition_index == -1
    assert name.persistence_name == "public/default/segment/orders%2F0000-7fff-3"
    assert TopicName.from_persistence_name(name.persistence_name) == name


def test_scalable_topics_are_not_stored() -> None:
    name = TopicName.parse("topic://public/default/orders")
    assert name.domain is TopicDomain.TOPIC
    assert not name.domain.is_stored


@pytest.mark.parametrize("text", ["", "a/b", "persistent://public/default", "foo://a/b/c",
                                  "persistent:///default/x", "segment://public/default/orders",
                                  "segment://public/default/orders/zz-1-2"])
def test_invalid_names_say_what_is_expected(text: str) -> None:
    with pytest.raises(InvalidTopicName):
        TopicName.parse(text)


def test_persistence_name_round_trips_odd_characters() -> None:
    name = TopicName.parse("persistent://public/default/a b%c")
    assert TopicName.from_persistence_name(name.persistence_name) == name
    assert "/" not in name.encoded_local_name
