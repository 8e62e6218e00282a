"""Our declaration of the Pulsar protobuf schema, as a table, turned into descriptors.

Theory of operation: `MESSAGES` lists every message we speak with Pulsar's exact field
numbers, types, labels (proto2 required / optional / repeated) and defaults; enums come
from `harness.wire.enums`, the one place their numbers are written. `build_file()` turns
the table into a `FileDescriptorProto`, and `harness.wire.proto` loads it into a private
descriptor pool at import time and makes classes with `message_factory`, so there is no
code-generation step and the C (upb) runtime does the parsing.

The source of truth is the real `proto/PulsarApi.proto` of apache/pulsar-client-cpp
(HEAD 1d08b2b3, 2026-07-21), which is the C++ client's copy of Pulsar's own file, and
../shared/reference/pulsar-protocol-and-v5-facts.md. Field *names* follow Pulsar's
spelling (including its camelCase ones such as `ledgerId`, `messagePermits`) so the two
can be compared line by line; the keyword helpers in `harness.wire.commands` give
Python-style argument names on top. Names never reach the wire: only numbers, types
and labels must match, and `tests/unit/wire/test_schema.py` checks them.

Every message of PulsarApi.proto is declared (not just the ones we send), so any
command a real broker or client sends decodes into a typed message rather than into
unknown fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

from google.protobuf import descriptor_pb2

from harness.wire.enums import (
    AckType,
    AckValidationError,
    AuthMethod,
    CommandType,
    CompressionType,
    InitialPosition,
    KeySharedMode,
    LookupType,
    PartitionedMetadataResult,
    ProducerAccessMode,
    ProtocolVersion,
    ResourceType,
    ScalableConsumerType,
    SchemaType,
    SegmentState,
    ServerError,
    SubType,
    TopicsMode,
    TxnAction,
)

PACKAGE = "txnbench.pulsar"
"""Our package name; it never reaches the wire, and keeps our descriptors apart from any other."""

FILE_NAME = "txnbench/pulsar_api.proto"


class Label(Enum):
    """proto2 field labels."""

    REQUIRED = descriptor_pb2.FieldDescriptorProto.LABEL_REQUIRED
    OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED


_FDP = descriptor_pb2.FieldDescriptorProto
SCALAR_TYPES: dict[str, int] = {
    "double": _FDP.TYPE_DOUBLE,
    "float": _FDP.TYPE_FLOAT,
    "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32,
    "uint32": _FDP.TYPE_UINT32,
    "sfixed64": _FDP.TYPE_SFIXED64,
    "bool": _FDP.TYPE_BOOL,
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
}


@dataclass(frozen=True)
class Field:
    """One field: `type` is a scalar name, a message name or an enum name."""

    number: int
    name: str
    label: Label
    type: str
    default: object = None
    oneof: str | None = None


@dataclass(frozen=True)
class Message:
    """One message; `enums` are the enums nested in it, by their proto name."""

    name: str
    fields: tuple[Field, ...]
    enums: tuple[tuple[str, type[IntEnum]], ...] = ()


def req(number: int, name: str, type_: str, default: object = None) -> Field:
    """A `required` field."""
    return Field(number, name, Label.REQUIRED, type_, default)


def opt(number: int, name: str, type_: str, default: object = None, oneof: str | None = None) -> Field:
    """An `optional` field."""
    return Field(number, name, Label.OPTIONAL, type_, default, oneof)


def rep(number: int, name: str, type_: str) -> Field:
    """A `repeated` field (proto2: not packed, as in Pulsar)."""
    return Field(number, name, Label.REPEATED, type_)


def _msg(name: str, *fields: Field, enums: tuple[tuple[str, type[IntEnum]], ...] = ()) -> Message:
    return Message(name, tuple(fields), enums)


TOP_LEVEL_ENUMS: tuple[tuple[str, type[IntEnum]], ...] = (
    ("CompressionType", CompressionType),
    ("ProducerAccessMode", ProducerAccessMode),
    ("ServerError", ServerError),
    ("AuthMethod", AuthMethod),
    ("ProtocolVersion", ProtocolVersion),
    ("KeySharedMode", KeySharedMode),
    ("SegmentState", SegmentState),
    ("ScalableConsumerType", ScalableConsumerType),
    ("TxnAction", TxnAction),
)

# The txn-id pair and the error/message pair recur in every transaction response.
_TXN_RESPONSE_FIELDS = (
    req(1, "request_id", "uint64"),
    opt(2, "txnid_least_bits", "uint64", 0),
    opt(3, "txnid_most_bits", "uint64", 0),
    opt(4, "error", "ServerError"),
    opt(5, "message", "string"),
)

MESSAGES: tuple[Message, ...] = (
    # --- data model -------------------------------------------------------------------
    _msg("Schema",
         req(1, "name", "string"),
         req(3, "schema_data", "bytes"),
         req(4, "type", "Type"),
         rep(5, "properties", "KeyValue"),
         enums=(("Type", SchemaType),)),
    _msg("MessageIdData",
         req(1, "ledgerId", "uint64"),
         req(2, "entryId", "uint64"),
         opt(3, "partition", "int32", -1),
         opt(4, "batch_index", "int32", -1),
         rep(5, "ack_set", "int64"),
         opt(6, "batch_size", "int32"),
         opt(7, "first_chunk_message_id", "MessageIdData")),
    _msg("KeyValue", req(1, "key", "string"), req(2, "value", "string")),
    _msg("KeyLongValue", req(1, "key", "string"), req(2, "value", "uint64")),
    _msg("IntRange", req(1, "start", "int32"), req(2, "end", "int32")),
    _msg("EncryptionKeys",
         req(1, "key", "string"),
         req(2, "value", "bytes"),
         rep(3, "metadata", "KeyValue")),
    _msg("MessageMetadata",
         req(1, "producer_name", "string"),
         req(2, "sequence_id", "uint64"),
         req(3, "publish_time", "uint64"),
         rep(4, "properties", "KeyValue"),
         opt(5, "replicated_from", "string"),
         opt(6, "partition_key", "string"),
         rep(7, "replicate_to", "string"),
         opt(8, "compression", "CompressionType", CompressionType.NONE),
         opt(9, "uncompressed_size", "uint32", 0),
         opt(11, "num_messages_in_batch", "int32", 1),
         opt(12, "event_time", "uint64", 0),
         rep(13, "encryption_keys", "EncryptionKeys"),
         opt(14, "encryption_algo", "string"),
         opt(15, "encryption_param", "bytes"),
         opt(16, "schema_version", "bytes"),
         opt(17, "partition_key_b64_encoded", "bool", False),
         opt(18, "ordering_key", "bytes"),
         opt(19, "deliver_at_time", "int64"),
         opt(20, "marker_type", "int32"),
         opt(22, "txnid_least_bits", "uint64"),
         opt(23, "txnid_most_bits", "uint64"),
         opt(24, "highest_sequence_id", "uint64", 0),
         opt(25, "null_value", "bool", False),
         opt(26, "uuid", "string"),
         opt(27, "num_chunks_from_msg", "int32"),
         opt(28, "total_chunk_msg_size", "int32"),
         opt(29, "chunk_id", "int32"),
         opt(30, "null_partition_key", "bool", False),
         rep(31, "compacted_batch_indexes", "int32"),
         opt(32, "schema_id", "bytes"),
         opt(33, "entry_hash_min", "uint32"),
         opt(34, "entry_hash_max", "uint32")),
    _msg("SingleMessageMetadata",
         rep(1, "properties", "KeyValue"),
         opt(2, "partition_key", "string"),
         req(3, "payload_size", "int32"),
         opt(4, "compacted_out", "bool", False),
         opt(5, "event_time", "uint64", 0),
         opt(6, "partition_key_b64_encoded", "bool", False),
         opt(7, "ordering_key", "bytes"),
         opt(8, "sequence_id", "uint64"),
         opt(9, "null_value", "bool", False),
         opt(10, "null_partition_key", "bool", False)),
    _msg("BrokerEntryMetadata",
         opt(1, "broker_timestamp", "uint64"),
         opt(2, "index", "uint64")),
    # --- connection -------------------------------------------------------------------
    _msg("CommandConnect",
         req(1, "client_version", "string"),
         opt(2, "auth_method", "AuthMethod"),
         opt(5, "auth_method_name", "string"),
         opt(3, "auth_data", "bytes"),
         opt(4, "protocol_version", "int32", 0),
         opt(6, "proxy_to_broker_url", "string"),
         opt(7, "original_principal", "string"),
         opt(8, "original_auth_data", "string"),
         opt(9, "original_auth_method", "string"),
         opt(10, "feature_flags", "FeatureFlags"),
         opt(11, "proxy_version", "string")),
    _msg("FeatureFlags",
         opt(1, "supports_auth_refresh", "bool", False),
         opt(2, "supports_broker_entry_metadata", "bool", False),
         opt(3, "supports_partial_producer", "bool", False),
         opt(4, "supports_topic_watchers", "bool", False),
         opt(5, "supports_get_partitioned_metadata_without_auto_creation", "bool", False),
         opt(6, "supports_repl_dedup_by_lid_and_eid", "bool", False),
         opt(7, "supports_topic_watcher_reconcile", "bool", False),
         opt(8, "supports_scalable_topics", "bool", False),
         opt(9, "supports_tc_metadata_discovery", "bool", False)),
    _msg("CommandConnected",
         req(1, "server_version", "string"),
         opt(2, "protocol_version", "int32", 0),
         opt(3, "max_message_size", "int32"),
         opt(4, "feature_flags", "FeatureFlags")),
    _msg("CommandAuthResponse",
         opt(1, "client_version", "string"),
         opt(2, "response", "AuthData"),
         opt(3, "protocol_version", "int32", 0)),
    _msg("CommandAuthChallenge",
         opt(1, "server_version", "string"),
         opt(2, "challenge", "AuthData"),
         opt(3, "protocol_version", "int32", 0)),
    _msg("AuthData",
         opt(1, "auth_method_name", "string"),
         opt(2, "auth_data", "bytes")),
    # --- produce / consume ------------------------------------------------------------
    _msg("KeySharedMeta",
         req(1, "keySharedMode", "KeySharedMode"),
         rep(3, "hashRanges", "IntRange"),
         opt(4, "allowOutOfOrderDelivery", "bool", False)),
    _msg("CommandSubscribe",
         req(1, "topic", "string"),
         req(2, "subscription", "string"),
         req(3, "subType", "SubType"),
         req(4, "consumer_id", "uint64"),
         req(5, "request_id", "uint64"),
         opt(6, "consumer_name", "string"),
         opt(7, "priority_level", "int32"),
         opt(8, "durable", "bool", True),
         opt(9, "start_message_id", "MessageIdData"),
         rep(10, "metadata", "KeyValue"),
         opt(11, "read_compacted", "bool"),
         opt(12, "schema", "Schema"),
         opt(13, "initialPosition", "InitialPosition", InitialPosition.Latest),
         opt(14, "replicate_subscription_state", "bool"),
         opt(15, "force_topic_creation", "bool", True),
         opt(16, "start_message_rollback_duration_sec", "uint64", 0),
         opt(17, "keySharedMeta", "KeySharedMeta"),
         rep(18, "subscription_properties", "KeyValue"),
         opt(19, "consumer_epoch", "uint64"),
         enums=(("SubType", SubType), ("InitialPosition", InitialPosition))),
    _msg("CommandPartitionedTopicMetadata",
         req(1, "topic", "string"),
         req(2, "request_id", "uint64"),
         opt(3, "original_principal", "string"),
         opt(4, "original_auth_data", "string"),
         opt(5, "original_auth_method", "string"),
         opt(6, "metadata_auto_creation_enabled", "bool", True)),
    _msg("CommandPartitionedTopicMetadataResponse",
         opt(1, "partitions", "uint32"),
         req(2, "request_id", "uint64"),
         opt(3, "response", "LookupType"),
         opt(4, "error", "ServerError"),
         opt(5, "message", "string"),
         enums=(("LookupType", PartitionedMetadataResult),)),
    _msg("CommandLookupTopic",
         req(1, "topic", "string"),
         req(2, "request_id", "uint64"),
         opt(3, "authoritative", "bool", False),
         opt(4, "original_principal", "string"),
         opt(5, "original_auth_data", "string"),
         opt(6, "original_auth_method", "string"),
         opt(7, "advertised_listener_name", "string"),
         rep(8, "properties", "KeyValue")),
    _msg("CommandLookupTopicResponse",
         opt(1, "brokerServiceUrl", "string"),
         opt(2, "brokerServiceUrlTls", "string"),
         opt(3, "response", "LookupType"),
         req(4, "request_id", "uint64"),
         opt(5, "authoritative", "bool", False),
         opt(6, "error", "ServerError"),
         opt(7, "message", "string"),
         opt(8, "proxy_through_service_url", "bool", False),
         enums=(("LookupType", LookupType),)),
    _msg("CommandProducer",
         req(1, "topic", "string"),
         req(2, "producer_id", "uint64"),
         req(3, "request_id", "uint64"),
         opt(4, "producer_name", "string"),
         opt(5, "encrypted", "bool", False),
         rep(6, "metadata", "KeyValue"),
         opt(7, "schema", "Schema"),
         opt(8, "epoch", "uint64", 0),
         opt(9, "user_provided_producer_name", "bool", True),
         opt(10, "producer_access_mode", "ProducerAccessMode", ProducerAccessMode.Shared),
         opt(11, "topic_epoch", "uint64"),
         opt(12, "txn_enabled", "bool", False),
         opt(13, "initial_subscription_name", "string")),
    _msg("CommandSend",
         req(1, "producer_id", "uint64"),
         req(2, "sequence_id", "uint64"),
         opt(3, "num_messages", "int32", 1),
         opt(4, "txnid_least_bits", "uint64", 0),
         opt(5, "txnid_most_bits", "uint64", 0),
         opt(6, "highest_sequence_id", "uint64", 0),
         opt(7, "is_chunk", "bool", False),
         opt(8, "marker", "bool", False),
         opt(9, "message_id", "MessageIdData")),
    _msg("CommandSendReceipt",
         req(1, "producer_id", "uint64"),
         req(2, "sequence_id", "uint64"),
         opt(3, "message_id", "MessageIdData"),
         opt(4, "highest_sequence_id", "uint64", 0)),
    _msg("CommandSendError",
         req(1, "producer_id", "uint64"),
         req(2, "sequence_id", "uint64"),
         req(3, "error", "ServerError"),
         req(4, "message", "string")),
    _msg("CommandMessage",
         req(1, "consumer_id", "uint64"),
         req(2, "message_id", "MessageIdData"),
         opt(3, "redelivery_count", "uint32", 0),
         rep(4, "ack_set", "int64"),
         opt(5, "consumer_epoch", "uint64")),
    _msg("CommandAck",
         req(1, "consumer_id", "uint64"),
         req(2, "ack_type", "AckType"),
         rep(3, "message_id", "MessageIdData"),
         opt(4, "validation_error", "ValidationError"),
         rep(5, "properties", "KeyLongValue"),
         opt(6, "txnid_least_bits", "uint64", 0),
         opt(7, "txnid_most_bits", "uint64", 0),
         opt(8, "request_id", "uint64"),
         enums=(("AckType", AckType), ("ValidationError", AckValidationError))),
    _msg("CommandAckResponse",
         req(1, "consumer_id", "uint64"),
         opt(2, "txnid_least_bits", "uint64", 0),
         opt(3, "txnid_most_bits", "uint64", 0),
         opt(4, "error", "ServerError"),
         opt(5, "message", "string"),
         opt(6, "request_id", "uint64")),
    _msg("CommandActiveConsumerChange",
         req(1, "consumer_id", "uint64"),
         opt(2, "is_active", "bool", False)),
    _msg("CommandFlow",
         req(1, "consumer_id", "uint64"),
         req(2, "messagePermits", "uint32")),
    _msg("CommandUnsubscribe",
         req(1, "consumer_id", "uint64"),
         req(2, "request_id", "uint64"),
         opt(3, "force", "bool", False)),
    _msg("CommandSeek",
         req(1, "consumer_id", "uint64"),
         req(2, "request_id", "uint64"),
         opt(3, "message_id", "MessageIdData"),
         opt(4, "message_publish_time", "uint64")),
    _msg("CommandReachedEndOfTopic", req(1, "consumer_id", "uint64")),
    _msg("CommandTopicMigrated",
         req(1, "resource_id", "uint64"),
         req(2, "resource_type", "ResourceType"),
         opt(3, "brokerServiceUrl", "string"),
         opt(4, "brokerServiceUrlTls", "string"),
         enums=(("ResourceType", ResourceType),)),
    _msg("CommandCloseProducer",
         req(1, "producer_id", "uint64"),
         req(2, "request_id", "uint64"),
         opt(3, "assignedBrokerServiceUrl", "string"),
         opt(4, "assignedBrokerServiceUrlTls", "string")),
    _msg("CommandCloseConsumer",
         req(1, "consumer_id", "uint64"),
         req(2, "request_id", "uint64"),
         opt(3, "assignedBrokerServiceUrl", "string"),
         opt(4, "assignedBrokerServiceUrlTls", "string")),
    _msg("CommandRedeliverUnacknowledgedMessages",
         req(1, "consumer_id", "uint64"),
         rep(2, "message_ids", "MessageIdData"),
         opt(3, "consumer_epoch", "uint64")),
    _msg("CommandSuccess",
         req(1, "request_id", "uint64"),
         opt(2, "schema", "Schema")),
    _msg("CommandProducerSuccess",
         req(1, "request_id", "uint64"),
         req(2, "producer_name", "string"),
         opt(3, "last_sequence_id", "int64", -1),
         opt(4, "schema_version", "bytes"),
         opt(5, "topic_epoch", "uint64"),
         opt(6, "producer_ready", "bool", True)),
    _msg("CommandError",
         req(1, "request_id", "uint64"),
         req(2, "error", "ServerError"),
         req(3, "message", "string")),
    _msg("CommandPing"),
    _msg("CommandPong"),
    _msg("CommandConsumerStats",
         req(1, "request_id", "uint64"),
         req(4, "consumer_id", "uint64")),
    _msg("CommandConsumerStatsResponse",
         req(1, "request_id", "uint64"),
         opt(2, "error_code", "ServerError"),
         opt(3, "error_message", "string"),
         opt(4, "msgRateOut", "double"),
         opt(5, "msgThroughputOut", "double"),
         opt(6, "msgRateRedeliver", "double"),
         opt(7, "consumerName", "string"),
         opt(8, "availablePermits", "uint64"),
         opt(9, "unackedMessages", "uint64"),
         opt(10, "blockedConsumerOnUnackedMsgs", "bool"),
         opt(11, "address", "string"),
         opt(12, "connectedSince", "string"),
         opt(13, "type", "string"),
         opt(14, "msgRateExpired", "double"),
         opt(15, "msgBacklog", "uint64"),
         opt(16, "messageAckRate", "double")),
    _msg("CommandGetLastMessageId",
         req(1, "consumer_id", "uint64"),
         req(2, "request_id", "uint64")),
    _msg("CommandGetLastMessageIdResponse",
         req(1, "last_message_id", "MessageIdData"),
         req(2, "request_id", "uint64"),
         opt(3, "consumer_mark_delete_position", "MessageIdData")),
    _msg("CommandGetTopicsOfNamespace",
         req(1, "request_id", "uint64"),
         req(2, "namespace", "string"),
         opt(3, "mode", "Mode", TopicsMode.PERSISTENT),
         opt(4, "topics_pattern", "string"),
         opt(5, "topics_hash", "string"),
         rep(6, "properties", "KeyValue"),
         enums=(("Mode", TopicsMode),)),
    _msg("CommandGetTopicsOfNamespaceResponse",
         req(1, "request_id", "uint64"),
         rep(2, "topics", "string"),
         opt(3, "filtered", "bool", False),
         opt(4, "topics_hash", "string"),
         opt(5, "changed", "bool", True)),
    _msg("CommandWatchTopicList",
         req(1, "request_id", "uint64"),
         req(2, "watcher_id", "uint64"),
         req(3, "namespace", "string"),
         req(4, "topics_pattern", "string"),
         opt(5, "topics_hash", "string")),
    _msg("CommandWatchTopicListSuccess",
         req(1, "request_id", "uint64"),
         req(2, "watcher_id", "uint64"),
         rep(3, "topic", "string"),
         req(4, "topics_hash", "string")),
    _msg("CommandWatchTopicUpdate",
         req(1, "watcher_id", "uint64"),
         rep(2, "new_topics", "string"),
         rep(3, "deleted_topics", "string"),
         req(4, "topics_hash", "string")),
    _msg("CommandWatchTopicListClose",
         req(1, "request_id", "uint64"),
         req(2, "watcher_id", "uint64")),
    # --- PIP-460 scalable topics ------------------------------------------------------
    _msg("SegmentInfoProto",
         req(1, "segment_id", "uint64"),
         req(2, "hash_start", "uint32"),
         req(3, "hash_end", "uint32"),
         req(4, "state", "SegmentState"),
         rep(5, "parent_ids", "uint64"),
         rep(6, "child_ids", "uint64"),
         req(7, "created_at_epoch", "uint64"),
         opt(8, "sealed_at_epoch", "uint64"),
         req(9, "created_at_ms", "uint64"),
         opt(10, "sealed_at_ms", "uint64"),
         opt(11, "legacy_topic_name", "string"),
         rep(12, "entry_bucket_splits", "uint32")),
    _msg("SegmentBrokerAddress",
         req(1, "segment_id", "uint64"),
         req(2, "broker_url", "string"),
         opt(3, "broker_url_tls", "string")),
    _msg("ScalableTopicDAG",
         req(1, "epoch", "uint64"),
         rep(2, "segments", "SegmentInfoProto"),
         rep(3, "segment_brokers", "SegmentBrokerAddress"),
         opt(4, "controller_broker_url", "string"),
         opt(5, "controller_broker_url_tls", "string")),
    _msg("CommandScalableTopicLookup",
         req(1, "session_id", "uint64"),
         req(2, "topic", "string"),
         opt(3, "create_if_missing", "bool", True)),
    _msg("CommandScalableTopicUpdate",
         req(1, "session_id", "uint64"),
         opt(2, "dag", "ScalableTopicDAG"),
         opt(3, "error", "ServerError"),
         opt(4, "message", "string"),
         opt(5, "resolved_topic_name", "string")),
    _msg("CommandScalableTopicClose", req(1, "session_id", "uint64")),
    _msg("ScalableAssignedSegment",
         req(1, "segment_id", "uint64"),
         req(2, "hash_start", "uint32"),
         req(3, "hash_end", "uint32"),
         req(4, "segment_topic", "string"),
         rep(5, "bucket_ranges", "IntRange")),
    _msg("ScalableConsumerAssignment",
         req(1, "layout_epoch", "uint64"),
         rep(2, "segments", "ScalableAssignedSegment")),
    _msg("CommandScalableTopicSubscribe",
         req(1, "request_id", "uint64"),
         req(2, "topic", "string"),
         req(3, "subscription", "string"),
         req(4, "consumer_name", "string"),
         req(5, "consumer_id", "uint64"),
         req(6, "consumer_type", "ScalableConsumerType")),
    _msg("CommandScalableTopicSubscribeResponse",
         req(1, "request_id", "uint64"),
         opt(2, "error", "ServerError"),
         opt(3, "message", "string"),
         opt(4, "assignment", "ScalableConsumerAssignment")),
    _msg("CommandScalableTopicAssignmentUpdate",
         req(1, "consumer_id", "uint64"),
         req(2, "assignment", "ScalableConsumerAssignment")),
    _msg("CommandWatchScalableTopics",
         req(1, "watch_id", "uint64"),
         req(2, "namespace", "string"),
         rep(3, "property_filters", "KeyValue"),
         opt(4, "current_hash", "string")),
    _msg("ScalableTopicsSnapshot", rep(1, "topics", "string")),
    _msg("ScalableTopicsDiff", rep(1, "added", "string"), rep(2, "removed", "string")),
    _msg("CommandWatchScalableTopicsUpdate",
         req(1, "watch_id", "uint64"),
         opt(2, "snapshot", "ScalableTopicsSnapshot", oneof="event"),
         opt(3, "diff", "ScalableTopicsDiff", oneof="event"),
         opt(4, "error", "ServerError"),
         opt(5, "message", "string")),
    _msg("CommandWatchScalableTopicsClose", req(1, "watch_id", "uint64")),
    # --- PIP-473 coordinator discovery ------------------------------------------------
    _msg("CommandWatchTcAssignments", req(1, "watch_id", "uint64")),
    _msg("TcAssignment",
         req(1, "tc_id", "uint64"),
         opt(2, "broker_service_url", "string"),
         opt(3, "broker_service_url_tls", "string")),
    _msg("TcAssignmentsSnapshot",
         req(1, "parallelism", "uint32"),
         rep(2, "assignments", "TcAssignment")),
    _msg("CommandWatchTcAssignmentsUpdate",
         req(1, "watch_id", "uint64"),
         opt(2, "snapshot", "TcAssignmentsSnapshot"),
         opt(3, "error", "ServerError"),
         opt(4, "message", "string")),
    _msg("CommandWatchTcAssignmentsClose", req(1, "watch_id", "uint64")),
    # --- schemas ----------------------------------------------------------------------
    _msg("CommandGetSchema",
         req(1, "request_id", "uint64"),
         req(2, "topic", "string"),
         opt(3, "schema_version", "bytes")),
    _msg("CommandGetSchemaResponse",
         req(1, "request_id", "uint64"),
         opt(2, "error_code", "ServerError"),
         opt(3, "error_message", "string"),
         opt(4, "schema", "Schema"),
         opt(5, "schema_version", "bytes")),
    _msg("CommandGetOrCreateSchema",
         req(1, "request_id", "uint64"),
         req(2, "topic", "string"),
         req(3, "schema", "Schema"),
         opt(4, "producerName", "string")),
    _msg("CommandGetOrCreateSchemaResponse",
         req(1, "request_id", "uint64"),
         opt(2, "error_code", "ServerError"),
         opt(3, "error_message", "string"),
         opt(4, "schema_version", "bytes")),
    # --- transactions (PIP-31, with the PIP-473 `scalable` routing flags) --------------
    _msg("CommandTcClientConnectRequest",
         req(1, "request_id", "uint64"),
         req(2, "tc_id", "uint64", 0),
         opt(3, "scalable", "bool", False)),
    _msg("CommandTcClientConnectResponse",
         req(1, "request_id", "uint64"),
         opt(2, "error", "ServerError"),
         opt(3, "message", "string")),
    _msg("CommandNewTxn",
         req(1, "request_id", "uint64"),
         opt(2, "txn_ttl_millis", "uint64", 0),
         opt(3, "tc_id", "uint64", 0),
         opt(4, "scalable", "bool", False)),
    _msg("CommandNewTxnResponse", *_TXN_RESPONSE_FIELDS),
    _msg("CommandAddPartitionToTxn",
         req(1, "request_id", "uint64"),
         opt(2, "txnid_least_bits", "uint64", 0),
         opt(3, "txnid_most_bits", "uint64", 0),
         rep(4, "partitions", "string"),
         opt(5, "scalable", "bool", False)),
    _msg("CommandAddPartitionToTxnResponse", *_TXN_RESPONSE_FIELDS),
    _msg("Subscription",
         req(1, "topic", "string"),
         req(2, "subscription", "string")),
    _msg("CommandAddSubscriptionToTxn",
         req(1, "request_id", "uint64"),
         opt(2, "txnid_least_bits", "uint64", 0),
         opt(3, "txnid_most_bits", "uint64", 0),
         rep(4, "subscription", "Subscription"),
         opt(5, "scalable", "bool", False)),
    _msg("CommandAddSubscriptionToTxnResponse", *_TXN_RESPONSE_FIELDS),
    _msg("CommandEndTxn",
         req(1, "request_id", "uint64"),
         opt(2, "txnid_least_bits", "uint64", 0),
         opt(3, "txnid_most_bits", "uint64", 0),
         opt(4, "txn_action", "TxnAction"),
         opt(5, "scalable", "bool", False)),
    _msg("CommandEndTxnResponse", *_TXN_RESPONSE_FIELDS),
    _msg("CommandEndTxnOnPartition",
         req(1, "request_id", "uint64"),
         opt(2, "txnid_least_bits", "uint64", 0),
         opt(3, "txnid_most_bits", "uint64", 0),
         opt(4, "topic", "string"),
         opt(5, "txn_action", "TxnAction"),
         opt(6, "txnid_least_bits_of_low_watermark", "uint64")),
    _msg("CommandEndTxnOnPartitionResponse", *_TXN_RESPONSE_FIELDS),
    _msg("CommandEndTxnOnSubscription",
         req(1, "request_id", "uint64"),
         opt(2, "txnid_least_bits", "uint64", 0),
         opt(3, "txnid_most_bits", "uint64", 0),
         opt(4, "subscription", "Subscription"),
         opt(5, "txn_action", "TxnAction"),
         opt(6, "txnid_least_bits_of_low_watermark", "uint64")),
    _msg("CommandEndTxnOnSubscriptionResponse", *_TXN_RESPONSE_FIELDS),
)

COMMAND_BODIES: dict[CommandType, tuple[str, str]] = {
    CommandType.CONNECT: ("connect", "CommandConnect"),
    CommandType.CONNECTED: ("connected", "CommandConnected"),
    CommandType.SUBSCRIBE: ("subscribe", "CommandSubscribe"),
    CommandType.PRODUCER: ("producer", "CommandProducer"),
    CommandType.SEND: ("send", "CommandSend"),
    CommandType.SEND_RECEIPT: ("send_receipt", "CommandSendReceipt"),
    CommandType.SEND_ERROR: ("send_error", "CommandSendError"),
    CommandType.MESSAGE: ("message", "CommandMessage"),
    CommandType.ACK: ("ack", "CommandAck"),
    CommandType.FLOW: ("flow", "CommandFlow"),
    CommandType.UNSUBSCRIBE: ("unsubscribe", "CommandUnsubscribe"),
    CommandType.SUCCESS: ("success", "CommandSuccess"),
    CommandType.ERROR: ("error", "CommandError"),
    CommandType.CLOSE_PRODUCER: ("close_producer", "CommandCloseProducer"),
    CommandType.CLOSE_CONSUMER: ("close_consumer", "CommandCloseConsumer"),
    CommandType.PRODUCER_SUCCESS: ("producer_success", "CommandProducerSuccess"),
    CommandType.PING: ("ping", "CommandPing"),
    CommandType.PONG: ("pong", "CommandPong"),
    CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES: (
        "redeliverUnacknowledgedMessages", "CommandRedeliverUnacknowledgedMessages"),
    CommandType.PARTITIONED_METADATA: ("partitionMetadata", "CommandPartitionedTopicMetadata"),
    CommandType.PARTITIONED_METADATA_RESPONSE: (
        "partitionMetadataResponse", "CommandPartitionedTopicMetadataResponse"),
    CommandType.LOOKUP: ("lookupTopic", "CommandLookupTopic"),
    CommandType.LOOKUP_RESPONSE: ("lookupTopicResponse", "CommandLookupTopicResponse"),
    CommandType.CONSUMER_STATS: ("consumerStats", "CommandConsumerStats"),
    CommandType.CONSUMER_STATS_RESPONSE: ("consumerStatsResponse", "CommandConsumerStatsResponse"),
    CommandType.REACHED_END_OF_TOPIC: ("reachedEndOfTopic", "CommandReachedEndOfTopic"),
    CommandType.SEEK: ("seek", "CommandSeek"),
    CommandType.GET_LAST_MESSAGE_ID: ("getLastMessageId", "CommandGetLastMessageId"),
    CommandType.GET_LAST_MESSAGE_ID_RESPONSE: (
        "getLastMessageIdResponse", "CommandGetLastMessageIdResponse"),
    CommandType.ACTIVE_CONSUMER_CHANGE: ("active_consumer_change", "CommandActiveConsumerChange"),
    CommandType.GET_TOPICS_OF_NAMESPACE: ("getTopicsOfNamespace", "CommandGetTopicsOfNamespace"),
    CommandType.GET_TOPICS_OF_NAMESPACE_RESPONSE: (
        "getTopicsOfNamespaceResponse", "CommandGetTopicsOfNamespaceResponse"),
    CommandType.GET_SCHEMA: ("getSchema", "CommandGetSchema"),
    CommandType.GET_SCHEMA_RESPONSE: ("getSchemaResponse", "CommandGetSchemaResponse"),
    CommandType.AUTH_CHALLENGE: ("authChallenge", "CommandAuthChallenge"),
    CommandType.AUTH_RESPONSE: ("authResponse", "CommandAuthResponse"),
    CommandType.ACK_RESPONSE: ("ackResponse", "CommandAckResponse"),
    CommandType.GET_OR_CREATE_SCHEMA: ("getOrCreateSchema", "CommandGetOrCreateSchema"),
    CommandType.GET_OR_CREATE_SCHEMA_RESPONSE: (
        "getOrCreateSchemaResponse", "CommandGetOrCreateSchemaResponse"),
    CommandType.NEW_TXN: ("newTxn", "CommandNewTxn"),
    CommandType.NEW_TXN_RESPONSE: ("newTxnResponse", "CommandNewTxnResponse"),
    CommandType.ADD_PARTITION_TO_TXN: ("addPartitionToTxn", "CommandAddPartitionToTxn"),
    CommandType.ADD_PARTITION_TO_TXN_RESPONSE: (
        "addPartitionToTxnResponse", "CommandAddPartitionToTxnResponse"),
    CommandType.ADD_SUBSCRIPTION_TO_TXN: ("addSubscriptionToTxn", "CommandAddSubscriptionToTxn"),
    CommandType.ADD_SUBSCRIPTION_TO_TXN_RESPONSE: (
        "addSubscriptionToTxnResponse", "CommandAddSubscriptionToTxnResponse"),
    CommandType.END_TXN: ("endTxn", "CommandEndTxn"),
    CommandType.END_TXN_RESPONSE: ("endTxnResponse", "CommandEndTxnResponse"),
    CommandType.END_TXN_ON_PARTITION: ("endTxnOnPartition", "CommandEndTxnOnPartition"),
    CommandType.END_TXN_ON_PARTITION_RESPONSE: (
        "endTxnOnPartitionResponse", "CommandEndTxnOnPartitionResponse"),
    CommandType.END_TXN_ON_SUBSCRIPTION: ("endTxnOnSubscription", "CommandEndTxnOnSubscription"),
    CommandType.END_TXN_ON_SUBSCRIPTION_RESPONSE: (
        "endTxnOnSubscriptionResponse", "CommandEndTxnOnSubscriptionResponse"),
    CommandType.TC_CLIENT_CONNECT_REQUEST: ("tcClientConnectRequest", "CommandTcClientConnectRequest"),
    CommandType.TC_CLIENT_CONNECT_RESPONSE: (
        "tcClientConnectResponse", "CommandTcClientConnectResponse"),
    CommandType.WATCH_TOPIC_LIST: ("watchTopicList", "CommandWatchTopicList"),
    CommandType.WATCH_TOPIC_LIST_SUCCESS: ("watchTopicListSuccess", "CommandWatchTopicListSuccess"),
    CommandType.WATCH_TOPIC_UPDATE: ("watchTopicUpdate", "CommandWatchTopicUpdate"),
    CommandType.WATCH_TOPIC_LIST_CLOSE: ("watchTopicListClose", "CommandWatchTopicListClose"),
    CommandType.TOPIC_MIGRATED: ("topicMigrated", "CommandTopicMigrated"),
    CommandType.SCALABLE_TOPIC_LOOKUP: ("scalableTopicLookup", "CommandScalableTopicLookup"),
    CommandType.SCALABLE_TOPIC_UPDATE: ("scalableTopicUpdate", "CommandScalableTopicUpdate"),
    CommandType.SCALABLE_TOPIC_CLOSE: ("scalableTopicClose", "CommandScalableTopicClose"),
    CommandType.SCALABLE_TOPIC_SUBSCRIBE: ("scalableTopicSubscribe", "CommandScalableTopicSubscribe"),
    CommandType.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE: (
        "scalableTopicSubscribeResponse", "CommandScalableTopicSubscribeResponse"),
    CommandType.SCALABLE_TOPIC_ASSIGNMENT_UPDATE: (
        "scalableTopicAssignmentUpdate", "CommandScalableTopicAssignmentUpdate"),
    CommandType.WATCH_SCALABLE_TOPICS: ("watchScalableTopics", "CommandWatchScalableTopics"),
    CommandType.WATCH_SCALABLE_TOPICS_UPDATE: (
        "watchScalableTopicsUpdate", "CommandWatchScalableTopicsUpdate"),
    CommandType.WATCH_SCALABLE_TOPICS_CLOSE: (
        "watchScalableTopicsClose", "CommandWatchScalableTopicsClose"),
    CommandType.WATCH_TC_ASSIGNMENTS: ("watchTcAssignments", "CommandWatchTcAssignments"),
    CommandType.WATCH_TC_ASSIGNMENTS_UPDATE: (
        "watchTcAssignmentsUpdate", "CommandWatchTcAssignmentsUpdate"),
    CommandType.WATCH_TC_ASSIGNMENTS_CLOSE: (
        "watchTcAssignmentsClose", "CommandWatchTcAssignmentsClose"),
}
"""BaseCommand's sub-message per command type: (field name, message name); field number = type."""


