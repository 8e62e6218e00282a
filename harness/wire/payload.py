"""The payload part of SEND and MESSAGE frames: checksum, metadata, data.

Theory of operation. What follows the command in a payload frame is, in Pulsar's
words, "headers and payload"; we call it the *entry*, because it is exactly what a
broker appends to the topic's ledger and later hands to consumers unchanged:

    [0x0e01:2][CRC32C:4][metadataSize:4][MessageMetadata][data]     (checksummed, v6+)
    [metadataSize:4][MessageMetadata][data]                         (no checksum)

The CRC32-C covers everything after the checksum field: metadataSize, metadata and
data. A broker may prepend broker entry metadata for consumers that asked for it
(`FeatureFlags.supports_broker_entry_metadata`): `[0x0e02:2][size:4][BrokerEntryMetadata]`.
It is not part of the entry and not covered by the checksum; `Payload` keeps it apart.
The two magics cannot be mistaken for a metadata size: 0x0e01xxxx and 0x0e02xxxx are
above 234 MB, far over any frame limit.

A wrong checksum is not a protocol error. Decoding never raises for it; the payload
records `ChecksumStatus.MISMATCH` and the receiver reacts as Pulsar does: a broker
answers the SEND with SEND_ERROR `ChecksumError` and keeps the connection (Java
`Producer.publishMessage`), a client discards the MESSAGE and acks it with
`validation_error=ChecksumMismatch` (C++ `ConsumerImpl`).

`Payload` is immutable and lazy: the metadata is parsed and the data copied out only
when asked for, so a broker that only stores and forwards entries never pays for them.
A decoded payload's `entry` is a read-only memoryview into the received bytes (no
copy); whoever keeps it for long should take `bytes(payload.entry)` so the receive
chunk it points into can be freed.
"""

from __future__ import annotations

import struct
from enum import Enum
from typing import Any

import google_crc32c

from harness.wire import proto
from harness.wire.errors import LocalProtocolError, MessageFormatError

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02

_U32 = struct.Struct(">I")
_CHECKSUM_HEADER = struct.Struct(">HII")  # magic, crc, metadataSize
_BEM_HEADER = struct.Struct(">HI")  # magic, size

Buffer = bytes | bytearray | memoryview


class ChecksumStatus(Enum):
    """What the entry's CRC32-C said when it was decoded."""

    VALID = "valid"
    MISMATCH = "mismatch"
    ABSENT = "absent"  # sent without a checksum (allowed: Pulsar accepts such entries)
    UNVERIFIED = "unverified"  # present but not checked (Payload.parse(verify=False))


def crc32c(data: Buffer) -> int:
    """CRC32-C (Castagnoli) of `data`, with the C implementation of google_crc32c."""
    return google_crc32c.value(data if type(data) is bytes else bytes(data))


