"""The HTTP API's paths, JSON shapes and status codes, checked with plain HTTP requests."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests

from harness.metrics import parse_prometheus_text
from tests.unit.proxy.support import OURS, Peer, ProxyEnv, connect, round_trip

#: Toxiproxy 2.5.0 (the version pinned, targets/gobuild.py) has no PATCH: it came in 2.6.
PATCH_CAME_IN_2_6 = pytest.param("PATCH", marks=pytest.mark.ours_only("PATCH came in Toxiproxy 2.6; 2.5.0 answers 405"))
STRICTER = pytest.mark.ours_only("stricter input: Toxiproxy accepts it (any address, any attribute value)")


def call(env: ProxyEnv, method: str, path: str, body: Any = None, raw: str | None = None,
         headers: dict[str, str] | None = None) -> requests.Response:
    if raw is not None:
        return requests.request(method, env.url + path, data=raw, headers=headers, timeout=10)
    return requests.request(method, env.url + path, json=body, headers=headers, timeout=10)


def create(env: ProxyEnv, name: str = "p", upstream: str | None = None, **extra: Any) -> dict[str, Any]:
    response = call(env, "POST", "/proxies", {"name": name, "upstream": upstream or env.echo_address, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def assert_error(response: requests.Response, status: int, fragment: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status
    assert fragment in body["error"]


def test_create_answers_201_with_toxiproxy_shape(env: ProxyEnv) -> None:
    proxy = create(env, listen="127.0.0.1:0")
    # Toxiproxy 2.5.0 also leaks an internal `Logger` field into the JSON; ours has exactly these
    assert set(proxy) >= {"name", "listen", "upstream", "enabled", "toxics"}
    assert proxy["name"] == "p" and proxy["enabled"] is True and proxy["toxics"] == []
    assert proxy["upstream"] == env.echo_address
    host, port = proxy["listen"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    with connect(proxy["listen"]) as sock:
        round_trip(sock)


def test_create_disabled_does_not_listen(env: ProxyEnv) -> None:
    proxy = create(env, listen="127.0.0.1:0", enabled=False)
    assert proxy["enabled"] is False


@pytest.mark.parametrize(("body", "status", "fragment"), [
    ({"upstream": "127.0.0.1:1"}, 400, "missing required field: name"),
    ({"name": "x"}, 400, "missing required field: upstream"),
    pytest.param({"name": "x", "upstream": "127.0.0.1:1", "listen": "0.0.0.0:0"}, 400, "binds 127.0.0.1 only",
                 marks=pytest.mark.ours_only("loopback only: Toxiproxy listens on every interface")),
    pytest.param({"name": "x", "upstream": "127.0.0.1:1", "listen": ":0"}, 400, "binds 127.0.0.1 only",
                 marks=pytest.mark.ours_only("loopback only: Toxiproxy listens on every interface")),
    pytest.param({"name": "x", "upstream": "10.1.2.3:80"}, 400, "loopback",
                 marks=pytest.mark.ours_only("loopback only: Toxiproxy dials any upstream")),
    pytest.param({"name": "x", "upstream": "example.com:80"}, 400, "loopback",
                 marks=pytest.mark.ours_only("loopback only: Toxiproxy dials any upstream")),
    pytest.param({"name": "x", "upstream": "127.0.0.1"}, 400, "host:port", marks=STRICTER),
    ({"name": "x", "upstream": "127.0.0.1:1", "enabled": "yes"}, 400, "enabled"),
    (["not", "an", "object"], 400, "bad request body"),
])
def test_create_refuses_bad_input(env: ProxyEnv, body: Any, status: int, fragment: str) -> None:
    assert_error(call(env, "POST", "/proxies", body), status, fragment)


def test_create_refuses_non_json_and_empty_bodies(env: ProxyEnv) -> None:
    assert_error(call(env, "POST", "/proxies", raw="{nope"), 400, "bad request body")
    assert_error(call(env, "POST", "/proxies", raw=""), 400, "bad request body")


def test_duplicate_name_is_409(env: ProxyEnv) -> None:
    create(env)
    assert_error(call(env, "POST", "/proxies", {"name": "p", "upstream": env.echo_address}), 409,
                 "proxy already exists")


def test_a_taken_listen_port_is_500_and_creates_nothing(env: ProxyEnv, peer: Peer) -> None:
    response = call(env, "POST", "/proxies", {"name": "x", "upstream": env.echo_address,
                                              "listen": peer.address})
    assert_error(response, 500, "cannot listen" if env.impl == OURS else "address already in use")
    assert call(env, "GET", "/proxies/x").status_code == 404


def test_index_show_and_delete(env: ProxyEnv) -> None:
    a = create(env, "a")
    b = create(env, "b")
    index = call(env, "GET", "/proxies")
    assert index.status_code == 200
    assert index.json() == {"a": a, "b": b}
    assert call(env, "GET", "/proxies/a").json() == a
    assert_error(call(env, "GET", "/proxies/zzz"), 404, "proxy not found")
    deleted = call(env, "DELETE", "/proxies/a")
    assert deleted.status_code == 204 and deleted.content == b""
    assert_error(call(env, "DELETE", "/proxies/a"), 404, "proxy not found")
    assert set(call(env, "GET", "/proxies").json()) == {"b"}


@pytest.mark.parametrize("method", ["POST", PATCH_CAME_IN_2_6])
def test_update_enables_and_disables_on_the_same_port(env: ProxyEnv, method: str) -> None:
    proxy = create(env)
    down = call(env, method, "/proxies/p", {"enabled": False})
    assert down.status_code == 200
    assert down.json() == {**proxy, "enabled": False}
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(proxy["listen"].rsplit(":", 1)[1])), timeout=5)
    up = call(env, method, "/proxies/p", {"enabled": True})
    assert up.json() == proxy
    with connect(proxy["listen"]) as sock:
        round_trip(sock)


def test_update_of_upstream_restarts_towards_the_new_one(env: ProxyEnv, peer: Peer) -> None:
    proxy = create(env)
    moved = call(env, "POST", "/proxies/p", {"upstream": peer.address})
    assert moved.status_code == 200
    assert moved.json()["upstream"] == peer.address and moved.json()["listen"] == proxy["listen"]
    with connect(proxy["listen"]) as sock:
        server = peer.accept()
        sock.sendall(b"to the new upstream")
        assert server.recv(100) == b"to the new upstream"


@STRICTER
def test_update_refuses_bad_input(env: ProxyEnv) -> None:
    create(env)
    assert_error(call(env, "POST", "/proxies/p", {"listen": "0.0.0.0:1"}), 400, "127.0.0.1")
    assert_error(call(env, "POST", "/proxies/p", {"name": "q"}), 400, "renamed")
    assert_error(call(env, "POST", "/proxies/p", raw="x"), 400, "bad request body")
    assert_error(call(env, "POST", "/proxies/nope", {"enabled": False}), 404, "proxy not found")


def test_toxic_create_defaults_and_shape(env: ProxyEnv) -> None:
    create(env)
    response = call(env, "POST", "/proxies/p/toxics", {"type": "latency", "attributes": {"latency": 5}})
    assert response.status_code == 200
    assert response.json() == {"attributes": {"latency": 5, "jitter": 0}, "name": "latency_downstream",
                               "type": "latency", "stream": "downstream", "toxicity": 1.0}
    named = call(env, "POST", "/proxies/p/toxics", {"type": "slicer", "name": "cut", "stream": "upstream",
                                                   "toxicity": 0.5, "attributes": {"average_size": 10}})
    assert named.json() == {"attributes": {"average_size": 10, "size_variation": 0, "delay": 0},
                            "name": "cut", "type": "slicer", "stream": "upstream", "toxicity": 0.5}
    listed = call(env, "GET", "/proxies/p/toxics")
    assert listed.status_code == 200
    assert [t["name"] for t in listed.json()] == ["cut", "latency_downstream"]  # upstream first
    assert call(env, "GET", "/proxies/p").json()["toxics"] == listed.json()
    assert call(env, "GET", "/proxies/p/toxics/cut").json() == named.json()


def test_every_toxic_type_is_accepted_with_its_attributes(env: ProxyEnv) -> None:
    create(env)
    types = {"latency": {"latency": 1, "jitter": 1}, "bandwidth": {"rate": 1}, "slow_close": {"delay": 1},
             "timeout": {"timeout": 1}, "reset_peer": {"timeout": 1},
             "slicer": {"average_size": 2, "size_variation": 1, "delay": 1}, "limit_data": {"bytes": 1}}
    for kind, attributes in types.items():
        response = call(env, "POST", "/proxies/p/toxics", {"type": kind, "attributes": attributes})
        assert response.status_code == 200, response.text
        assert response.json()["attributes"] == attributes


@pytest.mark.parametrize(("body", "status", "fragment"), [
    ({"type": "nonsense"}, 400, "invalid toxic type"),
    ({}, 400, "invalid toxic type"),
    ({"type": "latency", "stream": "sideways"}, 400, "stream was invalid"),
    pytest.param({"type": "latency", "attributes": {"latency": -1}}, 400, "must not be negative", marks=STRICTER),
    pytest.param({"type": "latency", "attributes": {"latency": 1.5}}, 400, "whole number", marks=STRICTER),
    pytest.param({"type": "latency", "attributes": {"latency": "5"}}, 400, "whole number", marks=STRICTER),
    pytest.param({"type": "latency", "attributes": {"latancy": 5}}, 400, "has no attribute 'latancy'",
                 marks=STRICTER),
    pytest.param({"type": "latency", "toxicity": 2}, 400, "toxicity", marks=STRICTER),
    pytest.param({"type": "slicer", "attributes": {"average_size": 0}}, 400, "average_size",
                 marks=pytest.mark.ours_only("Toxiproxy's slicer with average_size 0 recurses without end")),
    pytest.param({"type": "slicer", "attributes": {"average_size": 5, "size_variation": 5}}, 400, "size_variation",
                 marks=STRICTER),
])
def test_toxic_create_refuses_bad_input(env: ProxyEnv, body: Any, status: int, fragment: str) -> None:
    create(env)
    assert_error(call(env, "POST", "/proxies/p/toxics", body), status, fragment)


def test_toxic_conflicts_and_missing_names(env: ProxyEnv) -> None:
    create(env)
    call(env, "POST", "/proxies/p/toxics", {"type": "latency", "name": "t"})
    assert_error(call(env, "POST", "/proxies/p/toxics", {"type": "timeout", "name": "t", "stream": "upstream"}),
                 409, "toxic already exists")
    assert_error(call(env, "GET", "/proxies/p/toxics/none"), 404, "toxic not found")
    assert_error(call(env, "DELETE", "/proxies/p/toxics/none"), 404, "toxic not found")
    assert_error(call(env, "POST", "/proxies/p/toxics/none", {"attributes": {}}), 404, "toxic not found")
    assert_error(call(env, "GET", "/proxies/q/toxics"), 404, "proxy not found")
    assert_error(call(env, "POST", "/proxies/q/toxics", {"type": "latency"}), 404, "proxy not found")


@pytest.mark.parametrize("method", ["POST", PATCH_CAME_IN_2_6])
def test_toxic_update_merges_attributes(env: ProxyEnv, method: str) -> None:
    create(env)
    call(env, "POST", "/proxies/p/toxics", {"type": "latency", "attributes": {"latency": 5, "jitter": 2}})
    updated = call(env, method, "/proxies/p/toxics/latency_downstream", {"attributes": {"latency": 9}})
    assert updated.status_code == 200
    assert updated.json()["attributes"] == {"latency": 9, "jitter": 2}
    again = call(env, method, "/proxies/p/toxics/latency_downstream", {"toxicity": 0.25})
    assert again.json()["toxicity"] == 0.25 and again.json()["attributes"]["latency"] == 9
    if env.impl == OURS:   # stricter: Toxiproxy lets an update move a toxic to the other stream
        assert_error(call(env, method, "/proxies/p/toxics/latency_downstream", {"stream": "upstream"}),
                     400, "cannot be changed")


def test_toxic_delete_is_204(env: ProxyEnv) -> None:
    create(env)
    call(env, "POST", "/proxies/p/toxics", {"type": "latency"})
    response = call(env, "DELETE", "/proxies/p/toxics/latency_downstream")
    assert response.status_code == 204
    assert call(env, "GET", "/proxies/p/toxics").json() == []


def test_populate_creates_keeps_and_replaces(env: ProxyEnv, peer: Peer) -> None:
    body = [{"name": "a", "upstream": env.echo_address, "listen": "127.0.0.1:0"},
            {"name": "b", "upstream": env.echo_address, "enabled": False}]
    first = call(env, "POST", "/populate", body)
    assert first.status_code == 201
    proxies = first.json()["proxies"]
    assert [p["name"] for p in proxies] == ["a", "b"]
    assert [p["enabled"] for p in proxies] == [True, False]
    same = [{"name": "a", "upstream": env.echo_address, "listen": proxies[0]["listen"]}]
    kept = call(env, "POST", "/populate", same).json()["proxies"]
    # Toxiproxy 2.5.0 keeps the proxy but answers with `enabled: false` for it (it is still enabled)
    assert kept == [proxies[0]] if env.impl == OURS else kept[0]["listen"] == proxies[0]["listen"]
    assert call(env, "GET", "/proxies/a").json()["enabled"] is True
    moved = [{"name": "a", "upstream": peer.address, "listen": proxies[0]["listen"]}]
    replaced = call(env, "POST", "/populate", moved).json()["proxies"][0]
    assert replaced["upstream"] == peer.address and replaced["listen"] == proxies[0]["listen"]


@pytest.mark.ours_only("populate validates the whole list before creating anything; Toxiproxy creates up to the bad one")
def test_populate_validates_everything_first(env: ProxyEnv) -> None:
    body = [{"name": "a", "upstream": env.echo_address}, {"name": "b"}]
    assert_error(call(env, "POST", "/populate", body), 400, "upstream at proxy 2")
    assert call(env, "GET", "/proxies").json() == {}
    assert_error(call(env, "POST", "/populate", {"name": "a"}), 400, "JSON array")


def test_populate_error_keeps_the_done_ones(env: ProxyEnv, peer: Peer) -> None:
    body = [{"name": "a", "upstream": env.echo_address}, {"name": "b", "upstream": env.echo_address,
                                                          "listen": peer.address}]
    response = call(env, "POST", "/populate", body)
    assert response.status_code == 500
    assert ("cannot listen" if env.impl == OURS else "address already in use") in response.json()["error"]
    assert [p["name"] for p in response.json()["proxies"]] == ["a"]


def test_reset_enables_all_and_removes_all_toxics(env: ProxyEnv) -> None:
    create(env, "a")
    create(env, "b", enabled=False)
    call(env, "POST", "/proxies/a/toxics", {"type": "latency"})
    call(env, "POST", "/proxies/a/toxics", {"type": "timeout", "stream": "upstream"})
    response = call(env, "POST", "/reset")
    assert response.status_code == 204
    index = call(env, "GET", "/proxies").json()
    assert all(p["enabled"] and p["toxics"] == [] for p in index.values())


@pytest.mark.ours_only("JSON /version and /health came after Toxiproxy 2.5.0 (its /version is plain text)")
def test_version_and_health(env: ProxyEnv) -> None:
    version = call(env, "GET", "/version")
    assert version.status_code == 200 and "version" in version.json()
    assert call(env, "GET", "/health").text.startswith("ok pid=")   # the pid tells services apart


def test_browsers_are_refused(env: ProxyEnv) -> None:   # Toxiproxy's CSRF guard
    response = call(env, "GET", "/proxies", headers={"User-Agent": "Mozilla/5.0 (X11)"})
    assert response.status_code == 403


def test_unknown_paths_and_methods(env: ProxyEnv) -> None:
    assert call(env, "GET", "/nothing").status_code == 404
    assert call(env, "PUT", "/proxies").status_code == 405


@pytest.mark.ours_only("byte metrics are always on and txnbench_proxy_* are ours; Toxiproxy needs -proxy-metrics")
def test_metrics_count_bytes_connections_and_toxics(env: ProxyEnv) -> None:
    proxy = create(env)
    call(env, "POST", "/proxies/p/toxics", {"type": "latency", "attributes": {"latency": 1}})
    call(env, "POST", "/proxies/p/toxics", {"type": "slicer", "name": "s", "attributes": {"average_size": 9}})
    with connect(proxy["listen"]) as sock:
        round_trip(sock, b"x" * 100)
        metrics = parse_prometheus_text(call(env, "GET", "/metrics").text)
    labels = (("listener", proxy["listen"]), ("proxy", "p"), ("upstream", env.echo_address))

    def series(name: str, direction: str) -> float:
        return metrics[(name, tuple(sorted((("direction", direction), *labels))))]

    assert series("toxiproxy_proxy_received_bytes_total", "upstream") == 100
    assert series("toxiproxy_proxy_sent_bytes_total", "downstream") == 100
    assert metrics[("txnbench_proxy_connections_total", (("proxy", "p"),))] == 1
    assert metrics[("txnbench_proxy_active_connections", (("proxy", "p"),))] == 1
    assert metrics[("txnbench_proxy_enabled", (("proxy", "p"),))] == 1
    toxics = (("proxy", "p"), ("stream", "downstream"))
    assert metrics[("txnbench_proxy_active_toxics", tuple(sorted((*toxics, ("type", "latency")))))] == 1
    assert metrics[("txnbench_proxy_active_toxics", tuple(sorted((*toxics, ("type", "slicer")))))] == 1
