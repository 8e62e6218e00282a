"""Build commands by name with keyword arguments, and read the common fields back.

The client and the broker never poke protobuf objects to build a command: each helper
here returns a ready `Command` event for `Connection.send`, with Python-style argument
names and our id types (`MessageId`, `TxnId`) instead of field pairs. Optional
arguments left as None are not set on the wire, so Pulsar's defaults apply exactly as
they would for a Java or C++ peer. `command(kind, **fields)` builds any other command
from raw field names.

Readers (`error_of`, `request_id_of`, `txn_of`, `message_id_of`, `describe`) give
typed access to what many commands share.

Transactions: the Java client writes a transaction id both into `MessageMetadata`
and into `CommandSend`; `send()` copies it from the metadata so the two cannot differ.
`scalable=True` on the transaction commands routes them to the PIP-473 (v5)
coordinator, as `PulsarClientBuilderV5` does; v4 clients leave it unset.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from google.protobuf import text_format

from harness.wire import proto
from harness.wire.connection import CURRENT_PROTOCOL_VERSION
from harness.wire.enums import (
    AckType,
    AckValidationError,
    CommandType,
    CompressionType,
    InitialPosition,
    LookupType,
    PartitionedMetadataResult,
    ProducerAccessMode,
    ResourceType,
    ScalableConsumerType,
    SchemaType,
    ServerError,
    SubType,
    TopicsMode,
    TxnAction,
)
from harness.wire.errors import LocalProtocolError
from harness.wire.events import Command
from harness.wire.ids import MessageId, TxnId
from harness.wire.payload import Buffer, Payload

T = CommandType

# ---- generic ------------------------------------------------------------------------


def command(kind: CommandType, /, **fields: Any) -> Command:
    """Any command from its raw protobuf field names; None values are left unset.

    Raises:
        LocalProtocolError: a field name or value does not fit the message.
    """
    cls = proto.BODY_CLASSES[kind]
    try:
        body = cls(**{name: value for name, value in fields.items() if value is not None})
    except (ValueError, TypeError) as exc:
        raise LocalProtocolError(f"cannot build {kind.name}: {exc}") from None
    return Command(kind, body)


def _body(kind: CommandType, fields: dict[str, Any]) -> Any:
    return proto.BODY_CLASSES[kind](**{k: v for k, v in fields.items() if v is not None})


def _key_values(values: Mapping[str, str] | None) -> list[Any] | None:
    if not values:
        return None
    return [proto.KeyValue(key=key, value=value) for key, value in values.items()]


def _feature_flags(names: Collection[str] | None) -> Any:
    if names is None:
        return None
    flags = proto.FeatureFlags()
    for name in names:
        try:
            setattr(flags, name, True)
        except AttributeError:
            known = ", ".join(field.name for field in proto.FeatureFlags.DESCRIPTOR.fields)
            raise LocalProtocolError(f"unknown feature flag {name!r}; known: {known}") from None
    return flags


def _txn_fields(txn: TxnId | None) -> dict[str, int]:
    if txn is None:
        return {}
    return {"txnid_most_bits": txn.most, "txnid_least_bits": txn.least}


def _error_fields(error: ServerError | None, message: str | None) -> dict[str, Any]:
    if error is None:
        return {}
    return {"error": int(error), "message": message if message is not None else error.name}


# ---- connection ---------------------------------------------------------------------


def connect(
    client_version: str = "txnbench",
    *,
    protocol_version: int = CURRENT_PROTOCOL_VERSION,
    auth_method_name: str | None = None,
    auth_data: bytes | None = None,
    feature_flags: Collection[str] | None = None,
    proxy_to_broker_url: str | None = None,
) -> Command:
    """CONNECT. `feature_flags` names the `FeatureFlags` fields to announce as true.

    A broker sends broker entry metadata only to clients announcing
    `supports_broker_entry_metadata`; v5 discovery needs the broker's
    `supports_tc_metadata_discovery` in return.
    """
    body = _body(T.CONNECT, {
        "client_version": client_version,
        "protocol_version": int(protocol_version),
        "auth_method_name": auth_method_name,
        "auth_data": auth_data,
        "proxy_to_broker_url": proxy_to_broker_url,
    })
    flags = _feature_flags(feature_flags)
    if flags is not None:
        body.feature_flags.CopyFrom(flags)
    return Command(T.CONNECT, body)


def connected(
    server_version: str = "txnbench",
    *,
    protocol_version: int | None = None,
    max_message_size: int | None = None,
    feature_flags: Collection[str] | None = None,
) -> Command:
    """CONNECTED. Leave `protocol_version`/`max_message_size` unset to let the Connection negotiate."""
    body = _body(T.CONNECTED, {
        "server_version": server_version,
        "protocol_version": protocol_version,
        "max_message_size": max_message_size,
    })
    flags = _feature_flags(feature_flags)
    if flags is not None:
        body.feature_flags.CopyFrom(flags)
    return Command(T.CONNECTED, body)


_PING = Command(T.PING, proto.CommandPing())
_PONG = Command(T.PONG, proto.CommandPong())


def ping() -> Command:
    """PING (keep-alive probe; answer with PONG)."""
    return _PING


def pong() -> Command:
    """PONG."""
    return _PONG


def success(request_id: int, *, schema: Any = None) -> Command:
    """SUCCESS: the generic positive answer (subscribe, unsubscribe, close, seek ...)."""
    body = proto.CommandSuccess(request_id=request_id)
    if schema is not None:
        body.schema.CopyFrom(schema)
    return Command(T.SUCCESS, body)


def error(request_id: int, error: ServerError, message: str) -> Command:
    """ERROR: the generic negative answer to a request (or to CONNECT: reject)."""
    return Command(T.ERROR, proto.CommandError(request_id=request_id, error=int(error), message=message))


# ---- discovery ----------------------------------------------------------------------


def partitioned_metadata(
    topic: str, request_id: int, *, metadata_auto_creation_enabled: bool | None = None
) -> Command:
    """PARTITIONED_METADATA (v4 TC discovery asks it of the assign topic)."""
    return Command(T.PARTITIONED_METADATA, _body(T.PARTITIONED_METADATA, {
        "topic": topic,
        "request_id": request_id,
        "metadata_auto_creation_enabled": metadata_auto_creation_enabled,
    }))


def partitioned_metadata_response(request_id: int, partitions: int) -> Command:
    """PARTITIONED_METADATA_RESPONSE, success (0 partitions = a non-partitioned topic)."""
    return Command(T.PARTITIONED_METADATA_RESPONSE, proto.CommandPartitionedTopicMetadataResponse(
        request_id=request_id, partitions=partitions, response=PartitionedMetadataResult.Success,
    ))


def partitioned_metadata_failed(request_id: int, error: ServerError, message: str) -> Command:
    """PARTITIONED_METADATA_RESPONSE, failed."""
    return Command(T.PARTITIONED_METADATA_RESPONSE, proto.CommandPartitionedTopicMetadataResponse(
        request_id=request_id, response=PartitionedMetadataResult.Failed,
        error=int(error), message=message,
    ))


def lookup(
    topic: str,
    request_id: int,
    *,
    authoritative: bool = False,
    advertised_listener_name: str | None = None,
) -> Command:
    """LOOKUP (`authoritative` after following a redirect, as the Java client does)."""
    return Command(T.LOOKUP, _body(T.LOOKUP, {
        "topic": topic,
        "request_id": request_id,
        "authoritative": authoritative or None,
        "advertised_listener_name": advertised_listener_name,
    }))


def lookup_response(
    request_id: int,
    broker_service_url: str,
    *,
    redirect: bool = False,
    authoritative: bool = False,
    broker_service_url_tls: str | None = None,
    proxy_through_service_url: bool = False,
) -> Command:
    """LOOKUP_RESPONSE: Connect to (or, with `redirect`, ask again at) `broker_service_url`."""
    return Command(T.LOOKUP_RESPONSE, _body(T.LOOKUP_RESPONSE, {
        "request_id": request_id,
        "brokerServiceUrl": broker_service_url,
        "brokerServiceUrlTls": broker_service_url_tls,
        "response": LookupType.Redirect if redirect else LookupType.Connect,
        "authoritative": authoritative,
        "proxy_through_service_url": proxy_through_service_url or None,
    }))


def lookup_failed(request_id: int, error: ServerError, message: str) -> Command:
    """LOOKUP_RESPONSE, Failed."""
    return Command(T.LOOKUP_RESPONSE, proto.CommandLookupTopicResponse(
        request_id=request_id, response=LookupType.Failed, error=int(error), message=message,
    ))


def get_topics_of_namespace(
    request_id: int, namespace: str, *, mode: TopicsMode = TopicsMode.PERSISTENT,
    topics_pattern: str | None = None,
) -> Command:
    """GET_TOPICS_OF_NAMESPACE."""
    return Command(T.GET_TOPICS_OF_NAMESPACE, _body(T.GET_TOPICS_OF_NAMESPACE, {
        "request_id": request_id, "namespace": namespace, "mode": int(mode),
        "topics_pattern": topics_pattern,
    }))


def get_topics_of_namespace_response(
    request_id: int, topics: Iterable[str], *, filtered: bool | None = None,
    topics_hash: str | None = None, changed: bool | None = None,
) -> Command:
    """GET_TOPICS_OF_NAMESPACE_RESPONSE."""
    return Command(T.GET_TOPICS_OF_NAMESPACE_RESPONSE, _body(T.GET_TOPICS_OF_NAMESPACE_RESPONSE, {
        "request_id": request_id, "topics": list(topics), "filtered": filtered,
        "topics_hash": topics_hash, "changed": changed,
    }))


def topic_migrated(
    resource_id: int, resource_type: ResourceType, broker_service_url: str,
    *, broker_service_url_tls: str | None = None,
) -> Command:
    """TOPIC_MIGRATED: the producer/consumer should reconnect to `broker_service_url`."""
    return Command(T.TOPIC_MIGRATED, _body(T.TOPIC_MIGRATED, {
        "resource_id": resource_id, "resource_type": int(resource_type),
        "brokerServiceUrl": broker_service_url, "brokerServiceUrlTls": broker_service_url_tls,
    }))


# ---- schemas ------------------------------------------------------------------------


def schema(
    name: str, type: SchemaType, data: bytes = b"", *, properties: Mapping[str, str] | None = None
) -> Any:
    """A `Schema` message (for PRODUCER, SUBSCRIBE, GET_OR_CREATE_SCHEMA)."""
    return proto.Schema(name=name, type=int(type), schema_data=data, properties=_key_values(properties))


def get_schema(request_id: int, topic: str, *, schema_version: bytes | None = None) -> Command:
    """GET_SCHEMA."""
    return Command(T.GET_SCHEMA, _body(T.GET_SCHEMA, {
        "request_id": request_id, "topic": topic, "schema_version": schema_version,
    }))


def get_schema_response(
    request_id: int, *, schema: Any = None, schema_version: bytes | None = None,
    error: ServerError | None = None, message: str | None = None,
) -> Command:
    """GET_SCHEMA_RESPONSE: the schema, or an error (e.g. TopicNotFound when none exists)."""
    body = _body(T.GET_SCHEMA_RESPONSE, {
        "request_id": request_id, "schema_version": schema_version,
        "error_code": int(error) if error is not None else None,
        "error_message": message if error is not None else None,
    })
    if schema is not None:
        body.schema.CopyFrom(schema)
    return Command(T.GET_SCHEMA_RESPONSE, body)


def get_or_create_schema(request_id: int, topic: str, schema: Any) -> Command:
    """GET_OR_CREATE_SCHEMA."""
    body = proto.CommandGetOrCreateSchema(request_id=request_id, topic=topic)
    body.schema.CopyFrom(schema)
    return Command(T.GET_OR_CREATE_SCHEMA, body)


def get_or_create_schema_response(
    request_id: int, *, schema_version: bytes | None = None,
    error: ServerError | None = None, message: str | None = None,
) -> Command:
    """GET_OR_CREATE_SCHEMA_RESPONSE."""
    return Command(T.GET_OR_CREATE_SCHEMA_RESPONSE, _body(T.GET_OR_CREATE_SCHEMA_RESPONSE, {
        "request_id": request_id, "schema_version": schema_version,
        "error_code": int(error) if error is not None else None,
        "error_message": message if error is not None else None,
    }))


# ---- producing ----------------------------------------------------------------------


def producer(
    topic: str,
    producer_id: int,
    request_id: int,
    *,
    producer_name: str | None = None,
    txn_enabled: bool = False,
    epoch: int | None = None,
    access_mode: ProducerAccessMode | None = None,
    metadata: Mapping[str, str] | None = None,
    schema: Any = None,
    topic_epoch: int | None = None,
    initial_subscription_name: str | None = None,
) -> Command:
    """PRODUCER. A broker-chosen name when `producer_name` is None (`user_provided_producer_name` false)."""
    body = _body(T.PRODUCER, {
        "topic": topic,
        "producer_id": producer_id,
        "request_id": request_id,
        "producer_name": producer_name,
        "user_provided_producer_name": False if producer_name is None else None,
        "txn_enabled": txn_enabled or None,
        "epoch": epoch,
        "producer_access_mode": int(access_mode) if access_mode is not None else None,
        "metadata": _key_values(metadata),
        "topic_epoch": topic_epoch,
        "initial_subscription_name": initial_subscription_name,
    })
    if schema is not None:
        body.schema.CopyFrom(schema)
    return Command(T.PRODUCER, body)


def producer_success(
    request_id: int,
    producer_name: str,
    *,
    last_sequence_id: int = -1,
    schema_version: bytes | None = None,
    topic_epoch: int | None = None,
    producer_ready: bool | None = None,
) -> Command:
    """PRODUCER_SUCCESS."""
    return Command(T.PRODUCER_SUCCESS, _body(T.PRODUCER_SUCCESS, {
        "request_id": request_id,
        "producer_name": producer_name,
        "last_sequence_id": last_sequence_id,
        "schema_version": schema_version,
        "topic_epoch": topic_epoch,
        "producer_ready": producer_ready,
    }))


def message_metadata(
    producer_name: str,
    sequence_id: int,
    publish_time_ms: int,
    *,
    properties: Mapping[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: bytes | None = None,
    event_time_ms: int | None = None,
    num_messages_in_batch: int | None = None,
    txn: TxnId | None = None,
    compression: CompressionType | None = None,
    uncompressed_size: int | None = None,
    highest_sequence_id: int | None = None,
    marker_type: int | None = None,
    null_value: bool | None = None,
    uuid: str | None = None,
    schema_version: bytes | None = None,
    entry_hash_min: int | None = None,
    entry_hash_max: int | None = None,
) -> Any:
    """A `MessageMetadata` for `send()` (and for marker entries a v4 broker writes).

    For a batch, pass `num_messages_in_batch` (the Java client always sets it, 1 for a
    single message); `harness.wire.batch.encode_batch` builds the matching data.
    """
    # Plain ifs rather than a kwargs dict: this runs once per message a producer sends.
    meta = proto.MessageMetadata(
        producer_name=producer_name, sequence_id=sequence_id, publish_time=publish_time_ms
    )
    if properties:
        for name, value in properties.items():
            meta.properties.add(key=name, value=value)
    if partition_key is not None:
        meta.partition_key = partition_key
    if ordering_key is not None:
        meta.ordering_key = ordering_key
    if event_time_ms is not None:
        meta.event_time = event_time_ms
    if num_messages_in_batch is not None:
        meta.num_messages_in_batch = num_messages_in_batch
    if txn is not None:
        meta.txnid_most_bits = txn.most
        meta.txnid_least_bits = txn.least
    if compression is not None:
        meta.compression = int(compression)
    if uncompressed_size is not None:
        meta.uncompressed_size = uncompressed_size
    if highest_sequence_id is not None:
        meta.highest_sequence_id = highest_sequence_id
    if marker_type is not None:
        meta.marker_type = int(marker_type)
    if null_value is not None:
        meta.null_value = null_value
    if uuid is not None:
        meta.uuid = uuid
    if schema_version is not None:
        meta.schema_version = schema_version
    if entry_hash_min is not None:
        meta.entry_hash_min = entry_hash_min
    if entry_hash_max is not None:
        meta.entry_hash_max = entry_hash_max
    return meta


def send(
    producer_id: int,
    sequence_id: int,
    metadata: Any,
    data: Buffer,
    *,
    num_messages: int | None = None,
    highest_sequence_id: int | None = None,
    is_chunk: bool = False,
    marker: bool = False,
    with_checksum: bool = True,
) -> Command:
    """SEND with its payload: `metadata` (see `message_metadata`) and `data`.

    The transaction id is taken from `metadata`; `num_messages` defaults to the
    metadata's `num_messages_in_batch` (1 when unset).
    """
    body = proto.CommandSend(producer_id=producer_id, sequence_id=sequence_id)
    count = num_messages if num_messages is not None else metadata.num_messages_in_batch
    if count != 1:
        body.num_messages = count
    if metadata.HasField("txnid_most_bits") or metadata.HasField("txnid_least_bits"):
        body.txnid_most_bits = metadata.txnid_most_bits
        body.txnid_least_bits = metadata.txnid_least_bits
    if highest_sequence_id is not None:
        body.highest_sequence_id = highest_sequence_id
    if is_chunk:
        body.is_chunk = True
    if marker:
        body.marker = True
    return Command(T.SEND, body, Payload.build(metadata, data, with_checksum=with_checksum))


def send_receipt(
    producer_id: int, sequence_id: int, message_id: MessageId, *, highest_sequence_id: int | None = None
) -> Command:
    """SEND_RECEIPT: the message is persisted at `message_id`."""
    body = proto.CommandSendReceipt(producer_id=producer_id, sequence_id=sequence_id)
    message_id.to_proto(body.message_id)
    if highest_sequence_id is not None:
        body.highest_sequence_id = highest_sequence_id
    return Command(T.SEND_RECEIPT, body)


def send_error(producer_id: int, sequence_id: int, error: ServerError, message: str) -> Command:
    """SEND_ERROR (e.g. `ChecksumError` for a payload whose checksum did not match)."""
    return Command(T.SEND_ERROR, proto.CommandSendError(
        producer_id=producer_id, sequence_id=sequence_id, error=int(error), message=message,
    ))


def close_producer(
    producer_id: int, request_id: int, *, assigned_broker_service_url: str | None = None,
) -> Command:
    """CLOSE_PRODUCER (client: close it; broker: tell the client to reconnect elsewhere)."""
    return Command(T.CLOSE_PRODUCER, _body(T.CLOSE_PRODUCER, {
        "producer_id": producer_id, "request_id": request_id,
        "assignedBrokerServiceUrl": assigned_broker_service_url,
    }))


# ---- consuming ----------------------------------------------------------------------


def subscribe(
    topic: str,
    subscription: str,
    consumer_id: int,
    request_id: int,
    *,
    sub_type: SubType = SubType.Exclusive,
    consumer_name: str | None = None,
    initial_position: InitialPosition | None = None,
    durable: bool | None = None,
    start_message_id: MessageId | None = None,
    read_compacted: bool | None = None,
    force_topic_creation: bool | None = None,
    priority_level: int | None = None,
    metadata: Mapping[str, str] | None = None,
    schema: Any = None,
    consumer_epoch: int | None = None,
    key_shared_ranges: Sequence[tuple[int, int]] | None = None,
) -> Command:
    """SUBSCRIBE. `key_shared_ranges` (inclusive hash ranges) makes a STICKY Key_Shared meta."""
    body = _body(T.SUBSCRIBE, {
        "topic": topic,
        "subscription": subscription,
        "subType": int(sub_type),
        "consumer_id": consumer_id,
        "request_id": request_id,
        "consumer_name": consumer_name,
        "initialPosition": int(initial_position) if initial_position is not None else None,
        "durable": durable,
        "read_compacted": read_compacted,
        "force_topic_creation": force_topic_creation,
        "priority_level": priority_level,
        "metadata": _key_values(metadata),
        "consumer_epoch": consumer_epoch,
    })
    if start_message_id is not None:
        start_message_id.to_proto(body.start_message_id)
    if schema is not None:
        body.schema.CopyFrom(schema)
    if key_shared_ranges is not None:
        meta = body.keySharedMeta
        meta.keySharedMode = 1  # STICKY
        for start, end in key_shared_ranges:
            meta.hashRanges.add(start=start, end=end)
    return Command(T.SUBSCRIBE, body)


def flow(consumer_id: int, permits: int) -> Command:
    """FLOW: the consumer can take `permits` more messages."""
    return Command(T.FLOW, proto.CommandFlow(consumer_id=consumer_id, messagePermits=permits))


def message(
    consumer_id: int,
    message_id: MessageId,
    payload: Payload,
    *,
    redelivery_count: int = 0,
    ack_set: Sequence[int] | None = None,
    consumer_epoch: int | None = None,
) -> Command:
    """MESSAGE: dispatch a stored entry. Attach broker entry metadata to the payload itself."""
    body = proto.CommandMessage(consumer_id=consumer_id)
    message_id.to_proto(body.message_id)
    if redelivery_count:
        body.redelivery_count = redelivery_count
    if ack_set:
        body.ack_set.extend(ack_set)
    if consumer_epoch is not None:
        body.consumer_epoch = consumer_epoch
    return Command(T.MESSAGE, body, payload)


def broker_entry_metadata(*, broker_timestamp: int | None = None, index: int | None = None) -> Any:
    """A `BrokerEntryMetadata` for `Payload.with_broker_entry_metadata`."""
    return proto.BrokerEntryMetadata(**{k: v for k, v in (
        ("broker_timestamp", broker_timestamp), ("index", index)) if v is not None})


def ack(
    consumer_id: int,
    message_ids: Iterable[MessageId],
    *,
    ack_type: AckType = AckType.Individual,
    txn: TxnId | None = None,
    request_id: int | None = None,
    ack_sets: Mapping[MessageId, Sequence[int]] | None = None,
    validation_error: AckValidationError | None = None,
) -> Command:
    """ACK of one or more messages.

    Args:
        message_ids: the ids; a batch index in an id is not sent (Pulsar acks a batch
            message through the entry id plus an `ack_set` bit set of what remains unacked).
        ack_type: Individual, or Cumulative (one id: everything up to it).
        txn: a transactional ack.
        request_id: ask for an ACK_RESPONSE (protocol v17+; transactional acks need it).
        ack_sets: per entry id, the `ack_set` words for partial batch acks.
        validation_error: acknowledging a message that was discarded as corrupt.
    """
    body = proto.CommandAck(consumer_id=consumer_id, ack_type=int(ack_type))
    for message_id in message_ids:
        data = body.message_id.add()
        entry = message_id.entry() if message_id.is_batched else message_id
        entry.to_proto(data)
        if ack_sets and message_id in ack_sets:
            data.ack_set.extend(ack_sets[message_id])
    if txn is not None:
        body.txnid_most_bits = txn.most
        body.txnid_least_bits = txn.least
    if request_id is not None:
        body.request_id = request_id
    if validation_error is not None:
        body.validation_error = int(validation_error)
    return Command(T.ACK, body)


def ack_response(
    consumer_id: int,
    request_id: int | None,
    *,
    txn: TxnId | None = None,
    error: ServerError | None = None,
    message: str | None = None,
) -> Command:
    """ACK_RESPONSE (the ack receipt; `error` e.g. TransactionConflict). `request_id` is optional in
    the protocol: None leaves it out, as an answer to an ack sent without one."""
    return Command(T.ACK_RESPONSE, _body(T.ACK_RESPONSE, {
        "consumer_id": consumer_id, "request_id": request_id,
        **_txn_fields(txn), **_error_fields(error, message),
    }))


def redeliver_unacknowledged(
    consumer_id: int, message_ids: Iterable[MessageId] = (), *, consumer_epoch: int | None = None
) -> Command:
    """REDELIVER_UNACKNOWLEDGED_MESSAGES (no ids: everything unacked)."""
    body = proto.CommandRedeliverUnacknowledgedMessages(consumer_id=consumer_id)
    for message_id in message_ids:
        message_id.to_proto(body.message_ids.add())
    if consumer_epoch is not None:
        body.consumer_epoch = consumer_epoch
    return Command(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, body)


def unsubscribe(consumer_id: int, request_id: int, *, force: bool = False) -> Command:
    """UNSUBSCRIBE."""
    return Command(T.UNSUBSCRIBE, _body(T.UNSUBSCRIBE, {
        "consumer_id": consumer_id, "request_id": request_id, "force": force or None,
    }))


def close_consumer(
    consumer_id: int, request_id: int, *, assigned_broker_service_url: str | None = None,
) -> Command:
    """CLOSE_CONSUMER (client: close it; broker: tell the client to reconnect elsewhere)."""
    return Command(T.CLOSE_CONSUMER, _body(T.CLOSE_CONSUMER, {
        "consumer_id": consumer_id, "request_id": request_id,
        "assignedBrokerServiceUrl": assigned_broker_service_url,
    }))


def seek(
    consumer_id: int, request_id: int, *, message_id: MessageId | None = None,
    publish_time_ms: int | None = None,
) -> Command:
    """SEEK to a message id or a publish time (exactly one of them).

    Raises:
        LocalProtocolError: neither or both targets were given.
    """
    if (message_id is None) == (publish_time_ms is None):
        raise LocalProtocolError("seek needs exactly one of message_id and publish_time_ms")
    body = proto.CommandSeek(consumer_id=consumer_id, request_id=request_id)
    if message_id is not None:
        message_id.to_proto(body.message_id)
    else:
        body.message_publish_time = publish_time_ms
    return Command(T.SEEK, body)


def reached_end_of_topic(consumer_id: int) -> Command:
    """REACHED_END_OF_TOPIC (a terminated topic, e.g. a sealed v5 segment, is drained)."""
    return Command(T.REACHED_END_OF_TOPIC, proto.CommandReachedEndOfTopic(consumer_id=consumer_id))


def active_consumer_change(consumer_id: int, is_active: bool) -> Command:
    """ACTIVE_CONSUMER_CHANGE (Failover subscriptions)."""
    return Command(T.ACTIVE_CONSUMER_CHANGE, proto.CommandActiveConsumerChange(
        consumer_id=consumer_id, is_active=is_active))


def get_last_message_id(consumer_id: int, request_id: int) -> Command:
    """GET_LAST_MESSAGE_ID."""
    return Command(T.GET_LAST_MESSAGE_ID, proto.CommandGetLastMessageId(
        consumer_id=consumer_id, request_id=request_id))


def get_last_message_id_response(
    request_id: int, last_message_id: MessageId, *, mark_delete_position: MessageId | None = None
) -> Command:
    """GET_LAST_MESSAGE_ID_RESPONSE."""
    body = proto.CommandGetLastMessageIdResponse(request_id=request_id)
    last_message_id.to_proto(body.last_message_id)
    if mark_delete_position is not None:
        mark_delete_position.to_proto(body.consumer_mark_delete_position)
    return Command(T.GET_LAST_MESSAGE_ID_RESPONSE, body)


def consumer_stats(request_id: int, consumer_id: int) -> Command:
    """CONSUMER_STATS."""
    return Command(T.CONSUMER_STATS, proto.CommandConsumerStats(
        request_id=request_id, consumer_id=consumer_id))


def consumer_stats_response(request_id: int, **stats: Any) -> Command:
    """CONSUMER_STATS_RESPONSE; `stats` uses the proto's names (msgRateOut, msgBacklog ...)."""
    return command(T.CONSUMER_STATS_RESPONSE, request_id=request_id, **stats)


