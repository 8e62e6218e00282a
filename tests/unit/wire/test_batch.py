"""Batches and compression."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.wire import commands as c
from harness.wire import proto
from harness.wire.batch import (
    BatchMessage,
    compress,
    decode_batch,
    decompress,
    encode_batch,
    unpack_messages,
)
from harness.wire.enums import CompressionType
from harness.wire.errors import MessageFormatError
from harness.wire.payload import Payload


def test_batch_layout() -> None:
    data, count = encode_batch([BatchMessage(b"ab", key="k"), BatchMessage(b"c")])
    assert count == 2
    size = struct.unpack_from(">I", data)[0]
    first = proto.SingleMessageMetadata.FromString(data[4 : 4 + size])
    assert first.payload_size == 2 and first.partition_key == "k"
    assert data[4 + size : 6 + size] == b"ab"


def test_batch_round_trip_with_all_single_metadata_fields() -> None:
    messages = [
        BatchMessage(b'{"v": "a"}', key="k1", properties={"x": "1"}, sequence_id=7,
                     event_time_ms=99, ordering_key=b"o"),
        BatchMessage(b""),
        BatchMessage(b"\x00" * 300, key="k3"),
    ]
    data, count = encode_batch(messages)
    out = decode_batch(data, count)
    assert [m.data for m in out] == [m.data for m in messages]
    assert [m.batch_index for m in out] == [0, 1, 2]
    assert [m.key for m in out] == ["k1", None, "k3"]
    first = out[0].single_metadata
    assert (first.sequence_id, first.event_time, first.ordering_key) == (7, 99, b"o")
    assert [(p.key, p.value) for p in first.properties] == [("x", "1")]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=300), st.none() | st.text(max_size=10)),
                min_size=1, max_size=20),
       st.sampled_from([CompressionType.NONE, CompressionType.ZLIB]))
def test_any_batch_round_trips_through_an_entry(items: list[tuple[bytes, str | None]],
                                                codec: CompressionType) -> None:
    data, count = encode_batch(BatchMessage(body, key=key) for body, key in items)
    packed = compress(codec, data)
    metadata = c.message_metadata("p", 1, 2, num_messages_in_batch=count, compression=codec,
                                  uncompressed_size=len(data))
    payload = Payload.parse(Payload.build(metadata, packed).entry)
    out = unpack_messages(payload)
    assert [(m.data, m.key) for m in out] == items


def test_unbatched_entry_unpacks_to_one_message() -> None:
    payload = Payload.build(c.message_metadata("p", 1, 2), b"solo")
    (only,) = unpack_messages(payload)
    assert (only.batch_index, only.data, only.single_metadata) == (-1, b"solo", None)


def test_a_batch_of_one_is_still_a_batch() -> None:
    data, count = encode_batch([BatchMessage(b"one")])
    payload = Payload.build(c.message_metadata("p", 1, 2, num_messages_in_batch=count), data)
    (only,) = unpack_messages(payload)
    assert only.batch_index == 0 and only.data == b"one"


def test_malformed_batches() -> None:
    data, _ = encode_batch([BatchMessage(b"abc"), BatchMessage(b"def")])
    with pytest.raises(MessageFormatError, match="truncated before message 2 of 3"):
        decode_batch(data, 3)
    with pytest.raises(MessageFormatError, match="bytes left over"):
        decode_batch(data, 1)
    with pytest.raises(MessageFormatError, match="payload size 3 runs past the end"):
        decode_batch(data[:-1], 2)
    with pytest.raises(MessageFormatError, match="metadata runs past the end"):
        decode_batch(struct.pack(">I", 50) + b"xx", 1)


def test_zlib_size_mismatch_and_corruption_are_format_errors() -> None:
    packed = compress(CompressionType.ZLIB, b"hello")
    assert decompress(CompressionType.ZLIB, packed, 5) == b"hello"
    with pytest.raises(MessageFormatError, match="metadata says 6"):
        decompress(CompressionType.ZLIB, packed, 6)
    with pytest.raises(MessageFormatError, match="does not decompress"):
        decompress(CompressionType.ZLIB, b"not zlib", 5)


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD, CompressionType.SNAPPY])
def test_unimplemented_codecs_name_themselves(codec: CompressionType) -> None:
    with pytest.raises(MessageFormatError, match=f"compression {codec.name} is not supported"):
        decompress(codec, b"x", 1)
    with pytest.raises(MessageFormatError, match=f"compression {codec.name} is not implemented"):
        compress(codec, b"x")
    with pytest.raises(MessageFormatError, match="unknown codec 9"):
        decompress(9, b"x", 1)
