"""What every service process shares: config, logging, lifecycle, HTTP.

Why in the harness: the reference cluster's stores and brokers (`embedded`) and the
fault proxy (`faultproxy`) run the same way, and neither package may import the other;
this leaf serves both.

Theory of operation. Each service runs as `python -m <module> --config F.json`.
`run_service()` loads the JSON config, sets up logging to stderr (the supervisor
redirects it to `logs/<service>.log`), runs the service's `start()` coroutine, then
waits for SIGTERM/SIGINT, or for its parent to die when the config names a
`parent_pid` (so a run killed with -9 leaves no orphan services), and finally runs
`stop()`. Every service serves `GET /health` (200 once started) and `GET /metrics`
on its HTTP port; brokers add their admin routes to the same aiohttp application.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from harness.fork_server import FORKED_FOR_ENV
from harness.metrics import Registry

log = logging.getLogger(__name__)


class Service(Protocol):
    """A service the runner can start and stop."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def load_config(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    with args.config.open(encoding="utf-8") as f:
        config = json.load(f)
    if not isinstance(config, dict):
        raise SystemExit(f"{args.config}: expected a JSON object")
    return config


def setup_logging(name: str, level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s {name} %(name)s: %(message)s",
        stream=sys.stderr,
    )


def http_app(registry: Registry, health: Callable[[], bool] = lambda: True) -> web.Application:
    """An aiohttp app with /health and /metrics; services add their own routes."""

    async def health_handler(_: web.Request) -> web.Response:
        # the pid lets a readiness check tell this service from another one answering on its port
        return web.Response(text=f"ok pid={os.getpid()}") if health() else web.Response(status=503, text="starting")

    async def metrics_handler(_: web.Request) -> web.Response:
        return web.Response(text=registry.render(), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/health", health_handler)
    app.router.add_get("/metrics", metrics_handler)
    return app


async def start_http(app: web.Application, port: int, host: str = "127.0.0.1") -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    return runner


def watched_parent(parent_pid: int, forked_for: str | None) -> int:
    """The process whose end means `parent_pid` ended: itself, or, for a service the fork server
    started for `parent_pid` (`forked_for`, harness.fork_server.FORKED_FOR_ENV, "<owner>:<server>"),
    that server, which is this process's parent and ends with its owner."""
    owner, _, server = (forked_for or "").partition(":")
    if owner.isdigit() and server.isdigit() and int(owner) == parent_pid:
        return int(server)
    return parent_pid


async def _parent_gone(parent_pid: int) -> None:
    """Return when the parent process has exited (polling; bounded by the process's life)."""
    watched = watched_parent(parent_pid, os.environ.get(FORKED_FOR_ENV))
    while True:
        if os.getppid() != watched:
            return
        await asyncio.sleep(1.0)


def run_service(factory: Callable[[dict[str, Any]], Service], argv: list[str] | None = None) -> None:
    """Entry point of a service process; returns when the service has stopped."""
    config = load_config(argv)
    setup_logging(config.get("name", "service"), config.get("log_level", "INFO"))
    asyncio.run(_main(factory, config))


async def _main(factory: Callable[[dict[str, Any]], Service], config: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    service = factory(config)
    await service.start()
    log.info("%s started (pid %d)", config.get("name"), os.getpid())
    waiters: list[Awaitable[Any]] = [stop.wait()]
    parent = config.get("parent_pid")
    if parent:
        waiters.append(_parent_gone(int(parent)))
    tasks = [asyncio.ensure_future(w) for w in waiters]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    log.info("%s stopping", config.get("name"))
    with contextlib.suppress(Exception):
        await asyncio.wait_for(service.stop(), 10)
