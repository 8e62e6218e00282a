"""The proxy's pure parts: toxic parsing, slicing, addresses and the process config."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultproxy.addresses import Address, parse_listen, parse_upstream
from faultproxy.behaviours import slice_bounds
from faultproxy.errors import ApiError
from faultproxy.service import ConfigError, parse_config
from faultproxy.toxics import parse_toxic, updated_toxic
from harness.toxiproxy.model import Stream, ToxicType


@given(length=st.integers(1, 5000), average=st.integers(1, 300), data=st.data())
def test_slices_cover_the_chunk_in_order(length: int, average: int, data: st.DataObject) -> None:
    variation = data.draw(st.integers(0, average - 1))
    bounds = slice_bounds(length, average, variation, random.Random(data.draw(st.integers(0, 2**32))))
    assert bounds[0][0] == 0 and bounds[-1][1] == length
    assert all(a < b for a, b in bounds)
    assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(bounds))
    assert all(b - a <= average + variation for a, b in bounds)


def test_toxic_defaults_follow_toxiproxy() -> None:
    toxic = parse_toxic({"type": "bandwidth"})
    assert (toxic.name, toxic.stream, toxic.toxicity) == ("bandwidth_downstream", Stream.DOWNSTREAM, 1.0)
    assert dict(toxic.attributes) == {"rate": 0}
    assert toxic.type is ToxicType.BANDWIDTH


def test_update_keeps_identity_and_bumps_revision() -> None:
    toxic = parse_toxic({"type": "latency", "attributes": {"latency": 5}})
    updated = updated_toxic(toxic, {"attributes": {"jitter": 1}})
    assert updated.uid == toxic.uid and updated.revision == toxic.revision + 1
    assert dict(updated.attributes) == {"latency": 5, "jitter": 1}
    assert parse_toxic({"type": "latency"}).uid != toxic.uid


def test_integral_floats_are_accepted_as_whole_numbers() -> None:
    assert parse_toxic({"type": "latency", "attributes": {"latency": 100.0}}).attr("latency") == 100


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:0", Address("127.0.0.1", 0)),
    ("localhost:8080", Address("127.0.0.1", 8080)),
])
def test_listen_addresses(text: str, expected: Address) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["0.0.0.0:1", "[::]:1", "10.0.0.1:1", "127.0.0.1:x", "127.0.0.1:70000", 5])
def test_listen_refusals(text: Any) -> None:
    with pytest.raises(ApiError) as err:
        parse_listen(text)
    assert err.value.status == 400


@pytest.mark.parametrize("text", ["127.0.0.1:80", "127.8.9.1:80", "localhost:80", "[::1]:80"])
def test_upstream_addresses(text: str) -> None:
    assert parse_upstream(text).port == 80


@pytest.mark.parametrize("text", ["192.168.1.1:80", "8.8.8.8:53", "example.org:80", "127.0.0.1:0"])
def test_upstream_refusals(text: str) -> None:
    with pytest.raises(ApiError):
        parse_upstream(text)


def test_config_parses_the_architecture_keys() -> None:
    config = parse_config({
        "name": "proxy", "host": "127.0.0.1", "data_dir": "/tmp/x", "log_level": "DEBUG", "parent_pid": 1,
        "api_port": 0, "proxies": [{"name": "client-broker-0", "listen": "127.0.0.1:0",
                                    "upstream": "127.0.0.1:6650", "enabled": True}],
    })
    assert config.api_port == 0 and config.parent_pid == 1 and config.log_level == "DEBUG"
    assert [p.name for p in config.proxies] == ["client-broker-0"]


@pytest.mark.parametrize(("raw", "fragment"), [
    ({"api_port": 1, "host": "0.0.0.0"}, "binds 127.0.0.1 only"),
    ({}, "api_port"),
    ({"api_port": "80"}, "api_port"),
    ({"api_port": 0, "proxies": {}}, "proxies must be a list"),
    ({"api_port": 0, "proxies": [{"name": "a"}]}, "proxies[0]: missing required field: upstream"),
    ({"api_port": 0, "proxies": [{"name": "a", "upstream": "127.0.0.1:1"},
                                 {"name": "a", "upstream": "127.0.0.1:2"}]}, "used twice"),
    ({"api_port": 0, "parent_pid": "me"}, "parent_pid"),
])
def test_config_errors_name_the_key(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert fragment in str(err.value)
