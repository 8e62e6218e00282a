"""Batched payloads and compression: many messages in one entry, and back.

Theory of operation. A batch entry's data is a sequence of

    [singleMetaSize:4][SingleMessageMetadata][payload_i]

one per message, with `SingleMessageMetadata.payload_size` giving each payload's length.
The entry's `MessageMetadata.num_messages_in_batch` holds the count (and CommandSend's
`num_messages` repeats it); a message's id inside the entry is (ledger, entry,
batch_index). The Java and C++ clients mark *every* payload they produce with
`num_messages_in_batch`, 1 for a single message, and treat an entry as a batch when
the metadata has the field set; `unpack_messages` does the same.

Compression applies to the whole data (after batching): `MessageMetadata.compression`
names the codec and `uncompressed_size` the size before it. We encode and decode NONE
and ZLIB (the zlib stream format that Java's `Deflater` and the C++ client's zlib
produce); LZ4, ZSTD and SNAPPY raise `MessageFormatError` naming the codec, which a
client reports as a `DecompressionError` validation error when it acks the message.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from harness.wire import proto
from harness.wire.enums import CompressionType
from harness.wire.errors import MessageFormatError
from harness.wire.payload import Buffer, Payload

_U32 = struct.Struct(">I")


class BatchMessage(NamedTuple):
    """One message to put into a batch (a NamedTuple: immutable, and cheap to make per message)."""

    data: bytes
    key: str | None = None
    properties: Mapping[str, str] | None = None
    sequence_id: int | None = None
    event_time_ms: int | None = None
    ordering_key: bytes | None = None

    def single_metadata(self) -> Any:
        """This message's `SingleMessageMetadata`."""
        if self.key is not None:
            meta = proto.SingleMessageMetadata(payload_size=len(self.data), partition_key=self.key)
        else:
            meta = proto.SingleMessageMetadata(payload_size=len(self.data))
        if self.properties:
            for name, value in self.properties.items():
                meta.properties.add(key=name, value=value)
        if self.sequence_id is not None:
            meta.sequence_id = self.sequence_id
        if self.event_time_ms is not None:
            meta.event_time = self.event_time_ms
        if self.ordering_key is not None:
            meta.ordering_key = self.ordering_key
        return meta


class UnpackedMessage(NamedTuple):
    """One message taken out of an entry (a NamedTuple, made once per message received).

    Attributes:
        batch_index: its index in the batch, or -1 for an entry that is not a batch.
        data: its payload.
        single_metadata: its `SingleMessageMetadata` (None outside a batch).
    """

    batch_index: int
    data: bytes
    single_metadata: Any = None

    @property
    def key(self) -> str | None:
        """The message key (partition key), if any."""
        meta = self.single_metadata
        if meta is not None and meta.HasField("partition_key"):
            return meta.partition_key
        return None


def encode_batch(messages: Iterable[BatchMessage]) -> tuple[bytes, int]:
    """The batch data for `messages`, and how many there are.

    Put the count in `MessageMetadata.num_messages_in_batch` (see
    `commands.message_metadata`) and send the data with `commands.send`.
    """
    parts: list[bytes] = []
    count = 0
    for message in messages:
        meta = message.single_metadata().SerializeToString()
        parts.append(_U32.pack(len(meta)))
        parts.append(meta)
        parts.append(message.data)
        count += 1
    return b"".join(parts), count


def decode_batch(data: Buffer, count: int) -> list[UnpackedMessage]:
    """The `count` messages of a batch's (uncompressed) data.

    Raises:
        MessageFormatError: the data is truncated, a SingleMessageMetadata does not
            parse, or bytes are left over after `count` messages.
    """
    view = memoryview(data)
    total = len(view)
    pos = 0
    out: list[UnpackedMessage] = []
    parse = proto.SingleMessageMetadata.FromString
    for index in range(count):
        if pos + 4 > total:
            raise MessageFormatError(f"batch truncated before message {index} of {count}")
        meta_size = _U32.unpack_from(view, pos)[0]
        meta_end = pos + 4 + meta_size
        if meta_end > total:
            raise MessageFormatError(f"batch message {index}: metadata runs past the end")
        try:
            meta = parse(view[pos + 4 : meta_end])
        except proto.DecodeError as exc:
            raise MessageFormatError(f"batch message {index}: metadata does not parse: {exc}") from None
        data_end = meta_end + meta.payload_size
        if meta.payload_size < 0 or data_end > total:
            raise MessageFormatError(
                f"batch message {index}: payload size {meta.payload_size} runs past the end"
            )
        out.append(UnpackedMessage(index, bytes(view[meta_end:data_end]), meta))
        pos = data_end
    if pos != total:
        raise MessageFormatError(f"batch of {count} messages has {total - pos} bytes left over")
    return out


def compress(codec: CompressionType, data: bytes) -> bytes:
    """`data` compressed with `codec` (NONE or ZLIB).

    Raises:
        MessageFormatError: the codec is one we do not implement.
    """
    if codec is CompressionType.NONE:
        return data
    if codec is CompressionType.ZLIB:
        return zlib.compress(data)
    raise MessageFormatError(
        f"compression {codec.name} is not implemented by harness.wire; use NONE or ZLIB"
    )


def decompress(codec: int, data: Buffer, uncompressed_size: int) -> bytes:
    """`data` decompressed with `codec`, checked against `uncompressed_size`.

    Raises:
        MessageFormatError: unknown or unimplemented codec, corrupt data, or a size mismatch.
    """
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.ZLIB:
        try:
            out = zlib.decompress(data)
        except zlib.error as exc:
            raise MessageFormatError(f"ZLIB data does not decompress: {exc}") from None
        if len(out) != uncompressed_size:
            raise MessageFormatError(
                f"ZLIB data decompressed to {len(out)} bytes, metadata says {uncompressed_size}"
            )
        return out
    try:
        name = CompressionType(codec).name
    except ValueError:
        name = f"unknown codec {codec}"
    raise MessageFormatError(f"compression {name} is not supported by harness.wire (NONE, ZLIB only)")


def unpack_messages(payload: Payload) -> list[UnpackedMessage]:
    """Every message in an entry: decompressed, and split when it is a batch.

    Raises:
        MessageFormatError: as `decompress` and `decode_batch`.
    """
    metadata = payload.metadata
    data: Buffer = payload.data
    if metadata.compression != CompressionType.NONE:
        data = decompress(metadata.compression, data, metadata.uncompressed_size)
    if metadata.HasField("num_messages_in_batch"):
        return decode_batch(data, metadata.num_messages_in_batch)
    return [UnpackedMessage(-1, bytes(data))]
