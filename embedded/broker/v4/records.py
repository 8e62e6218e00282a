"""What the v4 logs store: Pulsar's protobuf records and PIP-160's batched entry format.

Theory of operation. The coordinator log holds `TransactionMetadataEntry` records
(Pulsar's `PulsarTransactionMetadata.proto`), a pending-ack log holds
`PendingAckMetadataEntry` records (`TransactionPendingAck.proto`), with Pulsar's field
numbers, so an entry's size is what Pulsar would write. The messages are declared here
and loaded into a private descriptor pool (as `harness.wire.proto` does for the wire
protocol), so there is no code-generation step.

An entry is either one record (batched writes off) or, with PIP-160 batched writes,

    [magic 0x0e01: u16][version 1: u16][BatchedTransactionMetadataEntry | BatchedPendingAckMetadataEntry]

where the batched message is `repeated <record> = 1`. Because a repeated message field
is just its elements one after another, each as `tag, length, bytes`, a batch is built
from already-serialized records without parsing them again (`encode_batch`), and
`decode_entry` splits it back. A single record can never start with the magic bytes
(0x0e would be field 1 with wire type 6, which does not exist), which is how Pulsar's
readers tell the two forms apart too.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

BATCHED_ENTRY_MAGIC = 0x0E01
BATCHED_ENTRY_VERSION = 1
BATCH_PREFIX = struct.pack(">HH", BATCHED_ENTRY_MAGIC, BATCHED_ENTRY_VERSION)
_BATCH_FIELD_TAG = (1 << 3) | 2   # field 1, length-delimited


class TxnStatus(enum.IntEnum):
    """Pulsar's `TxnStatus` (the persisted states of the coordinator log)."""

    OPEN = 0
    COMMITTING = 1
    COMMITTED = 2
    ABORTING = 3
    ABORTED = 4


class TransactionMetadataOp(enum.IntEnum):
    NEW = 0
    ADD_PARTITION = 1
    ADD_SUBSCRIPTION = 2
    UPDATE = 3


class PendingAckOp(enum.IntEnum):
    ACK = 1
    COMMIT = 2
    ABORT = 3


class AckType(enum.IntEnum):
    """`CommandAck.AckType`."""

    Individual = 0
    Cumulative = 1


class EntryFormatError(ValueError):
    """A log entry is neither a record nor a batched entry of a known version."""


# ---- the schema -------------------------------------------------------------------------------------

_PACKAGE = "txnbench.pulsar.txnlog"
_F = descriptor_pb2.FieldDescriptorProto
_OPT, _REP, _REQ = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED, _F.LABEL_REQUIRED
_SCALARS = {"uint64": _F.TYPE_UINT64, "int64": _F.TYPE_INT64, "int32": _F.TYPE_INT32, "string": _F.TYPE_STRING}
_ENUMS: dict[str, type[enum.IntEnum]] = {"TxnStatus": TxnStatus, "TransactionMetadataOp": TransactionMetadataOp,
                                         "PendingAckOp": PendingAckOp, "AckType": AckType}

# (message, [(number, name, label, type)]) with Pulsar's numbers
_MESSAGES: list[tuple[str, list[tuple[int, str, int, str]]]] = [
    ("Subscription", [(1, "topic", _REQ, "string"), (2, "subscription", _REQ, "string")]),
    ("TransactionMetadataEntry", [
        (1, "metadata_op", _OPT, "TransactionMetadataOp"),
        (2, "txnid_least_bits", _OPT, "uint64"),
        (3, "txnid_most_bits", _OPT, "uint64"),
        (4, "expected_status", _OPT, "TxnStatus"),
        (5, "new_status", _OPT, "TxnStatus"),
        (6, "partitions", _REP, "string"),
        (7, "subscriptions", _REP, "Subscription"),
        (8, "timeout_ms", _OPT, "uint64"),
        (9, "start_time", _OPT, "uint64"),
        (10, "last_modification_time", _OPT, "uint64"),
        (11, "max_local_txn_id", _OPT, "uint64"),
    ]),
    ("BatchedTransactionMetadataEntry", [(1, "transaction_log", _REP, "TransactionMetadataEntry")]),
    ("PendingAckMetadata", [
        (1, "ledgerId", _REQ, "uint64"),
        (2, "entryId", _REQ, "uint64"),
        (3, "ack_set", _REP, "int64"),
        (4, "batch_size", _OPT, "int32"),
    ]),
    ("PendingAckMetadataEntry", [
        (1, "pending_ack_op", _OPT, "PendingAckOp"),
        (2, "ack_type", _OPT, "AckType"),
        (3, "txnid_least_bits", _OPT, "uint64"),
        (4, "txnid_most_bits", _OPT, "uint64"),
        (5, "pending_ack_metadata", _REP, "PendingAckMetadata"),
    ]),
    ("BatchedPendingAckMetadataEntry", [(1, "pending_ack_log", _REP, "PendingAckMetadataEntry")]),
]


