"""The Toxiproxy HTTP API on aiohttp: Toxiproxy's paths, JSON shapes and status codes.

| method and path | answer |
|---|---|
| GET /proxies | 200 {name: proxy} |
| POST /proxies | 201 proxy; 409 name taken; 400 bad body |
| POST /populate | 201 {"proxies": [...]}; on error its status, with "error" and "status" too |
| GET /proxies/{proxy} | 200 proxy; 404 |
| POST or PATCH /proxies/{proxy} | 200 proxy (update: listen, upstream, enabled) |
| DELETE /proxies/{proxy} | 204 |
| GET /proxies/{proxy}/toxics | 200 [toxic] |
| POST /proxies/{proxy}/toxics | 200 toxic; 409 name taken; 400 bad type, stream or attributes |
| GET /proxies/{proxy}/toxics/{toxic} | 200 toxic; 404 |
| POST or PATCH /proxies/{proxy}/toxics/{toxic} | 200 toxic (update: attributes, toxicity) |
| DELETE /proxies/{proxy}/toxics/{toxic} | 204 |
| POST /reset | 204: every proxy enabled, every toxic removed |
| GET /version | 200 {"version": ...} |
| GET /metrics, GET /health | Prometheus text; "ok" |

A proxy is `{"name", "listen", "upstream", "enabled", "toxics": [...]}`, a toxic
`{"attributes", "name", "type", "stream", "toxicity"}`, an error
`{"error": message, "status": code}`. Like Toxiproxy, requests whose User-Agent is a
browser's (`Mozilla/...`) get 403, so a web page cannot drive the API.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from aiohttp import web

from faultproxy.collection import PopulateFailed, ProxyCollection, parse_proxy_spec
from faultproxy.errors import ApiError, bad_request, server_error
from harness.metrics import Registry
from harness.service import http_app

log = logging.getLogger(__name__)

VERSION = "txnbench-proxy 0.1.0 (Toxiproxy 2.x HTTP API)"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = HTTPStatus.OK) -> web.Response:
    return web.json_response(data, status=status)


def _error(err: ApiError) -> web.Response:
    return _json(err.to_json(), status=err.status)


@web.middleware
async def _no_browsers(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.headers.get("User-Agent", "").startswith("Mozilla/"):
        return web.Response(status=HTTPStatus.FORBIDDEN, text="User agent not allowed\n")
    return await handler(request)


@web.middleware
async def _api_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as err:
        return _error(err)
    except web.HTTPException:
        raise
    except Exception as err:
        log.exception("%s %s failed", request.method, request.path)
        return _error(server_error(f"{type(err).__name__}: {err}"))


async def _body(request: web.Request) -> Any:
    text = await request.text()
    if not text.strip():
        raise bad_request("empty body; send a JSON document")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise bad_request(f"not JSON: {err}") from None


class ToxiproxyApi:
    def __init__(self, proxies: ProxyCollection) -> None:
        self.proxies = proxies

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/reset", self.reset),
            web.get("/proxies", self.proxy_index),
            web.post("/proxies", self.proxy_create),
            web.post("/populate", self.populate),
            web.get("/proxies/{proxy}", self.proxy_show),
            web.post("/proxies/{proxy}", self.proxy_update),
            web.patch("/proxies/{proxy}", self.proxy_update),
            web.delete("/proxies/{proxy}", self.proxy_delete),
            web.get("/proxies/{proxy}/toxics", self.toxic_index),
            web.post("/proxies/{proxy}/toxics", self.toxic_create),
            web.get("/proxies/{proxy}/toxics/{toxic}", self.toxic_show),
            web.post("/proxies/{proxy}/toxics/{toxic}", self.toxic_update),
            web.patch("/proxies/{proxy}/toxics/{toxic}", self.toxic_update),
            web.delete("/proxies/{proxy}/toxics/{toxic}", self.toxic_delete),
            web.get("/version", self.version),
        ]

    async def reset(self, request: web.Request) -> web.Response:
        await self.proxies.reset()
        return web.Response(status=HTTPStatus.NO_CONTENT)

    async def proxy_index(self, request: web.Request) -> web.Response:
        return _json({name: proxy.to_json() for name, proxy in self.proxies.all().items()})

    async def proxy_create(self, request: web.Request) -> web.Response:
        spec = parse_proxy_spec(await _body(request))
        proxy = await self.proxies.create(spec)
        return _json(proxy.to_json(), status=HTTPStatus.CREATED)

    async def populate(self, request: web.Request) -> web.Response:
        try:
            done = await self.proxies.populate(await _body(request))
        except PopulateFailed as failed:
            return _json({**failed.error.to_json(), "proxies": [p.to_json() for p in failed.done]},
                         status=failed.error.status)
        return _json({"proxies": [p.to_json() for p in done]}, status=HTTPStatus.CREATED)

    async def proxy_show(self, request: web.Request) -> web.Response:
        return _json(self.proxies.get(request.match_info["proxy"]).to_json())

    async def proxy_update(self, request: web.Request) -> web.Response:
        proxy = await self.proxies.update(request.match_info["proxy"], await _body(request))
        return _json(proxy.to_json())

    async def proxy_delete(self, request: web.Request) -> web.Response:
        await self.proxies.delete(request.match_info["proxy"])
        return web.Response(status=HTTPStatus.NO_CONTENT)

    async def toxic_index(self, request: web.Request) -> web.Response:
        return _json(self.proxies.get(request.match_info["proxy"]).toxics.to_json())

    async def toxic_create(self, request: web.Request) -> web.Response:
        proxy = self.proxies.get(request.match_info["proxy"])
        return _json(proxy.toxics.add(await _body(request)).to_json())

    async def toxic_show(self, request: web.Request) -> web.Response:
        proxy = self.proxies.get(request.match_info["proxy"])
        return _json(proxy.toxics.get(request.match_info["toxic"]).to_json())

    async def toxic_update(self, request: web.Request) -> web.Response:
        proxy = self.proxies.get(request.match_info["proxy"])
        toxic = proxy.toxics.update(request.match_info["toxic"], await _body(request))
        return _json(toxic.to_json())

    async def toxic_delete(self, request: web.Request) -> web.Response:
        proxy = self.proxies.get(request.match_info["proxy"])
        proxy.toxics.remove(request.match_info["toxic"])
        return web.Response(status=HTTPStatus.NO_CONTENT)

    async def version(self, request: web.Request) -> web.Response:
        return _json({"version": VERSION})


def create_app(proxies: ProxyCollection, registry: Registry) -> web.Application:
    """The API plus /health and /metrics (from `harness.service.http_app`)."""
    app = http_app(registry)
    app.middlewares.append(_no_browsers)
    app.middlewares.append(_api_errors)
    app.add_routes(ToxiproxyApi(proxies).routes())
    return app
