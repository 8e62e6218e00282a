"""BrokerService: the broker process, and the `BrokerContext` the transaction paths use.

Theory of operation. Start-up, in order (the supervisor polls /health, which answers
200 only at the end): install the transaction paths (they only register), serve HTTP
(503 while starting), connect to the metadata store (opening a session) and the
ledger store, register `/brokers/<id>`, initialise the cluster metadata idempotently
(tenants public and pulsar, namespaces public/default and pulsar/system, the
partitioned topic transaction_coordinator_assign), start the paths' services, open
the binary port.

Topics. A LOOKUP decides who serves a topic (`lookup_policy`) and may acquire
ownership here. A topic is loaded (`get_topic`) only by its owner, once, on the
first PRODUCER / SUBSCRIBE / transaction command that needs it. When ownership
goes (session lost, admin unload, another broker fenced the managed ledger) the
topic is unloaded and its clients are told to reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from embedded import planted_bugs, tracing
from embedded.broker import admin
from embedded.broker.brokers_registry import LiveBrokers
from embedded.broker.config import BrokerConfig, SettingError, Settings
from embedded.broker.lookup_policy import LookupAction, LookupAnswer, decide
from embedded.broker.managed_ledger.api import ManagedLedgerError
from embedded.broker.managed_ledger.factory import ManagedLedgerFactory
from embedded.broker.metrics import BrokerMetrics
from embedded.broker.ownership import OwnershipService
from embedded.broker.peer import PeerClient
from embedded.broker.resources import ClusterResources
from embedded.broker.server_cnx import LoopbackTransport, ServerCnx
from embedded.broker.topic import PersistentTopic
from embedded.broker.topic_name import TopicDomain, TopicName
from embedded.broker.txn_api import (
    BrokerInfo,
    OwnerInfo,
    PeerUnavailable,
    TxnError,
)
from embedded.broker.txn_registry import TxnPaths, TxnRegistry
from embedded.broker.wire_server import BinaryServer
from embedded.ledger.client import LedgerClient
from embedded.ledger.model import LedgerError, LedgerUnavailable
from embedded.metadata.backend import MetadataBackend, open_metadata_client
from embedded.metadata.model import MetadataError, MetadataUnavailable
from harness.service import http_app, start_http
from harness.wire import Command, SchemaType, ServerError, commands

log = logging.getLogger(__name__)

_STORE_ERRORS = (ManagedLedgerError, LedgerError, LedgerUnavailable, MetadataError, MetadataUnavailable)


_SYSTEM_TOPIC_SUFFIXES = ("__transaction_pending_ack", "__transaction_buffer_snapshot", "__change_events")


def _is_system_topic(topic: TopicName) -> bool:
    """Transaction logs and snapshots kept as managed ledgers (Pulsar's TopicList.filterSystemTopic hides them)."""
    return topic.local_name.endswith(_SYSTEM_TOPIC_SUFFIXES) or topic.local_name.startswith("__transaction_log_")


class BrokerService:
    def __init__(self, raw_config: Mapping[str, Any], txn_paths: TxnPaths | None = None) -> None:
        self.config = BrokerConfig.from_dict(raw_config)
        cfg = self.config
        self._settings = cfg.settings
        planted = planted_bugs.activate(planted_bugs.enabled_in(cfg.settings))
        if planted:
            log.warning("PLANTED BUGS ON (deliberate faults for the txnbench self-test): %s", ", ".join(sorted(planted)))
        self._metrics = BrokerMetrics()
        tracing.set_sink(self._metrics.observe_span)   # one broker per process
        # Pulsar's `metadataStoreUrl` picks the store (oxia://HOST:PORT: the real Oxia client);
        # without it the broker speaks our protocol to `metadata_address`.
        self._metadata = open_metadata_client(
            self._settings.str("metadataStoreUrl", "") or cfg.metadata_address,
            session_timeout_ms=self._settings.int("metadataStoreSessionTimeoutMillis"),
            client_name=cfg.name, request_timeout_s=5.0, connect_attempts=40)
        self._ledgers = LedgerClient(cfg.ledger_address,
                                     request_timeout=self._settings.float("managedLedgerAddEntryTimeoutSeconds"))
        self._ml_factory = ManagedLedgerFactory(self._ledgers, self._metadata, self._metrics, self._settings)
        self.resources = ClusterResources(self._metadata, cfg.cluster_name)
        self._ownership = OwnershipService(self._metadata, cfg.broker_id, cfg.advertised_service_url,
                                           cfg.advertised_web_url, self._metrics,
                                           shutdown_on_session_loss=self._session_policy() == "shutdown")
        self._ownership.assign = self.assign_owner
        self._ownership.add_listener(self)
        self._live = LiveBrokers(self._metadata, BrokerInfo(cfg.broker_id, cfg.advertised_service_url,
                                                           cfg.advertised_web_url))
        self._loopback = LoopbackTransport()
        self._loopback_cnx = ServerCnx(self, self._loopback)
        self._peers = PeerClient(cfg.broker_id, cfg.peers, metrics=self._metrics, ensure_owner=self.assign_owner,
                                 local=self.handle_locally,
                                 timeout_s=self._settings.float("brokerClientOperationTimeoutSeconds"))
        self.txn_registry = TxnRegistry(self._settings, cfg.txn_path, txn_paths)
        self.topics: dict[TopicName, PersistentTopic] = {}
        self._loading: dict[TopicName, asyncio.Task[PersistentTopic]] = {}
        self._producer_names = itertools.count()
        self._started_ms = int(time.time() * 1000)
        self._ready = False
        self._http: web.AppRunner | None = None
        self._binary: BinaryServer | None = None
        self._started_lifecycles: list[Any] = []

    # ---- BrokerContext ------------------------------------------------------------------------

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def txn_path(self) -> str:
        return self.config.txn_path

    @property
    def cluster_name(self) -> str:
        return self.config.cluster_name

    @property
    def advertised_service_url(self) -> str:
        return self.config.advertised_service_url

    @property
    def advertised_web_url(self) -> str:
        return self.config.advertised_web_url

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def metadata(self) -> MetadataBackend:
        return self._metadata

    @property
    def ledgers(self) -> LedgerClient:
        return self._ledgers

    @property
    def managed_ledgers(self) -> ManagedLedgerFactory:
        return self._ml_factory

    def _session_policy(self) -> str:
        policy = self._settings.str("zookeeperSessionExpiredPolicy", "reconnect")
        if policy not in ("reconnect", "shutdown"):
            raise SettingError(f"zookeeperSessionExpiredPolicy is {policy!r}; use reconnect or shutdown")
        return policy

    @property
    def ownership(self) -> OwnershipService:
        return self._ownership

    @property
    def peers(self) -> PeerClient:
        return self._peers

    @property
    def metrics(self) -> BrokerMetrics:
        return self._metrics

    @property
    def ready(self) -> bool:
        return self._ready

    def live_brokers(self) -> Mapping[int, BrokerInfo]:
        return self._live.live()

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        self.txn_registry.load_extensions(self)
        app = http_app(self._metrics.registry, health=lambda: self._ready)
        admin.add_routes(app, self)
        if self.txn_registry.http_routes:
            app.router.add_routes(self.txn_registry.http_routes)
        self._http = await start_http(app, cfg.http_port, cfg.host)
        await self._metadata.connect()
        await self._metadata.session_id()
        try:
            await self._ledgers.connect()
        except LedgerUnavailable as err:
            # Pulsar's broker starts without its bookies (the BookKeeper client connects to a
            # bookie when a ledger is created or opened); topics and logs load once it answers
            log.warning("starting without the ledger store (%s); ledgers open once it answers", err)
        await self._live.start()
        coordinators = self._settings.int("transactionCoordinatorCount") if self._settings.bool(
            "transactionCoordinatorEnabled") else 0
        await self.resources.initialize_cluster(service_url=cfg.advertised_service_url,
                                                web_url=cfg.advertised_web_url, coordinators=coordinators)
        for part in self.txn_registry.lifecycles:
            await part.start()
            self._started_lifecycles.append(part)
        self._binary = BinaryServer(self, cfg.host, cfg.binary_port,
                                    max_message_size=self._settings.int("maxMessageSize"),
                                    keepalive_s=self._settings.float("keepAliveIntervalSeconds"))
        await self._binary.start()
        self._metrics.registry.add_collector(self._collect_metrics)
        self._ready = True
        log.info("broker %d ready: binary %s:%d (advertised %s), http %d, path %s, extensions %s",
                 cfg.broker_id, cfg.host, self._binary.port, cfg.advertised_service_url, cfg.http_port,
                 cfg.txn_path, self.txn_registry.installed or "none")

    async def stop(self) -> None:
        """A graceful stop, in Pulsar's order (`unloadNamespaceBundlesGracefully`): leave the live
        set first ("make broker-node unavailable from the cluster"), so the topics and coordinator
        partitions released next are assigned to another broker by the next lookup, not
        redirected back here while this one is still stopping; then unload and release them."""
        self._ready = False
        if self._binary is not None:
            await self._binary.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._live.stop(), 2.0)
        if self.topics:   # in parallel: each persists its cursors and closes its ledger (bounded)
            unloads = [self.unload_topic(name, release=True) for name in list(self.topics)]
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*unloads, return_exceptions=True), 6.0)
        for part in reversed(self._started_lifecycles):
            try:
                await asyncio.wait_for(part.stop(), 5.0)
            except Exception:
                log.exception("stopping %r failed", part)
        await self._ownership.close()
        await self._peers.close()
        await self._ml_factory.close_all()
        await self._ledgers.close()
        await self._metadata.close()
        if self._http is not None:
            await self._http.cleanup()

    # ---- lookups and ownership ----------------------------------------------------------------

    async def lookup(self, topic: TopicName, *, authoritative: bool) -> LookupAnswer:
        """Where the client should go for `topic` (acquiring it here when this broker should serve it)."""
        try:
            owner = await self._ownership.owner_of(topic)
            decision = decide(str(topic), self_id=self.broker_id, self_session=self._metadata.current_session,
                              owner=owner, live=self._live.live(), authoritative=authoritative)
            if decision.action is LookupAction.CONNECT:
                answer = LookupAnswer(decision.url or "", decision.web_url or "", decision.broker_id or 0, False)
            elif decision.action is LookupAction.REDIRECT:
                answer = LookupAnswer(decision.url or "", decision.web_url or "", decision.broker_id or 0, True)
            else:
                if decision.action is LookupAction.TAKE_OVER and owner is not None:
                    got = await self._ownership.take_over(topic, owner)
                else:
                    got = await self._ownership.try_acquire(topic)
                answer = LookupAnswer(got.service_url, got.web_url, got.broker_id, False)
        except (MetadataUnavailable, MetadataError) as err:
            self._metrics.lookups.inc(answer="failed")
            raise TxnError(ServerError.ServiceNotReady, f"lookup of {topic} failed: {err}") from None
        self._metrics.lookups.inc(answer="redirect" if answer.redirect else
                                  ("connect-self" if answer.broker_id == self.broker_id else "connect-other"))
        return answer

    async def assign_owner(self, topic: TopicName) -> OwnerInfo:
        """The owner of `topic`, having one assigned when there is none (following redirects)."""
        for _ in range(4):   # bounded: a redirect makes the candidate acquire, then the record exists
            if self._ownership.is_owned(topic):
                return await self._ownership.try_acquire(topic)
            answer = await self.lookup(topic, authoritative=False)
            if not answer.redirect:
                if answer.broker_id == self.broker_id:
                    return await self._ownership.try_acquire(topic)
                owner = await self._ownership.owner_of(topic)
                if owner is not None:
                    return owner
                continue
            with contextlib.suppress(PeerUnavailable):
                await self._peers.request(answer.broker_id, lambda rid: commands.lookup(
                    str(topic), rid, authoritative=True), timeout_s=5.0)
            owner = await self._ownership.owner_of(topic)
            if owner is not None:
                return owner
        raise TxnError(ServerError.ServiceNotReady, f"no broker could be assigned {topic}; are brokers live?")

    def on_owned(self, topic: TopicName) -> None:
        return None

    async def on_released(self, topic: TopicName) -> None:
        if topic in self.topics or topic in self._loading:
            await self.unload_topic(topic, release=False)

    async def still_current(self, topic: TopicName) -> bool:
        """Whether the loaded `topic` (if any) still has the ledger list it loaded (ownership's
        revalidation of a record gone with a lost session)."""
        loaded = self.topics.get(topic)
        return loaded is None or await loaded.ledger.metadata_unchanged()

    # ---- topics -------------------------------------------------------------------------------

    async def get_topic(self, name: TopicName, *, create: bool = True) -> PersistentTopic:
        if not name.domain.is_stored:
            raise TxnError(ServerError.NotAllowedError, f"{name.domain.value}:// topics are not stored topics")
        topic = self.topics.get(name)
        if topic is not None and not topic.closing:
            return topic
        if not self._ownership.is_owned(name):
            try:
                owner = await self._ownership.owner_of(name)
                if owner is not None and owner.broker_id == self.broker_id and \
                        owner.session_id != self._metadata.current_session:
                    await self._ownership.take_over(name, owner)
            except (MetadataUnavailable, MetadataError) as err:
                raise TxnError(ServerError.ServiceNotReady, f"cannot check the owner of {name}: {err}") from None
            if not self._ownership.is_owned(name):
                where = f"broker {owner.broker_id} ({owner.service_url})" if owner else "no broker yet"
                raise TxnError(ServerError.ServiceNotReady,
                               f"{name} is not served by broker {self.broker_id} (owner: {where}); look it up again")
        loading = self._loading.get(name)
        if loading is None:
            loading = asyncio.ensure_future(self._load(name, create))
            self._loading[name] = loading

            def loaded(_: asyncio.Task[PersistentTopic], n: TopicName = name) -> None:
                self._loading.pop(n, None)
            loading.add_done_callback(loaded)
        return await asyncio.shield(loading)

    async def _load(self, name: TopicName, create: bool) -> PersistentTopic:
        try:
            if not await self.resources.namespace_exists(name.namespace):
                raise TxnError(ServerError.TopicNotFound, f"namespace {name.namespace} does not exist; "
                                                          "create it with the admin API first")
            exists = await self._ml_factory.exists(name.persistence_name)
            if not exists and not (create and self._settings.bool("allowAutoTopicCreation")):
                raise TxnError(ServerError.TopicNotFound, f"topic {name} does not exist")
            if not exists and not name.is_partition and await self.resources.partitions(name) > 0:
                raise TxnError(ServerError.NotAllowedError,
                               f"{name} is a partitioned topic; produce to and consume from its partitions")
            ml = await self._ml_factory.open(name.persistence_name, self._ml_factory.config())
            topic = PersistentTopic(self, name, ml)
            try:
                await topic.load()
            except BaseException:
                await topic.close(disconnect=False)
                raise
        except _STORE_ERRORS as err:
            raise TxnError(ServerError.ServiceNotReady, f"loading {name} failed: {err}") from None
        if not self._ownership.is_owned(name):
            await topic.close(disconnect=False)
            raise TxnError(ServerError.ServiceNotReady, f"lost the ownership of {name} while loading it")
        self.topics[name] = topic
        log.info("loaded %s (last entry %s, %d subscriptions)", name, topic.ledger.last_confirmed,
                 len(topic.subscriptions()))
        return topic

    async def unload_topic(self, name: TopicName, *, release: bool) -> None:
        """Close the topic (clients are told to reconnect); `release` also gives up ownership."""
        loading = self._loading.get(name)
        if loading is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(loading), 10.0)
        topic = self.topics.pop(name, None)
        if topic is not None:
            try:
                await topic.close()
            except Exception:
                log.exception("unloading %s failed", name)
            log.info("unloaded %s", name)
        if release:
            await self._ownership.release(name)

    async def delete_topic(self, name: TopicName) -> None:
        topic = await self.get_topic(name, create=False)
        self.topics.pop(name, None)
        await topic.delete()
        await self._ownership.release(name)

    async def topics_of_namespace(self, namespace: str) -> list[str]:
        """Persistent topics of a namespace: non-partitioned ones and every partition of partitioned ones."""
        tenant, _, local = namespace.partition("/")
        names = await self._ml_factory.store.list_names(f"{tenant}/{local}/persistent/")
        topics = {str(t) for t in map(TopicName.from_persistence_name, names) if not _is_system_topic(t)}
        for partitioned in await self.resources.partitioned_topics(namespace):
            base = TopicName.parse(partitioned)
            for i in range(await self.resources.partitions(base)):
                topics.add(str(base.partition(i)))
        return sorted(topics)

    def new_producer_name(self) -> str:
        return f"{self.cluster_name}-{self.broker_id}-{self._started_ms}-{next(self._producer_names)}"

    async def schema_version_for(self, topic: TopicName, schema: Any) -> bytes:
        """Pulsar's answer for a producer's or GET_OR_CREATE_SCHEMA's schema: empty for bytes topics."""
        if schema.type == SchemaType.None_:   # BYTES travels as Schema.Type None
            return b""
        record = {"name": schema.name, "type": int(schema.type), "data": bytes(schema.schema_data).hex(),
                  "properties": {kv.key: kv.value for kv in schema.properties}}
        version = await self.resources.put_schema(topic, record)
        return version.to_bytes(8, "big")

    # ---- in-process requests (peer requests to ourselves) -------------------------------------

    async def handle_locally(self, command: Command) -> Command:
        request_id = commands.request_id_of(command)
        if request_id is None:
            raise ValueError(f"{command.type.name} has no request_id; only requests can be sent to a broker")
        future = self._loopback.expect(request_id)
        self._loopback_cnx.handle(command)
        return await future

    # ---- metrics ------------------------------------------------------------------------------

    def _collect_metrics(self) -> None:
        m = self._metrics
        m.topics.set(len(self.topics))
        for gauge in (m.producers, m.consumers, m.subscriptions, m.backlog):
            gauge.values.clear()
        for name, topic in self.topics.items():
            key = str(name)
            subscriptions = topic.subscriptions()
            m.producers.set(len(topic.producers), topic=key)
            m.subscriptions.set(len(subscriptions), topic=key)
            m.consumers.set(sum(len(s.consumers) for s in subscriptions.values()), topic=key)
            m.backlog.set(sum(s.backlog() for s in subscriptions.values() if s.durable), topic=key)


__all__ = ["BrokerService", "TopicDomain"]
