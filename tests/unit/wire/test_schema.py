"""Our schema against the facts: enum numbers, field numbers, labels and types.

The expectations below are transcribed from ../shared/reference/pulsar-protocol-and-v5-facts.md
(section A, itself from apache/pulsar-client-cpp `proto/PulsarApi.proto` @1d08b2b3) for the
transaction and v5 commands and the data-model messages they use; labels and types where the
facts file is silent come from that same proto file.
"""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor

from harness.wire import proto, schema
from harness.wire.enums import (
    CommandType,
    MarkerType,
    ProtocolVersion,
    SegmentState,
    ServerError,
    TxnAction,
)

_TYPE_NAMES = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
}

REQ, OPT, REP = "required", "optional", "repeated"

_TXN_RESPONSE = [
    (1, "request_id", REQ, "uint64"),
    (2, "txnid_least_bits", OPT, "uint64"),
    (3, "txnid_most_bits", OPT, "uint64"),
    (4, "error", OPT, "ServerError"),
    (5, "message", OPT, "string"),
]

EXPECTED_FIELDS: dict[str, list[tuple[int, str, str, str]]] = {
    "CommandSend": [
        (1, "producer_id", REQ, "uint64"), (2, "sequence_id", REQ, "uint64"),
        (3, "num_messages", OPT, "int32"), (4, "txnid_least_bits", OPT, "uint64"),
        (5, "txnid_most_bits", OPT, "uint64"), (6, "highest_sequence_id", OPT, "uint64"),
        (7, "is_chunk", OPT, "bool"), (8, "marker", OPT, "bool"),
        (9, "message_id", OPT, "MessageIdData"),
    ],
    "CommandSendReceipt": [
        (1, "producer_id", REQ, "uint64"), (2, "sequence_id", REQ, "uint64"),
        (3, "message_id", OPT, "MessageIdData"), (4, "highest_sequence_id", OPT, "uint64"),
    ],
    "CommandSendError": [
        (1, "producer_id", REQ, "uint64"), (2, "sequence_id", REQ, "uint64"),
        (3, "error", REQ, "ServerError"), (4, "message", REQ, "string"),
    ],
    "CommandAck": [
        (1, "consumer_id", REQ, "uint64"), (2, "ack_type", REQ, "AckType"),
        (3, "message_id", REP, "MessageIdData"), (4, "validation_error", OPT, "ValidationError"),
        (5, "properties", REP, "KeyLongValue"), (6, "txnid_least_bits", OPT, "uint64"),
        (7, "txnid_most_bits", OPT, "uint64"), (8, "request_id", OPT, "uint64"),
    ],
    "CommandAckResponse": [
        (1, "consumer_id", REQ, "uint64"), (2, "txnid_least_bits", OPT, "uint64"),
        (3, "txnid_most_bits", OPT, "uint64"), (4, "error", OPT, "ServerError"),
        (5, "message", OPT, "string"), (6, "request_id", OPT, "uint64"),
    ],
    "CommandTcClientConnectRequest": [
        (1, "request_id", REQ, "uint64"), (2, "tc_id", REQ, "uint64"), (3, "scalable", OPT, "bool"),
    ],
    "CommandTcClientConnectResponse": [
        (1, "request_id", REQ, "uint64"), (2, "error", OPT, "ServerError"),
        (3, "message", OPT, "string"),
    ],
    "CommandNewTxn": [
        (1, "request_id", REQ, "uint64"), (2, "txn_ttl_millis", OPT, "uint64"),
        (3, "tc_id", OPT, "uint64"), (4, "scalable", OPT, "bool"),
    ],
    "CommandNewTxnResponse": _TXN_RESPONSE,
    "CommandAddPartitionToTxn": [
        (1, "request_id", REQ, "uint64"), (2, "txnid_least_bits", OPT, "uint64"),
        (3, "txnid_most_bits", OPT, "uint64"), (4, "partitions", REP, "string"),
        (5, "scalable", OPT, "bool"),
    ],
    "CommandAddPartitionToTxnResponse": _TXN_RESPONSE,
    "Subscription": [(1, "topic", REQ, "string"), (2, "subscription", REQ, "string")],
    "CommandAddSubscriptionToTxn": [
        (1, "request_id", REQ, "uint64"), (2, "txnid_least_bits", OPT, "uint64"),
        (3, "txnid_most_bits", OPT, "uint64"), (4, "subscription", REP, "Subscription"),
        (5, "scalable", OPT, "bool"),
    ],
    "CommandAddSubscriptionToTxnResponse": _TXN_RESPONSE,
    "CommandEndTxn": [
        (1, "request_id", REQ, "uint64"), (2, "txnid_least_bits", OPT, "uint64"),
        (3, "txnid_most_bits", OPT, "uint64"), (4, "txn_action", OPT, "TxnAction"),
        (5, "scalable", OPT, "bool"),
    ],
    "CommandEndTxnResponse": _TXN_RESPONSE,
    "CommandEndTxnOnPartition": [
        (1, "request_id", REQ, "uint64"), (2, "txnid_least_bits", OPT, "uint64"),
        (3, "txnid_most_bits", OPT, "uint64"), (4, "topic", OPT, "string"),
        (5, "txn_action", OPT, "TxnAction"),
        (6, "txnid_least_bits_of_low_watermark", OPT, "uint64"),
    ],
    "CommandEndTxnOnPartitionResponse": _TXN_RESPONSE,
    "CommandEndTxnOnSubscription": [
        (1, "request_id", REQ, "uint64"), (2, "txnid_least_bits", OPT, "uint64"),
        (3, "txnid_most_bits", OPT, "uint64"), (4, "subscription", OPT, "Subscription"),
        (5, "txn_action", OPT, "TxnAction"),
        (6, "txnid_least_bits_of_low_watermark", OPT, "uint64"),
    ],
    "CommandEndTxnOnSubscriptionResponse": _TXN_RESPONSE,
    "CommandWatchTcAssignments": [(1, "watch_id", REQ, "uint64")],
    "CommandWatchTcAssignmentsUpdate": [
        (1, "watch_id", REQ, "uint64"), (2, "snapshot", OPT, "TcAssignmentsSnapshot"),
        (3, "error", OPT, "ServerError"), (4, "message", OPT, "string"),
    ],
    "TcAssignmentsSnapshot": [
        (1, "parallelism", REQ, "uint32"), (2, "assignments", REP, "TcAssignment"),
    ],
    "TcAssignment": [
        (1, "tc_id", REQ, "uint64"), (2, "broker_service_url", OPT, "string"),
        (3, "broker_service_url_tls", OPT, "string"),
    ],
    "CommandWatchTcAssignmentsClose": [(1, "watch_id", REQ, "uint64")],
    "FeatureFlags": [
        (1, "supports_auth_refresh", OPT, "bool"),
        (2, "supports_broker_entry_metadata", OPT, "bool"),
        (3, "supports_partial_producer", OPT, "bool"),
        (4, "supports_topic_watchers", OPT, "bool"),
        (5, "supports_get_partitioned_metadata_without_auto_creation", OPT, "bool"),
        (6, "supports_repl_dedup_by_lid_and_eid", OPT, "bool"),
        (7, "supports_topic_watcher_reconcile", OPT, "bool"),
        (8, "supports_scalable_topics", OPT, "bool"),
        (9, "supports_tc_metadata_discovery", OPT, "bool"),
    ],
    "CommandConnect": [(10, "feature_flags", OPT, "FeatureFlags")],
    "CommandConnected": [(4, "feature_flags", OPT, "FeatureFlags")],
    "MessageMetadata": [
        (1, "producer_name", REQ, "string"), (2, "sequence_id", REQ, "uint64"),
        (3, "publish_time", REQ, "uint64"), (4, "properties", REP, "KeyValue"),
        (5, "replicated_from", OPT, "string"), (6, "partition_key", OPT, "string"),
        (7, "replicate_to", REP, "string"), (8, "compression", OPT, "CompressionType"),
        (9, "uncompressed_size", OPT, "uint32"), (11, "num_messages_in_batch", OPT, "int32"),
        (12, "event_time", OPT, "uint64"), (13, "encryption_keys", REP, "EncryptionKeys"),
        (14, "encryption_algo", OPT, "string"), (15, "encryption_param", OPT, "bytes"),
        (16, "schema_version", OPT, "bytes"), (17, "partition_key_b64_encoded", OPT, "bool"),
        (18, "ordering_key", OPT, "bytes"), (19, "deliver_at_time", OPT, "int64"),
        (20, "marker_type", OPT, "int32"), (22, "txnid_least_bits", OPT, "uint64"),
        (23, "txnid_most_bits", OPT, "uint64"), (24, "highest_sequence_id", OPT, "uint64"),
        (25, "null_value", OPT, "bool"), (26, "uuid", OPT, "string"),
        (27, "num_chunks_from_msg", OPT, "int32"), (28, "total_chunk_msg_size", OPT, "int32"),
        (29, "chunk_id", OPT, "int32"), (30, "null_partition_key", OPT, "bool"),
        (31, "compacted_batch_indexes", REP, "int32"), (32, "schema_id", OPT, "bytes"),
        (33, "entry_hash_min", OPT, "uint32"), (34, "entry_hash_max", OPT, "uint32"),
    ],
    "SingleMessageMetadata": [
        (1, "properties", REP, "KeyValue"), (2, "partition_key", OPT, "string"),
        (3, "payload_size", REQ, "int32"), (4, "compacted_out", OPT, "bool"),
        (5, "event_time", OPT, "uint64"), (6, "partition_key_b64_encoded", OPT, "bool"),
        (7, "ordering_key", OPT, "bytes"), (8, "sequence_id", OPT, "uint64"),
        (9, "null_value", OPT, "bool"), (10, "null_partition_key", OPT, "bool"),
    ],
    "MessageIdData": [
        (1, "ledgerId", REQ, "uint64"), (2, "entryId", REQ, "uint64"),
        (3, "partition", OPT, "int32"), (4, "batch_index", OPT, "int32"),
        (5, "ack_set", REP, "int64"), (6, "batch_size", OPT, "int32"),
        (7, "first_chunk_message_id", OPT, "MessageIdData"),
    ],
    "BrokerEntryMetadata": [(1, "broker_timestamp", OPT, "uint64"), (2, "index", OPT, "uint64")],
    "SegmentInfoProto": [
        (1, "segment_id", REQ, "uint64"), (2, "hash_start", REQ, "uint32"),
        (3, "hash_end", REQ, "uint32"), (4, "state", REQ, "SegmentState"),
        (5, "parent_ids", REP, "uint64"), (6, "child_ids", REP, "uint64"),
        (7, "created_at_epoch", REQ, "uint64"), (8, "sealed_at_epoch", OPT, "uint64"),
        (9, "created_at_ms", REQ, "uint64"), (10, "sealed_at_ms", OPT, "uint64"),
        (11, "legacy_topic_name", OPT, "string"), (12, "entry_bucket_splits", REP, "uint32"),
    ],
    "ScalableTopicDAG": [
        (1, "epoch", REQ, "uint64"), (2, "segments", REP, "SegmentInfoProto"),
        (3, "segment_brokers", REP, "SegmentBrokerAddress"),
        (4, "controller_broker_url", OPT, "string"), (5, "controller_broker_url_tls", OPT, "string"),
    ],
    "CommandScalableTopicLookup": [
        (1, "session_id", REQ, "uint64"), (2, "topic", REQ, "string"),
        (3, "create_if_missing", OPT, "bool"),
    ],
    "CommandScalableTopicUpdate": [
        (1, "session_id", REQ, "uint64"), (2, "dag", OPT, "ScalableTopicDAG"),
        (3, "error", OPT, "ServerError"), (4, "message", OPT, "string"),
        (5, "resolved_topic_name", OPT, "string"),
    ],
    "CommandScalableTopicSubscribe": [
        (1, "request_id", REQ, "uint64"), (2, "topic", REQ, "string"),
        (3, "subscription", REQ, "string"), (4, "consumer_name", REQ, "string"),
        (5, "consumer_id", REQ, "uint64"), (6, "consumer_type", REQ, "ScalableConsumerType"),
    ],
    "CommandWatchScalableTopicsUpdate": [
        (1, "watch_id", REQ, "uint64"), (2, "snapshot", OPT, "ScalableTopicsSnapshot"),
        (3, "diff", OPT, "ScalableTopicsDiff"), (4, "error", OPT, "ServerError"),
        (5, "message", OPT, "string"),
    ],
}

