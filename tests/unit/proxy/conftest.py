"""Fixtures for the fault proxy tests: the proxy under test (ours, or the real Toxiproxy), echo server and peer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultproxy.server import ProxyServer
from harness.toxiproxy.client import ToxiproxyClient
from targets import gobuild
from tests.prerequisites import under_test
from tests.unit.proxy.support import (
    HOST,
    OURS,
    REAL,
    UNDER_TEST_ENV,
    BackgroundLoop,
    Peer,
    ProxyEnv,
    RealToxiproxy,
    echo_handler,
)


@pytest.fixture(params=under_test(UNDER_TEST_ENV, OURS, REAL))
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProxyEnv]:
    """The proxy under test, with an echo server: ours in process, or the real Toxiproxy as a process.

    A test marked `ours_only(reason)` checks what only our proxy does; it is skipped for the
    real one with that reason (faults/README.md lists them)."""
    impl = request.param
    marker = request.node.get_closest_marker("ours_only")
    if impl == REAL and marker is not None:
        pytest.skip(f"only our proxy: {marker.args[0]}")
    loop = BackgroundLoop()
    echo = loop.run(asyncio.start_server(echo_handler, HOST, 0))
    echo_address = f"{HOST}:{echo.sockets[0].getsockname()[1]}"
    server: ProxyServer | None = None
    real: RealToxiproxy | None = None
    if impl == OURS:
        server = ProxyServer()
        loop.run(server.start(api_port=0))
        url = server.url
    else:
        real = RealToxiproxy(str(gobuild.ensure_binary(gobuild.TOXIPROXY)), str(tmp_path / "toxiproxy.log"))
        url = real.url
    client = ToxiproxyClient(url, timeout_s=10)
    try:
        yield ProxyEnv(loop, server, client, echo_address, impl=impl, api_url=url)
    finally:
        client.close()
        if server is not None:
            loop.run(server.stop())
        if real is not None:
            real.stop()
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
