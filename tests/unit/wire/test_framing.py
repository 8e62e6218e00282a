"""Frames: every command round-trips; splits, oversize and malformed frames."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.wire import proto
from harness.wire.enums import CommandType
from harness.wire.errors import LocalProtocolError, RemoteProtocolError
from harness.wire.events import Command
from harness.wire.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    MESSAGE_SIZE_FRAME_PADDING,
    FrameBuffer,
    decode_frame,
    encode_body,
    encode_frame,
    max_frame_size,
)
from tests.unit.wire.samples import all_samples, send_sample

SAMPLES = all_samples()


def _encode(event: Command) -> bytes:
    return encode_frame(event.type, event.body, event.payload)


def _decode_all(stream: bytes, chunks: list[int] | None = None) -> list[Command]:
    buffer = FrameBuffer(max_frame_size())
    out: list[Command] = []
    pieces = [stream] if chunks is None else _split(stream, chunks)
    for piece in pieces:
        buffer.feed(piece)
        while (frame := buffer.next_frame()) is not None:
            out.append(Command(*decode_frame(frame)))
    assert len(buffer) == 0
    return out


def _split(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    return [stream[a:b] for a, b in itertools.pairwise(points)]


def _same(a: Command, b: Command) -> bool:
    return a.type == b.type and a.body == b.body and a.payload == b.payload


def test_samples_cover_every_command_type() -> None:
    assert {event.type for event in SAMPLES} == set(CommandType)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type.name)
def test_every_command_round_trips(event: Command) -> None:
    data = _encode(event)
    assert struct.unpack_from(">I", data)[0] == len(data) - 4
    (decoded,) = _decode_all(data)
    assert _same(decoded, event)
    assert _encode(decoded) == data  # re-encoding a decoded command is byte-identical


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type.name)
def test_our_base_command_bytes_equal_the_protobuf_serializer(event: Command) -> None:
    base = proto.BaseCommand(type=int(event.type))
    getattr(base, proto.BODY_FIELDS[event.type]).CopyFrom(event.body)
    assert encode_body(event.type, event.body) == base.SerializeToString()


def test_a_stream_split_at_every_byte_boundary_decodes_to_the_same_events() -> None:
    stream = b"".join(_encode(event) for event in SAMPLES[:12])
    expected = _decode_all(stream)
    assert len(expected) == 12
    for cut in range(1, len(stream)):
        got = _decode_all(stream, [cut])
        assert len(got) == len(expected) and all(map(_same, got, expected)), f"split at {cut}"


def test_a_stream_fed_one_byte_at_a_time_decodes_to_the_same_events() -> None:
    stream = b"".join(_encode(event) for event in SAMPLES)
    got = _decode_all(stream, list(range(len(stream))))
    assert len(got) == len(SAMPLES) and all(map(_same, got, SAMPLES))


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=40))
def test_any_chunking_decodes_to_the_same_events(cuts: list[int]) -> None:
    stream = b"".join(_encode(event) for event in SAMPLES)
    got = _decode_all(stream, cuts)
    assert len(got) == len(SAMPLES) and all(map(_same, got, SAMPLES))


def test_non_bytes_input_is_copied_so_the_caller_may_reuse_its_buffer() -> None:
    data = bytearray(_encode(SAMPLES[0]))
    buffer = FrameBuffer(max_frame_size())
    buffer.feed(data[:10])
    buffer.feed(memoryview(data)[10:])
    data[:] = b"\x00" * len(data)
    frame = buffer.next_frame()
    assert frame is not None and decode_frame(frame)[0] is CommandType.CONNECT


def test_limit_is_max_message_size_plus_padding_over_the_whole_frame() -> None:
    assert max_frame_size() == DEFAULT_MAX_MESSAGE_SIZE + MESSAGE_SIZE_FRAME_PADDING == 5 * 1024 * 1024 + 10240


def test_an_oversize_frame_is_a_protocol_error_from_its_size_field_alone() -> None:
    buffer = FrameBuffer(1000)
    buffer.feed(struct.pack(">I", 997))  # 997 + 4 = 1001 bytes
    with pytest.raises(RemoteProtocolError, match="frame of 1001 bytes exceeds the limit of 1000"):
        buffer.next_frame()


def test_a_frame_exactly_at_the_limit_is_accepted() -> None:
    body = proto.CommandError(request_id=1, error=0, message="")
    for length in range(900, 1000):  # varint lengths grow, so search for an exact fit
        body.message = "x" * length
        data = encode_frame(CommandType.ERROR, body)
        if len(data) == 1000:
            break
    assert len(data) == 1000
    buffer = FrameBuffer(1000)
    buffer.feed(data)
    frame = buffer.next_frame()
    assert frame is not None and decode_frame(frame)[1] == body


def test_large_frames_spanning_many_chunks_are_joined_once() -> None:
    event = send_sample()
    metadata = event.payload.metadata  # type: ignore[union-attr]
    from harness.wire import commands as c

    big = c.send(1, 1, metadata, b"z" * (3 * 1024 * 1024))
    data = _encode(big)
    buffer = FrameBuffer(max_frame_size())
    frames = []
    for start in range(0, len(data), 65536):
        buffer.feed(data[start : start + 65536])
        frame = buffer.next_frame()
        if frame is not None:
            frames.append(frame)
    assert len(frames) == 1
    kind, _, payload = decode_frame(frames[0])
    assert kind is CommandType.SEND and payload is not None and payload.checksum_ok
    assert payload.data == b"z" * (3 * 1024 * 1024)


def _frame(command: bytes, rest: bytes = b"") -> memoryview:
    return memoryview(struct.pack(">I", len(command)) + command + rest)


def test_malformed_frames_are_remote_protocol_errors() -> None:
    ping = encode_body(CommandType.PING, proto.CommandPing())
    with pytest.raises(RemoteProtocolError, match="no room for a command size"):
        decode_frame(memoryview(b"\x00\x00"))
    with pytest.raises(RemoteProtocolError, match="runs past the end"):
        decode_frame(memoryview(struct.pack(">I", 50) + ping))
    with pytest.raises(RemoteProtocolError, match="does not parse"):
        decode_frame(_frame(b"\xff\xff\xff"))
    with pytest.raises(RemoteProtocolError, match="bytes after the command"):
        decode_frame(_frame(ping, b"extra"))
    send = encode_body(CommandType.SEND, proto.CommandSend(producer_id=1, sequence_id=1))
    with pytest.raises(RemoteProtocolError, match="SEND frame has no payload"):
        decode_frame(_frame(send))
    with pytest.raises(RemoteProtocolError, match="SEND payload is malformed"):
        decode_frame(_frame(send, b"\x0e\x01\x00"))
    with pytest.raises(RemoteProtocolError, match="SEND payload is malformed: metadata size"):
        decode_frame(_frame(send, struct.pack(">I", 99) + b"abc"))


def test_unknown_command_type_is_not_mistaken_for_another() -> None:
    # type = 90 (unknown to us): proto2 moves it to unknown fields, `type` stays unset.
    with pytest.raises(RemoteProtocolError, match="unknown or missing type"):
        decode_frame(_frame(b"\x08\x5a"))


def test_missing_required_fields_are_rejected_both_ways() -> None:
    with pytest.raises(LocalProtocolError, match="cannot encode FLOW"):
        encode_frame(CommandType.FLOW, proto.CommandFlow(consumer_id=1))
    # A SEND whose sub-message lacks sequence_id, hand-encoded.
    body = b"\x08\x01"  # producer_id = 1
    command = b"\x08\x06" + b"\x32" + bytes([len(body)]) + body
    with pytest.raises(RemoteProtocolError, match="SEND lacks required fields: sequence_id"):
        decode_frame(_frame(command, struct.pack(">I", 0)))


def test_payload_only_on_send_and_message() -> None:
    event = send_sample()
    with pytest.raises(LocalProtocolError, match="FLOW cannot carry a payload"):
        encode_frame(CommandType.FLOW, proto.CommandFlow(consumer_id=1, messagePermits=1), event.payload)
    with pytest.raises(LocalProtocolError, match="SEND needs a payload"):
        encode_frame(CommandType.SEND, event.body)
