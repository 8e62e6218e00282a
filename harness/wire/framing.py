"""Frames: the size-prefixed units of the Pulsar byte stream, in and out.

Theory of operation. Every frame is `[totalSize:4][commandSize:4][BaseCommand]`
followed, for SEND and MESSAGE only, by the payload (see `harness.wire.payload`). All
sizes are unsigned big-endian; `totalSize` counts every byte after itself.

Size limit. Pulsar's Java broker and client both decode with Netty's
`LengthFieldBasedFrameDecoder(maxMessageSize + MESSAGE_SIZE_FRAME_PADDING, 0, 4, 0, 4)`
(`PulsarChannelInitializer`, `Commands.MESSAGE_SIZE_FRAME_PADDING = 10 * 1024`,
default `maxMessageSize` 5 MiB = `Commands.DEFAULT_MAX_MESSAGE_SIZE`), where the limit
counts the whole frame including its 4-byte size field; the broker advertises its
`maxMessageSize` in CONNECTED and the C++ client sizes messages to fit it. We do the
same: `max_frame_size(max_message_size) = max_message_size + 10 KiB`, measured over the
whole frame, and a frame over it is a protocol error, detected from the size field
alone, before its body arrives (Netty's fail-fast).

Encoding. BaseCommand is `required Type type = 1` plus the one sub-message whose field
number equals the type. We serialize the sub-message and prepend the few bytes of
BaseCommand framing ourselves (tag and type, tag and length), which is byte-for-byte
what a protobuf serializer emits and saves building and copying a BaseCommand per frame.
Each frame is produced by one `b"".join`, so payload data is copied once.

Decoding. `FrameBuffer` collects received chunks without copying them; a frame that
lies inside one chunk comes out as a zero-copy memoryview, and only a frame that spans
chunks is joined, once, when it is complete (never a growing concatenation).
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any

from harness.wire import proto
from harness.wire.enums import CommandType
from harness.wire.errors import LocalProtocolError, MessageFormatError, RemoteProtocolError
from harness.wire.payload import Buffer, Payload, split_broker_entry_metadata

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's default `maxMessageSize` (broker.conf), advertised in CONNECTED."""

MESSAGE_SIZE_FRAME_PADDING = 10 * 1024
"""Room for command and metadata on top of the message size (Java `Commands`)."""

PAYLOAD_COMMANDS = frozenset({CommandType.SEND, CommandType.MESSAGE})
"""The only command types followed by a payload."""

_SIZES = struct.Struct(">II")
_U32 = struct.Struct(">I")
_DECODE: dict[int, tuple[CommandType, str]] = {
    int(kind): (kind, proto.BODY_FIELDS[kind]) for kind in CommandType
}


