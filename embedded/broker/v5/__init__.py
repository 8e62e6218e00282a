"""The v5 transaction path: PIP-473 metadata-driven transactions on PIP-460 scalable topics.

`install(registry, broker)` registers, for the broker core (`embedded.broker.txn_api`):

* the `segment://` transaction buffer (`MetadataTransactionBuffer`) and pending-ack store
  (`MetadataPendingAckStore`), Pulsar 5.0's `DispatchingTransactionBufferProvider` and
  `DispatchingTransactionPendingAckStoreProvider` choices for segments (`persistent://`
  topics keep whatever `embedded.broker.v4` registered);
* the SCALABLE coordinator (`TransactionCoordinatorV5`), reached by commands carrying
  `scalable = true`;
* SCALABLE_TOPIC_LOOKUP / _CLOSE (DAG watch sessions), WATCH_SCALABLE_TOPICS / _CLOSE,
  SCALABLE_TOPIC_SUBSCRIBE (refused with an explanation), and the `topic://` domain;
* the admin REST of `/admin/v2/scalable` and `/admin/v2/segments`;
* the CONNECTED feature flags `supports_scalable_topics` and
  `supports_tc_metadata_discovery`, which make v5 clients use WATCH_TC_ASSIGNMENTS.

See `embedded/broker/v5/README.md` for the design, the settings and the measurements.
"""

from __future__ import annotations

import logging

from embedded.broker.topic_name import TopicDomain
from embedded.broker.txn_api import BrokerContext, CoordinatorKind, TxnRegistryApi
from embedded.broker.v5.scalable.admin import ScalableAdmin
from embedded.broker.v5.scalable.controller import ScalableTopicController
from embedded.broker.v5.scalable.resources import ScalableTopicResources
from embedded.broker.v5.scalable.sessions import DagWatchSessions, NamespaceWatches
from embedded.broker.v5.scalable.topic_domain import TopicDomainCommands, on_scalable_subscribe
from embedded.broker.v5.settings import V5Settings
from embedded.broker.v5.txn import admin as txn_admin
from embedded.broker.v5.txn.buffer import MetadataTransactionBufferProvider
from embedded.broker.v5.txn.coordinator import TransactionCoordinatorV5
from embedded.broker.v5.txn.metrics import V5Metrics
from embedded.broker.v5.txn.pending_ack import MetadataPendingAckProvider
from embedded.broker.v5.txn.store import TxnMetadataStore
from harness.wire import CommandType

log = logging.getLogger(__name__)

class _Parts:
    """Start and stop the v5 services with the broker (after its stores connect)."""

    def __init__(self, coordinator: TransactionCoordinatorV5, controller: ScalableTopicController,
                 sessions: DagWatchSessions) -> None:
        self.coordinator = coordinator
        self.controller = controller
        self.sessions = sessions

    async def start(self) -> None:
        await self.controller.start()
        await self.coordinator.start()

    async def stop(self) -> None:
        await self.coordinator.stop()
        await self.sessions.stop()
        await self.controller.stop()


def install(registry: TxnRegistryApi, broker: BrokerContext) -> None:
    settings = V5Settings.from_settings(broker.settings)
    metrics = V5Metrics(broker.metrics)
    store = TxnMetadataStore(broker.metadata, broker.metrics)
    coordinator = TransactionCoordinatorV5(broker, store, settings, metrics)
    resources = ScalableTopicResources(broker.metadata)
    controller = ScalableTopicController(broker, resources, settings)
    sessions = DagWatchSessions(broker, resources, controller, settings)
    namespaces = NamespaceWatches(broker, resources)

    registry.register_buffer_provider(TopicDomain.SEGMENT, MetadataTransactionBufferProvider(store, settings, metrics))
    registry.register_pending_ack_provider(TopicDomain.SEGMENT, MetadataPendingAckProvider(store, settings, metrics))
    registry.register_coordinator(CoordinatorKind.SCALABLE, coordinator)
    registry.register_command_handler(CommandType.SCALABLE_TOPIC_LOOKUP, sessions.lookup)
    registry.register_command_handler(CommandType.SCALABLE_TOPIC_CLOSE, sessions.close)
    registry.register_command_handler(CommandType.WATCH_SCALABLE_TOPICS, namespaces.watch)
    registry.register_command_handler(CommandType.WATCH_SCALABLE_TOPICS_CLOSE, namespaces.close)
    registry.register_command_handler(CommandType.SCALABLE_TOPIC_SUBSCRIBE, on_scalable_subscribe)
    registry.register_topic_domain_handler(TopicDomain.TOPIC, TopicDomainCommands(broker).on_command)
    registry.add_http_routes(ScalableAdmin(broker, resources, controller).routes())
    registry.add_http_routes(txn_admin.routes(store))
    registry.add_lifecycle(_Parts(coordinator, controller, sessions))
    flags = []
    if broker.settings.bool("scalableTopicsEnabled"):
        flags.append("supports_scalable_topics")
    if broker.settings.bool("transactionCoordinatorEnabled") and \
            broker.settings.bool("transactionCoordinatorScalableTopicsEnabled"):
        flags.append("supports_tc_metadata_discovery")
    registry.add_feature_flags(flags)
    log.info("v5 path installed: %d coordinator partitions, GC retention %.3fs (%s)", settings.parallelism,
             settings.gc_retention_s, settings.gc_leftover_ops.value)
