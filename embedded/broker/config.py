"""The broker's config file and its Pulsar-named settings.

The config keys are the contract in docs/architecture.md ("Service processes");
`settings` holds Pulsar setting names (`transactionCoordinatorEnabled`,
`managedLedgerMaxEntriesPerLedger`, ...) so scenario files and the compose target
speak one vocabulary. `Settings` reads them with a type and Pulsar's default, and a
wrong type names the setting and what it should be.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PATHS = ("v4", "v4-batched", "v5")

DEFAULTS: dict[str, Any] = {
    # Pulsar's names and defaults (ServiceConfiguration), except where noted
    "metadataStoreSessionTimeoutMillis": 30_000,
    "keepAliveIntervalSeconds": 30,
    # what a broker does when its metadata session is lost: `reconnect` keeps serving its topics
    # and revalidates them on the next session; `shutdown` (Pulsar: the broker exits and is
    # restarted) is modelled as giving up every topic at once (embedded/broker/ownership.py)
    "zookeeperSessionExpiredPolicy": "reconnect",
    "maxMessageSize": 5 * 1024 * 1024,
    "allowAutoTopicCreation": True,
    "managedLedgerMaxEntriesPerLedger": 50_000,
    "managedLedgerCursorMaxEntriesPerLedger": 50_000,
    "managedLedgerDefaultMarkDeleteRateLimit": 1.0,
    "managedLedgerMaxUnackedRangesToPersist": 10_000,
    "managedLedgerCacheSizeMB": 64,
    "managedLedgerAddEntryTimeoutSeconds": 10,
    "dispatcherMaxReadBatchSize": 100,
    "dispatcherMaxRoundRobinBatchSize": 20,
    "maxUnackedMessagesPerConsumer": 50_000,
    "transactionCoordinatorEnabled": False,
    "transactionCoordinatorCount": 16,   # `--initial-num-transaction-coordinators`
    "transactionCoordinatorScalableTopicsEnabled": False,
    "scalableTopicsEnabled": False,
    "brokerClientOperationTimeoutSeconds": 10,   # our peer requests (Pulsar: brokerClient_operationTimeoutMs)
    # ours, experiment 6: 0 = a transaction decision that moves the read horizon wakes the
    # topic's dispatchers at once; N > 0 = dispatchers learn of it only by polling the
    # horizon every N ms (the alternative the PIP-473 review weighed); appends wake them either way
    "txnbenchDispatchHorizonPollMillis": 0,
}


class SettingError(ValueError):
    """A setting has the wrong type; the message names it and the expected type."""


class Settings(Mapping[str, Any]):
    """Pulsar-named settings over their defaults, read with a type."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values = {**DEFAULTS, **dict(values or {})}

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def _get(self, name: str, default: Any) -> Any:
        return self._values.get(name, DEFAULTS.get(name, default))

    def bool(self, name: str, default: bool = False) -> bool:
        value = self._get(name, default)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise SettingError(f"setting {name} must be true or false, not {value!r}")

    def int(self, name: str, default: int = 0) -> int:
        value = self._get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, str, float)):
            raise SettingError(f"setting {name} must be an integer, not {value!r}")
        try:
            return int(value)
        except ValueError:
            raise SettingError(f"setting {name} must be an integer, not {value!r}") from None

    def float(self, name: str, default: float = 0.0) -> float:
        value = self._get(name, default)
        if isinstance(value, bool):
            raise SettingError(f"setting {name} must be a number, not {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SettingError(f"setting {name} must be a number, not {value!r}") from None

    def str(self, name: str, default: str = "") -> str:
        return str(self._get(name, default))


@dataclass(frozen=True)
class BrokerConfig:
    name: str
    broker_id: int
    binary_port: int
    http_port: int
    advertised_service_url: str
    advertised_web_url: str
    metadata_address: str
    ledger_address: str
    data_dir: Path
    txn_path: str = "v4"
    cluster_name: str = "txnbench"
    peers: Mapping[int, str] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)
    host: str = "127.0.0.1"
    log_level: str = "INFO"
    parent_pid: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BrokerConfig:
        required = ("name", "broker_id", "binary_port", "http_port", "advertised_service_url",
                    "metadata_address", "ledger_address")
        missing = [k for k in required if k not in raw]
        if missing:
            raise SystemExit(f"broker config is missing {missing}; see docs/architecture.md "
                             "'Service processes' for the broker's keys")
        host = str(raw.get("host", "127.0.0.1"))
        if host != "127.0.0.1":
            raise SystemExit(f"broker config host {host!r}: the embedded cluster binds 127.0.0.1 only")
        txn_path = str(raw.get("txn_path", "v4"))
        if txn_path not in PATHS:
            raise SystemExit(f"broker config txn_path {txn_path!r}: use one of {', '.join(PATHS)}")
        for key in ("binary_port", "http_port"):
            value = raw[key]
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
                raise SystemExit(f"broker config {key} must be a port number (0 picks a free one), not {value!r}")
        peers_raw = raw.get("peers") or {}
        if not isinstance(peers_raw, Mapping):
            raise SystemExit("broker config peers must be an object {\"<broker id>\": \"127.0.0.1:PORT\"}")
        settings_raw = raw.get("settings") or {}
        if not isinstance(settings_raw, Mapping):
            raise SystemExit("broker config settings must be an object of Pulsar setting names")
        http_port = int(raw["http_port"])
        parent = raw.get("parent_pid")
        return cls(
            name=str(raw["name"]), broker_id=int(raw["broker_id"]), binary_port=int(raw["binary_port"]),
            http_port=http_port, advertised_service_url=str(raw["advertised_service_url"]),
            advertised_web_url=str(raw.get("advertised_web_url") or f"http://127.0.0.1:{http_port}"),
            metadata_address=str(raw["metadata_address"]), ledger_address=str(raw["ledger_address"]),
            data_dir=Path(str(raw.get("data_dir", "."))), txn_path=txn_path,
            cluster_name=str(raw.get("cluster_name", "txnbench")),
            peers={int(k): str(v) for k, v in peers_raw.items()}, settings=Settings(settings_raw),
            host=host, log_level=str(raw.get("log_level", "INFO")),
            parent_pid=int(parent) if parent else None,
        )