# ---- transactions -------------------------------------------------------------------


def tc_client_connect_request(request_id: int, tc_id: int, *, scalable: bool = False) -> Command:
    """TC_CLIENT_CONNECT_REQUEST (v19+): attach to coordinator `tc_id`."""
    return Command(T.TC_CLIENT_CONNECT_REQUEST, _body(T.TC_CLIENT_CONNECT_REQUEST, {
        "request_id": request_id, "tc_id": tc_id, "scalable": scalable or None,
    }))


def tc_client_connect_response(
    request_id: int, *, error: ServerError | None = None, message: str | None = None
) -> Command:
    """TC_CLIENT_CONNECT_RESPONSE (error e.g. TransactionCoordinatorNotFound)."""
    return Command(T.TC_CLIENT_CONNECT_RESPONSE, _body(T.TC_CLIENT_CONNECT_RESPONSE, {
        "request_id": request_id, **_error_fields(error, message),
    }))


def new_txn(
    request_id: int, tc_id: int, *, timeout_ms: int | None = None, scalable: bool = False
) -> Command:
    """NEW_TXN on coordinator `tc_id`; `timeout_ms` goes to `txn_ttl_millis`."""
    return Command(T.NEW_TXN, _body(T.NEW_TXN, {
        "request_id": request_id, "tc_id": tc_id, "txn_ttl_millis": timeout_ms,
        "scalable": scalable or None,
    }))


