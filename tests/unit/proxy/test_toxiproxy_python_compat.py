"""The independent `toxiproxy-python` client drives our proxy: proof of API compatibility.

That library keeps the server's host and port in class attributes of `APIConsumer`;
the fixture points them at the in-process proxy and restores them afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from tests.unit.proxy.support import ProxyEnv, assert_cut, connect, round_trip


@pytest.fixture
def toxiproxy(env: ProxyEnv) -> Iterator[Toxiproxy]:
    saved = (APIConsumer.host, APIConsumer.port)
    server = Toxiproxy()
    server.update_api_consumer("127.0.0.1", int(env.url.rsplit(":", 1)[1]))
    try:
        yield server
    finally:
        APIConsumer.host, APIConsumer.port = saved


def test_toxiproxy_python_drives_the_proxy(env: ProxyEnv, toxiproxy: Toxiproxy) -> None:
    assert toxiproxy.running()
    assert toxiproxy.version()   # ours: JSON; Toxiproxy 2.5.0: plain text ("git" when built from the module)

    proxy = toxiproxy.create(upstream=env.echo_address, name="echo")
    assert proxy.enabled and proxy.listen.startswith("127.0.0.1:")
    with pytest.raises(ProxyExists):
        toxiproxy.create(upstream=env.echo_address, name="echo")
    assert set(toxiproxy.proxies()) == {"echo"}
    assert toxiproxy.get_proxy("echo").upstream == env.echo_address

    proxy.add_toxic(type="latency", attributes={"latency": 200})
    toxics = proxy.toxics()
    assert set(toxics) == {"latency_downstream"}
    assert toxics["latency_downstream"].attributes == {"latency": 200, "jitter": 0}
    with connect(proxy.listen) as sock:
        assert round_trip(sock) >= 0.2
        proxy.destroy_toxic("latency_downstream")
        assert proxy.toxics() == {}
        assert round_trip(sock) < 0.2
        with proxy.down():
            assert_cut(sock)
            assert toxiproxy.get_proxy("echo").enabled is False
    assert toxiproxy.get_proxy("echo").enabled is True
    with connect(proxy.listen) as sock:
        round_trip(sock)

    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no_such_toxic")
    proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
    assert toxiproxy.reset()
    assert proxy.toxics() == {}

    populated = toxiproxy.populate([{"name": "other", "upstream": env.echo_address,
                                     "listen": "127.0.0.1:0"}])
    assert [p.name for p in populated] == ["other"]
    assert toxiproxy.destroy(proxy)
    with pytest.raises(NotFound):
        proxy.destroy()
    toxiproxy.destroy_all()
    assert toxiproxy.proxies() == {}
