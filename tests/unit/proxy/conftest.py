"""Fixtures for the fault proxy tests: an in-process proxy server, echo server and peer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from faults.proxy.server import ProxyServer
from harness.toxiproxy.client import ToxiproxyClient
from tests.unit.proxy.support import HOST, BackgroundLoop, Peer, ProxyEnv, echo_handler


@pytest.fixture
def env() -> Iterator[ProxyEnv]:
    loop = BackgroundLoop()
    server = ProxyServer()
    echo = loop.run(asyncio.start_server(echo_handler, HOST, 0))
    loop.run(server.start(api_port=0))
    client = ToxiproxyClient(server.url, timeout_s=10)
    try:
        yield ProxyEnv(loop, server, client, f"{HOST}:{echo.sockets[0].getsockname()[1]}")
    finally:
        client.close()
        loop.run(server.stop())
        echo.close()
        loop.run(echo.wait_closed())
        loop.close()


@pytest.fixture
def peer() -> Iterator[Peer]:
    p = Peer()
    try:
        yield p
    finally:
        p.close()