def add_partition_to_txn(
    request_id: int, txn: TxnId, partitions: Iterable[str], *, scalable: bool = False
) -> Command:
    """ADD_PARTITION_TO_TXN: register topics (partitions, segments) the txn will write."""
    return Command(T.ADD_PARTITION_TO_TXN, _body(T.ADD_PARTITION_TO_TXN, {
        "request_id": request_id, **_txn_fields(txn), "partitions": list(partitions),
        "scalable": scalable or None,
    }))


def add_subscription_to_txn(
    request_id: int, txn: TxnId, subscriptions: Iterable[tuple[str, str]], *, scalable: bool = False
) -> Command:
    """ADD_SUBSCRIPTION_TO_TXN: register (topic, subscription) pairs the txn will ack on."""
    body = _body(T.ADD_SUBSCRIPTION_TO_TXN, {
        "request_id": request_id, **_txn_fields(txn), "scalable": scalable or None,
    })
    for topic, subscription in subscriptions:
        body.subscription.add(topic=topic, subscription=subscription)
    return Command(T.ADD_SUBSCRIPTION_TO_TXN, body)


def end_txn(request_id: int, txn: TxnId, action: TxnAction, *, scalable: bool = False) -> Command:
    """END_TXN: commit or abort."""
    return Command(T.END_TXN, _body(T.END_TXN, {
        "request_id": request_id, **_txn_fields(txn), "txn_action": int(action),
        "scalable": scalable or None,
    }))