def build_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="txnbench/v4_logs.proto", package=_PACKAGE, syntax="proto2")
    for name, values in _ENUMS.items():
        spec = file.enum_type.add(name=name)
        for member in values:
            spec.value.add(name=f"{name}_{member.name}", number=int(member))
    for name, fields in _MESSAGES:
        spec = file.message_type.add(name=name)
        for number, field_name, label, type_name in fields:
            field = spec.field.add(name=field_name, number=number, label=label)
            if type_name in _SCALARS:
                field.type = _SCALARS[type_name]
            elif type_name in _ENUMS:
                field.type = _F.TYPE_ENUM
                field.type_name = f".{_PACKAGE}.{type_name}"
            else:
                field.type = _F.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{type_name}"
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(build_file())


def _cls(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


TransactionMetadataEntry: Any = _cls("TransactionMetadataEntry")
BatchedTransactionMetadataEntry: Any = _cls("BatchedTransactionMetadataEntry")
PendingAckMetadataEntry: Any = _cls("PendingAckMetadataEntry")
BatchedPendingAckMetadataEntry: Any = _cls("BatchedPendingAckMetadataEntry")


# ---- entries ----------------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_batch(records: Sequence[bytes]) -> bytes:
    """A batched entry: the prefix, then the records as `repeated <record> = 1`."""
    parts = [BATCH_PREFIX]
    tag = bytes([_BATCH_FIELD_TAG])
    for record in records:
        parts.append(tag)
        parts.append(_varint(len(record)))
        parts.append(record)
    return b"".join(parts)


def is_batched(data: bytes) -> bool:
    return len(data) >= 4 and data[0] == 0x0E and data[1] == 0x01


def decode_entry(data: bytes) -> list[bytes] | None:
    """The serialized records of a batched entry, or None when `data` is a single record."""
    if not is_batched(data):
        return None
    version = struct.unpack_from(">H", data, 2)[0]
    if version != BATCHED_ENTRY_VERSION:
        raise EntryFormatError(f"batched log entry version {version} is not supported (only "
                               f"{BATCHED_ENTRY_VERSION}); was it written by a newer broker?")
    records: list[bytes] = []
    view = memoryview(data)
    i, end = 4, len(data)
    while i < end:
        if data[i] != _BATCH_FIELD_TAG:
            raise EntryFormatError(f"batched log entry: unexpected field tag {data[i]:#x} at byte {i}")
        i += 1
        length = shift = 0
        for _ in range(10):   # a varint has at most 10 bytes
            if i >= end:
                raise EntryFormatError("batched log entry: truncated length")
            byte = data[i]
            i += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if i + length > end:
            raise EntryFormatError("batched log entry: a record runs past the end of the entry")
        records.append(bytes(view[i:i + length]))
        i += length
    return records


def split_entry(data: bytes) -> list[bytes]:
    """The records of any entry: one for a plain entry, n for a batched one."""
    records = decode_entry(data)
    return [data] if records is None else records


# ---- record builders ----------------------------------------------------------------------------------


def txn_record(op: TransactionMetadataOp, most: int, least: int, *, now_ms: int, max_local_txn_id: int,
               new_status: TxnStatus | None = None, expected_status: TxnStatus | None = None,
               partitions: Iterable[str] = (), subscriptions: Iterable[tuple[str, str]] = (),
               timeout_ms: int | None = None) -> Any:
    entry = TransactionMetadataEntry(metadata_op=int(op), txnid_least_bits=least, txnid_most_bits=most,
                                     last_modification_time=now_ms, max_local_txn_id=max_local_txn_id)
    if op is TransactionMetadataOp.NEW:
        entry.start_time = now_ms
        entry.timeout_ms = timeout_ms or 0
    if new_status is not None:
        entry.new_status = int(new_status)
    if expected_status is not None:
        entry.expected_status = int(expected_status)
    entry.partitions.extend(partitions)
    for topic, subscription in subscriptions:
        entry.subscriptions.add(topic=topic, subscription=subscription)
    return entry


def pending_ack_record(op: PendingAckOp, most: int, least: int, ack_type: AckType,
                       positions: Iterable[tuple[int, int, Sequence[int] | None, int]] = ()) -> Any:
    """`positions`: (ledger id, entry id, ack set words or None, batch size)."""
    entry = PendingAckMetadataEntry(pending_ack_op=int(op), ack_type=int(ack_type), txnid_least_bits=least,
                                    txnid_most_bits=most)
    for ledger_id, entry_id, ack_set, batch_size in positions:
        item = entry.pending_ack_metadata.add(ledgerId=ledger_id, entryId=entry_id)
        if ack_set:
            item.ack_set.extend(w - (1 << 64) if w >= (1 << 63) else w for w in ack_set)
        if batch_size:
            item.batch_size = batch_size
    return entry


__all__ = [
    "BATCHED_ENTRY_MAGIC", "BATCHED_ENTRY_VERSION", "AckType", "BatchedPendingAckMetadataEntry",
    "BatchedTransactionMetadataEntry", "EntryFormatError", "PendingAckMetadataEntry", "PendingAckOp",
    "TransactionMetadataEntry", "TransactionMetadataOp", "TxnStatus", "decode_entry", "encode_batch",
    "is_batched", "pending_ack_record", "split_entry", "txn_record",
]
