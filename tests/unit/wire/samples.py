"""One realistic sample of every command type, built the way the client and broker build them."""

from __future__ import annotations

from harness.wire import commands as c
from harness.wire.batch import BatchMessage, encode_batch
from harness.wire.enums import (
    AckType,
    CommandType,
    InitialPosition,
    ResourceType,
    ScalableConsumerType,
    SchemaType,
    ServerError,
    SubType,
    TxnAction,
)
from harness.wire.events import Command
from harness.wire.ids import MessageId, TxnId

TXN = TxnId(3, 17)
TOPIC = "persistent://public/default/orders"
SEGMENT = "segment://public/default/orders/0000-7fff-1"


def send_sample(txn: TxnId | None = TXN) -> Command:
    metadata = c.message_metadata("producer-a", 42, 1_700_000_000_000, txn=txn,
                                  partition_key="k1", properties={"origin": "test"})
    return c.send(5, 42, metadata, b'{"v": "value-42", "i": [], "p": ""}')


def batch_send_sample() -> Command:
    data, count = encode_batch(
        BatchMessage(f'{{"v": "b{i}"}}'.encode(), key=f"k{i}", sequence_id=100 + i) for i in range(4)
    )
    metadata = c.message_metadata("producer-a", 100, 1_700_000_000_001, num_messages_in_batch=count,
                                  highest_sequence_id=103, txn=TXN)
    return c.send(5, 100, metadata, data, highest_sequence_id=103)


def message_sample() -> Command:
    entry = send_sample().payload
    assert entry is not None
    bem = c.broker_entry_metadata(broker_timestamp=1_700_000_000_005, index=77)
    return c.message(9, MessageId(12, 4), entry.with_broker_entry_metadata(bem), redelivery_count=1)