EXPECTED_DEFAULTS: dict[tuple[str, str], object] = {
    ("MessageMetadata", "num_messages_in_batch"): 1,
    ("MessageIdData", "partition"): -1,
    ("MessageIdData", "batch_index"): -1,
    ("CommandSend", "num_messages"): 1,
    ("CommandSubscribe", "durable"): True,
    ("CommandSubscribe", "force_topic_creation"): True,
    ("CommandProducer", "user_provided_producer_name"): True,
    ("CommandProducerSuccess", "last_sequence_id"): -1,
    ("CommandProducerSuccess", "producer_ready"): True,
    ("CommandScalableTopicLookup", "create_if_missing"): True,
    ("CommandGetTopicsOfNamespaceResponse", "changed"): True,
    ("CommandPartitionedTopicMetadata", "metadata_auto_creation_enabled"): True,
}


def _describe(field: FieldDescriptor) -> tuple[int, str, str, str]:
    label = REQ if field.is_required else REP if field.is_repeated else OPT
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        kind = field.message_type.name
    elif field.type == FieldDescriptor.TYPE_ENUM:
        kind = field.enum_type.name
    else:
        kind = _TYPE_NAMES[field.type]
    return field.number, field.name, label, kind


@pytest.mark.parametrize("message", sorted(EXPECTED_FIELDS))
def test_field_numbers_labels_and_types_match_the_facts(message: str) -> None:
    descriptor = getattr(proto, message).DESCRIPTOR
    actual = {field.number: _describe(field) for field in descriptor.fields}
    for expected in EXPECTED_FIELDS[message]:
        assert actual.get(expected[0]) == expected, f"{message} field {expected[0]}"