def end_txn_on_partition(
    request_id: int, txn: TxnId, topic: str, action: TxnAction,
    *, low_watermark_least_bits: int | None = None,
) -> Command:
    """END_TXN_ON_PARTITION: the v4 coordinator tells a topic owner the decision."""
    return Command(T.END_TXN_ON_PARTITION, _body(T.END_TXN_ON_PARTITION, {
        "request_id": request_id, **_txn_fields(txn), "topic": topic, "txn_action": int(action),
        "txnid_least_bits_of_low_watermark": low_watermark_least_bits,
    }))


def end_txn_on_subscription(
    request_id: int, txn: TxnId, topic: str, subscription: str, action: TxnAction,
    *, low_watermark_least_bits: int | None = None,
) -> Command:
    """END_TXN_ON_SUBSCRIPTION: the v4 coordinator tells a subscription's owner the decision."""
    body = _body(T.END_TXN_ON_SUBSCRIPTION, {
        "request_id": request_id, **_txn_fields(txn), "txn_action": int(action),
        "txnid_least_bits_of_low_watermark": low_watermark_least_bits,
    })
    body.subscription.topic = topic
    body.subscription.subscription = subscription
    return Command(T.END_TXN_ON_SUBSCRIPTION, body)


TXN_RESPONSES = frozenset({
    T.NEW_TXN_RESPONSE, T.ADD_PARTITION_TO_TXN_RESPONSE, T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
    T.END_TXN_RESPONSE, T.END_TXN_ON_PARTITION_RESPONSE, T.END_TXN_ON_SUBSCRIPTION_RESPONSE,
})
"""The transaction responses; all share request_id, txn id, error, message."""


