"""A sans-IO Pulsar connection: bytes in, events out; events in, bytes out.

Theory of operation (the h11 model). The caller owns the socket. It passes whatever
it reads to `receive_data` (b"" at end of stream) and calls `next_event` until it gets
`NEED_DATA`; it turns each `Command` it wants to send into bytes with `send` and
writes them. `Connection` holds no socket, thread, timer or event loop, so the blocking
client (threads or gevent) and the asyncio broker share it unchanged.

What `Connection` enforces (the tables are in `harness.wire.rules`):

* the handshake: a client sends CONNECT first and nothing else until CONNECTED; a
  server sends nothing before CONNECT, then CONNECTED (or AUTH_CHALLENGE, or ERROR to
  reject); see `rules.HANDSHAKE`;
* direction: each role sends only its own commands (`rules.SENT_BY`);
* version: after the handshake, commands newer than the negotiated protocol version
  are refused (`rules.MIN_PROTOCOL_VERSION`);
* frame size: frames larger than `maxMessageSize + 10 KiB` are refused both ways
  (`harness.wire.framing`).

Version negotiation follows Pulsar: the client announces its version in CONNECT; the
server answers with min(its own, the client's) in CONNECTED, and both use that. When
the CONNECTED we send leaves `protocol_version` or `max_message_size` unset,
`send` fills them in (the negotiated version, our `max_message_size`). A client adopts
the `max_message_size` the server announces for the frames it sends, and accepts
incoming frames up to the larger of its own and the server's limit.

Sharing: once READY, `send` reads only what the handshake set and changes nothing, so
one reader (calling `receive_data`/`next_event`) and any number of senders may share a
Connection across threads or greenlets; the caller still serializes its socket writes.
Before READY, use it from one place.

Errors: a violation by the peer raises `RemoteProtocolError` from `next_event` and
moves the connection to ERROR for good; a violation of ours raises
`LocalProtocolError` from `send`, sends nothing and changes nothing. A wrong payload
checksum is not a violation: it is reported on the event (`Payload.checksum`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harness.wire.enums import CommandType, ProtocolVersion
from harness.wire.errors import LocalProtocolError, RemoteProtocolError
from harness.wire.events import NEED_DATA, Command, ConnectionClosed, Event, NextEvent
from harness.wire.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FrameBuffer,
    decode_frame,
    encode_frame,
    max_frame_size,
)
from harness.wire.payload import Buffer
from harness.wire.rules import HANDSHAKE, ConnectionState, Role, ready_commands, why_not

CURRENT_PROTOCOL_VERSION = ProtocolVersion.v21
"""The version we speak: the newest in PulsarApi.proto (the C++ client sends the same)."""

_EMPTY: frozenset[CommandType] = frozenset()


class Connection:
    """One end of a Pulsar binary-protocol connection, without I/O.

    Args:
        role: CLIENT (we send CONNECT) or SERVER (we answer it).
        max_message_size: our `maxMessageSize`: a server announces it in CONNECTED and
            accepts frames up to it plus 10 KiB; a client accepts incoming frames up to
            the larger of this and the server's announcement.
        protocol_version: the newest version we speak.
    """

    def __init__(
        self,
        role: Role,
        *,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        protocol_version: int = CURRENT_PROTOCOL_VERSION,
    ) -> None:
        if max_message_size <= 0:
            raise ValueError(f"max_message_size must be positive, got {max_message_size}")
        self.role = role
        self.max_message_size = max_message_size
        self.protocol_version = int(protocol_version)
        self._state = ConnectionState.IDLE
        self._buffer = FrameBuffer(max_frame_size(max_message_size))
        self._eof = False
        self._failure: RemoteProtocolError | None = None
        self._receivable: frozenset[CommandType] = _EMPTY
        self._sendable: frozenset[CommandType] = _EMPTY
        self._send_limit = max_frame_size(max_message_size)
        self.peer_protocol_version: int | None = None
        """The version the peer announced (CONNECT's for a server, CONNECTED's for a client)."""
        self.negotiated_protocol_version: int | None = None
        """The version both ends use; set when CONNECTED passes."""
        self.peer_feature_flags: Any = None
        """The `FeatureFlags` the peer announced in CONNECT/CONNECTED, or None."""
        self.peer_max_message_size: int | None = None
        """A client: the `max_message_size` the server announced, if it did."""

    # ---- state ----------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """Where the connection is: IDLE, CONNECTING, READY, REJECTED, CLOSED or ERROR."""
        return self._state

    def peer_supports(self, feature: str) -> bool:
        """Whether the peer announced `feature` (a `FeatureFlags` field name) as true."""
        flags = self.peer_feature_flags
        return bool(flags is not None and getattr(flags, feature))

    # ---- receiving ------------------------------------------------------------------

    def receive_data(self, data: Buffer) -> None:
        """Add bytes read from the socket; b"" means the peer closed its side.

        Raises:
            LocalProtocolError: data after end of stream was already signalled.
        """
        if self._eof:
            if data:
                raise LocalProtocolError("receive_data after end of stream (b'') was signalled")
            return
        if not data:
            self._eof = True
            return
        self._buffer.feed(data)

    def next_event(self) -> NextEvent:
        """The next event: a `Command`, `ConnectionClosed`, or `NEED_DATA`.

        Raises:
            RemoteProtocolError: the peer broke the protocol; the connection is now in
                ERROR and every later call raises again.
        """
        if self._failure is not None:
            raise RemoteProtocolError(f"connection already failed: {self._failure}")
        if self._state is ConnectionState.CLOSED:
            return ConnectionClosed()
        try:
            frame = self._buffer.next_frame()
            if frame is None:
                if not self._eof:
                    return NEED_DATA
                if len(self._buffer):
                    raise RemoteProtocolError(
                        f"peer closed the connection inside a frame ({len(self._buffer)} "
                        "bytes of it received)"
                    )
                self._close()
                return ConnectionClosed()
            kind, body, payload = decode_frame(frame)
            if kind not in self._receivable:
                self._receive_outside_ready(kind, body)
        except RemoteProtocolError as exc:
            self._failure = exc
            self._close(ConnectionState.ERROR)
            raise
        return Command(kind, body, payload)

    def events(self) -> Iterator[Event]:
        """Every event buffered now, in order; stops at NEED_DATA or after ConnectionClosed."""
        while True:
            event = self.next_event()
            if event is NEED_DATA:
                return
            yield event
            if isinstance(event, ConnectionClosed):
                return

    def _receive_outside_ready(self, kind: CommandType, body: Any) -> None:
        # Handshake commands, or a violation. `_receivable` covers READY entirely.
        sender = self.role.peer
        following = HANDSHAKE.get((sender, self._state, kind))
        if following is None:
            reason = why_not(sender, self._state, kind, self.negotiated_protocol_version)
            raise RemoteProtocolError(f"peer sent {reason}")
        if kind is CommandType.CONNECT:
            self.peer_protocol_version = body.protocol_version
            self.peer_feature_flags = body.feature_flags if body.HasField("feature_flags") else None
        elif kind is CommandType.CONNECTED:
            self.peer_protocol_version = body.protocol_version
            self.peer_feature_flags = body.feature_flags if body.HasField("feature_flags") else None
            if body.HasField("max_message_size") and body.max_message_size > 0:
                self.peer_max_message_size = body.max_message_size
                self._send_limit = max_frame_size(body.max_message_size)
                self._buffer.max_frame_size = max_frame_size(
                    max(self.max_message_size, body.max_message_size)
                )
            self._become_ready(min(self.protocol_version, body.protocol_version))
            return
        self._state = following

    # ---- sending --------------------------------------------------------------------

    def send(self, event: Command | ConnectionClosed) -> bytes:
        """The bytes to write for `event`; `ConnectionClosed()` closes our side (b"").

        Raises:
            LocalProtocolError: the command is not allowed now (state, direction,
                version), lacks required fields, or its frame is over the peer's limit.
                Nothing is sent and the state is unchanged.
        """
        if isinstance(event, ConnectionClosed):
            if self._state is not ConnectionState.ERROR:
                self._close()
            return b""
        kind = event.type
        body = event.body
        following: ConnectionState | None = None
        if kind not in self._sendable:
            following = HANDSHAKE.get((self.role, self._state, kind))
            if following is None:
                reason = why_not(self.role, self._state, kind, self.negotiated_protocol_version)
                raise LocalProtocolError(f"cannot send {reason}")
            if kind is CommandType.CONNECTED:
                body = self._complete_connected(body)
        data = encode_frame(kind, body, event.payload)
        if len(data) > self._send_limit:
            raise LocalProtocolError(
                f"{kind.name} frame of {len(data)} bytes exceeds the peer's limit of "
                f"{self._send_limit} (maxMessageSize + 10 KiB); send smaller messages"
            )
        if following is ConnectionState.READY:  # we sent CONNECTED
            self._become_ready(body.protocol_version)
        elif following is not None:
            self._state = following
        return data

    def _complete_connected(self, body: Any) -> Any:
        # Fill in what the server must announce; refuse a version the client lacks.
        client_version = self.peer_protocol_version or 0
        agreed = min(self.protocol_version, client_version)
        if body.HasField("protocol_version") and body.protocol_version > client_version:
            raise LocalProtocolError(
                f"CONNECTED announces protocol v{body.protocol_version} but the client only "
                f"speaks v{client_version}; leave protocol_version unset to negotiate"
            )
        if body.HasField("protocol_version") and body.HasField("max_message_size"):
            return body
        completed = type(body)()
        completed.CopyFrom(body)
        if not completed.HasField("protocol_version"):
            completed.protocol_version = agreed
        if not completed.HasField("max_message_size"):
            completed.max_message_size = self.max_message_size
        return completed

    def _close(self, state: ConnectionState = ConnectionState.CLOSED) -> None:
        self._state = state
        self._receivable = _EMPTY
        self._sendable = _EMPTY

    def _become_ready(self, protocol_version: int) -> None:
        self.negotiated_protocol_version = protocol_version
        self._receivable = ready_commands(self.role.peer, protocol_version)
        self._sendable = ready_commands(self.role, protocol_version)
        self._state = ConnectionState.READY

    def __repr__(self) -> str:
        return (
            f"Connection(role={self.role.value}, state={self._state.value}, "
            f"protocol=v{self.negotiated_protocol_version}, buffered={len(self._buffer)})"
        )