def test_fully_listed_messages_have_no_extra_fields() -> None:
    partial = {"CommandConnect", "CommandConnected", "ScalableTopicDAG"}
    for message, fields in EXPECTED_FIELDS.items():
        if message in partial:
            continue
        numbers = sorted(field.number for field in getattr(proto, message).DESCRIPTOR.fields)
        assert numbers == sorted(number for number, *_ in fields), message


@pytest.mark.parametrize(("message", "field"), sorted(EXPECTED_DEFAULTS))
def test_defaults(message: str, field: str) -> None:
    assert getattr(getattr(proto, message)(), field) == EXPECTED_DEFAULTS[(message, field)]


def test_command_type_numbers_match_the_facts() -> None:
    expected = {
        "CONNECT": 2, "CONNECTED": 3, "SUBSCRIBE": 4, "PRODUCER": 5, "SEND": 6,
        "SEND_RECEIPT": 7, "SEND_ERROR": 8, "MESSAGE": 9, "ACK": 10, "FLOW": 11,
        "UNSUBSCRIBE": 12, "SUCCESS": 13, "ERROR": 14, "CLOSE_PRODUCER": 15,
        "CLOSE_CONSUMER": 16, "PRODUCER_SUCCESS": 17, "PING": 18, "PONG": 19,
        "REDELIVER_UNACKNOWLEDGED_MESSAGES": 20, "PARTITIONED_METADATA": 21,
        "PARTITIONED_METADATA_RESPONSE": 22, "LOOKUP": 23, "LOOKUP_RESPONSE": 24,
        "CONSUMER_STATS": 25, "CONSUMER_STATS_RESPONSE": 26, "REACHED_END_OF_TOPIC": 27,
        "SEEK": 28, "GET_LAST_MESSAGE_ID": 29, "GET_LAST_MESSAGE_ID_RESPONSE": 30,
        "ACTIVE_CONSUMER_CHANGE": 31, "GET_TOPICS_OF_NAMESPACE": 32,
        "GET_TOPICS_OF_NAMESPACE_RESPONSE": 33, "GET_SCHEMA": 34, "GET_SCHEMA_RESPONSE": 35,
        "AUTH_CHALLENGE": 36, "AUTH_RESPONSE": 37, "ACK_RESPONSE": 38,
        "GET_OR_CREATE_SCHEMA": 39, "GET_OR_CREATE_SCHEMA_RESPONSE": 40,
        "NEW_TXN": 50, "NEW_TXN_RESPONSE": 51, "ADD_PARTITION_TO_TXN": 52,
        "ADD_PARTITION_TO_TXN_RESPONSE": 53, "ADD_SUBSCRIPTION_TO_TXN": 54,
        "ADD_SUBSCRIPTION_TO_TXN_RESPONSE": 55, "END_TXN": 56, "END_TXN_RESPONSE": 57,
        "END_TXN_ON_PARTITION": 58, "END_TXN_ON_PARTITION_RESPONSE": 59,
        "END_TXN_ON_SUBSCRIPTION": 60, "END_TXN_ON_SUBSCRIPTION_RESPONSE": 61,
        "TC_CLIENT_CONNECT_REQUEST": 62, "TC_CLIENT_CONNECT_RESPONSE": 63,
        "WATCH_TOPIC_LIST": 64, "WATCH_TOPIC_LIST_SUCCESS": 65, "WATCH_TOPIC_UPDATE": 66,
        "WATCH_TOPIC_LIST_CLOSE": 67, "TOPIC_MIGRATED": 68,
        "SCALABLE_TOPIC_LOOKUP": 70, "SCALABLE_TOPIC_UPDATE": 71, "SCALABLE_TOPIC_CLOSE": 72,
        "SCALABLE_TOPIC_SUBSCRIBE": 73, "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE": 74,
        "SCALABLE_TOPIC_ASSIGNMENT_UPDATE": 75, "WATCH_SCALABLE_TOPICS": 76,
        "WATCH_SCALABLE_TOPICS_UPDATE": 77, "WATCH_SCALABLE_TOPICS_CLOSE": 78,
        "WATCH_TC_ASSIGNMENTS": 79, "WATCH_TC_ASSIGNMENTS_UPDATE": 80,
        "WATCH_TC_ASSIGNMENTS_CLOSE": 81,
    }
    assert {kind.name: int(kind) for kind in CommandType} == expected
    # ... and the descriptor carries the same values.
    type_enum = proto.BaseCommand.DESCRIPTOR.enum_types_by_name["Type"]
    assert {value.name: value.number for value in type_enum.values} == expected


