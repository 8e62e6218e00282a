"""The v4 transaction path (PIP-31) with PIP-160 batched logs: coordinators, transaction buffers, pending acks.

`install(registry, broker)` is called by the broker at start-up (on every path: on v5
it serves `persistent://` topics and v4 clients). It validates the settings (a broker
with invalid batched-write settings refuses to start), then registers:

* the LEGACY coordinator service (`coordinator_service`): coordinator i runs where
  `transaction_coordinator_assign-partition-i` is owned, with its log on
  `persistent://pulsar/system/__transaction_log_<i>` (`coordinator`, `coordinator_state`,
  `fanout`);
* the transaction buffer of every persistent topic (`buffer`, `buffer_state`): entries
  and commit/abort markers in the topic's own ledger, read horizon, aborted set,
  snapshots;
* the pending-ack handle of every subscription (`pending_ack`, `pending_ack_state`) on
  a `<topic>-<sub>__transaction_pending_ack` log;
* PIP-160's batched writer for both logs (`batched_writer`, `record_log`, `records`);
* admin REST (`admin`) and the extra metric names (`metrics`).

What follows Pulsar and what is simplified: embedded/broker/v4/README.md.
"""

from __future__ import annotations

from embedded.broker.topic_name import TopicDomain
from embedded.broker.txn_api import BrokerContext, CoordinatorKind, TxnRegistryApi
from embedded.broker.v4 import admin
from embedded.broker.v4.buffer import TopicTransactionBufferProvider
from embedded.broker.v4.coordinator_service import V4CoordinatorService
from embedded.broker.v4.metrics import V4Metrics
from embedded.broker.v4.pending_ack import PendingAckHandleProvider
from embedded.broker.v4.settings import InvalidV4Settings, V4Settings

__all__ = ["InvalidV4Settings", "V4Settings", "install"]


def install(registry: TxnRegistryApi, broker: BrokerContext) -> V4CoordinatorService:
    """Register the v4 components on `registry`; raises InvalidV4Settings for bad settings."""
    settings = V4Settings.from_settings(broker.settings)
    metrics = V4Metrics(broker.metrics, f"broker-{broker.broker_id}")
    service = V4CoordinatorService(broker, settings, metrics)
    registry.register_buffer_provider(TopicDomain.PERSISTENT, TopicTransactionBufferProvider(settings))
    registry.register_pending_ack_provider(TopicDomain.PERSISTENT, PendingAckHandleProvider(settings, metrics))
    registry.register_coordinator(CoordinatorKind.LEGACY, service)
    broker.ownership.add_listener(service)
    registry.add_lifecycle(service)
    # On a v5 broker the v5 coordinator answers transactionMetadata (its clients' transactions).
    registry.add_http_routes(admin.routes(service, transaction_metadata=broker.txn_path != "v5"))
    return service
