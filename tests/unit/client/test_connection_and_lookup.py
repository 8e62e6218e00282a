"""Connections (handshake, keep-alive, request matching, loss) and lookups (redirects, proxying)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from harness.client import PulsarClient
from harness.client.config import ClientConfig
from harness.client.connection import ClientConnection, ConnectionPool, next_request_id
from harness.client.errors import (
    ConnectionLostError,
    NotReadyError,
    OperationTimeoutError,
    SetupError,
)
from harness.client.lookup import BrokerAddress
from harness.client.timers import Deadline, Scheduler
from harness.wire import CommandType as T
from harness.wire import ServerError, commands
from tests.unit.client.fake_broker import (
    BrokerConnection,
    FakeCluster,
    drop,
    once,
    silent,
    wait_for,
)


@pytest.fixture
def pool_parts(cluster: FakeCluster):
    config = ClientConfig(cluster.url, operation_timeout_s=2.0, keepalive_interval_s=0.2,
                          initial_backoff_s=0.01, max_backoff_s=0.05)
    scheduler = Scheduler()
    pool = ConnectionPool(config, (), scheduler)
    yield config, pool
    pool.close()
    scheduler.stop()


def test_handshake_announces_v5_feature_flags_and_reads_the_brokers(
        make_cluster: Callable[..., FakeCluster],
        make_client: Callable[..., PulsarClient]) -> None:
    cluster = make_cluster(1, v5=True, tc_count=1)
    client = make_client(cluster.url, txn_path="v5")
    conn = client._pool.service_connection(Deadline.after(2))
    connect = cluster.commands(T.CONNECT)[0].body
    assert connect.feature_flags.supports_scalable_topics
    assert connect.feature_flags.supports_tc_metadata_discovery
    assert not connect.HasField("proxy_to_broker_url")
    assert conn.peer_supports("supports_tc_metadata_discovery")
    assert conn.protocol_version == 21


def test_v4_client_announces_no_v5_features(cluster: FakeCluster, client: PulsarClient) -> None:
    client._pool.service_connection(Deadline.after(2))
    assert not cluster.commands(T.CONNECT)[0].body.HasField("feature_flags")


def test_connect_refused_is_not_ready_and_definite(pool_parts) -> None:
    _, pool = pool_parts
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    with pytest.raises(NotReadyError, match="cannot connect") as info:
        pool.get(f"pulsar://127.0.0.1:{port}", None, Deadline.after(1))
    assert info.value.definite


def test_request_timeout_after_write_is_indeterminate(cluster: FakeCluster, pool_parts) -> None:
    _, pool = pool_parts
    cluster.brokers[0].intercept(T.LOOKUP, silent)
    conn = pool.get(cluster.url, None, Deadline.after(2))
    rid = next_request_id()
    with pytest.raises(OperationTimeoutError) as info:
        conn.request(commands.lookup("persistent://public/default/x", rid), rid, 0.1)
    assert not info.value.definite
    assert not conn.closed


def test_connection_lost_fails_pending_requests_as_indeterminate(
        cluster: FakeCluster, pool_parts) -> None:
    _, pool = pool_parts
    cluster.brokers[0].intercept(T.LOOKUP, drop)
    conn = pool.get(cluster.url, None, Deadline.after(2))
    rid = next_request_id()
    with pytest.raises(ConnectionLostError) as info:
        conn.request(commands.lookup("persistent://public/default/x", rid), rid, 2.0)
    assert not info.value.definite
    wait_for(lambda: conn.closed, what="connection closed")
    with pytest.raises(NotReadyError):
        conn.send(commands.ping())
    assert pool.get(cluster.url, None, Deadline.after(2)) is not conn  # a fresh connection


def test_ping_from_the_broker_is_answered(cluster: FakeCluster, pool_parts) -> None:
    _, pool = pool_parts
    pool.get(cluster.url, None, Deadline.after(2))
    broker_side = wait_for(lambda: cluster.brokers[0].connections)[0]
    broker_side.reply(commands.ping())
    wait_for(lambda: cluster.brokers[0].of_type(T.PONG), what="PONG from the client")


def test_keepalive_pings_and_closes_a_silent_connection(cluster: FakeCluster, pool_parts) -> None:
    _, pool = pool_parts
    conn = pool.get(cluster.url, None, Deadline.after(2))
    wait_for(lambda: cluster.brokers[0].of_type(T.PING), what="a keep-alive PING")
    assert not conn.closed  # the fake answered with PONG
    cluster.brokers[0].intercept(T.PING, silent)
    wait_for(lambda: conn.closed, timeout_s=3, what="dead connection closed")
    assert "keep-alive timeout" in (conn.close_reason or "")


def test_connect_rejection_is_a_setup_error(cluster: FakeCluster, pool_parts) -> None:
    _, pool = pool_parts

    def reject(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.error(0, ServerError.AuthenticationError, "who are you"))
        return True

    cluster.brokers[0].intercept(T.CONNECT, reject)
    with pytest.raises(SetupError, match="rejected CONNECT: AuthenticationError"):
        pool.get(cluster.url, None, Deadline.after(2))


def test_one_connection_per_logical_physical_pair(cluster: FakeCluster, pool_parts) -> None:
    _, pool = pool_parts
    results: list[ClientConnection] = []
    threads = [threading.Thread(target=lambda: results.append(
        pool.get(cluster.url, None, Deadline.after(2)))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len({id(c) for c in results}) == 1
    assert len(cluster.commands(T.CONNECT)) == 1


def test_lookup_follows_redirects_with_the_authoritative_flag(
        make_cluster: Callable[..., FakeCluster], make_client: Callable[..., PulsarClient]) -> None:
    cluster = make_cluster(3)
    topic = "persistent://public/default/moved"
    _b0, b1, b2 = cluster.brokers
    cluster.redirects[("b0", topic)] = (b1, False)
    cluster.redirects[("b1", topic)] = (b2, True)
    cluster.owners[topic] = b2
    client = make_client(cluster.url)
    address = client._lookup.lookup(topic, Deadline.after(2))
    assert address == BrokerAddress(b2.url, b2.url)
    lookups = [(c.body.topic, c.body.authoritative) for c in cluster.commands(T.LOOKUP)]
    assert lookups == [(topic, False), (topic, False), (topic, True)]
    assert [len(b.of_type(T.LOOKUP)) for b in cluster.brokers] == [1, 1, 1]


def test_lookup_gives_up_after_max_redirects(
        make_cluster: Callable[..., FakeCluster], make_client: Callable[..., PulsarClient]) -> None:
    cluster = make_cluster(2)
    topic = "persistent://public/default/flapping"
    cluster.redirects[("b0", topic)] = (cluster.brokers[1], True)
    cluster.redirects[("b1", topic)] = (cluster.brokers[0], True)
    client = make_client(cluster.url, max_lookup_redirects=3)
    with pytest.raises(SetupError, match="more than 3 redirects"):
        client._lookup.lookup(topic, Deadline.after(2))
    assert len(cluster.commands(T.LOOKUP)) == 4


def test_proxy_through_service_url_connects_via_the_service_host(
        make_cluster: Callable[..., FakeCluster], make_client: Callable[..., PulsarClient]) -> None:
    cluster = make_cluster(2)
    topic = "persistent://public/default/proxied"
    owner = cluster.brokers[1]

    def proxied(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.lookup_response(event.body.request_id, owner.url,
                                            proxy_through_service_url=True))
        return True

    cluster.brokers[0].intercept(T.LOOKUP, proxied)
    client = make_client(cluster.url)
    address = client._lookup.lookup(topic, Deadline.after(2))
    assert address == BrokerAddress(owner.url, cluster.url)
    client.create_producer(topic)
    connects = cluster.brokers[0].of_type(T.CONNECT)
    assert [c.body.proxy_to_broker_url for c in connects if c.body.HasField(
        "proxy_to_broker_url")] == [owner.url]
    assert not owner.of_type(T.CONNECT)  # the socket went to the service host


def test_retriable_lookup_errors_are_retried_until_success(
        cluster: FakeCluster, client: PulsarClient) -> None:
    def not_ready(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.lookup_failed(event.body.request_id, ServerError.ServiceNotReady,
                                          "namespace bundle is loading"))
        return True

    cluster.brokers[0].intercept(T.LOOKUP, once(not_ready))
    address = client._lookup.lookup("persistent://public/default/x", Deadline.after(2))
    assert address.logical == cluster.url
    assert len(cluster.commands(T.LOOKUP)) == 2


def test_non_retriable_lookup_error_fails_at_once(cluster: FakeCluster, client: PulsarClient) -> None:
    def missing(conn: BrokerConnection, event) -> bool:
        conn.reply(commands.lookup_failed(event.body.request_id, ServerError.TopicNotFound,
                                          "no such topic"))
        return True

    cluster.brokers[0].intercept(T.LOOKUP, missing)
    with pytest.raises(SetupError, match="TopicNotFound") as info:
        client._lookup.lookup("persistent://public/default/x", Deadline.after(2))
    assert info.value.definite
    assert len(cluster.commands(T.LOOKUP)) == 1


def test_client_settings_are_checked_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"unknown client setting.*keepalive_interval_s"):
        PulsarClient("pulsar://127.0.0.1:1", keepalive_secs=5)
    with pytest.raises(ValueError, match="txn_path 'v6' is not one of v4, v4-batched, v5"):
        PulsarClient("pulsar://127.0.0.1:1", txn_path="v6")
    with pytest.raises(ValueError, match="HTTP URL"):
        PulsarClient("http://127.0.0.1:8080")


def test_closing_clients_leaves_no_threads_behind(make_cluster: Callable[..., FakeCluster]) -> None:
    cluster = make_cluster(2, tc_count=2)
    baseline = threading.active_count()
    for _ in range(5):
        client = PulsarClient(cluster.url, operation_timeout_s=5, initial_backoff_s=0.01)
        producer = client.create_producer("leak-check")
        txn = client.new_transaction()
        producer.send(b"x", txn=txn)
        txn.commit()
        client.coordinator_brokers()
        client.close()
    wait_for(lambda: threading.active_count() <= baseline, timeout_s=5,
             what=f"threads back to {baseline} (now {threading.active_count()})")


def test_closing_the_pool_while_a_connection_opens_does_not_deadlock(
        cluster: FakeCluster, pool_parts, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client closed while a coordinator handler was still connecting used to hang: the
    new connection was closed under the pool's lock, and closing calls back into the pool."""
    _, pool = pool_parts
    real_open = ClientConnection.open

    def open_then_close_the_pool(self: ClientConnection, timeout_s: float) -> None:
        real_open(self, timeout_s)
        pool.close()

    monkeypatch.setattr(ClientConnection, "open", open_then_close_the_pool)
    outcome: list[BaseException] = []

    def get() -> None:
        try:
            pool.get(cluster.url, None, Deadline.after(2))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=get, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "pool.get deadlocked"
    assert len(outcome) == 1 and isinstance(outcome[0], NotReadyError)


