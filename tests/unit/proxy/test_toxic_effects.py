"""Each toxic's effect on real TCP traffic through an in-process proxy.

Timings are asserted as lower bounds (what a toxic must at least cost); upper bounds
are generous because the machine is shared.
"""

from __future__ import annotations

import os
import select
import socket
import time

import pytest

from harness.toxiproxy.client import Stream, ToxicType
from tests.unit.proxy.support import (
    OURS,
    Peer,
    ProxyEnv,
    assert_cut,
    connect,
    recv_exactly,
    recv_until_closed,
    round_trip,
)
from tests.waiting import wait_until


def test_passes_bytes_unchanged_both_ways(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    payload = os.urandom(1_000_000)
    with connect(proxy.listen) as sock:
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload


def test_latency_delays_each_direction_by_at_least_its_latency(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    with connect(proxy.listen) as sock:
        round_trip(sock)
        env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 150}, stream=Stream.DOWNSTREAM)
        assert 0.15 <= round_trip(sock) < 2.0
        env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 100}, stream=Stream.UPSTREAM)
        assert 0.25 <= round_trip(sock) < 2.5


def test_latency_does_not_add_up_over_a_stream_of_chunks(env: ProxyEnv) -> None:
    """Each chunk waits its own latency from when it arrived, not behind the previous one."""
    proxy = env.client.create_proxy("echo", env.echo_address)
    env.client.add_toxic("echo", ToxicType.SLICER, {"average_size": 100, "delay": 0}, stream=Stream.UPSTREAM)
    env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 100}, stream=Stream.UPSTREAM)
    payload = os.urandom(10_000)  # 100 chunks of 100 ms each: serial delays would take 10 s
    with connect(proxy.listen) as sock:
        started = time.perf_counter()
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload
        assert 0.1 <= time.perf_counter() - started < 3.0


def test_jitter_keeps_the_order_of_bytes(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    env.client.add_toxic("echo", ToxicType.SLICER, {"average_size": 16, "size_variation": 8, "delay": 0},
                         stream=Stream.UPSTREAM)
    env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 20, "jitter": 20}, stream=Stream.UPSTREAM)
    payload = b"".join(b"%06d\n" % i for i in range(1000))
    with connect(proxy.listen) as sock:
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload


def test_bandwidth_limits_throughput(env: ProxyEnv, peer: Peer) -> None:
    proxy = env.client.create_proxy("p", peer.address)
    env.client.add_toxic("p", ToxicType.BANDWIDTH, {"rate": 50})  # 50 KB/s downstream
    payload = os.urandom(50_000)
    with connect(proxy.listen) as sock:
        server = peer.accept()
        started = time.perf_counter()
        server.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload
        elapsed = time.perf_counter() - started
    assert elapsed >= 0.9, f"50 KB at 50 KB/s took {elapsed:.3f} s"


def test_timeout_zero_stops_one_direction_only(env: ProxyEnv, peer: Peer) -> None:
    proxy = env.client.create_proxy("p", peer.address)
    with connect(proxy.listen) as sock:
        server = peer.accept()
        env.client.add_toxic("p", ToxicType.TIMEOUT, {"timeout": 0}, stream=Stream.UPSTREAM)
        sock.sendall(b"lost on the way")
        server.sendall(b"still flows")
        assert recv_exactly(sock, 11) == b"still flows"
        server.settimeout(0.5)
        with pytest.raises(TimeoutError):
            server.recv(100)
        # Removing it closes the connections it applied to, as Toxiproxy's cleanup does.
        env.client.remove_toxic("p", "timeout_upstream")
        server.settimeout(5)
        assert recv_until_closed(sock) == b""
        assert recv_until_closed(server) == b""


def test_timeout_closes_the_connection_after_its_timeout(env: ProxyEnv, peer: Peer) -> None:
    proxy = env.client.create_proxy("p", peer.address)
    env.client.add_toxic("p", ToxicType.TIMEOUT, {"timeout": 300})
    started = time.perf_counter()   # before the connection: the proxy's timer may start before connect() returns
    with connect(proxy.listen) as sock:
        server = peer.accept()
        server.sendall(b"dropped")
        assert recv_until_closed(sock) == b""
        assert 0.3 <= time.perf_counter() - started < 5.0


def test_reset_peer_resets_the_connection(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    env.client.add_toxic("echo", ToxicType.RESET_PEER, {"timeout": 100}, stream=Stream.UPSTREAM)
    with connect(proxy.listen) as sock:
        started = time.perf_counter()
        sock.sendall(b"hello")
        with pytest.raises(ConnectionResetError):
            sock.recv(100)
        assert time.perf_counter() - started >= 0.1


def test_limit_data_closes_after_the_given_bytes(env: ProxyEnv, peer: Peer) -> None:
    proxy = env.client.create_proxy("p", peer.address)
    env.client.add_toxic("p", ToxicType.LIMIT_DATA, {"bytes": 100}, stream=Stream.UPSTREAM)
    payload = os.urandom(300)
    with connect(proxy.listen) as sock:
        server = peer.accept()
        sock.sendall(payload)
        assert recv_until_closed(server) == payload[:100]
        assert recv_until_closed(sock) == b""


def test_slicer_preserves_data_and_spaces_the_slices(env: ProxyEnv, peer: Peer) -> None:
    proxy = env.client.create_proxy("p", peer.address)
    env.client.add_toxic("p", ToxicType.SLICER, {"average_size": 100, "size_variation": 20, "delay": 2000})
    payload = os.urandom(10_000)
    with connect(proxy.listen) as sock:
        server = peer.accept()
        started = time.perf_counter()
        server.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload
        # at least 10000 / (100 + 20) slices, 2 ms apart
        assert time.perf_counter() - started >= 80 * 0.002


def test_slow_close_delays_the_close(env: ProxyEnv, peer: Peer) -> None:
    proxy = env.client.create_proxy("p", peer.address)
    env.client.add_toxic("p", ToxicType.SLOW_CLOSE, {"delay": 300})
    with connect(proxy.listen) as sock:
        server = peer.accept()
        server.sendall(b"last words")
        server.close()
        closed = time.perf_counter()
        assert recv_until_closed(sock) == b"last words"
        assert time.perf_counter() - closed >= 0.3


def test_toxicity_zero_never_applies(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 2000}, toxicity=0.0)
    with connect(proxy.listen) as sock:
        assert round_trip(sock) < 1.0


