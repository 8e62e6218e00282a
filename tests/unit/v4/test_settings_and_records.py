"""Settings validation (Pulsar's TransactionBatchedWriteValidator) and the log record formats."""

from __future__ import annotations

import struct

import pytest

from embedded.broker.config import Settings
from embedded.broker.v4.records import (
    BATCHED_ENTRY_MAGIC,
    AckType,
    BatchedPendingAckMetadataEntry,
    BatchedTransactionMetadataEntry,
    EntryFormatError,
    PendingAckMetadataEntry,
    PendingAckOp,
    TransactionMetadataEntry,
    TransactionMetadataOp,
    TxnStatus,
    decode_entry,
    encode_batch,
    pending_ack_record,
    split_entry,
    txn_record,
)
from embedded.broker.v4.settings import InvalidV4Settings, V4Settings


def test_defaults_are_pulsars() -> None:
    settings = V4Settings.from_settings(Settings({}))
    assert not settings.log_batching.enabled and not settings.pending_ack_batching.enabled
    assert (settings.log_batching.max_records, settings.log_batching.max_size, settings.log_batching.max_delay_ms) \
        == (512, 4 * 1024 * 1024, 1)
    assert settings.snapshot_max_txn_count == 1000 and settings.snapshot_min_interval_ms == 5000
    assert settings.participant_timeout_ms == 3000


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("transactionLogBatchedWriteMaxRecords", 9, "at least 10"),
    ("transactionLogBatchedWriteMaxSize", 128 * 1024 - 1, "at least 131072"),
    ("transactionLogBatchedWriteMaxDelayInMillis", 0, "at least 1"),
    ("transactionPendingAckBatchedWriteMaxRecords", 1, "at least 10"),
    ("transactionPendingAckBatchedWriteMaxSize", 1024, "at least 131072"),
    ("transactionPendingAckBatchedWriteMaxDelayInMillis", -1, "at least 1"),
])
def test_batched_write_settings_are_validated_when_enabled(name: str, value: int, needle: str) -> None:
    enabled = {"transactionLogBatchedWriteEnabled": True, "transactionPendingAckBatchedWriteEnabled": True}
    with pytest.raises(InvalidV4Settings) as err:
        V4Settings.from_settings(Settings({**enabled, name: value}))
    assert name in str(err.value) and needle in str(err.value)
    assert "disable batched writes" in str(err.value)   # the message says how to fix it
    # the same value is fine while batching is off, as in Pulsar
    V4Settings.from_settings(Settings({name: value}))


def test_minimum_valid_batched_settings_are_accepted() -> None:
    settings = V4Settings.from_settings(Settings({
        "transactionLogBatchedWriteEnabled": True, "transactionLogBatchedWriteMaxRecords": 10,
        "transactionLogBatchedWriteMaxSize": 128 * 1024, "transactionLogBatchedWriteMaxDelayInMillis": 1}))
    assert settings.log_batching.enabled and settings.log_batching.max_records == 10


def test_txn_record_has_pulsars_field_numbers() -> None:
    record = txn_record(TransactionMetadataOp.UPDATE, 3, 7, now_ms=5, max_local_txn_id=9,
                        new_status=TxnStatus.COMMITTING, expected_status=TxnStatus.OPEN,
                        subscriptions=[("persistent://t/n/a", "s")])
    data = record.SerializeToString()
    # field 1 (metadata_op, varint 3), field 2 (least 7), field 3 (most 3): tags 0x08 0x10 0x18
    assert data[:6] == bytes([0x08, 3, 0x10, 7, 0x18, 3])
    back = TransactionMetadataEntry.FromString(data)
    assert back.new_status == TxnStatus.COMMITTING and back.expected_status == TxnStatus.OPEN
    assert back.max_local_txn_id == 9 and back.subscriptions[0].subscription == "s"


def test_batched_entry_has_magic_version_and_is_the_batched_proto() -> None:
    records = [txn_record(TransactionMetadataOp.NEW, 1, i, now_ms=i, max_local_txn_id=i, timeout_ms=1000)
               .SerializeToString() for i in range(1, 4)]
    entry = encode_batch(records)
    assert struct.unpack(">HH", entry[:4]) == (BATCHED_ENTRY_MAGIC, 1)
    batch = BatchedTransactionMetadataEntry.FromString(entry[4:])
    assert [r.txnid_least_bits for r in batch.transaction_log] == [1, 2, 3]
    assert decode_entry(entry) == records and split_entry(records[0]) == [records[0]]
    assert decode_entry(records[0]) is None   # a single record never starts with the magic number

    acks = [pending_ack_record(PendingAckOp.ACK, 1, 2, AckType.Individual, [(5, 6, [0b101], 3)]).SerializeToString()]
    entry = encode_batch(acks)
    parsed = BatchedPendingAckMetadataEntry.FromString(entry[4:]).pending_ack_log[0]
    assert parsed.pending_ack_metadata[0].ack_set == [0b101] and parsed.pending_ack_metadata[0].batch_size == 3
    assert PendingAckMetadataEntry.FromString(decode_entry(entry)[0]).txnid_least_bits == 2  # type: ignore[index]


def test_unknown_batch_version_and_garbage_are_refused() -> None:
    with pytest.raises(EntryFormatError, match="version 2"):
        decode_entry(struct.pack(">HH", BATCHED_ENTRY_MAGIC, 2) + b"\x0a\x00")
    with pytest.raises(EntryFormatError):
        decode_entry(struct.pack(">HH", BATCHED_ENTRY_MAGIC, 1) + b"\x0a\x05ab")
