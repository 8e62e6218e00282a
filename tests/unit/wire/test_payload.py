"""Payloads: CRC32-C, checksum mismatch handling, broker entry metadata, real C++ client bytes."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from harness.wire import commands as c
from harness.wire.batch import unpack_messages
from harness.wire.connection import Connection
from harness.wire.enums import CommandType, CompressionType, ServerError
from harness.wire.errors import LocalProtocolError, MessageFormatError
from harness.wire.events import NEED_DATA, Command
from harness.wire.framing import encode_frame
from harness.wire.ids import MessageId
from harness.wire.payload import ChecksumStatus, Payload, crc32c
from harness.wire.rules import ConnectionState, Role
from tests.unit.wire.samples import send_sample

CPP_STREAM = bytes.fromhex((Path(__file__).parent / "data" / "cpp_client_stream.hex").read_text())


def test_crc32c_known_vector() -> None:
    # RFC 3720 (iSCSI) test vector: 32 bytes of zeros.
    assert crc32c(b"\x00" * 32) == 0x8A9136AA
    assert crc32c(memoryview(b"123456789")) == 0xE3069283


def test_built_entry_layout_and_checksum() -> None:
    metadata = c.message_metadata("p", 1, 2)
    payload = Payload.build(metadata, b"hello")
    entry = bytes(payload.entry)
    meta = metadata.SerializeToString()
    assert entry[:2] == b"\x0e\x01"
    assert struct.unpack_from(">I", entry, 2)[0] == crc32c(entry[6:])
    assert entry[6:] == struct.pack(">I", len(meta)) + meta + b"hello"
    assert payload.checksum is ChecksumStatus.VALID
    parsed = Payload.parse(entry)
    assert parsed.checksum is ChecksumStatus.VALID and parsed.data == b"hello"
    assert parsed.metadata == metadata and parsed == payload


def test_entry_without_checksum() -> None:
    payload = Payload.build(c.message_metadata("p", 1, 2), b"hi", with_checksum=False)
    assert bytes(payload.entry)[:2] != b"\x0e\x01"
    parsed = Payload.parse(payload.entry)
    assert parsed.checksum is ChecksumStatus.ABSENT and parsed.checksum_ok and parsed.data == b"hi"


@pytest.mark.parametrize("where", ["data", "metadata", "size", "checksum"])
def test_any_flipped_bit_is_a_mismatch_not_an_exception(where: str) -> None:
    entry = bytearray(Payload.build(c.message_metadata("p", 1, 2), b"hello world").entry)
    offset = {"data": len(entry) - 1, "metadata": 11, "size": 9, "checksum": 3}[where]
    entry[offset] ^= 0x01  # for "size": metadata one byte longer or shorter, still in bounds
    parsed = Payload.parse(bytes(entry))
    assert parsed.checksum is ChecksumStatus.MISMATCH and not parsed.checksum_ok


def test_unverified_when_asked_not_to_check() -> None:
    entry = bytearray(Payload.build(c.message_metadata("p", 1, 2), b"x").entry)
    entry[-1] ^= 0xFF
    assert Payload.parse(bytes(entry), verify=False).checksum is ChecksumStatus.UNVERIFIED


def test_malformed_entries() -> None:
    with pytest.raises(MessageFormatError, match="too short for a checksum"):
        Payload.parse(b"\x0e\x01\x00\x00")
    with pytest.raises(MessageFormatError, match="too short for a metadata size"):
        Payload.parse(b"\x00\x00")
    bad = Payload.parse(struct.pack(">I", 3) + b"\xff\xff\xff" + b"data")
    with pytest.raises(MessageFormatError, match="MessageMetadata does not parse"):
        _ = bad.metadata


def test_build_refuses_incomplete_metadata() -> None:
    from harness.wire import proto

    with pytest.raises(LocalProtocolError, match="set producer_name, sequence_id and publish_time"):
        Payload.build(proto.MessageMetadata(producer_name="p"), b"x")


def test_broker_entry_metadata_round_trip_and_is_outside_the_checksum() -> None:
    event = send_sample()
    assert event.payload is not None
    bem = c.broker_entry_metadata(broker_timestamp=123, index=456)
    dispatched = c.message(1, MessageId(2, 3), event.payload.with_broker_entry_metadata(bem))
    data = encode_frame(dispatched.type, dispatched.body, dispatched.payload)
    client = _ready(Role.CLIENT)
    client.receive_data(data)
    got = client.next_event()
    assert isinstance(got, Command) and got.payload is not None
    assert got.payload.broker_entry_metadata == bem
    assert got.payload.checksum is ChecksumStatus.VALID
    assert bytes(got.payload.entry) == bytes(event.payload.entry)  # the stored entry, unchanged


def _ready(role: Role) -> Connection:
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    server.receive_data(client.send(c.connect()))
    server.next_event()
    client.receive_data(server.send(c.connected()))
    client.next_event()
    return client if role is Role.CLIENT else server


def test_broker_answers_a_bad_checksum_with_send_error_and_keeps_the_connection() -> None:
    server = _ready(Role.SERVER)
    good = send_sample()
    data = bytearray(encode_frame(good.type, good.body, good.payload))
    data[-1] ^= 0x20  # corrupt the last data byte
    server.receive_data(bytes(data))
    server.receive_data(encode_frame(good.type, good.body, good.payload))
    corrupt = server.next_event()
    assert isinstance(corrupt, Command) and corrupt.type is CommandType.SEND
    assert corrupt.payload is not None and corrupt.payload.checksum is ChecksumStatus.MISMATCH
    reply = server.send(c.send_error(corrupt.body.producer_id, corrupt.body.sequence_id,
                                     ServerError.ChecksumError, "Checksum failed on the broker"))
    assert reply
    intact = server.next_event()
    assert isinstance(intact, Command) and intact.payload is not None and intact.payload.checksum_ok
    assert server.state is ConnectionState.READY and server.next_event() is NEED_DATA


def _cpp_events() -> list[Command]:
    server = Connection(Role.SERVER)
    server.receive_data(CPP_STREAM)
    events: list[Command] = []
    for event in server.events():
        assert isinstance(event, Command)
        events.append(event)
        if event.type is CommandType.CONNECT:
            server.send(c.connected())
    return events


def test_the_real_cpp_client_stream_decodes() -> None:
    events = _cpp_events()
    kinds = [event.type.name for event in events]
    assert kinds[:5] == ["CONNECT", "PARTITIONED_METADATA", "LOOKUP", "PRODUCER", "SEND"]
    assert kinds[-3:] == ["CLOSE_PRODUCER", "CLOSE_PRODUCER", "CLOSE_CONSUMER"]
    connect = events[0].body
    assert connect.client_version.startswith("Pulsar-CPP") and connect.protocol_version == 20
    assert connect.feature_flags.supports_broker_entry_metadata
    sends = [event for event in events if event.type is CommandType.SEND]
    assert all(event.payload is not None and event.payload.checksum is ChecksumStatus.VALID
               for event in sends)
    values = []
    for event in sends:
        assert event.payload is not None
        for message in unpack_messages(event.payload):
            values.append((json.loads(message.data)["v"], message.batch_index, message.key))
    assert values == [
        ("single-1", -1, None), ("single-2", -1, None),
        ("batch-0", 0, "k0"), ("batch-1", 1, "k1"), ("batch-2", 2, "k2"),
    ]
    batch = sends[2]
    assert batch.payload is not None
    assert batch.payload.metadata.compression == CompressionType.ZLIB
    assert batch.payload.metadata.num_messages_in_batch == 3 and batch.body.num_messages == 3
    assert sends[1].payload is not None and sends[1].payload.metadata.partition_key == "k1"
    ack = next(event for event in events if event.type is CommandType.ACK)
    assert [str(MessageId.from_proto(m)) for m in ack.body.message_id] == ["7:0:-1", "7:1:-1", "7:2:-1"]


def test_the_real_cpp_client_stream_reencodes_byte_for_byte() -> None:
    stream = b"".join(encode_frame(e.type, e.body, e.payload) for e in _cpp_events())
    assert stream == CPP_STREAM