def test_toxicity_is_a_probability_per_connection(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    # 3 s of latency, echoes within 2 s count as fast: a loaded machine once gave no echo within
    # 0.5 s of a 1 s toxic (a `make test` beside three other jobs, 2026-11-29)
    env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 3000}, toxicity=0.5)
    socks = [socket.create_connection(("127.0.0.1", int(proxy.listen.rsplit(":", 1)[1])), timeout=10)
             for _ in range(40)]
    try:
        started = time.perf_counter()
        for sock in socks:
            sock.sendall(b"ping")
        fast: list[socket.socket] = []
        while (left := started + 2.0 - time.perf_counter()) > 0:
            readable, _, _ = select.select([s for s in socks if s not in fast], [], [], left)
            for sock in readable:
                assert recv_exactly(sock, 4) == b"ping"
                fast.append(sock)
        slow = [s for s in socks if s not in fast]
        for sock in slow:
            assert recv_exactly(sock, 4) == b"ping"
        assert time.perf_counter() - started >= 3.0 or not slow
        # each connection rolled once: all 40 the same way has probability 2 * 0.5**40
        assert fast and slow
        assert round_trip(slow[0]) >= 3.0 and round_trip(fast[0]) < 3.0
    finally:
        for sock in socks:
            sock.close()


def test_toxics_added_updated_and_removed_affect_live_connections(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    with connect(proxy.listen) as sock:
        assert round_trip(sock) < 1.0
        env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 200}, name="slow")
        assert round_trip(sock) >= 0.2
        env.client.update_toxic("echo", "slow", {"latency": 600})
        assert round_trip(sock) >= 0.6
        env.client.remove_toxic("echo", "slow")
        assert round_trip(sock) < 0.3


def test_removing_latency_releases_data_held_by_it(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    env.client.add_toxic("echo", ToxicType.LATENCY, {"latency": 30_000}, name="huge")
    with connect(proxy.listen) as sock:
        started = time.perf_counter()
        sock.sendall(b"held")
        if env.impl == OURS:
            received_bytes = env.ours.metrics.received
            wait_until(lambda: env.loop.call(lambda: sum(
                v for k, v in received_bytes.values.items() if k[0] == "downstream")) >= 4,
                message="the echo to reach the latency toxic")
        else:   # no in-process counters to watch: give the echo time to reach the toxic
            time.sleep(0.5)
        env.client.remove_toxic("echo", "huge")
        assert recv_exactly(sock, 4) == b"held"
        assert time.perf_counter() - started < 10


def test_disable_cuts_live_connections_and_refuses_new_ones(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    with connect(proxy.listen) as sock:
        round_trip(sock)
        env.client.disable("echo")
        assert_cut(sock)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(proxy.listen.rsplit(":", 1)[1])), timeout=5)
    again = env.client.enable("echo")
    assert again.listen == proxy.listen
    with connect(proxy.listen) as sock:
        round_trip(sock)


def test_unreachable_upstream_closes_the_client(env: ProxyEnv) -> None:
    spare = socket.socket()
    spare.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{spare.getsockname()[1]}"
    spare.close()  # nothing listens there now
    proxy = env.client.create_proxy("dead", dead)
    with connect(proxy.listen) as sock:
        assert_cut(sock)
    if env.impl != OURS:   # the failure counter is ours
        return
    failures = env.ours.metrics.upstream_failures
    wait_until(lambda: env.loop.call(lambda: failures.get(proxy="dead")) == 1, message="the failure count")


def test_delete_closes_connections_and_frees_the_port(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    with connect(proxy.listen) as sock:
        round_trip(sock)
        env.client.delete_proxy("echo")
        assert_cut(sock)
    again = env.client.create_proxy("echo", env.echo_address, listen=proxy.listen)
    with connect(again.listen) as sock:
        round_trip(sock)


@pytest.mark.ours_only("a disabled proxy keeps its port bound; Toxiproxy releases it")
def test_a_disabled_proxy_keeps_its_port_from_other_programs(env: ProxyEnv) -> None:
    proxy = env.client.create_proxy("echo", env.echo_address)
    env.client.disable("echo")
    with socket.socket() as intruder, pytest.raises(OSError, match="in use"):
        intruder.bind(("127.0.0.1", int(proxy.listen.rsplit(":", 1)[1])))
    env.client.enable("echo")
    with connect(proxy.listen) as sock:
        round_trip(sock)