def max_frame_size(max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> int:
    """The largest frame, size field included, for a given `maxMessageSize`."""
    return max_message_size + MESSAGE_SIZE_FRAME_PADDING


def _varint_slow(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = tuple(bytes((value,)) for value in range(128))


def _varint(value: int) -> bytes:
    return _SMALL_VARINTS[value] if value < 128 else _varint_slow(value)


# BaseCommand bytes before the sub-message's length: `type` (field 1, varint) and the
# sub-message's tag (field number = type value, wire type 2).
_BASE_PREFIX: dict[CommandType, bytes] = {
    kind: b"\x08" + _varint(int(kind)) + _varint((int(kind) << 3) | 2) for kind in CommandType
}


def encode_body(kind: CommandType, body: Any) -> bytes:
    """The serialized BaseCommand carrying `body` as its `kind` sub-message.

    Raises:
        LocalProtocolError: `body` lacks a required field.
    """
    try:
        raw = body.SerializeToString()
    except proto.EncodeError as exc:
        raise LocalProtocolError(f"cannot encode {kind.name}: {exc}") from None
    return b"".join((_BASE_PREFIX[kind], _varint(len(raw)), raw))


def encode_frame(kind: CommandType, body: Any, payload: Payload | None = None) -> bytes:
    """One whole frame: sizes, BaseCommand, and for SEND/MESSAGE the payload.

    Raises:
        LocalProtocolError: a required field is missing, or a payload is given to a
            command other than SEND/MESSAGE (or missing for them).
    """
    command = encode_body(kind, body)
    if payload is None:
        if kind in PAYLOAD_COMMANDS:
            raise LocalProtocolError(f"{kind.name} needs a payload (harness.wire.Payload.build)")
        size = len(command)
        return _SIZES.pack(size + 4, size) + command
    if kind not in PAYLOAD_COMMANDS:
        raise LocalProtocolError(f"{kind.name} cannot carry a payload; only SEND and MESSAGE do")
    parts = payload.frame_parts()
    size = len(command)
    total = 4 + size
    for part in parts:
        total += len(part)
    parts[0:0] = (_SIZES.pack(total, size), command)
    return b"".join(parts)


def decode_frame(frame: memoryview) -> tuple[CommandType, Any, Payload | None]:
    """Decode one frame (without its 4-byte total size) into (type, body, payload).

    Raises:
        RemoteProtocolError: the frame is malformed: command size past the end, a
            BaseCommand that does not parse or lacks required fields, an unknown
            command type, a payload on a command that takes none (or none on SEND/MESSAGE).
    """
    length = len(frame)
    if length < 4:
        raise RemoteProtocolError(f"frame of {length} bytes has no room for a command size")
    command_size = _U32.unpack_from(frame, 0)[0]
    command_end = 4 + command_size
    if command_end > length:
        raise RemoteProtocolError(
            f"command size {command_size} runs past the end of a {length}-byte frame"
        )
    try:
        base = proto.BaseCommand.FromString(frame[4:command_end])
    except proto.DecodeError as exc:
        raise RemoteProtocolError(f"BaseCommand does not parse: {exc}") from None
    if not base.HasField("type"):
        raise RemoteProtocolError(
            "command has an unknown or missing type (a newer protocol than "
            "harness.wire.schema declares?)"
        )
    kind, field = _DECODE[base.type]
    body = getattr(base, field)
    if not body.IsInitialized():
        missing = ", ".join(body.FindInitializationErrors())
        raise RemoteProtocolError(f"{kind.name} lacks required fields: {missing}")
    if command_end == length:
        if kind in PAYLOAD_COMMANDS:
            raise RemoteProtocolError(f"{kind.name} frame has no payload")
        return kind, body, None
    if kind not in PAYLOAD_COMMANDS:
        raise RemoteProtocolError(
            f"{kind.name} frame has {length - command_end} bytes after the command; "
            "only SEND and MESSAGE carry a payload"
        )
    try:
        if frame[command_end] == 0x0E and length - command_end > 1 and frame[command_end + 1] == 0x02:
            bem, entry = split_broker_entry_metadata(frame[command_end:])
            payload = Payload.parse(entry, broker_entry_metadata=bem)
        else:
            payload = Payload.parse(frame[command_end:])
    except MessageFormatError as exc:
        raise RemoteProtocolError(f"{kind.name} payload is malformed: {exc}") from None
    return kind, body, payload


class FrameBuffer:
    """Received bytes, cut into frames; enforces the frame size limit.

    Chunks are kept as they arrive (`bytes` chunks are not copied); `next_frame`
    returns each complete frame without its size field.
    """

    __slots__ = ("_available", "_head", "_max_frame_size", "_pos", "_tail")

    def __init__(self, max_frame_size: int) -> None:
        self._head: bytes = b""
        self._pos = 0
        self._tail: deque[bytes] = deque()
        self._available = 0
        self._max_frame_size = max_frame_size

    @property
    def max_frame_size(self) -> int:
        """The largest acceptable frame, size field included."""
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        self._max_frame_size = value

    def __len__(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._available

    def feed(self, data: Buffer) -> None:
        """Add received bytes. Non-`bytes` buffers are copied (callers reuse them)."""
        if type(data) is not bytes:
            data = bytes(data)
        if not data:
            return
        if self._pos >= len(self._head):
            self._head = data
            self._pos = 0
        else:
            self._tail.append(data)
        self._available += len(data)

    def _coalesce(self, needed: int) -> None:
        # Join the head's rest and as many tail chunks as it takes to hold `needed` bytes.
        parts: list[Buffer] = [memoryview(self._head)[self._pos :]]
        have = len(self._head) - self._pos
        while have < needed:
            chunk = self._tail.popleft()
            parts.append(chunk)
            have += len(chunk)
        self._head = b"".join(parts)
        self._pos = 0

    def next_frame(self) -> memoryview | None:
        """The next complete frame (after its size field), or None if more bytes are needed.

        Raises:
            RemoteProtocolError: the next frame's size exceeds the limit.
        """
        if self._available < 4:
            return None
        pos = self._pos
        if len(self._head) - pos < 4:
            self._coalesce(4)
            pos = 0
        total = _U32.unpack_from(self._head, pos)[0]
        frame_size = total + 4
        if frame_size > self._max_frame_size:
            raise RemoteProtocolError(
                f"frame of {frame_size} bytes exceeds the limit of {self._max_frame_size} "
                f"(maxMessageSize + {MESSAGE_SIZE_FRAME_PADDING}); raise max_message_size on "
                "both sides if messages this large are intended"
            )
        if self._available < frame_size:
            return None
        if len(self._head) - pos < frame_size:
            self._coalesce(frame_size)
            pos = 0
        frame = memoryview(self._head)[pos + 4 : pos + frame_size]
        self._pos = pos + frame_size
        self._available -= frame_size
        if self._pos >= len(self._head) and self._tail:
            self._head = self._tail.popleft()
            self._pos = 0
        return frame
