"""All proxies of the process, by name, with the API's operations on them.

Operations that start or stop listeners await, so they run one at a time under a
lock; a request therefore never sees a proxy half-created or half-updated.
Semantics follow Toxiproxy's `ProxyCollection`: names are unique (409), an update
that changes `listen` or `upstream` restarts the proxy, and `populate` keeps a proxy
whose addresses are unchanged and replaces one whose addresses differ.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from faultproxy.addresses import LISTEN_HOST, Address, parse_listen, parse_upstream
from faultproxy.errors import ApiError, bad_request, missing_field, proxy_exists, proxy_not_found
from faultproxy.proxy import Proxy
from faultproxy.stats import ProxyMetrics


@dataclass(frozen=True)
class ProxySpec:
    """A proxy as a request or a config file describes it."""

    name: str
    listen: Address
    upstream: Address
    enabled: bool = True


def parse_proxy_spec(body: object, *, current: ProxySpec | None = None, where: str = "") -> ProxySpec:
    """A create body (no `current`), or an update body whose missing fields keep `current`."""
    if not isinstance(body, dict):
        raise bad_request(f"expected a JSON object{where}, got {body!r}")
    if current is None:
        name = body.get("name")
        if not name:
            raise missing_field(f"name{where}")
        if not isinstance(name, str) or "/" in name:
            raise bad_request(f"proxy name{where} must be a string without '/', got {name!r}")
        if not body.get("upstream"):
            raise missing_field(f"upstream{where}")
        listen = parse_listen(body.get("listen") or f"{LISTEN_HOST}:0")
        upstream = parse_upstream(body["upstream"])
        enabled = body.get("enabled", True)
    else:
        if body.get("name") not in (None, current.name):
            raise bad_request(f"a proxy cannot be renamed; delete {current.name!r} and create it again")
        name = current.name
        listen = parse_listen(body["listen"]) if body.get("listen") else current.listen
        upstream = parse_upstream(body["upstream"]) if body.get("upstream") else current.upstream
        enabled = body.get("enabled", current.enabled)
    if enabled is None:
        enabled = True if current is None else current.enabled
    if not isinstance(enabled, bool):
        raise bad_request(f"enabled{where} must be true or false, got {enabled!r}")
    return ProxySpec(name=name, listen=listen, upstream=upstream, enabled=enabled)


def spec_of(proxy: Proxy) -> ProxySpec:
    return ProxySpec(proxy.name, proxy.listen, proxy.upstream, proxy.enabled)


class PopulateFailed(Exception):
    """Populate stopped at an error; the proxies handled before it stay."""

    def __init__(self, error: ApiError, done: list[Proxy]) -> None:
        super().__init__(error.message)
        self.error = error
        self.done = done


class ProxyCollection:
    def __init__(self, metrics: ProxyMetrics) -> None:
        self._metrics = metrics
        self._proxies: dict[str, Proxy] = {}
        self._lock = asyncio.Lock()

    def all(self) -> dict[str, Proxy]:
        return dict(self._proxies)

    def get(self, name: str) -> Proxy:
        try:
            return self._proxies[name]
        except KeyError:
            raise proxy_not_found(name) from None

    async def create(self, spec: ProxySpec) -> Proxy:
        async with self._lock:
            return await self._create(spec)

    async def _create(self, spec: ProxySpec) -> Proxy:
        if spec.name in self._proxies:
            raise proxy_exists(spec.name)
        proxy = Proxy(spec.name, spec.listen, spec.upstream, self._metrics)
        if spec.enabled:
            try:
                await proxy.start()
            except ApiError:
                self._metrics.forget(spec.name)
                raise
        else:
            proxy.hold_port()
        self._proxies[spec.name] = proxy
        return proxy

    async def update(self, name: str, body: object) -> Proxy:
        async with self._lock:
            proxy = self.get(name)
            spec = parse_proxy_spec(body, current=spec_of(proxy))
            await proxy.update(spec.listen, spec.upstream, spec.enabled)
            return proxy

    async def delete(self, name: str) -> None:
        async with self._lock:
            proxy = self.get(name)
            del self._proxies[name]
            await proxy.close()

    async def populate(self, body: object) -> list[Proxy]:
        """Create or replace each listed proxy, all validated before any is touched."""
        if not isinstance(body, list):
            raise bad_request(f"populate expects a JSON array of proxies, got {type(body).__name__}")
        specs = [parse_proxy_spec(item, where=f" at proxy {i + 1}") for i, item in enumerate(body)]
        done: list[Proxy] = []
        async with self._lock:
            for spec in specs:
                try:
                    existing = self._proxies.get(spec.name)
                    if existing is not None:
                        if (existing.listen, existing.upstream) == (spec.listen, spec.upstream):
                            done.append(existing)
                            continue
                        del self._proxies[spec.name]
                        await existing.close()
                    done.append(await self._create(spec))
                except ApiError as err:
                    raise PopulateFailed(err, done) from None
        return done

    async def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        async with self._lock:
            for proxy in self._proxies.values():
                await proxy.start()
                proxy.toxics.reset()

    async def close(self) -> None:
        async with self._lock:
            for proxy in self._proxies.values():
                await proxy.close()
            self._proxies.clear()
