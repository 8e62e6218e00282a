"""What the broker's parts may ask of the broker: one narrow view per kind of child.

Why. `BrokerService` builds its topics, its client connections and its admin REST API
and hands itself to each, and they call back into it (load a topic, look one up,
unload one). Typed as the whole `BrokerService`, those back-pointers made every child
import `embedded.broker.broker` (the module that imports them all) and let it reach
anything the service has. Each child now names the few things it uses, as `txn_api`'s
`BrokerContext` already does for the transaction paths:

* `TopicView` for `PersistentTopic` and, through its topic, a `Subscription` and its
  dispatcher. It extends `BrokerContext` because a topic passes its broker to its
  transaction buffer and pending-ack handles (`TopicServices.broker`); on top of that a
  topic picks its transaction providers and unloads itself when another broker fences
  its ledger.
* `ConnectionView` for `ServerCnx` (and `BinaryServer`, which creates them, and the
  transaction commands of `txn_commands`): topics, lookups, schemas, producer names,
  and the transaction routes (coordinators, extension command and topic-domain handlers).
* `AdminView` for the admin REST API: cluster metadata, ownership, lookups and the
  owner-only topic operations.

`BrokerService` implements all three structurally (mypy checks it where it hands
itself over). The import-linter contract `broker-children-see-views` (pyproject.toml)
keeps the children from importing `embedded.broker.broker`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from embedded.broker.txn_api import BrokerContext

if TYPE_CHECKING:
    from embedded.broker.config import Settings
    from embedded.broker.lookup_policy import LookupAnswer
    from embedded.broker.managed_ledger.factory import ManagedLedgerFactory
    from embedded.broker.metrics import BrokerMetrics
    from embedded.broker.resources import ClusterResources
    from embedded.broker.topic import PersistentTopic
    from embedded.broker.topic_name import TopicDomain, TopicName
    from embedded.broker.txn_api import (
        BrokerInfo,
        CommandHandler,
        OwnershipApi,
        PendingAckProvider,
        TransactionBufferProvider,
        TransactionCoordinatorService,
    )
    from harness.wire import CommandType


class TxnProviders(Protocol):
    """The transaction components a topic and its subscriptions are built with (by topic domain)."""

    def buffer_provider(self, domain: TopicDomain) -> TransactionBufferProvider: ...

    def pending_ack_provider(self, domain: TopicDomain) -> PendingAckProvider: ...


class TxnRoutes(Protocol):
    """Where a connection sends what the broker core does not answer itself."""

    @property
    def feature_flags(self) -> Collection[str]:
        """FeatureFlags announced in CONNECTED."""
        ...

    def coordinator(self, scalable: bool) -> TransactionCoordinatorService: ...

    def command_handler(self, kind: CommandType) -> CommandHandler | None: ...

    def domain_handler(self, domain: TopicDomain) -> CommandHandler | None: ...


class TopicView(BrokerContext, Protocol):
    """The broker, as a loaded topic (and its subscriptions and dispatchers) sees it."""

    @property
    def txn_registry(self) -> TxnProviders: ...

    async def unload_topic(self, name: TopicName, *, release: bool) -> None:
        """Close the topic (its clients reconnect); `release` also gives up its ownership."""
        ...


class ConnectionView(Protocol):
    """The broker, as one client connection sees it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def metrics(self) -> BrokerMetrics: ...

    @property
    def resources(self) -> ClusterResources: ...

    @property
    def txn_registry(self) -> TxnRoutes: ...

    async def get_topic(self, name: TopicName, *, create: bool = True) -> PersistentTopic:
        """The loaded topic, loading it when this broker owns it; TxnError otherwise."""
        ...

    async def lookup(self, topic: TopicName, *, authoritative: bool) -> LookupAnswer: ...

    async def topics_of_namespace(self, namespace: str) -> list[str]: ...

    async def schema_version_for(self, topic: TopicName, schema: Any) -> bytes: ...

    def new_producer_name(self) -> str: ...


class AdminView(Protocol):
    """The broker, as its admin REST API sees it."""

    @property
    def broker_id(self) -> int: ...

    @property
    def ready(self) -> bool: ...

    @property
    def resources(self) -> ClusterResources: ...

    @property
    def ownership(self) -> OwnershipApi: ...

    @property
    def managed_ledgers(self) -> ManagedLedgerFactory: ...

    def live_brokers(self) -> Mapping[int, BrokerInfo]: ...

    async def lookup(self, topic: TopicName, *, authoritative: bool) -> LookupAnswer: ...

    async def get_topic(self, name: TopicName, *, create: bool = True) -> PersistentTopic: ...

    async def topics_of_namespace(self, namespace: str) -> list[str]: ...

    async def unload_topic(self, name: TopicName, *, release: bool) -> None: ...

    async def delete_topic(self, name: TopicName) -> None: ...


__all__ = ["AdminView", "ConnectionView", "TopicView", "TxnProviders", "TxnRoutes"]