class Payload:
    """One entry (metadata + data, optionally checksummed) plus broker entry metadata.

    Build one to send with `Payload.build(metadata, data)`; decoding a frame or reading
    a stored entry gives one through `Payload.parse(entry)`.
    """

    __slots__ = (
        "_data",
        "_entry",
        "_meta_end",
        "_meta_start",
        "_metadata",
        "_parts",
        "broker_entry_metadata",
        "checksum",
    )

    checksum: ChecksumStatus
    broker_entry_metadata: Any

    def __init__(
        self,
        parts: tuple[Buffer, ...],
        meta_start: int,
        meta_end: int,
        checksum: ChecksumStatus,
        broker_entry_metadata: Any = None,
    ) -> None:
        """Internal: use `Payload.build` or `Payload.parse`."""
        self._parts = parts
        self._entry: Buffer | None = parts[0] if len(parts) == 1 else None
        self._meta_start = meta_start
        self._meta_end = meta_end
        self._metadata: Any = None
        self._data: bytes | None = None
        self.checksum = checksum
        self.broker_entry_metadata = broker_entry_metadata

    # ---- construction ------------------------------------------------------------------

    @classmethod
    def build(cls, metadata: Any, data: Buffer, *, with_checksum: bool = True) -> Payload:
        """An entry to send: `metadata` (a `MessageMetadata`) serialized, CRC32-C over it.

        Raises:
            LocalProtocolError: `metadata` lacks a required field (producer_name,
                sequence_id, publish_time).
        """
        try:
            meta = metadata.SerializeToString()
        except proto.EncodeError as exc:
            raise LocalProtocolError(
                f"cannot encode MessageMetadata: {exc}; set producer_name, sequence_id and "
                "publish_time (harness.wire.commands.message_metadata does)"
            ) from None
        if type(data) is not bytes:
            data = bytes(data)
        meta_len = len(meta)
        if not with_checksum:
            return cls((_U32.pack(meta_len), meta, data), 4, 4 + meta_len, ChecksumStatus.ABSENT)
        size = _U32.pack(meta_len)
        crc = google_crc32c.extend(google_crc32c.value(size + meta), data)
        header = _CHECKSUM_HEADER.pack(MAGIC_CRC32C, crc, meta_len)
        return cls((header, meta, data), 10, 10 + meta_len, ChecksumStatus.VALID)

    @classmethod
    def parse(
        cls, entry: Buffer, *, verify: bool = True, broker_entry_metadata: Any = None
    ) -> Payload:
        """The payload of an entry as it appears on the wire or in a ledger.

        Args:
            entry: `[magic][crc][size][metadata][data]` or `[size][metadata][data]`.
            verify: compute the CRC32-C and record VALID/MISMATCH; without it a present
                checksum is recorded as UNVERIFIED (a broker re-reading its own ledger).
            broker_entry_metadata: a `BrokerEntryMetadata` to carry along, if any.

        Raises:
            MessageFormatError: the entry is too short or its metadata size runs past its end.
        """
        total = len(entry)
        if total >= 2 and entry[0] == 0x0E and entry[1] == 0x01:
            if total < 10:
                raise MessageFormatError(
                    f"entry of {total} bytes is too short for a checksum and a metadata size"
                )
            _, stored, meta_len = _CHECKSUM_HEADER.unpack_from(entry, 0)
            meta_start = 10
            if not verify:
                status = ChecksumStatus.UNVERIFIED
            elif google_crc32c.value(bytes(entry[6:])) == stored:
                status = ChecksumStatus.VALID
            else:
                status = ChecksumStatus.MISMATCH
        else:
            if total < 4:
                raise MessageFormatError(f"entry of {total} bytes is too short for a metadata size")
            meta_len = _U32.unpack_from(entry, 0)[0]
            meta_start = 4
            status = ChecksumStatus.ABSENT
        meta_end = meta_start + meta_len
        if meta_end > total:
            raise MessageFormatError(
                f"metadata size {meta_len} runs past the end of a {total}-byte entry"
            )
        return cls((entry,), meta_start, meta_end, status, broker_entry_metadata)

    def with_broker_entry_metadata(self, broker_entry_metadata: Any) -> Payload:
        """The same entry with `broker_entry_metadata` (a `BrokerEntryMetadata` or None)."""
        twin = Payload(
            self._parts, self._meta_start, self._meta_end, self.checksum, broker_entry_metadata
        )
        twin._entry = self._entry
        return twin

    # ---- reading -----------------------------------------------------------------------

    @property
    def entry(self) -> Buffer:
        """The whole entry (headers and payload): what a broker stores and dispatches."""
        if self._entry is None:
            self._entry = b"".join(self._parts)
        return self._entry

    @property
    def checksum_ok(self) -> bool:
        """False only when a checksum was present, verified, and wrong."""
        return self.checksum is not ChecksumStatus.MISMATCH

    @property
    def metadata(self) -> Any:
        """The `MessageMetadata` (parsed on first access).

        Raises:
            MessageFormatError: the metadata bytes do not parse.
        """
        if self._metadata is None:
            if len(self._parts) == 3:
                raw: Buffer = self._parts[1]
            else:
                raw = memoryview(self.entry)[self._meta_start : self._meta_end]
            try:
                self._metadata = proto.MessageMetadata.FromString(raw)
            except proto.DecodeError as exc:
                raise MessageFormatError(f"MessageMetadata does not parse: {exc}") from None
        return self._metadata

    @property
    def data(self) -> bytes:
        """The message data after the metadata (a batch or compressed data when so marked)."""
        if self._data is None:
            if len(self._parts) == 3:
                self._data = bytes(self._parts[2])
            else:
                self._data = bytes(memoryview(self.entry)[self._meta_end :])
        return self._data

    def __len__(self) -> int:
        if self._entry is not None:
            return len(self._entry)
        return sum(len(part) for part in self._parts)

    def frame_parts(self) -> list[Buffer]:
        """The buffers that follow the command in a frame, in order (no joining)."""
        parts: list[Buffer] = []
        bem = self.broker_entry_metadata
        if bem is not None:
            raw = bem.SerializeToString()
            parts.append(_BEM_HEADER.pack(MAGIC_BROKER_ENTRY_METADATA, len(raw)))
            parts.append(raw)
        if self._entry is not None:
            parts.append(self._entry)
        else:
            parts.extend(self._parts)
        return parts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Payload):
            return NotImplemented
        mine, theirs = self.broker_entry_metadata, other.broker_entry_metadata
        return bytes(self.entry) == bytes(other.entry) and (
            (mine is None and theirs is None)
            or (mine is not None and theirs is not None and mine == theirs)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Payload({len(self)} bytes, checksum={self.checksum.value}, "
            f"broker_entry_metadata={'yes' if self.broker_entry_metadata is not None else 'no'})"
        )


def split_broker_entry_metadata(rest: memoryview) -> tuple[Any, memoryview]:
    """Split `[0x0e02][size][BrokerEntryMetadata]` off the front of `rest`, if present.

    Returns:
        (the parsed BrokerEntryMetadata or None, the remaining bytes: the entry).

    Raises:
        MessageFormatError: the broker entry metadata is truncated or does not parse.
    """
    if len(rest) >= 2 and rest[0] == 0x0E and rest[1] == 0x02:
        if len(rest) < 6:
            raise MessageFormatError("broker entry metadata header is truncated")
        size = _U32.unpack_from(rest, 2)[0]
        end = 6 + size
        if end > len(rest):
            raise MessageFormatError(
                f"broker entry metadata size {size} runs past the end of the frame"
            )
        try:
            bem = proto.BrokerEntryMetadata.FromString(rest[6:end])
        except proto.DecodeError as exc:
            raise MessageFormatError(f"BrokerEntryMetadata does not parse: {exc}") from None
        return bem, rest[end:]
    return None, rest
