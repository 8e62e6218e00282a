"""`harness.toxiproxy.client.ToxiproxyClient` against the in-process proxy."""

from __future__ import annotations

import socket

import pytest

from harness.toxiproxy.client import (
    AlreadyExists,
    BadRequest,
    NotFound,
    ProxySpec,
    Stream,
    Toxic,
    ToxicType,
    ToxiproxyClient,
    Unreachable,
)
from tests.unit.proxy.support import OURS, ProxyEnv, assert_cut, connect, round_trip


def test_proxy_lifecycle(env: ProxyEnv) -> None:
    client = env.client
    assert client.version()
    assert client.is_available()
    created = client.create_proxy("p", env.echo_address)
    assert created.name == "p" and created.enabled and created.toxics == ()
    assert client.proxies() == {"p": created}
    assert client.get_proxy("p") == created
    with connect(created.listen) as sock:
        round_trip(sock)
        down = client.disable("p")
        assert not down.enabled and down.listen == created.listen
        assert_cut(sock)
    assert client.enable("p").enabled
    moved = client.update_proxy("p", listen="127.0.0.1:0")
    assert moved.listen != created.listen
    client.delete_proxy("p")
    assert client.proxies() == {}


def test_toxic_lifecycle(env: ProxyEnv) -> None:
    client = env.client
    client.create_proxy("p", env.echo_address)
    toxic = client.add_toxic("p", ToxicType.LATENCY, {"latency": 10}, stream=Stream.UPSTREAM)
    assert toxic == Toxic("latency_upstream", "latency", Stream.UPSTREAM, 1.0, {"latency": 10, "jitter": 0})
    named = client.add_toxic("p", "timeout", {"timeout": 0}, name="cut", toxicity=0.5)
    assert named.name == "cut" and named.stream is Stream.DOWNSTREAM and named.toxicity == 0.5
    assert client.toxics("p") == [toxic, named]
    assert client.get_toxic("p", "cut") == named
    assert client.get_proxy("p").toxics == (toxic, named)
    updated = client.update_toxic("p", "latency_upstream", {"jitter": 3}, toxicity=0.75)
    assert updated.attributes == {"latency": 10, "jitter": 3} and updated.toxicity == 0.75
    client.remove_toxic("p", "cut")
    assert [t.name for t in client.toxics("p")] == ["latency_upstream"]
    client.reset()
    assert client.toxics("p") == []


def test_populate(env: ProxyEnv) -> None:
    specs = [ProxySpec("a", env.echo_address), ProxySpec("b", env.echo_address, enabled=False)]
    proxies = env.client.populate(specs)
    assert [(p.name, p.enabled) for p in proxies] == [("a", True), ("b", False)]
    again = env.client.populate([ProxySpec("a", env.echo_address, listen=proxies[0].listen)])
    if env.impl == OURS:   # Toxiproxy 2.5.0 answers `enabled: false` for a proxy it kept enabled
        assert again == [proxies[0]]
    assert env.client.get_proxy("a") == proxies[0]


def test_errors_map_to_exceptions_with_the_server_message(env: ProxyEnv) -> None:
    client = env.client
    client.create_proxy("p", env.echo_address)
    with pytest.raises(AlreadyExists, match="proxy already exists"):
        client.create_proxy("p", env.echo_address)
    with pytest.raises(NotFound, match="proxy not found") as missing:
        client.get_proxy("q")
    assert missing.value.status == 404
    with pytest.raises(NotFound, match="toxic not found"):
        client.remove_toxic("p", "nothing")
    with pytest.raises(BadRequest, match="invalid toxic type"):
        client.add_toxic("p", "frobnicate")
    if env.impl == OURS:   # loopback only; Toxiproxy listens on every interface
        with pytest.raises(BadRequest, match=r"127\.0\.0\.1"):
            client.create_proxy("r", env.echo_address, listen="0.0.0.0:0")


def test_unreachable_server_is_a_clear_error() -> None:
    spare = socket.socket()
    spare.bind(("127.0.0.1", 0))
    port = spare.getsockname()[1]
    spare.close()  # nothing listens there
    with ToxiproxyClient(f"127.0.0.1:{port}", timeout_s=2) as client:
        assert not client.is_available()
        with pytest.raises(Unreachable, match="cannot reach the Toxiproxy server") as err:
            client.proxies()
    assert err.value.status is None


def test_a_silent_server_times_out() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts into the backlog, never answers
    try:
        with ToxiproxyClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.3) as client, \
                pytest.raises(Unreachable, match=r"no answer within 0\.3 s"):
            client.version()
    finally:
        silent.close()
