"""Python mirrors of the Pulsar protocol enums, with Pulsar's exact names and numbers.

These classes are the single source of the enum values: `harness.wire.schema` turns
them into the protobuf enum descriptors, so the wire numbers and the Python names cannot
drift apart. Member names keep Pulsar's spelling (`ServerError.TransactionConflict`,
`SubType.Key_Shared`) so they read like the reference `PulsarApi.proto`
(apache/pulsar-client-cpp `proto/PulsarApi.proto`) and the Java code they mirror.

Enums nested in a message in the real proto keep that nesting in our descriptors
(see `schema.MESSAGES`); here they are top-level classes with descriptive names.
"""

from __future__ import annotations

from enum import IntEnum


class CommandType(IntEnum):
    """`BaseCommand.Type`; each value equals the field number of its sub-message."""

    CONNECT = 2
    CONNECTED = 3
    SUBSCRIBE = 4
    PRODUCER = 5
    SEND = 6
    SEND_RECEIPT = 7
    SEND_ERROR = 8
    MESSAGE = 9
    ACK = 10
    FLOW = 11
    UNSUBSCRIBE = 12
    SUCCESS = 13
    ERROR = 14
    CLOSE_PRODUCER = 15
    CLOSE_CONSUMER = 16
    PRODUCER_SUCCESS = 17
    PING = 18
    PONG = 19
    REDELIVER_UNACKNOWLEDGED_MESSAGES = 20
    PARTITIONED_METADATA = 21
    PARTITIONED_METADATA_RESPONSE = 22
    LOOKUP = 23
    LOOKUP_RESPONSE = 24
    CONSUMER_STATS = 25
    CONSUMER_STATS_RESPONSE = 26
    REACHED_END_OF_TOPIC = 27
    SEEK = 28
    GET_LAST_MESSAGE_ID = 29
    GET_LAST_MESSAGE_ID_RESPONSE = 30
    ACTIVE_CONSUMER_CHANGE = 31
    GET_TOPICS_OF_NAMESPACE = 32
    GET_TOPICS_OF_NAMESPACE_RESPONSE = 33
    GET_SCHEMA = 34
    GET_SCHEMA_RESPONSE = 35
    AUTH_CHALLENGE = 36
    AUTH_RESPONSE = 37
    ACK_RESPONSE = 38
    GET_OR_CREATE_SCHEMA = 39
    GET_OR_CREATE_SCHEMA_RESPONSE = 40
    NEW_TXN = 50
    NEW_TXN_RESPONSE = 51
    ADD_PARTITION_TO_TXN = 52
    ADD_PARTITION_TO_TXN_RESPONSE = 53
    ADD_SUBSCRIPTION_TO_TXN = 54
    ADD_SUBSCRIPTION_TO_TXN_RESPONSE = 55
    END_TXN = 56
    END_TXN_RESPONSE = 57
    END_TXN_ON_PARTITION = 58
    END_TXN_ON_PARTITION_RESPONSE = 59
    END_TXN_ON_SUBSCRIPTION = 60
    END_TXN_ON_SUBSCRIPTION_RESPONSE = 61
    TC_CLIENT_CONNECT_REQUEST = 62
    TC_CLIENT_CONNECT_RESPONSE = 63
    WATCH_TOPIC_LIST = 64
    WATCH_TOPIC_LIST_SUCCESS = 65
    WATCH_TOPIC_UPDATE = 66
    WATCH_TOPIC_LIST_CLOSE = 67
    TOPIC_MIGRATED = 68
    SCALABLE_TOPIC_LOOKUP = 70
    SCALABLE_TOPIC_UPDATE = 71
    SCALABLE_TOPIC_CLOSE = 72
    SCALABLE_TOPIC_SUBSCRIBE = 73
    SCALABLE_TOPIC_SUBSCRIBE_RESPONSE = 74
    SCALABLE_TOPIC_ASSIGNMENT_UPDATE = 75
    WATCH_SCALABLE_TOPICS = 76
    WATCH_SCALABLE_TOPICS_UPDATE = 77
    WATCH_SCALABLE_TOPICS_CLOSE = 78
    WATCH_TC_ASSIGNMENTS = 79
    WATCH_TC_ASSIGNMENTS_UPDATE = 80
    WATCH_TC_ASSIGNMENTS_CLOSE = 81