def txn_response(
    kind: CommandType, request_id: int, txn: TxnId | None = None,
    *, error: ServerError | None = None, message: str | None = None,
) -> Command:
    """Any transaction response (`kind` in TXN_RESPONSES).

    Raises:
        LocalProtocolError: `kind` is not a transaction response.
    """
    if kind not in TXN_RESPONSES:
        raise LocalProtocolError(f"{kind.name} is not a transaction response")
    return Command(kind, _body(kind, {
        "request_id": request_id, **_txn_fields(txn), **_error_fields(error, message),
    }))


def new_txn_response(request_id: int, txn: TxnId | None = None, *,
                     error: ServerError | None = None, message: str | None = None) -> Command:
    """NEW_TXN_RESPONSE: the new transaction's id, or an error."""
    return txn_response(T.NEW_TXN_RESPONSE, request_id, txn, error=error, message=message)


def add_partition_to_txn_response(request_id: int, txn: TxnId | None = None, *,
                                  error: ServerError | None = None,
                                  message: str | None = None) -> Command:
    """ADD_PARTITION_TO_TXN_RESPONSE."""
    return txn_response(T.ADD_PARTITION_TO_TXN_RESPONSE, request_id, txn, error=error, message=message)


def add_subscription_to_txn_response(request_id: int, txn: TxnId | None = None, *,
                                     error: ServerError | None = None,
                                     message: str | None = None) -> Command:
    """ADD_SUBSCRIPTION_TO_TXN_RESPONSE."""
    return txn_response(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, request_id, txn, error=error,
                        message=message)


