"""The Pulsar binary protocol, sans-IO: bytes in, typed events out; events in, bytes out.

Shared by the transactional client (`harness.client`, blocking threads or gevent) and
the embedded broker (`embedded.broker`, asyncio). Nothing here opens a socket, starts
a thread or touches an event loop.

Theory of operation
-------------------
Layers, bottom up (each module opens with its own notes):

* `schema` declares the protobuf messages as a table with Pulsar's exact field numbers,
  labels and defaults (source: apache/pulsar-client-cpp `proto/PulsarApi.proto`);
  `enums` holds the enum values; `proto` builds the classes at import time (upb, no
  code generation).
* `payload` is the entry that follows SEND and MESSAGE: `[0x0e01][CRC32C][size]
  [MessageMetadata][data]`, plus optional broker entry metadata (0x0e02). A wrong
  checksum is reported (`Payload.checksum`), never raised: the broker answers SEND_ERROR
  ChecksumError and keeps the connection, a client drops the message and acks it with
  `validation_error=ChecksumMismatch`, as Pulsar does.
* `framing` cuts the byte stream into `[totalSize][commandSize][BaseCommand][payload]`
  frames and enforces the frame limit, `maxMessageSize + 10 KiB` (5 MiB + 10 KiB by
  default), the limit Pulsar's Netty decoders use.
* `batch` packs and unpacks batched entries (`[size][SingleMessageMetadata][data]`...)
  and the NONE / ZLIB codecs.
* `ids`: `MessageId` (log order; history form `"<ledger>:<entry>:<batch_index>"`) and
  `TxnId` (`"<most>:<least>"`).
* `connection.Connection` is the state machine (handshake, direction, version, size),
  with its rules as tables in `rules`; `events` holds what it emits.
* `commands` builds every command by name with keyword arguments and reads common
  fields back.

Typical use (client side; the server is the mirror image)::

    conn = Connection(Role.CLIENT)
    sock.sendall(conn.send(commands.connect(feature_flags={"supports_broker_entry_metadata"})))
    while conn.state is not ConnectionState.READY:
        conn.receive_data(sock.recv(65536))
        for event in conn.events():
            ...                         # CONNECTED (or ERROR: rejected)
    sock.sendall(conn.send(commands.lookup("persistent://public/default/t", request_id=1)))

Run `python -m tools.bench.wire` for encode/decode rates.
"""

from harness.wire import commands, proto
from harness.wire.batch import (
    BatchMessage,
    encode_batch,
    unpack_messages,
)
from harness.wire.connection import CURRENT_PROTOCOL_VERSION, Connection
from harness.wire.enums import (
    AckType,
    AckValidationError,
    CommandType,
    InitialPosition,
    LookupType,
    MarkerType,
    PartitionedMetadataResult,
    ProducerAccessMode,
    SchemaType,
    SegmentState,
    ServerError,
    SubType,
    TopicsMode,
    TxnAction,
)
from harness.wire.errors import (
    LocalProtocolError,
    MessageFormatError,
    ProtocolError,
    RemoteProtocolError,
)
from harness.wire.events import Command, ConnectionClosed
from harness.wire.ids import MessageId, TxnId
from harness.wire.payload import ChecksumStatus, Payload
from harness.wire.rules import ConnectionState, Role

__all__ = [
    "CURRENT_PROTOCOL_VERSION",
    "AckType",
    "AckValidationError",
    "BatchMessage",
    "ChecksumStatus",
    "Command",
    "CommandType",
    "Connection",
    "ConnectionClosed",
    "ConnectionState",
    "InitialPosition",
    "LocalProtocolError",
    "LookupType",
    "MarkerType",
    "MessageFormatError",
    "MessageId",
    "PartitionedMetadataResult",
    "Payload",
    "ProducerAccessMode",
    "ProtocolError",
    "RemoteProtocolError",
    "Role",
    "SchemaType",
    "SegmentState",
    "ServerError",
    "SubType",
    "TopicsMode",
    "TxnAction",
    "TxnId",
    "commands",
    "encode_batch",
    "proto",
    "unpack_messages",
]
