"""The proxies and their HTTP API in one event loop.

This is what the `faultproxy` process runs, and what tests and the benchmark can
run in-process: `await ProxyServer().start(api_port=0)` then talk to `.url`.
"""

from __future__ import annotations

from aiohttp import web

from faultproxy.addresses import LISTEN_HOST
from faultproxy.api import create_app
from faultproxy.collection import ProxyCollection, ProxySpec
from faultproxy.stats import ProxyMetrics
from harness.metrics import Registry
from harness.service import start_http


class ProxyServer:
    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry or Registry()
        self.metrics = ProxyMetrics(self.registry)
        self.proxies = ProxyCollection(self.metrics)
        self._runner: web.AppRunner | None = None
        self.api_port: int | None = None

    @property
    def url(self) -> str:
        if self.api_port is None:
            raise RuntimeError("the proxy server is not started")
        return f"http://{LISTEN_HOST}:{self.api_port}"

    async def start(self, api_port: int = 0, initial: tuple[ProxySpec, ...] = ()) -> None:
        """Create the initial proxies, then serve the API (port 0: a free one)."""
        for spec in initial:
            await self.proxies.create(spec)
        self._runner = await start_http(create_app(self.proxies, self.registry), api_port, LISTEN_HOST)
        self.api_port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.proxies.close()
