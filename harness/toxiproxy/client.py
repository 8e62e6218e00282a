"""A small synchronous client of the Toxiproxy HTTP API.

The nemesis drives network faults through this client against both our fault proxy
(`faultproxy`, embedded target) and the real Toxiproxy (compose target), so it uses
only what both serve: proxy updates go as POST (every Toxiproxy 2.x accepts it; PATCH
came in 2.6), and nothing depends on server-specific fields. Every request has a
timeout; failures raise `ToxiproxyError` subclasses that say what went wrong and
what to do: `NotFound` (404), `AlreadyExists` (409), `BadRequest` (400),
`ServerError` (other statuses), `Unreachable` (no answer).

It is blocking and built on `requests` only, so it runs as-is in threads and under
Locust's gevent monkey-patching.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import requests

from harness.toxiproxy.model import Stream, ToxicType

__all__ = [
    "AlreadyExists", "BadRequest", "NotFound", "Proxy", "ProxySpec", "ServerError", "Stream",
    "Toxic", "ToxicType", "ToxiproxyClient", "ToxiproxyError", "Unreachable",
]

DEFAULT_URL = "http://127.0.0.1:8474"
DEFAULT_TIMEOUT_S = 10.0


class ToxiproxyError(Exception):
    """A Toxiproxy request failed; `status` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(ToxiproxyError):
    pass


class AlreadyExists(ToxiproxyError):
    pass


class BadRequest(ToxiproxyError):
    pass


class ServerError(ToxiproxyError):
    pass


class Unreachable(ToxiproxyError):
    pass


@dataclass(frozen=True)
class Toxic:
    name: str
    type: str
    stream: Stream
    toxicity: float
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Toxic:
        return cls(name=data["name"], type=data["type"], stream=Stream(data.get("stream", "downstream")),
                   toxicity=float(data.get("toxicity", 1.0)), attributes=dict(data.get("attributes") or {}))


@dataclass(frozen=True)
class Proxy:
    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: tuple[Toxic, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Proxy:
        return cls(name=data["name"], listen=data["listen"], upstream=data["upstream"],
                   enabled=bool(data["enabled"]),
                   toxics=tuple(Toxic.from_json(t) for t in data.get("toxics") or ()))


@dataclass(frozen=True)
class ProxySpec:
    """A proxy to create or populate."""

    name: str
    upstream: str
    listen: str = "127.0.0.1:0"
    enabled: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream,
                "enabled": self.enabled}


_ERRORS: dict[int, type[ToxiproxyError]] = {400: BadRequest, 404: NotFound, 409: AlreadyExists}


class ToxiproxyClient:
    def __init__(self, url: str = DEFAULT_URL, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if not url.startswith(("http://", "https://")):
            url = "http://" + url
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._session = requests.Session()
        self._session.headers["User-Agent"] = "txnbench-toxiproxy-client"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> ToxiproxyClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- server -----------------------------------------------------------------------

    def version(self) -> str:
        """The server's version; both servers answer JSON {"version": ...} (old ones: text)."""
        response = self._request("GET", "/version")
        try:
            return str(response.json()["version"])
        except (ValueError, KeyError, TypeError):
            return response.text.strip()

    def is_available(self) -> bool:
        try:
            self._request("GET", "/version")
        except ToxiproxyError:
            return False
        return True

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._request("POST", "/reset")

    # -- proxies ----------------------------------------------------------------------

    def proxies(self) -> dict[str, Proxy]:
        data = self._request("GET", "/proxies").json()
        return {name: Proxy.from_json(p) for name, p in data.items()}

    def get_proxy(self, name: str) -> Proxy:
        return Proxy.from_json(self._request("GET", f"/proxies/{name}").json())

    def create_proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0",
                     enabled: bool = True) -> Proxy:
        spec = ProxySpec(name=name, upstream=upstream, listen=listen, enabled=enabled)
        return Proxy.from_json(self._request("POST", "/proxies", spec.to_json()).json())

    def populate(self, specs: Iterable[ProxySpec]) -> list[Proxy]:
        """Create the proxies that are missing, replace those whose addresses differ."""
        data = self._request("POST", "/populate", [s.to_json() for s in specs]).json()
        return [Proxy.from_json(p) for p in data.get("proxies") or ()]

    def update_proxy(self, name: str, *, listen: str | None = None, upstream: str | None = None,
                     enabled: bool | None = None) -> Proxy:
        body: dict[str, Any] = {}
        if listen is not None:
            body["listen"] = listen
        if upstream is not None:
            body["upstream"] = upstream
        if enabled is not None:
            body["enabled"] = enabled
        return Proxy.from_json(self._request("POST", f"/proxies/{name}", body).json())

    def enable(self, name: str) -> Proxy:
        return self.update_proxy(name, enabled=True)

    def disable(self, name: str) -> Proxy:
        """Take the proxy down: its listener closes and its live connections are cut."""
        return self.update_proxy(name, enabled=False)

    def delete_proxy(self, name: str) -> None:
        self._request("DELETE", f"/proxies/{name}")

    # -- toxics -----------------------------------------------------------------------

    def toxics(self, proxy: str) -> list[Toxic]:
        return [Toxic.from_json(t) for t in self._request("GET", f"/proxies/{proxy}/toxics").json()]

    def get_toxic(self, proxy: str, name: str) -> Toxic:
        return Toxic.from_json(self._request("GET", f"/proxies/{proxy}/toxics/{name}").json())

    def add_toxic(self, proxy: str, type: ToxicType | str, attributes: Mapping[str, int] | None = None,
                  *, stream: Stream | str = Stream.DOWNSTREAM, name: str | None = None,
                  toxicity: float = 1.0) -> Toxic:
        """Add a toxic; its name defaults to `<type>_<stream>`, as Toxiproxy names it."""
        body: dict[str, Any] = {"type": str(type), "stream": str(stream), "toxicity": toxicity,
                                "attributes": dict(attributes or {})}
        if name is not None:
            body["name"] = name
        return Toxic.from_json(self._request("POST", f"/proxies/{proxy}/toxics", body).json())

    def update_toxic(self, proxy: str, name: str, attributes: Mapping[str, int] | None = None,
                     *, toxicity: float | None = None) -> Toxic:
        body: dict[str, Any] = {"attributes": dict(attributes or {})}
        if toxicity is not None:
            body["toxicity"] = toxicity
        return Toxic.from_json(self._request("POST", f"/proxies/{proxy}/toxics/{name}", body).json())

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._request("DELETE", f"/proxies/{proxy}/toxics/{name}")

    # -- transport --------------------------------------------------------------------

    def _request(self, method: str, url_path: str, body: Any = None) -> requests.Response:
        url = self.url + url_path
        try:
            response = self._session.request(method, url, json=body, timeout=self.timeout_s)
        except requests.Timeout:
            raise Unreachable(f"{method} {url}: no answer within {self.timeout_s:g} s; is the "
                              "Toxiproxy server overloaded or stopped?") from None
        except requests.RequestException as err:
            raise Unreachable(f"{method} {url}: cannot reach the Toxiproxy server ({err}); is it "
                              "running, and is the URL right?") from None
        if response.status_code < 300:
            return response
        try:
            payload = response.json()
        except ValueError:
            payload = None
        detail = payload.get("error") if isinstance(payload, dict) else None
        detail = str(detail or response.text.strip())
        error = _ERRORS.get(response.status_code, ServerError)
        raise error(f"{method} {url_path}: {response.status_code} {detail}", response.status_code)
