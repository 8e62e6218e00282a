"""Client settings: frozen, validated once, shared by every part of a client."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from harness.client.topics import ServiceUrl


class TxnPath(Enum):
    """Which coordinator the client's transactions use.

    `v4` is PIP-31 (also `v4-batched`, whose batching is broker-side only): coordinators
    found through the partitions of the assign topic. `v5` is PIP-473: coordinators
    found by WATCH_TC_ASSIGNMENTS, commands flagged `scalable`, and `topic://` names.
    """

    V4 = "v4"
    V5 = "v5"

    @classmethod
    def parse(cls, text: str | TxnPath) -> TxnPath:
        """`v4`, `v4-batched` (same client path as v4) or `v5`.

        Raises:
            ValueError: another value.
        """
        if isinstance(text, TxnPath):
            return text
        if text in ("v4", "v4-batched"):
            return cls.V4
        if text == "v5":
            return cls.V5
        raise ValueError(f"txn_path {text!r} is not one of v4, v4-batched, v5")


@dataclass(frozen=True)
class BatchingConfig:
    """Producer batching: a batch is sent when it holds `max_messages` or `max_bytes`,
    or `max_delay_s` after its first message (Java's defaults: 1000, 128 KiB, 1 ms).

    On a partitioned topic, Java's batching producer sends unkeyed messages to one partition
    for `partition_switch_every` times `max_delay_s` (its `batchingPartitionSwitchFrequency-
    ByPublishDelay`, default 10: 10 ms), so a burst lands in one batch on one partition
    instead of one message per partition (RoundRobinPartitionMessageRouterImpl)."""

    max_messages: int = 1000
    max_bytes: int = 128 * 1024
    max_delay_s: float = 0.001
    partition_switch_every: int = 10

    @property
    def partition_switch_ms(self) -> int:
        """How long unkeyed messages stay on one partition (Java: at least 1 ms)."""
        return max(1, round(self.max_delay_s * 1000 * self.partition_switch_every))

    def __post_init__(self) -> None:
        if self.max_messages < 1:
            raise ValueError(f"batching max_messages must be >= 1, got {self.max_messages}")
        if self.max_bytes < 1:
            raise ValueError(f"batching max_bytes must be >= 1, got {self.max_bytes}")
        if self.max_delay_s <= 0:
            raise ValueError(f"batching max_delay_s must be > 0, got {self.max_delay_s}")
        if self.partition_switch_every < 1:
            raise ValueError(f"batching partition_switch_every must be >= 1, got {self.partition_switch_every}")


@dataclass(frozen=True)
class ClientConfig:
    """Everything a `PulsarClient` is configured with.

    Times are seconds. Defaults follow the Java client where it has one
    (operation timeout 30 s, keep-alive 30 s, 20 lookup redirects, backoff from 100 ms);
    the reconnect backoff is capped lower (5 s instead of 60 s) so a harness recovers
    quickly after a healed fault.
    """

    service_url: str
    txn_path: TxnPath = TxnPath.V4
    operation_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    keepalive_interval_s: float = 30.0
    max_lookup_redirects: int = 20
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0
    reconnect_timeout_s: float = 60.0
    """A background reconnect gives up after this long; the next operation starts another."""
    max_end_txn_attempts: int = 5
    listener_name: str | None = None
    """Pulsar's `advertised_listener_name` sent with lookups: brokers with several advertised
    listeners (e.g. an internal one and an external one through Toxiproxy) answer with the
    address of this listener. None asks for the broker's default."""
    client_version: str = "txnbench-client"
    max_message_size: int = 5 * 1024 * 1024
    hosts: tuple[tuple[str, int], ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "txn_path", TxnPath.parse(self.txn_path))
        object.__setattr__(self, "hosts", ServiceUrl.parse(self.service_url).hosts)
        for name in ("operation_timeout_s", "connect_timeout_s", "keepalive_interval_s",
                     "initial_backoff_s", "max_backoff_s", "reconnect_timeout_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if self.max_lookup_redirects < 1:
            raise ValueError(f"max_lookup_redirects must be >= 1, got {self.max_lookup_redirects}")
        if self.max_end_txn_attempts < 1:
            raise ValueError(f"max_end_txn_attempts must be >= 1, got {self.max_end_txn_attempts}")

    @property
    def is_v5(self) -> bool:
        """Whether transactions use the PIP-473 coordinator (and `scalable` flags)."""
        return self.txn_path is TxnPath.V5

    @property
    def service_urls(self) -> list[str]:
        """One `pulsar://host:port` per service host."""
        return [f"pulsar://{host}:{port}" for host, port in self.hosts]