def end_txn_response(request_id: int, txn: TxnId | None = None, *,
                     error: ServerError | None = None, message: str | None = None) -> Command:
    """END_TXN_RESPONSE."""
    return txn_response(T.END_TXN_RESPONSE, request_id, txn, error=error, message=message)


def end_txn_on_partition_response(request_id: int, txn: TxnId | None = None, *,
                                  error: ServerError | None = None,
                                  message: str | None = None) -> Command:
    """END_TXN_ON_PARTITION_RESPONSE."""
    return txn_response(T.END_TXN_ON_PARTITION_RESPONSE, request_id, txn, error=error, message=message)


def end_txn_on_subscription_response(request_id: int, txn: TxnId | None = None, *,
                                     error: ServerError | None = None,
                                     message: str | None = None) -> Command:
    """END_TXN_ON_SUBSCRIPTION_RESPONSE."""
    return txn_response(T.END_TXN_ON_SUBSCRIPTION_RESPONSE, request_id, txn, error=error,
                        message=message)


# ---- PIP-473 coordinator discovery --------------------------------------------------


def watch_tc_assignments(watch_id: int) -> Command:
    """WATCH_TC_ASSIGNMENTS: open the v5 coordinator-leader watch."""
    return Command(T.WATCH_TC_ASSIGNMENTS, proto.CommandWatchTcAssignments(watch_id=watch_id))


