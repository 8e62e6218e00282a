"""Command helpers and readers."""

from __future__ import annotations

import pytest

from harness.wire import commands as c
from harness.wire.enums import (
    AckType,
    CommandType,
    LookupType,
    PartitionedMetadataResult,
    ServerError,
    TxnAction,
)
from harness.wire.errors import LocalProtocolError
from harness.wire.ids import MessageId, TxnId
from tests.unit.wire.samples import TXN, send_sample


def test_send_takes_the_transaction_and_count_from_the_metadata() -> None:
    event = send_sample(txn=TXN)
    assert c.txn_of(event) == TXN == c.txn_of(event.payload.metadata)  # type: ignore[union-attr]
    assert not event.body.HasField("num_messages")  # 1 is the default: left unset, as Java does
    plain = send_sample(txn=None)
    assert c.txn_of(plain) is None and not plain.body.HasField("txnid_most_bits")
    batch = c.send(1, 1, c.message_metadata("p", 1, 2, num_messages_in_batch=5), b"")
    assert batch.body.num_messages == 5


def test_optional_arguments_left_as_none_are_not_on_the_wire() -> None:
    subscribe = c.subscribe("t", "s", 1, 2)
    for field in ("consumer_name", "initialPosition", "durable", "start_message_id", "keySharedMeta"):
        assert not subscribe.body.HasField(field)
    producer = c.producer("t", 1, 2)
    assert not producer.body.HasField("producer_name")
    assert producer.body.user_provided_producer_name is False  # the broker picks the name


def test_ack_sends_entry_ids_and_ack_sets() -> None:
    batched = MessageId(4, 5, 2)
    event = c.ack(1, [batched, MessageId(4, 6)], txn=TxnId(1, 2), request_id=9,
                  ack_sets={batched: [0b1011]})
    first, second = event.body.message_id
    assert (first.ledgerId, first.entryId, first.HasField("batch_index"), list(first.ack_set)) == (4, 5, False, [11])
    assert list(second.ack_set) == []
    assert c.txn_of(event) == TxnId(1, 2) and c.request_id_of(event) == 9
    assert c.ack(1, [MessageId(4, 5)], ack_type=AckType.Cumulative).body.ack_type == 1


def test_lookup_and_partition_responses() -> None:
    assert c.lookup_response(1, "pulsar://h:1").body.response == LookupType.Connect
    assert c.lookup_response(1, "pulsar://h:1", redirect=True).body.response == LookupType.Redirect
    failed = c.lookup_failed(1, ServerError.ServiceNotReady, "not yet")
    assert c.error_of(failed) == (ServerError.ServiceNotReady, "not yet")
    ok = c.partitioned_metadata_response(2, 0)
    assert ok.body.HasField("partitions") and ok.body.partitions == 0
    assert ok.body.response == PartitionedMetadataResult.Success and c.error_of(ok) is None
    bad = c.partitioned_metadata_failed(2, ServerError.TopicNotFound, "gone")
    assert c.error_of(bad) == (ServerError.TopicNotFound, "gone")


def test_error_of_covers_both_spellings_and_defaults_the_message() -> None:
    assert c.error_of(c.send_error(1, 2, ServerError.ChecksumError, "bad")) == (ServerError.ChecksumError, "bad")
    assert c.error_of(c.error(3, ServerError.TopicNotFound, "x")) == (ServerError.TopicNotFound, "x")
    schema = c.get_schema_response(4, error=ServerError.TopicNotFound, message="no schema")
    assert c.error_of(schema) == (ServerError.TopicNotFound, "no schema")
    assert c.error_of(c.new_txn_response(5, error=ServerError.TransactionCoordinatorNotFound)) == (
        ServerError.TransactionCoordinatorNotFound, "TransactionCoordinatorNotFound")
    assert c.error_of(c.new_txn_response(5, TxnId(0, 0))) is None
    assert c.error_of(c.success(6)) is None and c.error_of(c.ping()) is None


def test_request_id_of() -> None:
    assert c.request_id_of(c.end_txn(7, TXN, TxnAction.ABORT)) == 7
    assert c.request_id_of(c.ping()) is None
    assert c.request_id_of(c.ack(1, [MessageId(1, 1)])) is None


def test_message_id_of() -> None:
    assert c.message_id_of(c.send_receipt(1, 2, MessageId(3, 4, partition=1))) == MessageId(3, 4, -1, 1)
    assert c.message_id_of(c.get_last_message_id_response(1, MessageId(9, 9))) == MessageId(9, 9)
    assert c.message_id_of(c.flow(1, 1)) is None


def test_txn_responses() -> None:
    for kind in c.TXN_RESPONSES:
        event = c.txn_response(kind, 3, TXN)
        assert event.type is kind and c.txn_of(event) == TXN and c.request_id_of(event) == 3
    with pytest.raises(LocalProtocolError, match="END_TXN is not a transaction response"):
        c.txn_response(CommandType.END_TXN, 1, TXN)


def test_scalable_flag_only_when_asked() -> None:
    assert not c.new_txn(1, 0).body.HasField("scalable")
    assert c.new_txn(1, 0, scalable=True).body.scalable
    assert c.end_txn(1, TXN, TxnAction.COMMIT, scalable=True).body.scalable
    assert c.tc_client_connect_request(1, 2, scalable=True).body.scalable


def test_watch_tc_assignments_snapshot_and_error() -> None:
    update = c.watch_tc_assignments_update(1, parallelism=4, leaders={2: "pulsar://b:2", 0: "pulsar://a:1"})
    snapshot = update.body.snapshot
    assert snapshot.parallelism == 4
    assert [(a.tc_id, a.broker_service_url) for a in snapshot.assignments] == [(0, "pulsar://a:1"), (2, "pulsar://b:2")]
    failed = c.watch_tc_assignments_update(1, error=ServerError.NotAllowedError, message="disabled")
    assert not failed.body.HasField("snapshot") and c.error_of(failed) == (ServerError.NotAllowedError, "disabled")


def test_watch_scalable_topics_update_is_a_oneof() -> None:
    assert c.watch_scalable_topics_update(1, snapshot=["a"]).body.WhichOneof("event") == "snapshot"
    assert c.watch_scalable_topics_update(1, removed=["a"]).body.WhichOneof("event") == "diff"
    with pytest.raises(LocalProtocolError, match="snapshot or a diff, not both"):
        c.watch_scalable_topics_update(1, snapshot=["a"], added=["b"])


def test_seek_needs_exactly_one_target() -> None:
    assert c.seek(1, 2, publish_time_ms=5).body.message_publish_time == 5
    with pytest.raises(LocalProtocolError, match="exactly one"):
        c.seek(1, 2)
    with pytest.raises(LocalProtocolError, match="exactly one"):
        c.seek(1, 2, message_id=MessageId(1, 1), publish_time_ms=5)


def test_generic_command_and_bad_input() -> None:
    event = c.command(CommandType.WATCH_TOPIC_LIST_CLOSE, request_id=1, watcher_id=2, topics_hash=None)
    assert event.body.watcher_id == 2
    with pytest.raises(LocalProtocolError, match="cannot build FLOW"):
        c.command(CommandType.FLOW, no_such_field=1)
    with pytest.raises(LocalProtocolError, match="unknown feature flag 'supports_time_travel'"):
        c.connect(feature_flags={"supports_time_travel"})


def test_describe_is_one_line() -> None:
    text = c.describe(send_sample())
    assert text.startswith("SEND producer_id: 5 sequence_id: 42")
    assert "checksum valid" in text and "\n" not in text
    assert c.describe(c.ping()) == "PING"
