"""Admin REST (Pulsar's `/admin/v2/...` and `/lookup/v2/...` paths) on the broker's HTTP port.

Metadata operations (tenants, namespaces, partitioned topics, creating a topic) are
served by any broker: they only touch the metadata store. Operations on a topic's
live state (stats, internal stats, terminate, unload, delete) are served by its
owner; another broker answers 307 Temporary Redirect to the owner's web URL, as
Pulsar does (`validateTopicOwnership`). A topic nobody owns is assigned first, by
the same rules as a LOOKUP, so the request lands where producers will. Errors are
`{"reason": ...}` with Pulsar's status codes (404 missing, 409 exists, 412 invalid).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from embedded.broker.managed_ledger.metadata import MlInfo
from embedded.broker.position import Position
from embedded.broker.resources import AlreadyExists, NotFound
from embedded.broker.topic_name import InvalidTopicName, TopicDomain, TopicName
from embedded.broker.txn_api import TxnError
from embedded.ledger.model import LedgerUnavailable, NoSuchEntry, NoSuchLedger
from embedded.metadata.model import BadVersion, MetadataError, MetadataUnavailable
from harness.wire import ServerError

if TYPE_CHECKING:
    from embedded.broker.topic import PersistentTopic
    from embedded.broker.views import AdminView

log = logging.getLogger(__name__)

BROKER_KEY = web.AppKey("broker", object)
# terminating one partition at its owner: a ledger close, well under the admin client's timeout
_FORWARD_TIMEOUT_S = 20.0


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def _fail(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def _status_of(error: ServerError) -> int:
    return {ServerError.TopicNotFound: 404, ServerError.ServiceNotReady: 503, ServerError.NotAllowedError: 405,
            ServerError.InvalidTopicName: 412}.get(error, 500)


async def _body(request: web.Request) -> Any:
    text = await request.text()
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise web.HTTPPreconditionFailed(text=json.dumps({"reason": "the body is not JSON"}),
                                         content_type="application/json") from None


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except NotFound as err:
        return _fail(404, str(err))
    except AlreadyExists as err:
        return _fail(409, str(err))
    except (InvalidTopicName, ValueError) as err:
        return _fail(412, str(err))
    except TxnError as err:
        return _fail(_status_of(err.error), err.message)
    except (MetadataUnavailable, MetadataError) as err:
        return _fail(503, f"metadata store: {err}")
    except Exception as err:
        log.exception("admin %s %s failed", request.method, request.path)
        return _fail(500, repr(err))


class AdminApi:
    def __init__(self, broker: AdminView) -> None:
        self.broker = broker

    # ---- cluster, brokers ---------------------------------------------------------------------

    async def clusters(self, request: web.Request) -> web.Response:
        return _json(await self.broker.resources.clusters())

    async def cluster(self, request: web.Request) -> web.Response:
        return _json(await self.broker.resources.cluster_data(request.match_info["cluster"]))

    async def health(self, request: web.Request) -> web.Response:
        if not self.broker.ready:
            return web.Response(status=503, text="starting")
        return web.Response(text="ok")

    async def brokers(self, request: web.Request) -> web.Response:
        return _json(sorted(info.web_url.removeprefix("http://") for info in self.broker.live_brokers().values()))

    # ---- tenants and namespaces ---------------------------------------------------------------

    async def tenants(self, request: web.Request) -> web.Response:
        return _json(await self.broker.resources.tenants())

    async def get_tenant(self, request: web.Request) -> web.Response:
        return _json(await self.broker.resources.tenant(request.match_info["tenant"]))

    async def put_tenant(self, request: web.Request) -> web.Response:
        await self.broker.resources.create_tenant(request.match_info["tenant"], await _body(request) or {})
        return web.Response(status=204)

    async def delete_tenant(self, request: web.Request) -> web.Response:
        await self.broker.resources.delete_tenant(request.match_info["tenant"])
        return web.Response(status=204)

    async def namespaces(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        await self.broker.resources.tenant(tenant)
        return _json(await self.broker.resources.namespaces(tenant))

    def _namespace(self, request: web.Request) -> str:
        return f"{request.match_info['tenant']}/{request.match_info['namespace']}"

    async def get_namespace(self, request: web.Request) -> web.Response:
        return _json(await self.broker.resources.namespace_policies(self._namespace(request)))

    async def put_namespace(self, request: web.Request) -> web.Response:
        await self.broker.resources.create_namespace(self._namespace(request), await _body(request))
        return web.Response(status=204)

    async def delete_namespace(self, request: web.Request) -> web.Response:
        namespace = self._namespace(request)
        if await self.broker.topics_of_namespace(namespace):
            return _fail(409, f"namespace {namespace} still has topics")
        await self.broker.resources.delete_namespace(namespace)
        return web.Response(status=204)

    # ---- topic lists and metadata -------------------------------------------------------------

    async def list_topics(self, request: web.Request) -> web.Response:
        namespace = self._namespace(request)
        if not await self.broker.resources.namespace_exists(namespace):
            return _fail(404, f"namespace {namespace} does not exist")
        return _json(await self.broker.topics_of_namespace(namespace))

    async def list_partitioned(self, request: web.Request) -> web.Response:
        return _json(await self.broker.resources.partitioned_topics(self._namespace(request)))

    def _topic(self, request: web.Request) -> TopicName:
        domain = request.match_info.get("domain", "persistent")
        if domain != TopicDomain.PERSISTENT.value:
            raise InvalidTopicName(f"{domain} topics are not served by this admin API")
        return TopicName.parse(f"persistent://{self._namespace(request)}/{request.match_info['topic']}")

    async def create_topic(self, request: web.Request) -> web.Response:
        topic = self._topic(request)
        if not await self.broker.resources.namespace_exists(topic.namespace):
            return _fail(404, f"namespace {topic.namespace} does not exist")
        if await self.broker.resources.partitions(topic) > 0:
            return _fail(409, f"{topic} is already a partitioned topic")
        try:
            await self.broker.managed_ledgers.store.create(topic.persistence_name, MlInfo())
        except BadVersion:
            return _fail(409, f"topic {topic} already exists")
        return web.Response(status=204)

    async def create_partitions(self, request: web.Request) -> web.Response:
        topic = self._topic(request)
        partitions = await _body(request)
        if not isinstance(partitions, int) or isinstance(partitions, bool):
            return _fail(412, "the body must be the number of partitions, e.g. 4")
        if not await self.broker.resources.namespace_exists(topic.namespace):
            return _fail(404, f"namespace {topic.namespace} does not exist")
        if await self.broker.managed_ledgers.exists(topic.persistence_name):
            return _fail(409, f"{topic} already exists as a non-partitioned topic")
        await self.broker.resources.create_partitioned(topic, partitions)
        return web.Response(status=204)

    async def update_partitions(self, request: web.Request) -> web.Response:
        partitions = await _body(request)
        if not isinstance(partitions, int) or isinstance(partitions, bool):
            return _fail(412, "the body must be the number of partitions, e.g. 8")
        await self.broker.resources.update_partitioned(self._topic(request), partitions)
        return web.Response(status=204)

    async def get_partitions(self, request: web.Request) -> web.Response:
        return _json({"partitions": await self.broker.resources.partitions(self._topic(request))})

    async def delete_partitions(self, request: web.Request) -> web.Response:
        await self.broker.resources.delete_partitioned(self._topic(request))
        return web.Response(status=204)

    # ---- owner-only operations ----------------------------------------------------------------

    async def _owned(self, request: web.Request, topic: TopicName) -> PersistentTopic:
        broker = self.broker
        if not broker.ownership.is_owned(topic):
            answer = await broker.lookup(topic, authoritative=request.query.get("authoritative") == "true")
            if answer.broker_id != broker.broker_id:
                query = dict(request.query)
                if answer.redirect:
                    query["authoritative"] = "true"
                location = answer.web_url.rstrip("/") + request.path
                if query:
                    location += "?" + "&".join(f"{k}={v}" for k, v in query.items())
                raise web.HTTPTemporaryRedirect(location)
        return await broker.get_topic(topic, create=False)

    async def stats(self, request: web.Request) -> web.Response:
        topic = await self._owned(request, self._topic(request))
        return _json(topic.stats())

    async def internal_stats(self, request: web.Request) -> web.Response:
        topic = await self._owned(request, self._topic(request))
        return _json(topic.internal_stats())

    async def message_by_id(self, request: web.Request) -> web.Response:
        """Pulsar's `getMessageById`: the entry at ledger:entry, as stored.

        404 when the topic has no such position, as Pulsar answers "Message not found".
        When the position is one this broker acknowledged (inside its ledger list) and the
        ledger store answers that the entry or its ledger does not exist, the 404 says
        `"nonRecoverable": true`: the data is gone (Pulsar's NonRecoverableLedgerException),
        which is not the same as a store that is down (503) or an entry not written yet.
        """
        topic = await self._owned(request, self._topic(request))
        try:
            position = Position(int(request.match_info["ledger"]), int(request.match_info["entry"]))
        except ValueError:
            return _fail(412, "ledger and entry ids must be integers")
        ml = topic.ledger
        if not ml.acknowledged(position):
            return _fail(404, f"Message not found: {position} is not a position of {topic.name}")
        try:
            entry = await ml.read_entry(position)
        except (NoSuchEntry, NoSuchLedger) as err:
            return _json({"reason": f"Message not found: {position} was acknowledged but the ledger store "
                                    f"has lost it ({type(err).__name__}: {err})", "nonRecoverable": True}, 404)
        except LedgerUnavailable as err:
            return _fail(503, f"ledger store: {err}")
        return web.Response(body=entry.data, content_type="application/octet-stream",
                            headers={"X-Pulsar-Message-ID": str(position)})

    async def terminate(self, request: web.Request) -> web.Response:
        topic = await self._owned(request, self._topic(request))
        position = await topic.terminate()
        return _json({"ledgerId": position.ledger_id, "entryId": position.entry_id,
                      "partitionIndex": topic.name.partition_index})

    async def terminate_partitions(self, request: web.Request) -> web.Response:
        """Terminate every partition where it is owned, as Pulsar's `terminatePartitionedTopic`.

        Each partition goes through the owner-only `terminate` route of the broker that
        owns it (a redirect when that is another broker), so a partition is terminated
        exactly as a non-partitioned topic is. Answers `{partition index: message id}`.
        """
        name = self._topic(request)
        partitions = await self.broker.resources.partitions(name)
        if partitions <= 0:
            return _fail(404, f"{name} is not a partitioned topic")
        base = str(request.url.origin()) + "/admin/v2/persistent/" + name.namespace
        ends: dict[str, Any] = {}
        timeout = aiohttp.ClientTimeout(total=_FORWARD_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            for index in range(partitions):
                url = f"{base}/{name.partition(index).encoded_local_name}/terminate"
                async with http.post(url) as answer:
                    body = await answer.text()
                    if answer.status != 200:
                        return _fail(answer.status, f"partition {index} of {name}: {body}")
                    ends[str(index)] = json.loads(body)
        return _json(ends)

    async def unload(self, request: web.Request) -> web.Response:
        name = self._topic(request)
        if self.broker.ownership.is_owned(name):
            await self.broker.unload_topic(name, release=True)
            return web.Response(status=204)
        owner = await self.broker.ownership.owner_of(name)
        if owner is None:
            return web.Response(status=204)   # nobody serves it: nothing to unload
        raise web.HTTPTemporaryRedirect(owner.web_url.rstrip("/") + request.path)

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = self._topic(request)
        topic = await self._owned(request, name)
        busy = any(s.consumers for s in topic.subscriptions().values()) or topic.producers
        if busy and request.query.get("force") != "true":
            return _fail(412, f"{name} has connected producers or consumers; use force=true")
        await self.broker.delete_topic(name)
        return web.Response(status=204)

    # ---- lookup -------------------------------------------------------------------------------

    async def lookup(self, request: web.Request) -> web.Response:
        topic = TopicName.parse(f"{request.match_info['domain']}://{self._namespace(request)}/"
                                f"{request.match_info['topic']}")
        answer = await self.broker.lookup(topic, authoritative=request.query.get("authoritative") == "true")
        if answer.redirect:
            raise web.HTTPTemporaryRedirect(answer.web_url.rstrip("/") + request.path + "?authoritative=true")
        return _json({"brokerUrl": answer.url, "brokerUrlTls": None, "httpUrl": answer.web_url,
                      "httpUrlTls": None, "nativeUrl": answer.url})


def add_routes(app: web.Application, broker: AdminView) -> None:
    api = AdminApi(broker)
    app.middlewares.append(_errors)
    topic = "/admin/v2/{domain:persistent}/{tenant}/{namespace}/{topic}"
    app.router.add_routes([
        web.get("/admin/v2/clusters", api.clusters),
        web.get("/admin/v2/clusters/{cluster}", api.cluster),
        web.get("/admin/v2/brokers/health", api.health),
        web.get("/admin/v2/brokers/{cluster}", api.brokers),
        web.get("/admin/v2/tenants", api.tenants),
        web.get("/admin/v2/tenants/{tenant}", api.get_tenant),
        web.put("/admin/v2/tenants/{tenant}", api.put_tenant),
        web.delete("/admin/v2/tenants/{tenant}", api.delete_tenant),
        web.get("/admin/v2/namespaces/{tenant}", api.namespaces),
        web.get("/admin/v2/namespaces/{tenant}/{namespace}", api.get_namespace),
        web.put("/admin/v2/namespaces/{tenant}/{namespace}", api.put_namespace),
        web.delete("/admin/v2/namespaces/{tenant}/{namespace}", api.delete_namespace),
        web.get("/admin/v2/{domain:persistent}/{tenant}/{namespace}", api.list_topics),
        web.get("/admin/v2/{domain:persistent}/{tenant}/{namespace}/partitioned", api.list_partitioned),
        web.put(topic, api.create_topic),
        web.delete(topic, api.delete_topic),
        web.put(topic + "/partitions", api.create_partitions),
        web.post(topic + "/partitions", api.update_partitions),
        web.get(topic + "/partitions", api.get_partitions),
        web.delete(topic + "/partitions", api.delete_partitions),
        web.get(topic + "/stats", api.stats),
        web.get(topic + "/internalStats", api.internal_stats),
        web.get(topic + "/ledger/{ledger}/entry/{entry}", api.message_by_id),
        web.post(topic + "/terminate", api.terminate),
        web.post(topic + "/terminate/partitions", api.terminate_partitions),
        web.put(topic + "/unload", api.unload),
        web.get("/lookup/v2/topic/{domain:persistent}/{tenant}/{namespace}/{topic}", api.lookup),
    ])
