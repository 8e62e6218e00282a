"""Extension points for the transaction paths, and the no-transaction defaults.

Theory of operation. As in Pulsar, transactions plug into a broker at three places:

* per topic, a `TransactionBuffer` (Pulsar's `TransactionBuffer`): it appends a
  transaction's entries, decides how far dispatchers may read (`max_read_position`,
  the "read horizon": nothing of an open transaction may be delivered) and which
  transactional entries are aborted (`is_aborted`), and applies END_TXN_ON_PARTITION.
  The topic calls `on_entry_added` for *every* confirmed entry of its managed ledger,
  in log order and before the append's future resolves (the buffer's own appends and
  markers included); whenever the horizon moves or an abort makes entries skippable
  the buffer calls its listeners (`add_listener`), so dispatchers wake up instead of
  polling (the PIP-473 review's point). Dispatchers skip marker entries and aborted
  entries and acknowledge them on the subscription's behalf.
* per subscription, a `PendingAckHandle` (Pulsar's `PendingAckHandle`):
  transactional individual and cumulative acks (`TransactionConflict` as Pulsar
  raises it), the positions the dispatcher must not deliver while a transaction holds
  them, commit (apply to the cursor) and abort (make them deliverable again), and
  END_TXN_ON_SUBSCRIPTION.
* per broker, coordinators (`TransactionCoordinatorService`): NEW_TXN,
  ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN, END_TXN, TC_CLIENT_CONNECT_REQUEST and
  WATCH_TC_ASSIGNMENTS. The broker core (`txn_commands`) routes a command to the
  `SCALABLE` coordinator when it carries `scalable = true` and
  `transactionCoordinatorScalableTopicsEnabled` is on (facts file C.3), otherwise to the
  `LEGACY` one.

A path registers its implementations in a `TxnRegistryApi` from a module-level
`install(registry, broker)` in `embedded.broker.v4` / `embedded.broker.v5`; the
registry (`txn_registry`) chooses providers by topic domain: `segment://` topics get
the SEGMENT providers when registered, every stored topic falls back to PERSISTENT,
and without any the defaults below apply. Everything a component may need from the
broker is in `BrokerContext`, `TopicServices` and `SubscriptionServices`.

Errors: raise `TxnError(ServerError.X, message)`; the broker core (`txn_commands`,
`ServerCnx`) turns it into the response's `error`/`message` (or a SEND_ERROR /
ACK_RESPONSE error).
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from embedded.broker.config import Settings
from embedded.broker.entry import EntryInfo
from embedded.broker.managed_ledger.api import (
    ManagedCursorApi,
    ManagedLedgerApi,
    ManagedLedgerError,
    ManagedLedgerFactoryApi,
)
from embedded.broker.position import Position
from embedded.broker.topic_name import TopicDomain, TopicName
from harness.wire import Command, CommandType, ServerError, TxnAction, TxnId

if TYPE_CHECKING:
    from aiohttp import web

    from embedded.broker.metrics import BrokerMetrics
    from embedded.ledger.client import LedgerClient
    from embedded.metadata.backend import MetadataBackend

log = logging.getLogger(__name__)


class TxnError(Exception):
    """A definite failure answered to the client with `error` (e.g. TransactionConflict)."""

    def __init__(self, error: ServerError, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error
        self.message = message


class CoordinatorKind(enum.Enum):
    LEGACY = "legacy"        # v4 / v4-batched (PIP-31, PIP-160), reached via the assign topic
    SCALABLE = "scalable"    # v5 (PIP-473), commands carrying `scalable = true`


# ---- what the broker offers -----------------------------------------------------------------


class ClientChannel(Protocol):
    """One client connection, as command handlers and coordinators see it."""

    @property
    def remote(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def protocol_version(self) -> int: ...

    def peer_supports(self, feature: str) -> bool:
        """Whether the client announced `feature` (a FeatureFlags field) in CONNECT."""
        ...

    def send(self, command: Command) -> None:
        """Queue a command to the client (written at the end of the loop iteration)."""
        ...

    def add_close_listener(self, listener: Callable[[], Any]) -> None: ...


@dataclass(frozen=True)
class OwnerInfo:
    """Who serves a topic: an ephemeral record of the owner's metadata session."""

    broker_id: int
    service_url: str
    web_url: str
    session_id: int | None = None
    version_id: int | None = None


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker (`/brokers/<id>`)."""

    broker_id: int
    service_url: str
    web_url: str


class OwnershipListener(Protocol):
    """Told when this broker starts or stops owning a topic (sync or async callbacks)."""

    def on_owned(self, topic: TopicName) -> Any: ...

    def on_released(self, topic: TopicName) -> Any: ...


class OwnershipApi(Protocol):
    def is_owned(self, topic: TopicName) -> bool: ...

    def owned_topics(self) -> list[TopicName]: ...

    async def owner_of(self, topic: TopicName) -> OwnerInfo | None:
        """The current owner record, read from the metadata store (None: unowned)."""
        ...

    async def ensure_owner(self, topic: TopicName) -> OwnerInfo:
        """The owner, assigning one (possibly this broker) when the topic has none."""
        ...

    def add_listener(self, listener: OwnershipListener) -> None: ...

    async def release(self, topic: TopicName) -> None:
        """Stop owning `topic` and delete its owner record, so the next lookup assigns another broker."""
        ...


class PeerUnavailable(Exception):
    """A broker-to-broker request got no answer (peer down, link cut, timeout): outcome unknown."""


class PeerApi(Protocol):
    async def request(self, broker_id: int, build: Callable[[int], Command], *,
                      timeout_s: float | None = None) -> Command:
        """Send `build(request_id)` to broker `broker_id` over its `peers` link; return the response.

        The response may carry an error (`harness.wire.commands.error_of`); PeerUnavailable
        when no response arrives in time.
        """
        ...

    async def request_owner(self, topic: TopicName, build: Callable[[int], Command], *,
                            timeout_s: float | None = None) -> Command:
        """Like `request`, to whichever broker owns `topic` (handled in-process when that is us)."""
        ...


class BrokerContext(Protocol):
    """The broker, as the transaction paths see it."""

    @property
    def broker_id(self) -> int: ...

    @property
    def txn_path(self) -> str: ...

    @property
    def cluster_name(self) -> str: ...

    @property
    def advertised_service_url(self) -> str: ...

    @property
    def advertised_web_url(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def metadata(self) -> MetadataBackend: ...

    @property
    def ledgers(self) -> LedgerClient: ...

    @property
    def managed_ledgers(self) -> ManagedLedgerFactoryApi: ...

    @property
    def ownership(self) -> OwnershipApi: ...

    @property
    def peers(self) -> PeerApi: ...

    @property
    def metrics(self) -> BrokerMetrics: ...

    def live_brokers(self) -> Mapping[int, BrokerInfo]: ...

    async def get_topic(self, name: TopicName) -> TopicServices:
        """The loaded topic, loading it when this broker owns it; TxnError(ServiceNotReady) otherwise."""
        ...


class TopicServices(Protocol):
    """A loaded stored topic (persistent:// or segment://), for its transaction buffer."""

    @property
    def name(self) -> TopicName: ...

    @property
    def ledger(self) -> ManagedLedgerApi: ...

    @property
    def broker(self) -> BrokerContext: ...

    @property
    def transaction_buffer(self) -> TransactionBuffer: ...

    def subscription(self, name: str) -> SubscriptionServices | None: ...

    def subscriptions(self) -> Mapping[str, SubscriptionServices]: ...


class SubscriptionServices(Protocol):
    """A subscription, for its pending-ack handle."""

    @property
    def topic(self) -> TopicServices: ...

    @property
    def name(self) -> str: ...

    @property
    def cursor(self) -> ManagedCursorApi: ...

    @property
    def pending_ack(self) -> PendingAckHandle: ...

    def redeliver(self, positions: Iterable[Position]) -> None:
        """Make these positions deliverable again (an aborted transaction's acks)."""
        ...

    def wake(self) -> None:
        """Pending-ack state changed: the dispatcher should look again."""
        ...


# ---- what a transaction path provides ---------------------------------------------------------


ChangeListener = Callable[[], None]


class TransactionBuffer(Protocol):
    async def recover(self) -> None:
        """Rebuild state (ongoing and aborted transactions) before the topic serves anyone."""
        ...

    async def append(self, txn: TxnId, data: bytes, info: EntryInfo) -> Position:
        """Append one transactional entry (a SEND with a txn id) and return its position."""
        ...

    def on_entry_added(self, position: Position, info: EntryInfo) -> None:
        """Every confirmed entry of the topic, in log order (Pulsar's syncMaxReadPositionForNormalPublish)."""
        ...

    def max_read_position(self) -> Position:
        """Dispatchers read no entry after this position."""
        ...

    def is_aborted(self, txn: TxnId, position: Position) -> bool:
        """Whether the transactional entry at `position` belongs to an aborted transaction."""
        ...

    def add_listener(self, listener: ChangeListener) -> None:
        """`listener()` is called (synchronously, keep it cheap) when the horizon moves or aborts change."""
        ...

    def remove_listener(self, listener: ChangeListener) -> None: ...

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        """END_TXN_ON_PARTITION: commit or abort `txn` on this topic."""
        ...

    async def close(self) -> None: ...

    def stats(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class TxnAck:
    """One transactional individual ack: an entry, optionally only some of its batch."""

    position: Position
    ack_set: tuple[int, ...] | None = None   # bit i set: message i stays unacknowledged
    batch_size: int = 0


_U64_WORD = (1 << 64) - 1


def acked_index_named(ack_set: Sequence[int] | None, cursor_batch: Sequence[int] | None) -> int | None:
    """The batch index a cumulative ack names when the cursor already acknowledged it, else None.

    A cumulative ack of index i of a batch carries the ack set of the indexes after it (bits
    i+1.. set: they stay unacknowledged); `cursor_batch` is what the cursor keeps for the entry
    after its mark-delete position (set bits: not yet acknowledged). Pulsar (2.10.5 to 5.0.1)
    compares only the entry with the mark-delete position and accepts such an ack, so a message
    is consumed by two committed transactions (docs/findings/v4-cumulative-ack-of-acked-batch-message.md);
    the model refuses it, as a fixed broker would, so that its baseline stays the correct reference."""
    if not ack_set or cursor_batch is None:
        return None
    remaining = sum((int(w) & _U64_WORD) << (64 * i) for i, w in enumerate(ack_set))
    if remaining == 0:
        return None
    named = (remaining & -remaining).bit_length() - 2
    if named < 0:
        return None
    unacked = sum((int(w) & _U64_WORD) << (64 * i) for i, w in enumerate(cursor_batch))
    return None if (unacked >> named) & 1 else named


async def batch_size_of(subscription: SubscriptionServices, ack: TxnAck) -> int:
    """The messages in the batch `ack` names: the ack's own count, else read from its entry.

    An ack set alone cannot say it: its words end at a multiple of 64 bits, and acking the
    last index of a batch clears the highest bit a batch size could be guessed from. Pulsar's
    pending-ack handle takes the size from the ack's message id for the same reason.
    """
    if ack.batch_size > 0:
        return ack.batch_size
    try:
        entry = await subscription.topic.ledger.read_entry(ack.position)
    except ManagedLedgerError as err:
        raise TxnError(ServerError.ServiceNotReady,
                       f"cannot read {ack.position} to learn its batch size ({err})") from None
    return max(1, entry.info.num_messages)


class PendingAckHandle(Protocol):
    async def recover(self) -> None:
        """Rebuild pending acks before the subscription dispatches."""
        ...

    async def individual_ack(self, txn: TxnId, acks: Sequence[TxnAck]) -> None:
        """Hold these acks for `txn`; TxnError(TransactionConflict) when already acked or held."""
        ...

    async def cumulative_ack(self, txn: TxnId, ack: TxnAck) -> None:
        """Hold every message up to `ack` for `txn` (a batch message's ack set: the indexes after it
        stay unacknowledged, as Pulsar's `AckSetPosition`); TxnError(TransactionConflict) when at or
        before the mark-delete position or another transaction holds a cumulative ack."""
        ...

    def check_plain_ack(self, positions: Sequence[Position], cumulative: bool) -> None:
        """A non-transactional ack is about to apply; raise TxnError to refuse it."""
        ...

    def is_pending(self, position: Position) -> bool:
        """The whole entry is held by an open transaction's individual ack: do not deliver it."""
        ...

    def held_cumulatively(self, position: Position) -> bool:
        """An open transaction's cumulative ack covers this entry (whole, or part of its batch): a single
        active consumer's dispatch stops before it until the transaction ends (see the dispatcher)."""
        ...

    def pending_ack_set(self, position: Position) -> Sequence[int] | None:
        """Words whose set bits are batch indexes held by open transactions (not to deliver)."""
        ...

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        """END_TXN_ON_SUBSCRIPTION: commit applies the acks to the cursor, abort releases them."""
        ...

    async def close(self) -> None: ...

    def stats(self) -> dict[str, Any]: ...


class TransactionBufferProvider(Protocol):
    def create(self, topic: TopicServices) -> TransactionBuffer: ...


class PendingAckProvider(Protocol):
    def create(self, subscription: SubscriptionServices) -> PendingAckHandle: ...


class TransactionCoordinatorService(Protocol):
    """A broker's coordinator(s) of one kind; raise TxnError for definite failures."""

    async def tc_client_connect(self, tc_id: int) -> None:
        """TC_CLIENT_CONNECT_REQUEST: succeed only when coordinator `tc_id` is served here."""
        ...

    async def new_txn(self, tc_id: int, timeout_ms: int) -> TxnId: ...

    async def add_partitions(self, txn: TxnId, partitions: Sequence[str]) -> None: ...

    async def add_subscriptions(self, txn: TxnId, subscriptions: Sequence[tuple[str, str]]) -> None: ...

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None: ...

    async def watch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        """WATCH_TC_ASSIGNMENTS: send the snapshot now (WATCH_TC_ASSIGNMENTS_UPDATE), then on every change."""
        ...

    async def unwatch_assignments(self, watch_id: int, channel: ClientChannel) -> None: ...


CommandHandler = Callable[[ClientChannel, Command], Awaitable[None]]
"""Handles one command on a client connection (e.g. SCALABLE_TOPIC_LOOKUP) and answers on the channel."""


class Lifecycle(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class TxnRegistryApi(Protocol):
    """Where a path's `install(registry, broker)` registers its parts."""

    def register_buffer_provider(self, domain: TopicDomain, provider: TransactionBufferProvider) -> None: ...

    def register_pending_ack_provider(self, domain: TopicDomain, provider: PendingAckProvider) -> None: ...

    def register_coordinator(self, kind: CoordinatorKind, coordinator: TransactionCoordinatorService) -> None: ...

    def register_command_handler(self, kind: CommandType, handler: CommandHandler) -> None:
        """Commands the core does not handle (SCALABLE_TOPIC_*, WATCH_SCALABLE_TOPICS*)."""
        ...

    def register_topic_domain_handler(self, domain: TopicDomain, handler: CommandHandler) -> None:
        """LOOKUP / PARTITIONED_METADATA / PRODUCER / SUBSCRIBE naming a topic of `domain` (topic://)."""
        ...

    def add_http_routes(self, routes: Sequence[web.RouteDef]) -> None: ...

    def add_lifecycle(self, part: Lifecycle) -> None:
        """`start()` runs after the broker's stores are connected, `stop()` before they close."""
        ...

    def add_feature_flags(self, names: Iterable[str]) -> None:
        """FeatureFlags this broker announces in CONNECTED (e.g. supports_tc_metadata_discovery)."""
        ...


# ---- defaults: no transactions ---------------------------------------------------------------


class ChangeListeners:
    """A small list of change listeners; `fire()` calls each, logging (not raising) failures."""

    def __init__(self) -> None:
        self._listeners: list[ChangeListener] = []

    def add(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def remove(self, listener: ChangeListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def fire(self) -> None:
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                log.exception("read-horizon listener %r failed", listener)


def _disabled(what: str) -> TxnError:
    return TxnError(ServerError.NotAllowedError,
                    f"{what}: transactions are not available on this broker (transactionCoordinatorEnabled "
                    "is off, or no transaction path is installed for this topic)")


class NoTransactionBuffer:
    """Pulsar's TransactionBufferDisable: everything durable is readable; txn sends are refused."""

    def __init__(self, topic: TopicServices) -> None:
        self._topic = topic
        self._max_read = topic.ledger.last_confirmed
        self._listeners = ChangeListeners()

    async def recover(self) -> None:
        self._max_read = self._topic.ledger.last_confirmed

    async def append(self, txn: TxnId, data: bytes, info: EntryInfo) -> Position:
        raise _disabled(f"transactional send of {txn} to {self._topic.name}")

    def on_entry_added(self, position: Position, info: EntryInfo) -> None:
        self._max_read = position
        self._listeners.fire()

    def max_read_position(self) -> Position:
        return self._max_read

    def is_aborted(self, txn: TxnId, position: Position) -> bool:
        return False

    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        self._listeners.remove(listener)

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        raise _disabled(f"end of {txn} on {self._topic.name}")

    async def close(self) -> None:
        return None

    def stats(self) -> dict[str, Any]:
        return {"state": "NoSnapshot", "maxReadPosition": str(self._max_read)}


class NoPendingAck:
    """No transactional acks: nothing is ever pending."""

    def __init__(self, subscription: SubscriptionServices) -> None:
        self._subscription = subscription

    async def recover(self) -> None:
        return None

    async def individual_ack(self, txn: TxnId, acks: Sequence[TxnAck]) -> None:
        raise _disabled(f"transactional ack of {txn} on {self._subscription.name}")

    async def cumulative_ack(self, txn: TxnId, ack: TxnAck) -> None:
        raise _disabled(f"transactional ack of {txn} on {self._subscription.name}")

    def check_plain_ack(self, positions: Sequence[Position], cumulative: bool) -> None:
        return None

    def is_pending(self, position: Position) -> bool:
        return False

    def held_cumulatively(self, position: Position) -> bool:
        return False

    def pending_ack_set(self, position: Position) -> Sequence[int] | None:
        return None

    async def end_txn(self, txn: TxnId, action: TxnAction, low_watermark: int | None) -> None:
        raise _disabled(f"end of {txn} on subscription {self._subscription.name}")

    async def close(self) -> None:
        return None

    def stats(self) -> dict[str, Any]:
        return {"state": "None"}


class NoTransactionBufferProvider:
    def create(self, topic: TopicServices) -> TransactionBuffer:
        return NoTransactionBuffer(topic)


class NoPendingAckProvider:
    def create(self, subscription: SubscriptionServices) -> PendingAckHandle:
        return NoPendingAck(subscription)


class UnavailableCoordinator:
    """Answers every coordinator command with one error until a path registers a coordinator.

    Pulsar answers NotAllowedError while transactions are disabled, and
    TransactionCoordinatorNotFound for a coordinator it does not serve.
    """

    def __init__(self, error: ServerError, reason: str) -> None:
        self.error = error
        self.reason = reason

    def _fail(self) -> TxnError:
        return TxnError(self.error, self.reason)

    async def tc_client_connect(self, tc_id: int) -> None:
        raise self._fail()

    async def new_txn(self, tc_id: int, timeout_ms: int) -> TxnId:
        raise self._fail()

    async def add_partitions(self, txn: TxnId, partitions: Sequence[str]) -> None:
        raise self._fail()

    async def add_subscriptions(self, txn: TxnId, subscriptions: Sequence[tuple[str, str]]) -> None:
        raise self._fail()

    async def end_txn(self, txn: TxnId, action: TxnAction) -> None:
        raise self._fail()

    async def watch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        raise self._fail()

    async def unwatch_assignments(self, watch_id: int, channel: ClientChannel) -> None:
        return None


async def call_listener(callback: Callable[..., Any], *args: Any) -> None:
    """Call a sync or async listener, logging its failure instead of raising."""
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("listener %r failed", callback)