def all_samples() -> list[Command]:
    """Every CommandType at least once (tests check the coverage)."""
    schema = c.schema("orders", SchemaType.Json, b'{"type": "record"}', properties={"a": "b"})
    dag = c.segment_dag(
        4,
        [c.segment_info(1, 0, 0x7FFF, sealed=True, child_ids=[3, 4], created_at_ms=1, sealed_at_ms=2,
                        sealed_at_epoch=3),
         c.segment_info(3, 0, 0x3FFF, parent_ids=[1], created_at_epoch=3, created_at_ms=2)],
        segment_brokers={3: "pulsar://127.0.0.1:6650"},
        controller_broker_url="pulsar://127.0.0.1:6650",
    )
    assignment = c.consumer_assignment(4, [(3, 0, 0x3FFF, SEGMENT)])
    return [
        c.connect("txnbench-test", feature_flags={"supports_broker_entry_metadata",
                                                  "supports_scalable_topics"}),
        c.connected("txnbench-broker", protocol_version=21, max_message_size=5 * 1024 * 1024,
                    feature_flags={"supports_tc_metadata_discovery"}),
        c.subscribe(TOPIC, "sub-1", 9, 3, sub_type=SubType.Key_Shared, consumer_name="cons",
                    initial_position=InitialPosition.Earliest, durable=True,
                    start_message_id=MessageId.EARLIEST, key_shared_ranges=[(0, 0x7FFF)],
                    metadata={"m": "1"}, schema=schema),
        c.producer(TOPIC, 5, 2, producer_name="producer-a", txn_enabled=True, schema=schema),
        send_sample(),
        batch_send_sample(),
        c.send_receipt(5, 42, MessageId(12, 4, partition=2)),
        c.send_error(5, 43, ServerError.ChecksumError, "Checksum failed on the broker"),
        message_sample(),
        c.ack(9, [MessageId(12, 4), MessageId(12, 5)], txn=TXN, request_id=8),
        c.ack(9, [MessageId(12, 6)], ack_type=AckType.Cumulative),
        c.flow(9, 1000),
        c.unsubscribe(9, 10, force=True),
        c.success(10),
        c.error(11, ServerError.TopicNotFound, "no such topic"),
        c.close_producer(5, 12),
        c.close_consumer(9, 13, assigned_broker_service_url="pulsar://127.0.0.1:6651"),
        c.producer_success(2, "producer-a", last_sequence_id=41),
        c.ping(),
        c.pong(),
        c.redeliver_unacknowledged(9, [MessageId(12, 4)], consumer_epoch=2),
        c.partitioned_metadata("persistent://pulsar/system/transaction_coordinator_assign", 1),
        c.partitioned_metadata_response(1, 16),
        c.lookup(TOPIC, 2, authoritative=True),
        c.lookup_response(2, "pulsar://127.0.0.1:6650", redirect=True, authoritative=True),
        c.consumer_stats(14, 9),
        c.consumer_stats_response(14, msgRateOut=1.5, msgBacklog=3, consumerName="cons"),
        c.reached_end_of_topic(9),
        c.seek(9, 15, message_id=MessageId(12, 0)),
        c.get_last_message_id(9, 16),
        c.get_last_message_id_response(16, MessageId(12, 9), mark_delete_position=MessageId(12, 3)),
        c.active_consumer_change(9, True),
        c.get_topics_of_namespace(17, "public/default"),
        c.get_topics_of_namespace_response(17, [TOPIC], topics_hash="abc"),
        c.get_schema(18, TOPIC),
        c.get_schema_response(18, schema=schema, schema_version=b"\x00\x01"),
        c.command(CommandType.AUTH_CHALLENGE, server_version="b",
                  challenge={"auth_method_name": "token", "auth_data": b"x"}),
        c.command(CommandType.AUTH_RESPONSE, client_version="c",
                  response={"auth_method_name": "token", "auth_data": b"y"}),
        c.ack_response(9, 8, txn=TXN, error=ServerError.TransactionConflict, message="conflict"),
        c.get_or_create_schema(19, TOPIC, schema),
        c.get_or_create_schema_response(19, schema_version=b"\x02"),
        c.new_txn(20, 3, timeout_ms=30_000, scalable=True),
        c.new_txn_response(20, TXN),
        c.add_partition_to_txn(21, TXN, [TOPIC, SEGMENT], scalable=True),
        c.add_partition_to_txn_response(21, TXN),
        c.add_subscription_to_txn(22, TXN, [(TOPIC, "sub-1")]),
        c.add_subscription_to_txn_response(22, TXN, error=ServerError.TransactionNotFound),
        c.end_txn(23, TXN, TxnAction.COMMIT, scalable=True),
        c.end_txn_response(23, TXN),
        c.end_txn_on_partition(24, TXN, TOPIC, TxnAction.ABORT, low_watermark_least_bits=10),
        c.end_txn_on_partition_response(24, TXN),
        c.end_txn_on_subscription(25, TXN, TOPIC, "sub-1", TxnAction.COMMIT),
        c.end_txn_on_subscription_response(25, TXN),
        c.tc_client_connect_request(26, 3, scalable=True),
        c.tc_client_connect_response(26, error=ServerError.TransactionCoordinatorNotFound),
        c.command(CommandType.WATCH_TOPIC_LIST, request_id=27, watcher_id=1,
                  namespace="public/default", topics_pattern="orders.*"),
        c.command(CommandType.WATCH_TOPIC_LIST_SUCCESS, request_id=27, watcher_id=1,
                  topic=[TOPIC], topics_hash="h"),
        c.command(CommandType.WATCH_TOPIC_UPDATE, watcher_id=1, new_topics=[TOPIC], topics_hash="h2"),
        c.command(CommandType.WATCH_TOPIC_LIST_CLOSE, request_id=28, watcher_id=1),
        c.topic_migrated(5, ResourceType.Producer, "pulsar://127.0.0.1:6652"),
        c.scalable_topic_lookup(1, "topic://public/default/orders", create_if_missing=False),
        c.scalable_topic_update(1, dag=dag, resolved_topic_name="topic://public/default/orders"),
        c.scalable_topic_close(1),
        c.scalable_topic_subscribe(29, "topic://public/default/orders", "sub-1", "cons", 9,
                                   consumer_type=ScalableConsumerType.CHECKPOINT),
        c.scalable_topic_subscribe_response(29, assignment=assignment),
        c.scalable_topic_assignment_update(9, assignment),
        c.watch_scalable_topics(2, "public/default", property_filters={"team": "a"}),
        c.watch_scalable_topics_update(2, added=["topic://public/default/orders"], removed=[]),
        c.watch_scalable_topics_close(2),
        c.watch_tc_assignments(3),
        c.watch_tc_assignments_update(3, parallelism=16, leaders={
            0: "pulsar://127.0.0.1:6650", 3: ("pulsar://127.0.0.1:6651", "pulsar+ssl://127.0.0.1:6751")}),
        c.watch_tc_assignments_close(3),
    ]