def test_every_command_type_has_its_sub_message_at_the_matching_field_number() -> None:
    fields = proto.BaseCommand.DESCRIPTOR.fields_by_number
    assert fields[1].name == "type" and fields[1].is_required
    for kind in CommandType:
        field = fields[int(kind)]
        assert field.name == proto.BODY_FIELDS[kind]
        assert field.message_type.name == schema.COMMAND_BODIES[kind][1]
        assert not field.is_required and not field.is_repeated


def test_enum_values_match_the_facts() -> None:
    assert {e.name: int(e) for e in TxnAction} == {"COMMIT": 0, "ABORT": 1}
    assert {e.name: int(e) for e in SegmentState} == {"ACTIVE": 0, "SEALED": 1}
    txn_errors = {
        "TransactionCoordinatorNotFound": 20, "InvalidTxnStatus": 21, "NotAllowedError": 22,
        "TransactionConflict": 23, "TransactionNotFound": 24,
    }
    for name, number in txn_errors.items():
        assert ServerError[name] == number
    assert ServerError.ChecksumError == 9 and ServerError.ProducerFenced == 25
    assert ProtocolVersion.v19 == 19 and max(ProtocolVersion) == ProtocolVersion.v21
    assert (MarkerType.TXN_COMMITTING, MarkerType.TXN_COMMIT, MarkerType.TXN_ABORT) == (20, 21, 22)
    server_error = proto.POOL.FindEnumTypeByName(f"{schema.PACKAGE}.ServerError")
    assert {v.name: v.number for v in server_error.values} == {e.name: int(e) for e in ServerError}


def test_schema_type_none_keeps_pulsars_name_on_the_descriptor() -> None:
    values = proto.Schema.DESCRIPTOR.enum_types_by_name["Type"].values_by_name
    assert values["None"].number == 0 and values["AutoConsume"].number == 21


def test_repeated_scalars_are_not_packed_as_in_proto2() -> None:
    data = proto.MessageIdData(ledgerId=1, entryId=2, ack_set=[5, 6]).SerializeToString()
    # field 5, wire type 0 (varint), once per element: 0x28 05 0x28 06
    assert data.endswith(b"\x28\x05\x28\x06")


def test_build_file_rejects_an_unknown_type() -> None:
    bad = schema.Message("Broken", (schema.opt(1, "x", "NoSuchType"),))
    original = schema.MESSAGES
    try:
        schema.MESSAGES = (*original, bad)
        with pytest.raises(ValueError, match=r"Broken\.x: unknown type 'NoSuchType'"):
            schema.build_file()
    finally:
        schema.MESSAGES = original