def watch_tc_assignments_update(
    watch_id: int,
    *,
    parallelism: int | None = None,
    leaders: Mapping[int, str | tuple[str, str | None]] | None = None,
    error: ServerError | None = None,
    message: str | None = None,
) -> Command:
    """WATCH_TC_ASSIGNMENTS_UPDATE: the full snapshot, or (initial watch only) an error.

    Args:
        parallelism: the number of TC partitions; with `leaders` it makes the snapshot.
        leaders: tc_id -> broker service URL, or (URL, TLS URL). Partitions mid-election
            are simply absent.
    """
    body = _body(T.WATCH_TC_ASSIGNMENTS_UPDATE, {"watch_id": watch_id, **_error_fields(error, message)})
    if parallelism is not None:
        snapshot = body.snapshot
        snapshot.parallelism = parallelism
        for tc_id, url in sorted((leaders or {}).items()):
            plain, tls = (url, None) if isinstance(url, str) else url
            assignment = snapshot.assignments.add(tc_id=tc_id, broker_service_url=plain)
            if tls is not None:
                assignment.broker_service_url_tls = tls
    return Command(T.WATCH_TC_ASSIGNMENTS_UPDATE, body)


def watch_tc_assignments_close(watch_id: int) -> Command:
    """WATCH_TC_ASSIGNMENTS_CLOSE."""
    return Command(T.WATCH_TC_ASSIGNMENTS_CLOSE, proto.CommandWatchTcAssignmentsClose(watch_id=watch_id))


# ---- PIP-460 scalable topics --------------------------------------------------------


def scalable_topic_lookup(session_id: int, topic: str, *, create_if_missing: bool | None = None) -> Command:
    """SCALABLE_TOPIC_LOOKUP: fetch a scalable topic's segment DAG and watch it."""
    return Command(T.SCALABLE_TOPIC_LOOKUP, _body(T.SCALABLE_TOPIC_LOOKUP, {
        "session_id": session_id, "topic": topic, "create_if_missing": create_if_missing,
    }))


def scalable_topic_update(
    session_id: int, *, dag: Any = None, resolved_topic_name: str | None = None,
    error: ServerError | None = None, message: str | None = None,
) -> Command:
    """SCALABLE_TOPIC_UPDATE: the DAG (a `ScalableTopicDAG`, see `segment_dag`) or an error."""
    body = _body(T.SCALABLE_TOPIC_UPDATE, {
        "session_id": session_id, "resolved_topic_name": resolved_topic_name,
        **_error_fields(error, message),
    })
    if dag is not None:
        body.dag.CopyFrom(dag)
    return Command(T.SCALABLE_TOPIC_UPDATE, body)


def scalable_topic_close(session_id: int) -> Command:
    """SCALABLE_TOPIC_CLOSE: end a DAG watch session."""
    return Command(T.SCALABLE_TOPIC_CLOSE, proto.CommandScalableTopicClose(session_id=session_id))


def segment_dag(
    epoch: int,
    segments: Iterable[Any],
    *,
    segment_brokers: Mapping[int, str] | None = None,
    controller_broker_url: str | None = None,
) -> Any:
    """A `ScalableTopicDAG` from `SegmentInfoProto`s (see `segment_info`) and their owners."""
    dag = proto.ScalableTopicDAG(epoch=epoch)
    dag.segments.extend(segments)
    for segment_id, url in sorted((segment_brokers or {}).items()):
        dag.segment_brokers.add(segment_id=segment_id, broker_url=url)
    if controller_broker_url is not None:
        dag.controller_broker_url = controller_broker_url
    return dag


def segment_info(
    segment_id: int,
    hash_start: int,
    hash_end: int,
    *,
    sealed: bool = False,
    parent_ids: Iterable[int] = (),
    child_ids: Iterable[int] = (),
    created_at_epoch: int = 0,
    created_at_ms: int = 0,
    sealed_at_epoch: int | None = None,
    sealed_at_ms: int | None = None,
) -> Any:
    """A `SegmentInfoProto`: one segment of the DAG (hash range inclusive)."""
    info = proto.SegmentInfoProto(
        segment_id=segment_id, hash_start=hash_start, hash_end=hash_end,
        state=1 if sealed else 0, parent_ids=list(parent_ids), child_ids=list(child_ids),
        created_at_epoch=created_at_epoch, created_at_ms=created_at_ms,
    )
    if sealed_at_epoch is not None:
        info.sealed_at_epoch = sealed_at_epoch
    if sealed_at_ms is not None:
        info.sealed_at_ms = sealed_at_ms
    return info


def scalable_topic_subscribe(
    request_id: int, topic: str, subscription: str, consumer_name: str, consumer_id: int,
    *, consumer_type: ScalableConsumerType = ScalableConsumerType.STREAM,
) -> Command:
    """SCALABLE_TOPIC_SUBSCRIBE: register a Stream/Checkpoint consumer with the controller."""
    return Command(T.SCALABLE_TOPIC_SUBSCRIBE, proto.CommandScalableTopicSubscribe(
        request_id=request_id, topic=topic, subscription=subscription,
        consumer_name=consumer_name, consumer_id=consumer_id, consumer_type=int(consumer_type),
    ))


