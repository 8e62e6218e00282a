"""The errors `harness.wire` raises.

Following h11: a `LocalProtocolError` means *we* tried to do something the protocol
forbids (a bug in the caller: send before the handshake, an oversize frame, a command
missing a required field); a `RemoteProtocolError` means the *peer* broke the protocol
(garbage bytes, an oversize frame, a command in the wrong state). After a
RemoteProtocolError the connection is unusable and the caller should close the socket;
after a LocalProtocolError nothing was sent and the connection is unchanged.

`MessageFormatError` is narrower: one message's payload cannot be decoded (a malformed
batch, an unsupported compression codec). It is not a connection problem: Pulsar's
clients discard such a message and acknowledge it with a `CommandAck.validation_error`,
and so should ours.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class of the connection-level protocol errors; `str(err)` names problem and fix."""


class LocalProtocolError(ProtocolError):
    """We misused the protocol; nothing was sent. Fix the calling code."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol; close the connection."""


class MessageFormatError(ValueError):
    """A message payload (batch, compression, metadata) cannot be decoded."""