def test_lookups_carry_the_advertised_listener_name(
        make_cluster: Callable[..., FakeCluster], make_client: Callable[..., PulsarClient]) -> None:
    """Brokers behind Toxiproxy (the compose target) advertise an external listener."""
    cluster = make_cluster(1)
    topic = "persistent://public/default/through-the-proxy"
    cluster.owners[topic] = cluster.brokers[0]
    make_client(cluster.url, listener_name="external")._lookup.lookup(topic, Deadline.after(2))
    make_client(cluster.url)._lookup.lookup(topic, Deadline.after(2))
    names = [c.body.advertised_listener_name if c.body.HasField("advertised_listener_name") else None
             for c in cluster.commands(T.LOOKUP)]
    assert names == ["external", None]


def test_frames_sent_together_arrive_whole_and_in_order(cluster: FakeCluster, pool_parts) -> None:
    """Coalesced writes: frames queued by several threads at once reach the broker decoded, each
    thread's in the order it sent them, and every request is answered."""
    _, pool = pool_parts
    conn = pool.get(cluster.url, None, Deadline.after(2))
    answers: dict[int, list[int]] = {}

    def sender(thread: int) -> None:
        futures = []
        for i in range(40):
            rid = next_request_id()
            futures.append((rid, conn.start_request(
                commands.lookup(f"persistent://public/default/t{thread}-{i}", rid), rid)))
        answers[thread] = [f.result(5.0).body.request_id for _, f in futures]
        assert answers[thread] == [rid for rid, _ in futures]

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(answers) == [0, 1, 2, 3]
    seen = [c.body.topic for c in cluster.commands(T.LOOKUP)]
    for thread in range(4):
        mine = [topic for topic in seen if f"/t{thread}-" in topic]
        assert mine == [f"persistent://public/default/t{thread}-{i}" for i in range(40)]


