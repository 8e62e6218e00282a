"""The events a `Connection` produces and accepts.

`Command` is every protocol command, typed by its `CommandType` and carrying its
protobuf sub-message (`body`) and, for SEND and MESSAGE, the `Payload`. One generic
event rather than ninety classes keeps dispatch a dict lookup on `type`; the readers in
`harness.wire.commands` give typed access to the common fields.

`ConnectionClosed` is the end of the stream; `NEED_DATA` says "feed me more bytes".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Literal

from harness.wire.enums import CommandType
from harness.wire.payload import Payload


@dataclass(frozen=True, slots=True)
class Command:
    """One protocol command.

    Attributes:
        type: the command type.
        body: its protobuf sub-message (e.g. a `CommandSend` for SEND). Treat it as
            read-only: it belongs to the event.
        payload: the entry of a SEND or MESSAGE, else None.
    """

    type: CommandType
    body: Any
    payload: Payload | None = None


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed its side (`receive_data(b"")`), or we closed ours (`send(ConnectionClosed())`)."""


class NeedData(Enum):
    """The type of the `NEED_DATA` sentinel."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA
"""`next_event()` result meaning: no complete frame buffered; call `receive_data` first."""

Event = Command | ConnectionClosed
"""What `next_event()` returns, besides `NEED_DATA`."""

NextEvent = Command | ConnectionClosed | Literal[NeedData.NEED_DATA]
