"""The protobuf message classes of the Pulsar protocol, built at import time.

`harness.wire.schema` declares the schema as a table; this module loads it into a
private `DescriptorPool` (so nothing clashes with other protobuf users in the process)
and makes one class per message with `message_factory`. With protobuf's upb backend
these classes parse and serialize in C.

Use the classes like generated ones: `proto.CommandSend(producer_id=1, sequence_id=0)`,
`proto.MessageMetadata.FromString(data)`. The keyword helpers in `harness.wire.commands`
are the convenient way to build whole commands.
"""

from __future__ import annotations

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError, EncodeError, Message

from harness.wire.enums import CommandType
from harness.wire.schema import COMMAND_BODIES, PACKAGE, build_file

__all__ = ["BODY_CLASSES", "BODY_FIELDS", "POOL", "DecodeError", "EncodeError", "Message"]

POOL = descriptor_pool.DescriptorPool()
POOL.Add(build_file())


def _message_class(name: str) -> type[Message]:
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


Schema: type[Message] = _message_class("Schema")
MessageIdData: type[Message] = _message_class("MessageIdData")
KeyValue: type[Message] = _message_class("KeyValue")
KeyLongValue: type[Message] = _message_class("KeyLongValue")
IntRange: type[Message] = _message_class("IntRange")
EncryptionKeys: type[Message] = _message_class("EncryptionKeys")
MessageMetadata: type[Message] = _message_class("MessageMetadata")
SingleMessageMetadata: type[Message] = _message_class("SingleMessageMetadata")
BrokerEntryMetadata: type[Message] = _message_class("BrokerEntryMetadata")
CommandConnect: type[Message] = _message_class("CommandConnect")
FeatureFlags: type[Message] = _message_class("FeatureFlags")
CommandConnected: type[Message] = _message_class("CommandConnected")
CommandAuthResponse: type[Message] = _message_class("CommandAuthResponse")
CommandAuthChallenge: type[Message] = _message_class("CommandAuthChallenge")
AuthData: type[Message] = _message_class("AuthData")
KeySharedMeta: type[Message] = _message_class("KeySharedMeta")
CommandSubscribe: type[Message] = _message_class("CommandSubscribe")
CommandPartitionedTopicMetadata: type[Message] = _message_class("CommandPartitionedTopicMetadata")
CommandPartitionedTopicMetadataResponse: type[Message] = _message_class("CommandPartitionedTopicMetadataResponse")
CommandLookupTopic: type[Message] = _message_class("CommandLookupTopic")
CommandLookupTopicResponse: type[Message] = _message_class("CommandLookupTopicResponse")
CommandProducer: type[Message] = _message_class("CommandProducer")
CommandSend: type[Message] = _message_class("CommandSend")
CommandSendReceipt: type[Message] = _message_class("CommandSendReceipt")
CommandSendError: type[Message] = _message_class("CommandSendError")
CommandMessage: type[Message] = _message_class("CommandMessage")
CommandAck: type[Message] = _message_class("CommandAck")
CommandAckResponse: type[Message] = _message_class("CommandAckResponse")
CommandActiveConsumerChange: type[Message] = _message_class("CommandActiveConsumerChange")
CommandFlow: type[Message] = _message_class("CommandFlow")
CommandUnsubscribe: type[Message] = _message_class("CommandUnsubscribe")
CommandSeek: type[Message] = _message_class("CommandSeek")
CommandReachedEndOfTopic: type[Message] = _message_class("CommandReachedEndOfTopic")
CommandTopicMigrated: type[Message] = _message_class("CommandTopicMigrated")
CommandCloseProducer: type[Message] = _message_class("CommandCloseProducer")
CommandCloseConsumer: type[Message] = _message_class("CommandCloseConsumer")
CommandRedeliverUnacknowledgedMessages: type[Message] = _message_class("CommandRedeliverUnacknowledgedMessages")
CommandSuccess: type[Message] = _message_class("CommandSuccess")
CommandProducerSuccess: type[Message] = _message_class("CommandProducerSuccess")
CommandError: type[Message] = _message_class("CommandError")
CommandPing: type[Message] = _message_class("CommandPing")
CommandPong: type[Message] = _message_class("CommandPong")
CommandConsumerStats: type[Message] = _message_class("CommandConsumerStats")
CommandConsumerStatsResponse: type[Message] = _message_class("CommandConsumerStatsResponse")
CommandGetLastMessageId: type[Message] = _message_class("CommandGetLastMessageId")
CommandGetLastMessageIdResponse: type[Message] = _message_class("CommandGetLastMessageIdResponse")
CommandGetTopicsOfNamespace: type[Message] = _message_class("CommandGetTopicsOfNamespace")
CommandGetTopicsOfNamespaceResponse: type[Message] = _message_class("CommandGetTopicsOfNamespaceResponse")
CommandWatchTopicList: type[Message] = _message_class("CommandWatchTopicList")
CommandWatchTopicListSuccess: type[Message] = _message_class("CommandWatchTopicListSuccess")
CommandWatchTopicUpdate: type[Message] = _message_class("CommandWatchTopicUpdate")
CommandWatchTopicListClose: type[Message] = _message_class("CommandWatchTopicListClose")
SegmentInfoProto: type[Message] = _message_class("SegmentInfoProto")
SegmentBrokerAddress: type[Message] = _message_class("SegmentBrokerAddress")
ScalableTopicDAG: type[Message] = _message_class("ScalableTopicDAG")
CommandScalableTopicLookup: type[Message] = _message_class("CommandScalableTopicLookup")
CommandScalableTopicUpdate: type[Message] = _message_class("CommandScalableTopicUpdate")
CommandScalableTopicClose: type[Message] = _message_class("CommandScalableTopicClose")
ScalableAssignedSegment: type[Message] = _message_class("ScalableAssignedSegment")
ScalableConsumerAssignment: type[Message] = _message_class("ScalableConsumerAssignment")
CommandScalableTopicSubscribe: type[Message] = _message_class("CommandScalableTopicSubscribe")
CommandScalableTopicSubscribeResponse: type[Message] = _message_class("CommandScalableTopicSubscribeResponse")
CommandScalableTopicAssignmentUpdate: type[Message] = _message_class("CommandScalableTopicAssignmentUpdate")
CommandWatchScalableTopics: type[Message] = _message_class("CommandWatchScalableTopics")
ScalableTopicsSnapshot: type[Message] = _message_class("ScalableTopicsSnapshot")
ScalableTopicsDiff: type[Message] = _message_class("ScalableTopicsDiff")
CommandWatchScalableTopicsUpdate: type[Message] = _message_class("CommandWatchScalableTopicsUpdate")
CommandWatchScalableTopicsClose: type[Message] = _message_class("CommandWatchScalableTopicsClose")
CommandWatchTcAssignments: type[Message] = _message_class("CommandWatchTcAssignments")
TcAssignment: type[Message] = _message_class("TcAssignment")
TcAssignmentsSnapshot: type[Message] = _message_class("TcAssignmentsSnapshot")
CommandWatchTcAssignmentsUpdate: type[Message] = _message_class("CommandWatchTcAssignmentsUpdate")
CommandWatchTcAssignmentsClose: type[Message] = _message_class("CommandWatchTcAssignmentsClose")
CommandGetSchema: type[Message] = _message_class("CommandGetSchema")
CommandGetSchemaResponse: type[Message] = _message_class("CommandGetSchemaResponse")
CommandGetOrCreateSchema: type[Message] = _message_class("CommandGetOrCreateSchema")
CommandGetOrCreateSchemaResponse: type[Message] = _message_class("CommandGetOrCreateSchemaResponse")
CommandTcClientConnectRequest: type[Message] = _message_class("CommandTcClientConnectRequest")
CommandTcClientConnectResponse: type[Message] = _message_class("CommandTcClientConnectResponse")
CommandNewTxn: type[Message] = _message_class("CommandNewTxn")
CommandNewTxnResponse: type[Message] = _message_class("CommandNewTxnResponse")
CommandAddPartitionToTxn: type[Message] = _message_class("CommandAddPartitionToTxn")
CommandAddPartitionToTxnResponse: type[Message] = _message_class("CommandAddPartitionToTxnResponse")
Subscription: type[Message] = _message_class("Subscription")
CommandAddSubscriptionToTxn: type[Message] = _message_class("CommandAddSubscriptionToTxn")
CommandAddSubscriptionToTxnResponse: type[Message] = _message_class("CommandAddSubscriptionToTxnResponse")
CommandEndTxn: type[Message] = _message_class("CommandEndTxn")
CommandEndTxnResponse: type[Message] = _message_class("CommandEndTxnResponse")
CommandEndTxnOnPartition: type[Message] = _message_class("CommandEndTxnOnPartition")
CommandEndTxnOnPartitionResponse: type[Message] = _message_class("CommandEndTxnOnPartitionResponse")
CommandEndTxnOnSubscription: type[Message] = _message_class("CommandEndTxnOnSubscription")
CommandEndTxnOnSubscriptionResponse: type[Message] = _message_class("CommandEndTxnOnSubscriptionResponse")
BaseCommand: type[Message] = _message_class("BaseCommand")

BODY_FIELDS: dict[CommandType, str] = {kind: field for kind, (field, _) in COMMAND_BODIES.items()}
"""The BaseCommand field that holds each command type's sub-message."""

BODY_CLASSES: dict[CommandType, type[Message]] = {
    kind: _message_class(name) for kind, (_, name) in COMMAND_BODIES.items()
}
"""The sub-message class of each command type."""

__all__ += [name for name, value in list(globals().items()) if isinstance(value, type)
            and issubclass(value, Message) and value is not Message]