def test_frames_queued_before_a_close_still_leave(cluster: FakeCluster, pool_parts) -> None:
    """A fire-and-forget frame (an ACK, a PING) sent just before `close` is handed over, not dropped."""
    _, pool = pool_parts
    conn = pool.get(cluster.url, None, Deadline.after(2))
    before = len(cluster.commands(T.PING))
    for _ in range(5):
        conn.send(commands.ping())
    conn.close("test")
    wait_for(lambda: len(cluster.commands(T.PING)) >= before + 5, what="the pings sent before the close")


def test_a_failed_write_closes_the_connection_and_fails_requests_as_indeterminate(
        cluster: FakeCluster, pool_parts) -> None:
    _, pool = pool_parts
    cluster.brokers[0].intercept(T.LOOKUP, silent)
    conn = pool.get(cluster.url, None, Deadline.after(2))

    class FailingWrites:
        """The connection's socket, but every write fails as a reset connection's would."""

        def __init__(self, real: socket.socket) -> None:
            self.real = real

        def sendall(self, data: bytes) -> None:
            raise ConnectionResetError("reset by the test")

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

    conn._sock = FailingWrites(conn._sock)
    rid = next_request_id()
    with pytest.raises(ConnectionLostError) as info:
        conn.request(commands.lookup("persistent://public/default/x", rid), rid, 2.0)
    assert not info.value.definite
    assert conn.closed
