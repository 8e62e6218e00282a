"""The `faultproxy` service process: config file -> proxies + API, run by `harness.service`.

Config keys (see docs/architecture.md, "Service processes"): `name`, `host` (must be
127.0.0.1), `data_dir`, `log_level`, `parent_pid` (optional: exit when that process
is gone), `api_port` (0 picks a free port), `proxies` [{`name`, `listen`, `upstream`,
`enabled`}] created at start-up. Once serving, the process writes
`<data_dir>/endpoints.json` ({`pid`, `api_url`, `api_port`, `proxies`: {name: listen}})
so a caller that passed port 0 can find the ports chosen.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultproxy.addresses import LISTEN_HOST
from faultproxy.collection import ProxySpec, parse_proxy_spec
from faultproxy.errors import ApiError
from faultproxy.server import ProxyServer

log = logging.getLogger(__name__)

ENDPOINTS_FILE = "endpoints.json"


class ConfigError(Exception):
    """The config file cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class ProxyServiceConfig:
    name: str
    api_port: int
    proxies: tuple[ProxySpec, ...]
    data_dir: Path | None = None
    log_level: str = "INFO"
    parent_pid: int | None = None


def parse_config(raw: Mapping[str, Any]) -> ProxyServiceConfig:
    host = raw.get("host", LISTEN_HOST)
    if host != LISTEN_HOST:
        raise ConfigError(f"host is {host!r}: the proxy binds 127.0.0.1 only; set \"host\": \"127.0.0.1\"")
    api_port = raw.get("api_port")
    if isinstance(api_port, bool) or not isinstance(api_port, int) or not 0 <= api_port <= 65535:
        raise ConfigError(f"api_port must be a port number 0..65535 (0 picks a free one), got {api_port!r}")
    items = raw.get("proxies", [])
    if not isinstance(items, list):
        raise ConfigError(f"proxies must be a list of {{name, listen, upstream, enabled}}, got {items!r}")
    specs: list[ProxySpec] = []
    for i, item in enumerate(items):
        try:
            spec = parse_proxy_spec(item, where=f" at proxy {i + 1}")
        except ApiError as err:
            raise ConfigError(f"proxies[{i}]: {err.message}") from None
        if any(s.name == spec.name for s in specs):
            raise ConfigError(f"proxies[{i}]: the name {spec.name!r} is used twice; names must be unique")
        specs.append(spec)
    parent = raw.get("parent_pid")
    if parent is not None and (isinstance(parent, bool) or not isinstance(parent, int)):
        raise ConfigError(f"parent_pid must be a process id, got {parent!r}")
    data_dir = raw.get("data_dir")
    return ProxyServiceConfig(
        name=str(raw.get("name", "proxy")), api_port=api_port, proxies=tuple(specs),
        data_dir=Path(data_dir) if data_dir else None, log_level=str(raw.get("log_level", "INFO")),
        parent_pid=parent)


def _write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class ProxyService:
    """`harness.service.Service` for the proxy process."""

    def __init__(self, raw_config: Mapping[str, Any]) -> None:
        self.config = parse_config(raw_config)
        self.server = ProxyServer()

    async def start(self) -> None:
        try:
            await self.server.start(self.config.api_port, self.config.proxies)
        except ApiError as err:
            await self.server.stop()
            raise ConfigError(f"cannot start the proxies: {err.message}") from None
        except OSError as err:
            await self.server.stop()
            raise ConfigError(f"cannot serve the API on 127.0.0.1:{self.config.api_port}: {err}; "
                              "choose a free api_port (or 0)") from None
        proxies = self.server.proxies.all()
        log.info("API on %s; %d proxies", self.server.url, len(proxies))
        if self.config.data_dir is not None:
            _write_json_atomic(self.config.data_dir / ENDPOINTS_FILE, {
                "pid": os.getpid(), "api_url": self.server.url, "api_port": self.server.api_port,
                "proxies": {name: str(p.listen) for name, p in proxies.items()},
            })

    async def stop(self) -> None:
        await self.server.stop()