def consumer_assignment(layout_epoch: int, segments: Iterable[tuple[int, int, int, str]]) -> Any:
    """A `ScalableConsumerAssignment` from (segment_id, hash_start, hash_end, segment_topic)."""
    assignment = proto.ScalableConsumerAssignment(layout_epoch=layout_epoch)
    for segment_id, hash_start, hash_end, segment_topic in segments:
        assignment.segments.add(segment_id=segment_id, hash_start=hash_start, hash_end=hash_end,
                                segment_topic=segment_topic)
    return assignment


def scalable_topic_subscribe_response(
    request_id: int, *, assignment: Any = None,
    error: ServerError | None = None, message: str | None = None,
) -> Command:
    """SCALABLE_TOPIC_SUBSCRIBE_RESPONSE: the initial assignment, or an error."""
    body = _body(T.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE, {
        "request_id": request_id, **_error_fields(error, message),
    })
    if assignment is not None:
        body.assignment.CopyFrom(assignment)
    return Command(T.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE, body)


def scalable_topic_assignment_update(consumer_id: int, assignment: Any) -> Command:
    """SCALABLE_TOPIC_ASSIGNMENT_UPDATE: a new assignment after a rebalance or split/merge."""
    body = proto.CommandScalableTopicAssignmentUpdate(consumer_id=consumer_id)
    body.assignment.CopyFrom(assignment)
    return Command(T.SCALABLE_TOPIC_ASSIGNMENT_UPDATE, body)


def watch_scalable_topics(
    watch_id: int, namespace: str, *, property_filters: Mapping[str, str] | None = None,
    current_hash: str | None = None,
) -> Command:
    """WATCH_SCALABLE_TOPICS: follow the scalable topics of a namespace."""
    return Command(T.WATCH_SCALABLE_TOPICS, _body(T.WATCH_SCALABLE_TOPICS, {
        "watch_id": watch_id, "namespace": namespace,
        "property_filters": _key_values(property_filters), "current_hash": current_hash,
    }))


def watch_scalable_topics_update(
    watch_id: int, *, snapshot: Iterable[str] | None = None,
    added: Iterable[str] | None = None, removed: Iterable[str] | None = None,
    error: ServerError | None = None, message: str | None = None,
) -> Command:
    """WATCH_SCALABLE_TOPICS_UPDATE: a full snapshot, or a diff (added/removed), or an error.

    Raises:
        LocalProtocolError: both a snapshot and a diff were given (they are a oneof).
    """
    if snapshot is not None and (added is not None or removed is not None):
        raise LocalProtocolError("a scalable-topics update is a snapshot or a diff, not both")
    body = _body(T.WATCH_SCALABLE_TOPICS_UPDATE, {"watch_id": watch_id, **_error_fields(error, message)})
    if snapshot is not None:
        body.snapshot.topics.extend(snapshot)
    elif added is not None or removed is not None:
        body.diff.added.extend(added or ())
        body.diff.removed.extend(removed or ())
    return Command(T.WATCH_SCALABLE_TOPICS_UPDATE, body)


def watch_scalable_topics_close(watch_id: int) -> Command:
    """WATCH_SCALABLE_TOPICS_CLOSE."""
    return Command(T.WATCH_SCALABLE_TOPICS_CLOSE, proto.CommandWatchScalableTopicsClose(watch_id=watch_id))


# ---- readers ------------------------------------------------------------------------


def request_id_of(event: Command) -> int | None:
    """The command's `request_id`, when its message has one and it is set."""
    body = event.body
    try:
        return body.request_id if body.HasField("request_id") else None
    except ValueError:  # the message has no such field
        return None


def error_of(event: Command) -> tuple[ServerError, str] | None:
    """The (error, message) a response carries, or None when it reports success.

    Covers the two spellings Pulsar uses: `error`/`message` and `error_code`/`error_message`.
    """
    body = event.body
    fields = body.DESCRIPTOR.fields_by_name
    if "error" in fields and body.HasField("error"):
        text = body.message if "message" in fields else ""
        return _server_error(body.error), text
    if "error_code" in fields and body.HasField("error_code"):
        return _server_error(body.error_code), body.error_message
    if event.type is T.LOOKUP_RESPONSE and body.response == LookupType.Failed:
        return ServerError.UnknownError, body.message
    return None


def _server_error(value: int) -> ServerError:
    try:
        return ServerError(value)
    except ValueError:
        return ServerError.UnknownError


def txn_of(event_or_body: Command | Any) -> TxnId | None:
    """The transaction id of a command (or of a `MessageMetadata`), or None if it has none."""
    body = event_or_body.body if isinstance(event_or_body, Command) else event_or_body
    return TxnId.from_fields(body)


def message_id_of(event: Command) -> MessageId | None:
    """The message id of SEND_RECEIPT, MESSAGE or GET_LAST_MESSAGE_ID_RESPONSE, else None."""
    body = event.body
    if event.type is T.GET_LAST_MESSAGE_ID_RESPONSE:
        return MessageId.from_proto(body.last_message_id)
    if event.type in (T.SEND_RECEIPT, T.MESSAGE) and body.HasField("message_id"):
        return MessageId.from_proto(body.message_id)
    return None


def describe(event: Command) -> str:
    """A one-line text form for logs: `SEND producer_id: 1 sequence_id: 5 [payload 312 bytes]`."""
    text = text_format.MessageToString(event.body, as_one_line=True)
    if event.payload is not None:
        text += f" [payload {len(event.payload)} bytes, checksum {event.payload.checksum.value}]"
    return f"{event.type.name} {text}".rstrip()
