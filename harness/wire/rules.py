"""The connection's rules, as tables: who may send what, in which state, from which version.

Theory of operation. A Pulsar connection has a short handshake and then a long
symmetric phase:

    client                         server
    CONNECT            ------->                     IDLE -> CONNECTING
                       <-------    AUTH_CHALLENGE   (optional, repeatable)
    AUTH_RESPONSE      ------->
                       <-------    CONNECTED        CONNECTING -> READY
                       <-------    ERROR            CONNECTING -> REJECTED (then close)

Nothing else may be sent before READY: Pulsar's broker drops a connection whose first
command is not CONNECT and rejects commands before the handshake completes, and its
keep-alive (PING/PONG) only starts after it. In READY each side may send the commands
of its role (`SENT_BY`; a broker that calls another broker, e.g. the v4 coordinator
sending END_TXN_ON_PARTITION to a topic owner, is the client of that connection), from
the protocol version that introduced them (`MIN_PROTOCOL_VERSION`, checked against the
negotiated version: the minimum of both sides', as the server announces in CONNECTED).
AUTH_CHALLENGE / AUTH_RESPONSE stay allowed in READY for credential refresh.

`harness.wire.connection.Connection` consults these tables and nothing else; changing a
rule means changing a table here.
"""

from __future__ import annotations

from enum import Enum

from harness.wire.enums import CommandType as T
from harness.wire.enums import ProtocolVersion


class Role(Enum):
    """Which end of the connection we are."""

    CLIENT = "client"
    SERVER = "server"

    @property
    def peer(self) -> Role:
        """The other end."""
        return Role.SERVER if self is Role.CLIENT else Role.CLIENT


class ConnectionState(Enum):
    """The connection's state; both ends pass through the same states."""

    IDLE = "idle"  # nothing exchanged yet
    CONNECTING = "connecting"  # CONNECT sent/received, CONNECTED not yet
    READY = "ready"  # handshake done
    REJECTED = "rejected"  # the server answered CONNECT with ERROR; only closing is left
    CLOSED = "closed"  # end of stream seen, or we closed
    ERROR = "error"  # the peer broke the protocol; the connection is unusable


HANDSHAKE: dict[tuple[Role, ConnectionState, T], ConnectionState] = {
    (Role.CLIENT, ConnectionState.IDLE, T.CONNECT): ConnectionState.CONNECTING,
    (Role.SERVER, ConnectionState.CONNECTING, T.AUTH_CHALLENGE): ConnectionState.CONNECTING,
    (Role.CLIENT, ConnectionState.CONNECTING, T.AUTH_RESPONSE): ConnectionState.CONNECTING,
    (Role.SERVER, ConnectionState.CONNECTING, T.CONNECTED): ConnectionState.READY,
    (Role.SERVER, ConnectionState.CONNECTING, T.ERROR): ConnectionState.REJECTED,
}
"""(sender, state, command) -> next state, for every command allowed before READY."""

HANDSHAKE_ONLY = frozenset({T.CONNECT, T.CONNECTED})
"""Commands that are never allowed once READY."""

_BOTH = frozenset({T.PING, T.PONG, T.CLOSE_PRODUCER, T.CLOSE_CONSUMER})

SENT_BY: dict[Role, frozenset[T]] = {
    Role.CLIENT: _BOTH
    | {
        T.CONNECT, T.AUTH_RESPONSE,
        T.PARTITIONED_METADATA, T.LOOKUP, T.GET_TOPICS_OF_NAMESPACE,
        T.WATCH_TOPIC_LIST, T.WATCH_TOPIC_LIST_CLOSE,
        T.GET_SCHEMA, T.GET_OR_CREATE_SCHEMA,
        T.PRODUCER, T.SEND,
        T.SUBSCRIBE, T.FLOW, T.ACK, T.REDELIVER_UNACKNOWLEDGED_MESSAGES, T.UNSUBSCRIBE,
        T.SEEK, T.GET_LAST_MESSAGE_ID, T.CONSUMER_STATS,
        T.TC_CLIENT_CONNECT_REQUEST, T.NEW_TXN, T.ADD_PARTITION_TO_TXN,
        T.ADD_SUBSCRIPTION_TO_TXN, T.END_TXN, T.END_TXN_ON_PARTITION, T.END_TXN_ON_SUBSCRIPTION,
        T.SCALABLE_TOPIC_LOOKUP, T.SCALABLE_TOPIC_CLOSE, T.SCALABLE_TOPIC_SUBSCRIBE,
        T.WATCH_SCALABLE_TOPICS, T.WATCH_SCALABLE_TOPICS_CLOSE,
        T.WATCH_TC_ASSIGNMENTS, T.WATCH_TC_ASSIGNMENTS_CLOSE,
    },
    Role.SERVER: _BOTH
    | {
        T.CONNECTED, T.AUTH_CHALLENGE, T.SUCCESS, T.ERROR,
        T.PARTITIONED_METADATA_RESPONSE, T.LOOKUP_RESPONSE, T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        T.WATCH_TOPIC_LIST_SUCCESS, T.WATCH_TOPIC_UPDATE, T.TOPIC_MIGRATED,
        T.GET_SCHEMA_RESPONSE, T.GET_OR_CREATE_SCHEMA_RESPONSE,
        T.PRODUCER_SUCCESS, T.SEND_RECEIPT, T.SEND_ERROR,
        T.MESSAGE, T.ACK_RESPONSE, T.ACTIVE_CONSUMER_CHANGE, T.REACHED_END_OF_TOPIC,
        T.GET_LAST_MESSAGE_ID_RESPONSE, T.CONSUMER_STATS_RESPONSE,
        T.TC_CLIENT_CONNECT_RESPONSE, T.NEW_TXN_RESPONSE, T.ADD_PARTITION_TO_TXN_RESPONSE,
        T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, T.END_TXN_RESPONSE,
        T.END_TXN_ON_PARTITION_RESPONSE, T.END_TXN_ON_SUBSCRIPTION_RESPONSE,
        T.SCALABLE_TOPIC_UPDATE, T.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE,
        T.SCALABLE_TOPIC_ASSIGNMENT_UPDATE, T.WATCH_SCALABLE_TOPICS_UPDATE,
        T.WATCH_TC_ASSIGNMENTS_UPDATE,
    },
}
"""The commands each role may send."""

