"""The connection state machine: handshake, direction, versions, limits, end of stream."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.wire import commands as c
from harness.wire.connection import CURRENT_PROTOCOL_VERSION, Connection
from harness.wire.enums import CommandType, ServerError
from harness.wire.errors import LocalProtocolError, RemoteProtocolError
from harness.wire.events import NEED_DATA, Command, ConnectionClosed
from harness.wire.framing import encode_frame
from harness.wire.ids import MessageId
from harness.wire.rules import (
    HANDSHAKE,
    MIN_PROTOCOL_VERSION,
    SENT_BY,
    ConnectionState,
    Role,
)
from tests.unit.wire.samples import all_samples, send_sample


def _raw(event: Command) -> bytes:
    """Bytes for `event` without any state checks: a peer that may break the rules."""
    return encode_frame(event.type, event.body, event.payload)


def _pair(client_version: int = CURRENT_PROTOCOL_VERSION, **server_kwargs: int) -> tuple[Connection, Connection]:
    client = Connection(Role.CLIENT, protocol_version=client_version)
    server = Connection(Role.SERVER, **server_kwargs)
    server.receive_data(client.send(c.connect(protocol_version=client_version)))
    assert isinstance(server.next_event(), Command)
    client.receive_data(server.send(c.connected()))
    assert isinstance(client.next_event(), Command)
    return client, server


def _one(conn: Connection) -> Command:
    event = conn.next_event()
    assert isinstance(event, Command), event
    return event


def test_the_handshake_reaches_ready_on_both_sides() -> None:
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    assert client.state is server.state is ConnectionState.IDLE
    server.receive_data(client.send(c.connect(feature_flags={"supports_scalable_topics"})))
    assert client.state is ConnectionState.CONNECTING
    assert _one(server).type is CommandType.CONNECT
    assert server.state is ConnectionState.CONNECTING
    assert server.peer_supports("supports_scalable_topics")
    client.receive_data(server.send(c.connected(feature_flags={"supports_tc_metadata_discovery"})))
    assert server.state is ConnectionState.READY
    connected = _one(client)
    assert client.state is ConnectionState.READY
    assert connected.body.protocol_version == 21 and connected.body.max_message_size == 5 * 1024 * 1024
    assert client.negotiated_protocol_version == server.negotiated_protocol_version == 21
    assert client.peer_supports("supports_tc_metadata_discovery")
    assert not client.peer_supports("supports_scalable_topics")
    assert client.next_event() is NEED_DATA


def test_server_negotiates_down_to_an_older_client() -> None:
    client, server = _pair(client_version=15)
    assert client.negotiated_protocol_version == server.negotiated_protocol_version == 15
    # ACK_RESPONSE needs v17, TC_CLIENT_CONNECT v19: refused both ways.
    with pytest.raises(LocalProtocolError, match="ACK_RESPONSE needs protocol v17 but the connection negotiated v15"):
        server.send(c.ack_response(1, 2))
    with pytest.raises(LocalProtocolError, match="needs protocol v19"):
        client.send(c.tc_client_connect_request(1, 0))
    client.receive_data(_raw(c.ack_response(1, 2)))
    with pytest.raises(RemoteProtocolError, match="ACK_RESPONSE needs protocol v17"):
        client.next_event()


def test_an_older_server_caps_the_client() -> None:
    client = Connection(Role.CLIENT)
    server = Connection(Role.SERVER, protocol_version=18)
    server.receive_data(client.send(c.connect()))
    _one(server)
    client.receive_data(server.send(c.connected()))
    assert _one(client).body.protocol_version == 18
    assert client.negotiated_protocol_version == 18
    with pytest.raises(LocalProtocolError, match="TC_CLIENT_CONNECT_REQUEST needs protocol v19"):
        client.send(c.tc_client_connect_request(1, 0))


def test_server_may_not_announce_a_version_the_client_lacks() -> None:
    client, server = Connection(Role.CLIENT, protocol_version=12), Connection(Role.SERVER)
    server.receive_data(client.send(c.connect(protocol_version=12)))
    _one(server)
    with pytest.raises(LocalProtocolError, match="announces protocol v21 but the client only speaks v12"):
        server.send(c.connected(protocol_version=21))
    assert server.state is ConnectionState.CONNECTING  # nothing changed


def test_client_must_send_connect_first() -> None:
    client = Connection(Role.CLIENT)
    with pytest.raises(LocalProtocolError, match="LOOKUP before the handshake: a client sends CONNECT first"):
        client.send(c.lookup("t", 1))
    assert client.state is ConnectionState.IDLE


def test_server_rejects_anything_before_connect() -> None:
    server = Connection(Role.SERVER)
    server.receive_data(_raw(c.lookup("t", 1)))
    with pytest.raises(RemoteProtocolError, match="LOOKUP before the handshake"):
        server.next_event()
    assert server.state is ConnectionState.ERROR
    with pytest.raises(RemoteProtocolError, match="connection already failed"):
        server.next_event()
    with pytest.raises(LocalProtocolError, match="on a failed connection"):
        server.send(c.pong())


def test_server_sends_nothing_before_connect() -> None:
    with pytest.raises(LocalProtocolError, match="before the client's CONNECT"):
        Connection(Role.SERVER).send(c.connected())


def test_no_other_command_until_connected() -> None:
    client = Connection(Role.CLIENT)
    client.send(c.connect())
    with pytest.raises(LocalProtocolError, match="during the handshake: wait for CONNECTED"):
        client.send(c.ping())
    client.receive_data(_raw(c.ping()))
    with pytest.raises(RemoteProtocolError, match="PING during the handshake"):
        client.next_event()


def test_connect_twice_is_refused() -> None:
    client, server = _pair()
    with pytest.raises(LocalProtocolError, match="CONNECT after the handshake completed"):
        client.send(c.connect())
    server.receive_data(_raw(c.connect()))
    with pytest.raises(RemoteProtocolError, match="CONNECT after the handshake completed"):
        server.next_event()


def test_auth_challenge_during_and_after_the_handshake() -> None:
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    server.receive_data(client.send(c.connect()))
    _one(server)
    challenge = c.command(CommandType.AUTH_CHALLENGE, server_version="s", protocol_version=21)
    response = c.command(CommandType.AUTH_RESPONSE, client_version="c", protocol_version=21)
    client.receive_data(server.send(challenge))
    assert _one(client).type is CommandType.AUTH_CHALLENGE
    assert client.state is ConnectionState.CONNECTING
    server.receive_data(client.send(response))
    assert _one(server).type is CommandType.AUTH_RESPONSE
    client.receive_data(server.send(c.connected()))
    _one(client)
    client.receive_data(server.send(challenge))  # credential refresh
    assert _one(client).type is CommandType.AUTH_CHALLENGE


def test_server_rejects_the_connection_with_error() -> None:
    client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
    server.receive_data(client.send(c.connect()))
    _one(server)
    client.receive_data(server.send(c.error(0, ServerError.AuthenticationError, "bad token")))
    assert server.state is ConnectionState.REJECTED
    rejected = _one(client)
    assert rejected.type is CommandType.ERROR and client.state is ConnectionState.REJECTED
    with pytest.raises(LocalProtocolError, match="after the server rejected the connection"):
        client.send(c.lookup("t", 1))
    client.receive_data(b"")
    assert isinstance(client.next_event(), ConnectionClosed)


@pytest.mark.parametrize("event", all_samples(), ids=lambda e: e.type.name)
def test_direction_is_enforced_both_ways(event: Command) -> None:
    client, server = _pair()
    if event.type in (CommandType.CONNECT, CommandType.CONNECTED):
        return  # handshake-only, covered above
    sender, receiver = (client, server) if event.type in SENT_BY[Role.CLIENT] else (server, client)
    receiver.receive_data(sender.send(event))
    assert _one(receiver).type is event.type
    if event.type in SENT_BY[receiver.role]:
        return  # both roles may send it (PING, PONG, CLOSE_*)
    with pytest.raises(LocalProtocolError, match=f"never sends {event.type.name}"):
        receiver.send(event)
    sender.receive_data(_raw(event))
    with pytest.raises(RemoteProtocolError, match=f"never sends {event.type.name}"):
        sender.next_event()


def test_rule_tables_cover_every_command() -> None:
    assert SENT_BY[Role.CLIENT] | SENT_BY[Role.SERVER] == set(CommandType)
    both = SENT_BY[Role.CLIENT] & SENT_BY[Role.SERVER]
    assert both == {CommandType.PING, CommandType.PONG, CommandType.CLOSE_PRODUCER,
                    CommandType.CLOSE_CONSUMER}
    for (sender, _, kind), _ in HANDSHAKE.items():
        assert kind in SENT_BY[sender]
    assert all(version <= CURRENT_PROTOCOL_VERSION for version in MIN_PROTOCOL_VERSION.values())


def test_end_of_stream() -> None:
    client, server = _pair()
    server.receive_data(client.send(c.ping()))
    server.receive_data(b"")
    assert _one(server).type is CommandType.PING  # buffered events come first
    assert isinstance(server.next_event(), ConnectionClosed)
    assert isinstance(server.next_event(), ConnectionClosed)
    assert server.state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError, match="on a closed connection"):
        server.send(c.pong())
    with pytest.raises(LocalProtocolError, match="after end of stream"):
        server.receive_data(b"more")


def test_end_of_stream_inside_a_frame_is_a_protocol_error() -> None:
    client, server = _pair()
    server.receive_data(client.send(c.ping())[:-1])
    assert server.next_event() is NEED_DATA
    server.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="inside a frame"):
        server.next_event()


def test_closing_our_side() -> None:
    client, _ = _pair()
    assert client.send(ConnectionClosed()) == b""
    assert client.state is ConnectionState.CLOSED
    assert isinstance(client.next_event(), ConnectionClosed)
    with pytest.raises(LocalProtocolError):
        client.send(c.ping())


def test_events_drains_until_need_data() -> None:
    client, server = _pair()
    server.receive_data(client.send(c.ping()) + client.send(c.flow(1, 10)) + client.send(c.ping())[:3])
    assert [event.type for event in server.events()] == [CommandType.PING, CommandType.FLOW]  # type: ignore[union-attr]
    assert len(server._buffer) == 3


def test_oversize_frames_are_refused_both_ways() -> None:
    client, server = _pair(max_message_size=1000)
    # The client adopted the server's announced maxMessageSize for what it sends.
    assert client.peer_max_message_size == 1000
    big = c.send(1, 1, c.message_metadata("p", 1, 1), b"x" * (1000 + 10 * 1024))
    with pytest.raises(LocalProtocolError, match="exceeds the peer's limit of 11240"):
        client.send(big)
    assert client.state is ConnectionState.READY
    server.receive_data(_raw(big))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit of 11240"):
        server.next_event()
    fits = c.send(1, 1, c.message_metadata("p", 1, 1), b"x" * 1000)
    client2, server2 = _pair(max_message_size=1000)
    server2.receive_data(client2.send(fits))
    assert _one(server2).payload is not None


def test_client_accepts_frames_up_to_the_larger_of_both_limits() -> None:
    client = Connection(Role.CLIENT, max_message_size=1000)
    server = Connection(Role.SERVER, max_message_size=50_000)
    server.receive_data(client.send(c.connect()))
    _one(server)
    client.receive_data(server.send(c.connected()))
    _one(client)
    payload = send_sample().payload
    assert payload is not None
    big = c.message(1, MessageId(1, 1), c.send(1, 1, payload.metadata, b"y" * 40_000).payload)  # type: ignore[arg-type]
    client.receive_data(server.send(big))
    assert _one(client).type is CommandType.MESSAGE


def test_a_local_error_sends_nothing_and_changes_nothing() -> None:
    client, _ = _pair()
    from harness.wire import proto

    with pytest.raises(LocalProtocolError, match="cannot encode FLOW"):
        client.send(Command(CommandType.FLOW, proto.CommandFlow(consumer_id=1)))
    assert client.state is ConnectionState.READY


def test_invalid_max_message_size() -> None:
    with pytest.raises(ValueError, match="max_message_size must be positive"):
        Connection(Role.CLIENT, max_message_size=0)


_CLIENT_SAMPLES = [e for e in all_samples() if e.type in SENT_BY[Role.CLIENT] - {CommandType.CONNECT}]
_SERVER_SAMPLES = [e for e in all_samples() if e.type in SENT_BY[Role.SERVER] - {CommandType.CONNECTED}]


@settings(max_examples=50, deadline=None)
@given(
    picks=st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=1000)), max_size=30),
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=30),
)
def test_conversations_survive_any_chunking(picks: list[tuple[bool, int]], cuts: list[int]) -> None:
    client, server = _pair()
    to_server: list[Command] = []
    to_client: list[Command] = []
    wire_up, wire_down = bytearray(), bytearray()
    for from_client, index in picks:
        if from_client:
            event = _CLIENT_SAMPLES[index % len(_CLIENT_SAMPLES)]
            wire_up += client.send(event)
            to_server.append(event)
        else:
            event = _SERVER_SAMPLES[index % len(_SERVER_SAMPLES)]
            wire_down += server.send(event)
            to_client.append(event)
    for receiver, wire, expected in ((server, bytes(wire_up), to_server), (client, bytes(wire_down), to_client)):
        got: list[Command] = []
        position = 0
        for cut in [*cuts, len(wire)]:
            chunk = wire[position : position + cut]
            position += cut
            if chunk:  # b"" would mean end of stream
                receiver.receive_data(chunk)
            got.extend(event for event in receiver.events() if isinstance(event, Command))
        assert [(e.type, e.body, e.payload) for e in got] == [(e.type, e.body, e.payload) for e in expected]
        assert receiver.state is ConnectionState.READY
