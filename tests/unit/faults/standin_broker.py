"""A broker process for fault tests that must not depend on the broker's protocol.

`python -m tests.unit.faults.standin_broker --config conf/broker-<i>.json` takes a
broker's config, serves `/health` on its HTTP port and echoes every byte on its
binary port. The fault cluster tests run the real proxy and stores with these in
the brokers' place, so network and process faults are shown on real processes and
real links without waiting on (or being broken by) the Pulsar protocol; the tests
that need real brokers (coordinators, topics, segments) use `embedded.broker`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from harness.metrics import Registry
from harness.service import http_app, run_service, start_http


class EchoBroker:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.server: asyncio.Server | None = None
        self.http: web.AppRunner | None = None

    async def _echo(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def start(self) -> None:
        host = self.config.get("host", "127.0.0.1")
        self.server = await asyncio.start_server(self._echo, host, int(self.config["binary_port"]))
        self.http = await start_http(http_app(Registry()), int(self.config["http_port"]), host)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        if self.http is not None:
            await self.http.cleanup()


if __name__ == "__main__":
    run_service(EchoBroker)