MIN_PROTOCOL_VERSION: dict[T, ProtocolVersion] = {
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: ProtocolVersion.v2,
    T.LOOKUP: ProtocolVersion.v7,
    T.LOOKUP_RESPONSE: ProtocolVersion.v7,
    T.CONSUMER_STATS: ProtocolVersion.v8,
    T.CONSUMER_STATS_RESPONSE: ProtocolVersion.v8,
    T.REACHED_END_OF_TOPIC: ProtocolVersion.v9,
    T.GET_LAST_MESSAGE_ID: ProtocolVersion.v12,
    T.GET_LAST_MESSAGE_ID_RESPONSE: ProtocolVersion.v12,
    T.ACTIVE_CONSUMER_CHANGE: ProtocolVersion.v12,
    T.GET_TOPICS_OF_NAMESPACE: ProtocolVersion.v12,
    T.GET_TOPICS_OF_NAMESPACE_RESPONSE: ProtocolVersion.v12,
    T.AUTH_CHALLENGE: ProtocolVersion.v14,
    T.AUTH_RESPONSE: ProtocolVersion.v14,
    T.GET_OR_CREATE_SCHEMA: ProtocolVersion.v15,
    T.GET_OR_CREATE_SCHEMA_RESPONSE: ProtocolVersion.v15,
    T.ACK_RESPONSE: ProtocolVersion.v17,
    T.TC_CLIENT_CONNECT_REQUEST: ProtocolVersion.v19,
    T.TC_CLIENT_CONNECT_RESPONSE: ProtocolVersion.v19,
    T.TOPIC_MIGRATED: ProtocolVersion.v20,
}
"""The protocol version that introduced a command (the comments of `enum ProtocolVersion`)."""


def ready_commands(sender: Role, protocol_version: int) -> frozenset[T]:
    """What `sender` may send once READY at the negotiated `protocol_version`."""
    return frozenset(
        kind
        for kind in SENT_BY[sender] - HANDSHAKE_ONLY
        if MIN_PROTOCOL_VERSION.get(kind, 0) <= protocol_version
    )


def why_not(sender: Role, state: ConnectionState, kind: T, protocol_version: int | None) -> str:
    """A one-line explanation of why `sender` may not send `kind` in `state`."""
    who = sender.value
    if kind not in SENT_BY[sender]:
        return f"a {who} never sends {kind.name}; it is sent by the {sender.peer.value}"
    if state is ConnectionState.IDLE:
        first = "CONNECT" if sender is Role.CLIENT else "nothing before the client's CONNECT"
        return f"{kind.name} before the handshake: a {who} sends {first} first"
    if state is ConnectionState.CONNECTING:
        return f"{kind.name} during the handshake: wait for CONNECTED before other commands"
    if state is ConnectionState.REJECTED:
        return f"{kind.name} after the server rejected the connection; close it"
    if state is ConnectionState.CLOSED:
        return f"{kind.name} on a closed connection; open a new one"
    if state is ConnectionState.ERROR:
        return f"{kind.name} on a failed connection (the peer broke the protocol); open a new one"
    if kind in HANDSHAKE_ONLY:
        return f"{kind.name} after the handshake completed"
    needed = MIN_PROTOCOL_VERSION.get(kind, ProtocolVersion.v0)
    return (
        f"{kind.name} needs protocol {needed.name} but the connection negotiated "
        f"v{protocol_version}; the peer is too old for it"
    )