def base_command_message() -> Message:
    """`BaseCommand`: `required Type type = 1` plus one optional sub-message per command type."""
    fields = [req(1, "type", "Type")]
    fields += [opt(int(kind), field, message) for kind, (field, message) in COMMAND_BODIES.items()]
    return Message("BaseCommand", tuple(fields), (("Type", CommandType),))


def _enum_value_name(member: IntEnum) -> str:
    # `SchemaType.None_` stands for Pulsar's `None`, which Python cannot spell.
    return member.name.rstrip("_")


def _add_enum(target: descriptor_pb2.EnumDescriptorProto, enum: type[IntEnum]) -> None:
    for member in enum:
        target.value.add(name=_enum_value_name(member), number=int(member))


def _default_text(value: object) -> str:
    if isinstance(value, IntEnum):
        return _enum_value_name(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_file() -> descriptor_pb2.FileDescriptorProto:
    """The whole schema as one proto2 `FileDescriptorProto`.

    Raises:
        ValueError: a field names a type that is neither a scalar, a declared message
            nor an enum in scope; this is a mistake in the table above.
    """
    messages = (*MESSAGES, base_command_message())
    message_names = {message.name for message in messages}
    top_enum_names = {name for name, _ in TOP_LEVEL_ENUMS}
    file = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=PACKAGE, syntax="proto2")
    for name, enum in TOP_LEVEL_ENUMS:
        _add_enum(file.enum_type.add(name=name), enum)
    for message in messages:
        out = file.message_type.add(name=message.name)
        nested = {name for name, _ in message.enums}
        for name, enum in message.enums:
            _add_enum(out.enum_type.add(name=name), enum)
        oneofs: list[str] = []
        for field in message.fields:
            spec = out.field.add(name=field.name, number=field.number, label=field.label.value)
            if field.type in SCALAR_TYPES:
                spec.type = SCALAR_TYPES[field.type]
            elif field.type in nested:
                spec.type = _FDP.TYPE_ENUM
                spec.type_name = f".{PACKAGE}.{message.name}.{field.type}"
            elif field.type in top_enum_names:
                spec.type = _FDP.TYPE_ENUM
                spec.type_name = f".{PACKAGE}.{field.type}"
            elif field.type in message_names:
                spec.type = _FDP.TYPE_MESSAGE
                spec.type_name = f".{PACKAGE}.{field.type}"
            else:
                raise ValueError(f"{message.name}.{field.name}: unknown type {field.type!r}")
            if field.default is not None:
                spec.default_value = _default_text(field.default)
            if field.oneof is not None:
                if field.oneof not in oneofs:
                    oneofs.append(field.oneof)
                    out.oneof_decl.add(name=field.oneof)
                spec.oneof_index = oneofs.index(field.oneof)
    return file
