"""Admin REST of scalable topics and segments, on Pulsar 5.0's paths.

`/admin/v2/scalable` (`ScalableTopics.java`), served by any broker:

| method and path | operation |
|---|---|
| `GET /{tenant}/{ns}` | list the namespace's scalable topics |
| `PUT /{t}/{ns}/{topic}?numInitialSegments=N` (body: properties) | create (204; 409 exists) |
| `GET /{t}/{ns}/{topic}` | metadata: the segment DAG |
| `DELETE /{t}/{ns}/{topic}` | delete, with its segments |
| `GET .../stats`, `GET .../segments/{id}/stats` | stats over all segments / of one |
| `POST .../split/{segmentId}`, `POST .../merge/{id1}/{id2}` | reshape (returns the new metadata) |
| `PUT`/`DELETE .../subscriptions/{sub}` | create a subscription on every segment / forget it |

`/admin/v2/segments` (`Segments.java`), served by the segment's owner (another broker
answers 307 to it): `PUT /{t}/{ns}/{topic}/{descriptor}` (body: subscriptions) creates
the segment topic, `POST .../terminate` seals it, `PUT .../unload` unloads it (its owner
closes it and gives up ownership; the next lookup loads it again), `GET .../stats`, `DELETE`.
Errors are `{"reason": ...}`: 404 missing, 409 exists or busy, 412 invalid.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from aiohttp import web

from embedded.broker.topic_name import InvalidTopicName, TopicName
from embedded.broker.txn_api import BrokerContext, TxnError
from embedded.broker.v5.scalable.controller import (
    LoadedSegment,
    OwnerCallFailed,
    ScalableTopicController,
    segment_topic,
)
from embedded.broker.v5.scalable.layout import LayoutError
from embedded.broker.v5.scalable.resources import (
    ScalableTopicExists,
    ScalableTopicNotFound,
    ScalableTopicResources,
    TopicBusy,
)
from embedded.metadata.model import MetadataError, MetadataUnavailable

log = logging.getLogger(__name__)


def _fail(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


async def _json_body(request: web.Request) -> Any:
    text = await request.text()
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise web.HTTPPreconditionFailed(text=json.dumps({"reason": "the body is not JSON"}),
                                         content_type="application/json") from None


def _guard(handler: Any) -> Any:
    async def run(self: ScalableAdmin, request: web.Request) -> web.StreamResponse:
        try:
            return await handler(self, request)
        except web.HTTPException:
            raise
        except ScalableTopicNotFound as err:
            return _fail(404, str(err))
        except (ScalableTopicExists, TopicBusy) as err:
            return _fail(409, str(err))
        except (LayoutError, InvalidTopicName, ValueError) as err:
            return _fail(412, str(err))
        except OwnerCallFailed as err:
            return _fail(err.status, str(err))
        except TxnError as err:
            return _fail(503, err.message)
        except (MetadataUnavailable, MetadataError) as err:
            return _fail(503, f"metadata store: {err}")
    return run


class ScalableAdmin:
    def __init__(self, broker: BrokerContext, resources: ScalableTopicResources,
                 controller: ScalableTopicController) -> None:
        self.broker = broker
        self.resources = resources
        self.controller = controller

    @staticmethod
    def _topic(request: web.Request) -> TopicName:
        m = request.match_info
        return TopicName.parse(f"topic://{m['tenant']}/{m['namespace']}/{m['topic']}")

    @staticmethod
    def _segment(request: web.Request) -> TopicName:
        m = request.match_info
        return TopicName.parse(f"segment://{m['tenant']}/{m['namespace']}/{m['topic']}/{m['descriptor']}")

    # ---- scalable topics ----------------------------------------------------------------------

    @_guard
    async def list_topics(self, request: web.Request) -> web.StreamResponse:
        namespace = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
        if not await self.controller.namespace_exists(namespace):
            return _fail(404, f"namespace {namespace} does not exist")
        return web.json_response([str(t) for t in await self.resources.topics(namespace)])

    @_guard
    async def create(self, request: web.Request) -> web.StreamResponse:
        topic = self._topic(request)
        try:
            count = int(request.query.get("numInitialSegments", "1"))
        except ValueError:
            return _fail(412, "numInitialSegments must be a number >= 1")
        body = await _json_body(request) or {}
        if not isinstance(body, dict):
            return _fail(412, "the body must be the topic's properties, a JSON object of strings")
        await self.controller.create(topic, count, {str(k): str(v) for k, v in body.items()})
        return web.Response(status=204)

    @_guard
    async def metadata(self, request: web.Request) -> web.StreamResponse:
        return web.json_response((await self.resources.require(self._topic(request))).to_json())

    @_guard
    async def delete(self, request: web.Request) -> web.StreamResponse:
        await self.controller.delete(self._topic(request))
        return web.Response(status=204)

    @_guard
    async def split(self, request: web.Request) -> web.StreamResponse:
        layout = await self.controller.split(self._topic(request), int(request.match_info["segment_id"]))
        return web.json_response(layout.to_json())

    @_guard
    async def merge(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        layout = await self.controller.merge(self._topic(request), int(m["first"]), int(m["second"]))
        return web.json_response(layout.to_json())

    @_guard
    async def stats(self, request: web.Request) -> web.StreamResponse:
        topic = self._topic(request)
        layout = await self.resources.require(topic)
        segments: dict[str, Any] = {}
        subscriptions: dict[str, dict[str, Any]] = {}
        totals = {"msgInCounter": 0, "msgOutCounter": 0, "bytesInCounter": 0, "bytesOutCounter": 0}
        for segment in sorted(layout.segments.values(), key=lambda s: s.segment_id):
            stats = await self.controller.on_owner(segment_topic(topic, segment), self._stats_local, "GET", "/stats")
            stats = dict(stats or {})
            stats["segmentId"] = segment.segment_id
            stats["state"] = segment.state.value
            segments[str(segment.segment_id)] = stats
            for key in totals:
                totals[key] += int(stats.get(key) or 0)
            for name, sub in (stats.get("subscriptions") or {}).items():
                agg = subscriptions.setdefault(name, {"msgBacklog": 0, "msgOutCounter": 0, "consumers": 0})
                agg["msgBacklog"] += int(sub.get("msgBacklog") or 0)
                agg["msgOutCounter"] += int(sub.get("msgOutCounter") or 0)
                agg["consumers"] += len(sub.get("consumers") or [])
        return web.json_response({"epoch": layout.epoch, **totals, "subscriptions": subscriptions,
                                  "segments": segments})

    @_guard
    async def segment_stats(self, request: web.Request) -> web.StreamResponse:
        topic = self._topic(request)
        segment = (await self.resources.require(topic)).get(int(request.match_info["segment_id"]))
        stats = await self.controller.on_owner(segment_topic(topic, segment), self._stats_local, "GET", "/stats")
        return web.json_response(stats)

    @_guard
    async def create_subscription(self, request: web.Request) -> web.StreamResponse:
        topic = self._topic(request)
        subscription = request.match_info["subscription"]
        layout = await self.resources.require(topic)
        await self.resources.add_subscription(topic, subscription)
        for segment in layout.segments.values():
            create = functools.partial(self.controller.create_segment, subscriptions=[subscription])
            await self.controller.on_owner(segment_topic(topic, segment), create, "PUT", "", body=[subscription])
        return web.Response(status=204)

    @_guard
    async def delete_subscription(self, request: web.Request) -> web.StreamResponse:
        topic = self._topic(request)
        await self.resources.require(topic)
        await self.resources.remove_subscription(topic, request.match_info["subscription"])
        return web.Response(status=204)

    @staticmethod
    async def _stats_local(topic: LoadedSegment) -> dict[str, Any]:
        return topic.stats()

    # ---- segments (on their owner) ------------------------------------------------------------

    async def _owned(self, request: web.Request) -> LoadedSegment:
        name = self._segment(request)
        owner = await self.broker.ownership.ensure_owner(name)
        if owner.broker_id != self.broker.broker_id:
            location = owner.web_url.rstrip("/") + request.path_qs
            raise web.HTTPTemporaryRedirect(location)
        return await self.broker.get_topic(name)   # type: ignore[return-value]

    @_guard
    async def put_segment(self, request: web.Request) -> web.StreamResponse:
        body = await _json_body(request) or []
        if not isinstance(body, list) or not all(isinstance(s, str) for s in body):
            return _fail(412, "the body must be a JSON list of subscription names")
        name = self._segment(request)
        parent = name.scalable_parent
        if parent is None or await self.resources.get(parent) is None:
            return _fail(404, f"{name} belongs to no scalable topic")
        await self.controller.create_ledger(name)
        topic = await self._owned(request)
        return web.json_response(await self.controller.create_segment(topic, body))

    @_guard
    async def terminate_segment(self, request: web.Request) -> web.StreamResponse:
        topic = await self._owned(request)
        return web.json_response(await self.controller.terminate_segment(topic))

    @_guard
    async def unload_segment(self, request: web.Request) -> web.StreamResponse:
        """Its owner lets the segment go (like a topic unload): clients reconnect and a broker
        loads it again on the next lookup. Nobody owning it means nothing to unload."""
        name = self._segment(request)
        if self.broker.ownership.is_owned(name):
            await self.broker.unload_topic(name, release=True)  # type: ignore[attr-defined]
            return web.Response(status=204)
        owner = await self.broker.ownership.owner_of(name)
        if owner is None:
            return web.Response(status=204)
        raise web.HTTPTemporaryRedirect(owner.web_url.rstrip("/") + request.path_qs)

    @_guard
    async def get_segment_stats(self, request: web.Request) -> web.StreamResponse:
        topic = await self._owned(request)
        return web.json_response(topic.stats())

    @_guard
    async def delete_segment(self, request: web.Request) -> web.StreamResponse:
        name = self._segment(request)
        topic = await self._owned(request)
        delete = getattr(self.broker, "delete_topic", None)
        if delete is None:
            return _fail(405, "this broker cannot delete topics")
        del topic
        await delete(name)
        return web.Response(status=204)

    # ---- routes -------------------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        base = "/admin/v2/scalable/{tenant}/{namespace}/{topic}"
        seg = "/admin/v2/segments/{tenant}/{namespace}/{topic}/{descriptor}"
        return [
            web.get("/admin/v2/scalable/{tenant}/{namespace}", self.list_topics),
            web.put(base, self.create),
            web.get(base, self.metadata),
            web.delete(base, self.delete),
            web.get(base + "/stats", self.stats),
            web.get(base + "/segments/{segment_id:\\d+}/stats", self.segment_stats),
            web.post(base + "/split/{segment_id:\\d+}", self.split),
            web.post(base + "/merge/{first:\\d+}/{second:\\d+}", self.merge),
            web.put(base + "/subscriptions/{subscription}", self.create_subscription),
            web.delete(base + "/subscriptions/{subscription}", self.delete_subscription),
            web.put(seg, self.put_segment),
            web.post(seg + "/terminate", self.terminate_segment),
            web.put(seg + "/unload", self.unload_segment),
            web.get(seg + "/stats", self.get_segment_stats),
            web.delete(seg, self.delete_segment),
        ]