class ProtocolVersion(IntEnum):
    """Protocol versions; each adds features (the comments say which ones we rely on)."""

    v0 = 0
    v1 = 1
    v2 = 2
    v3 = 3
    v4 = 4
    v5 = 5
    v6 = 6  # checksum over metadata + payload
    v7 = 7  # binary lookup
    v8 = 8
    v9 = 9  # end-of-topic notification
    v10 = 10
    v11 = 11
    v12 = 12  # GET_LAST_MESSAGE_ID, ACTIVE_CONSUMER_CHANGE, GET_TOPICS_OF_NAMESPACE
    v13 = 13
    v14 = 14  # AUTH_CHALLENGE / AUTH_RESPONSE, Key_Shared
    v15 = 15  # GET_OR_CREATE_SCHEMA
    v16 = 16  # broker entry metadata
    v17 = 17  # ack receipts (ACK.request_id, ACK_RESPONSE)
    v18 = 18  # client support for broker entry metadata
    v19 = 19  # TC_CLIENT_CONNECT_REQUEST / _RESPONSE
    v20 = 20  # TOPIC_MIGRATED
    v21 = 21  # AUTO_CONSUME schema carried to the broker


class ServerError(IntEnum):
    """Error codes carried by ERROR, SEND_ERROR and the `error` fields of responses."""

    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ProducerBlockedQuotaExceededError = 7
    ProducerBlockedQuotaExceededException = 8
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    TransactionCoordinatorNotFound = 20
    InvalidTxnStatus = 21
    NotAllowedError = 22
    TransactionConflict = 23
    TransactionNotFound = 24
    ProducerFenced = 25


class CompressionType(IntEnum):
    """`MessageMetadata.compression`."""

    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4


class ProducerAccessMode(IntEnum):
    """`CommandProducer.producer_access_mode`."""

    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class AuthMethod(IntEnum):
    """`CommandConnect.auth_method` (deprecated in favour of `auth_method_name`)."""

    AuthMethodNone = 0
    AuthMethodYcaV1 = 1
    AuthMethodAthens = 2


class KeySharedMode(IntEnum):
    """`KeySharedMeta.keySharedMode`."""

    AUTO_SPLIT = 0
    STICKY = 1


class TxnAction(IntEnum):
    """`CommandEndTxn*.txn_action`."""

    COMMIT = 0
    ABORT = 1


class SegmentState(IntEnum):
    """PIP-460 `SegmentInfoProto.state`."""

    ACTIVE = 0
    SEALED = 1


class ScalableConsumerType(IntEnum):
    """PIP-460 `CommandScalableTopicSubscribe.consumer_type`."""

    STREAM = 0
    CHECKPOINT = 1


class SchemaType(IntEnum):
    """`Schema.Type` (nested in `Schema`)."""

    None_ = 0  # Pulsar's name is `None`, a Python keyword; the descriptor uses `None`
    String = 1
    Json = 2
    Protobuf = 3
    Avro = 4
    Bool = 5
    Int8 = 6
    Int16 = 7
    Int32 = 8
    Int64 = 9
    Float = 10
    Double = 11
    Date = 12
    Time = 13
    Timestamp = 14
    KeyValue = 15
    Instant = 16
    LocalDate = 17
    LocalTime = 18
    LocalDateTime = 19
    ProtobufNative = 20
    AutoConsume = 21
    External = 22


class SubType(IntEnum):
    """`CommandSubscribe.SubType`."""

    Exclusive = 0
    Shared = 1
    Failover = 2
    Key_Shared = 3


class InitialPosition(IntEnum):
    """`CommandSubscribe.InitialPosition`."""

    Latest = 0
    Earliest = 1


class PartitionedMetadataResult(IntEnum):
    """`CommandPartitionedTopicMetadataResponse.LookupType`."""

    Success = 0
    Failed = 1


class LookupType(IntEnum):
    """`CommandLookupTopicResponse.LookupType`."""

    Redirect = 0
    Connect = 1
    Failed = 2


class AckType(IntEnum):
    """`CommandAck.AckType`."""

    Individual = 0
    Cumulative = 1


class AckValidationError(IntEnum):
    """`CommandAck.ValidationError`: why a consumer discarded a message it acks."""

    UncompressedSizeCorruption = 0
    DecompressionError = 1
    ChecksumMismatch = 2
    BatchDeSerializeError = 3
    DecryptionError = 4


class ResourceType(IntEnum):
    """`CommandTopicMigrated.ResourceType`."""

    Producer = 0
    Consumer = 1


class TopicsMode(IntEnum):
    """`CommandGetTopicsOfNamespace.Mode`."""

    PERSISTENT = 0
    NON_PERSISTENT = 1
    ALL = 2


class MarkerType(IntEnum):
    """`MessageMetadata.marker_type` values (an int32 field; the enum is in PulsarMarkers.proto).

    The v4 transaction buffer writes TXN_COMMIT / TXN_ABORT marker entries into a
    topic's data stream (PIP-31); replicated-subscription markers are listed for
    completeness so a reader can name any marker it meets.
    """

    UNKNOWN_MARKER = 0
    REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST = 10
    REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE = 11
    REPLICATED_SUBSCRIPTION_SNAPSHOT = 12
    REPLICATED_SUBSCRIPTION_UPDATE = 13
    TXN_COMMITTING = 20
    TXN_COMMIT = 21
    TXN_ABORT = 22
