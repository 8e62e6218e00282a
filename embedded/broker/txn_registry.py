"""The provider registry: which transaction components serve which topics and commands.

Theory of operation. At start-up the broker creates one `TxnRegistry` and asks the
transaction paths to install themselves (`load_extensions`). Which modules a path installs
is handed in by the broker process's entry point (`embedded/broker/__main__.py`,
`TXN_PATHS`), which imports them, so the import contracts see the tie while this module
and the broker core stay free of the paths: `embedded.broker.v4` for
every path (v4 and v4-batched use it for everything; on v5 it still serves
`persistent://` topics and v4 clients, as Pulsar 5.0's dispatching providers do), and
`embedded.broker.v5` on the v5 path (segment:// topics, the scalable coordinator,
scalable-topic commands). With no path installed (`txnbenchTxnExtensions: []`, the
broker-only tests) the defaults of `txn_api` apply and the coordinator answers every
transaction command with TransactionCoordinatorNotFound (NotAllowedError when
transactions are disabled).

Providers are chosen by topic domain: SEGMENT, when registered, else PERSISTENT, else
the no-transaction default (Pulsar 5.0's DispatchingTransactionBufferProvider:
`segment://` → MetadataTransactionBuffer, otherwise TopicTransactionBuffer).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from embedded.broker.config import Settings
from embedded.broker.topic_name import TopicDomain
from embedded.broker.txn_api import (
    BrokerContext,
    CommandHandler,
    CoordinatorKind,
    Lifecycle,
    NoPendingAckProvider,
    NoTransactionBufferProvider,
    PendingAckProvider,
    TransactionBufferProvider,
    TransactionCoordinatorService,
    UnavailableCoordinator,
)
from harness.wire import CommandType, ServerError

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

#: a transaction path's name -> the modules it installs, each with `install(registry, broker)`
TxnPaths = Mapping[str, Sequence[ModuleType]]

CORE_COMMANDS = frozenset({
    CommandType.CONNECT, CommandType.PING, CommandType.PONG, CommandType.PARTITIONED_METADATA,
    CommandType.LOOKUP, CommandType.PRODUCER, CommandType.SEND, CommandType.CLOSE_PRODUCER,
    CommandType.SUBSCRIBE, CommandType.FLOW, CommandType.ACK, CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES,
    CommandType.UNSUBSCRIBE, CommandType.CLOSE_CONSUMER, CommandType.SEEK, CommandType.GET_LAST_MESSAGE_ID,
    CommandType.CONSUMER_STATS, CommandType.GET_SCHEMA, CommandType.GET_OR_CREATE_SCHEMA,
    CommandType.GET_TOPICS_OF_NAMESPACE, CommandType.TC_CLIENT_CONNECT_REQUEST, CommandType.NEW_TXN,
    CommandType.ADD_PARTITION_TO_TXN, CommandType.ADD_SUBSCRIPTION_TO_TXN, CommandType.END_TXN,
    CommandType.END_TXN_ON_PARTITION, CommandType.END_TXN_ON_SUBSCRIPTION, CommandType.WATCH_TC_ASSIGNMENTS,
    CommandType.WATCH_TC_ASSIGNMENTS_CLOSE,
})


class RegistryError(ValueError):
    """Two parts registered for the same slot, or a core command was claimed."""


class TxnRegistry:
    def __init__(self, settings: Settings, txn_path: str, paths: TxnPaths | None = None) -> None:
        self.settings = settings
        self.txn_path = txn_path
        self.paths: TxnPaths = paths or {}
        self._buffers: dict[TopicDomain, TransactionBufferProvider] = {}
        self._pending_acks: dict[TopicDomain, PendingAckProvider] = {}
        self._coordinators: dict[CoordinatorKind, TransactionCoordinatorService] = {}
        self._commands: dict[CommandType, CommandHandler] = {}
        self._domains: dict[TopicDomain, CommandHandler] = {}
        self.http_routes: list[web.RouteDef] = []
        self.lifecycles: list[Lifecycle] = []
        self.feature_flags: set[str] = set()
        self.installed: list[str] = []
        self._default_buffer = NoTransactionBufferProvider()
        self._default_pending_ack = NoPendingAckProvider()

    # ---- TxnRegistryApi -----------------------------------------------------------------------

    def register_buffer_provider(self, domain: TopicDomain, provider: TransactionBufferProvider) -> None:
        self._claim(self._buffers, domain, provider, "transaction buffer provider")

    def register_pending_ack_provider(self, domain: TopicDomain, provider: PendingAckProvider) -> None:
        self._claim(self._pending_acks, domain, provider, "pending-ack provider")

    def register_coordinator(self, kind: CoordinatorKind, coordinator: TransactionCoordinatorService) -> None:
        self._claim(self._coordinators, kind, coordinator, "coordinator")

    def register_command_handler(self, kind: CommandType, handler: CommandHandler) -> None:
        if kind in CORE_COMMANDS:
            raise RegistryError(f"{kind.name} is handled by the broker core; extend it through the "
                                "txn_api protocols instead")
        self._claim(self._commands, kind, handler, "command handler")

    def register_topic_domain_handler(self, domain: TopicDomain, handler: CommandHandler) -> None:
        if domain.is_stored:
            raise RegistryError(f"{domain.value}:// topics are served by the broker core")
        self._claim(self._domains, domain, handler, "topic domain handler")

    def add_http_routes(self, routes: Sequence[web.RouteDef]) -> None:
        self.http_routes.extend(routes)

    def add_lifecycle(self, part: Lifecycle) -> None:
        self.lifecycles.append(part)

    def add_feature_flags(self, names: Iterable[str]) -> None:
        self.feature_flags.update(names)

    @staticmethod
    def _claim(table: dict[Any, Any], key: Any, value: Any, what: str) -> None:
        if key in table:
            name = getattr(key, "name", key)
            raise RegistryError(f"a {what} for {name} is already registered ({table[key]!r})")
        table[key] = value

    # ---- lookups for the broker ---------------------------------------------------------------

    def buffer_provider(self, domain: TopicDomain) -> TransactionBufferProvider:
        if not self.settings.bool("transactionCoordinatorEnabled"):
            return self._default_buffer
        return self._buffers.get(domain) or self._buffers.get(TopicDomain.PERSISTENT) or self._default_buffer

    def pending_ack_provider(self, domain: TopicDomain) -> PendingAckProvider:
        if not self.settings.bool("transactionCoordinatorEnabled"):
            return self._default_pending_ack
        return (self._pending_acks.get(domain) or self._pending_acks.get(TopicDomain.PERSISTENT)
                or self._default_pending_ack)

    def coordinator(self, scalable: bool) -> TransactionCoordinatorService:
        """The coordinator for a command (C.3: scalable only with the setting on and the flag set)."""
        if not self.settings.bool("transactionCoordinatorEnabled"):
            return UnavailableCoordinator(ServerError.NotAllowedError,
                                          "transactions are disabled on this broker (transactionCoordinatorEnabled=false)")
        use_scalable = scalable and self.settings.bool("transactionCoordinatorScalableTopicsEnabled")
        kind = CoordinatorKind.SCALABLE if use_scalable else CoordinatorKind.LEGACY
        found = self._coordinators.get(kind)
        if found is not None:
            return found
        return UnavailableCoordinator(
            ServerError.TransactionCoordinatorNotFound,
            f"no {kind.value} transaction coordinator is installed on this broker (path {self.txn_path}; "
            f"installed: {', '.join(self.installed) or 'none'})")

    def command_handler(self, kind: CommandType) -> CommandHandler | None:
        return self._commands.get(kind)

    def domain_handler(self, domain: TopicDomain) -> CommandHandler | None:
        return self._domains.get(domain)

    # ---- installing the paths -----------------------------------------------------------------

    def extensions(self) -> tuple[ModuleType, ...]:
        """The path modules to install: the path's, or those the `txnbenchTxnExtensions` setting
        names (a list of module names: a test's own path, or none for the broker-only tests)."""
        chosen = self.settings.get("txnbenchTxnExtensions")
        if chosen is None:
            return tuple(self.paths.get(self.txn_path, ()))
        if not isinstance(chosen, (list, tuple)) or not all(isinstance(m, str) for m in chosen):
            raise RegistryError("setting txnbenchTxnExtensions must be a list of module names, "
                                f"e.g. [\"embedded.broker.v4\"], not {chosen!r}")
        return tuple(importlib.import_module(name) for name in chosen)

    def load_extensions(self, broker: BrokerContext, modules: Sequence[ModuleType] | None = None) -> None:
        """Call each path module's `install(registry, broker)`.

        A module that is missing, fails to import, or has no `install` stops the broker
        (a half-installed path would give wrong results).
        """
        for module in modules if modules is not None else self.extensions():
            install = getattr(module, "install", None)
            if install is None:
                raise RegistryError(f"transaction extension {module.__name__} has no install(registry, broker)")
            install(self, broker)
            self.installed.append(module.__name__)
            log.info("installed transaction extension %s", module.__name__)
