"""The v4 path's settings, read once from the broker's Pulsar-named settings and validated.

Names and defaults are Pulsar's (`ServiceConfiguration`), so a scenario file means the
same to the embedded cluster and to a real broker. The batched-write checks are
Pulsar's `TransactionBatchedWriteValidator`: when batched writes are enabled, MaxRecords
must be at least 10, MaxSize at least 128 KiB and MaxDelay at least 1 ms, otherwise the
broker refuses to start (`InvalidV4Settings`, naming the setting and the fix).

Settings that are ours, not Pulsar's, start with `txnbench`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from embedded.broker.config import Settings

MIN_BATCHED_RECORDS = 10
MIN_BATCHED_SIZE = 128 * 1024
MIN_BATCHED_DELAY_MS = 1

DEFAULTS: dict[str, Any] = {
    "transactionCoordinatorCount": 16,
    "transactionLogBatchedWriteEnabled": False,
    "transactionLogBatchedWriteMaxRecords": 512,
    "transactionLogBatchedWriteMaxSize": 4 * 1024 * 1024,
    "transactionLogBatchedWriteMaxDelayInMillis": 1,
    "transactionPendingAckBatchedWriteEnabled": False,
    "transactionPendingAckBatchedWriteMaxRecords": 512,
    "transactionPendingAckBatchedWriteMaxSize": 4 * 1024 * 1024,
    "transactionPendingAckBatchedWriteMaxDelayInMillis": 1,
    "transactionBufferSnapshotMaxTransactionCount": 1000,
    "transactionBufferSnapshotMinTimeInMillis": 5000,
    "transactionBufferClientOperationTimeoutInMills": 3000,
    # ours: Pulsar's TransactionMetadataStoreService retries END_TXN every second (a constant there)
    "txnbenchTxnEndRetryIntervalMillis": 1000,
    # ours: how long TC_CLIENT_CONNECT waits for a coordinator that is still replaying its log
    "txnbenchTcLoadWaitMillis": 30_000,
    # ours: how long END_TXN's answer waits while the fan-out is retried. Pulsar keeps the
    # client's future pending across retries without a bound (the client's own operation
    # timeout ends the wait); we bound it, longer than the clients' 30 s timeout.
    "txnbenchTxnEndResponseTimeoutMillis": 60_000,
}


class InvalidV4Settings(ValueError):
    """A v4 setting is out of range; the broker must not start with it."""


@dataclass(frozen=True)
class BatchedWriteConfig:
    """PIP-160's thresholds for one log (the coordinator log or a pending-ack log)."""

    enabled: bool = False
    max_records: int = 512
    max_size: int = 4 * 1024 * 1024
    max_delay_ms: int = 1

    def validate(self, prefix: str) -> None:
        """Pulsar's TransactionBatchedWriteValidator for the settings named `<prefix>*`."""
        if not self.enabled:
            return
        if self.max_records < MIN_BATCHED_RECORDS:
            raise InvalidV4Settings(
                f"setting {prefix}MaxRecords is {self.max_records}; with {prefix}Enabled=true it must be at "
                f"least {MIN_BATCHED_RECORDS} (Pulsar's default is 512): raise it or disable batched writes")
        if self.max_size < MIN_BATCHED_SIZE:
            raise InvalidV4Settings(
                f"setting {prefix}MaxSize is {self.max_size} bytes; with {prefix}Enabled=true it must be at "
                f"least {MIN_BATCHED_SIZE} (128 KiB; Pulsar's default is 4194304): raise it or disable batched "
                "writes")
        if self.max_delay_ms < MIN_BATCHED_DELAY_MS:
            raise InvalidV4Settings(
                f"setting {prefix}MaxDelayInMillis is {self.max_delay_ms}; with {prefix}Enabled=true it must "
                f"be at least {MIN_BATCHED_DELAY_MS} (Pulsar's default is 1): raise it or disable batched writes")


@dataclass(frozen=True)
class V4Settings:
    coordinator_count: int = 16
    log_batching: BatchedWriteConfig = BatchedWriteConfig()
    pending_ack_batching: BatchedWriteConfig = BatchedWriteConfig()
    snapshot_max_txn_count: int = 1000
    snapshot_min_interval_ms: int = 5000
    participant_timeout_ms: int = 3000
    end_retry_interval_ms: int = 1000
    tc_load_wait_ms: int = 30_000
    end_response_timeout_ms: int = 60_000
    max_entries_per_ledger: int = 50_000

    @classmethod
    def from_settings(cls, settings: Settings | Mapping[str, Any]) -> V4Settings:
        """Read and validate; raises InvalidV4Settings (or the settings' own type error)."""
        s = settings if isinstance(settings, Settings) else Settings(settings)

        def integer(name: str) -> int:
            return s.int(name, DEFAULTS[name])

        def flag(name: str) -> bool:
            return s.bool(name, DEFAULTS[name])

        log = BatchedWriteConfig(flag("transactionLogBatchedWriteEnabled"),
                                 integer("transactionLogBatchedWriteMaxRecords"),
                                 integer("transactionLogBatchedWriteMaxSize"),
                                 integer("transactionLogBatchedWriteMaxDelayInMillis"))
        pending_ack = BatchedWriteConfig(flag("transactionPendingAckBatchedWriteEnabled"),
                                         integer("transactionPendingAckBatchedWriteMaxRecords"),
                                         integer("transactionPendingAckBatchedWriteMaxSize"),
                                         integer("transactionPendingAckBatchedWriteMaxDelayInMillis"))
        pending_ack.validate("transactionPendingAckBatchedWrite")
        log.validate("transactionLogBatchedWrite")
        config = cls(
            coordinator_count=integer("transactionCoordinatorCount"),
            log_batching=log,
            pending_ack_batching=pending_ack,
            snapshot_max_txn_count=integer("transactionBufferSnapshotMaxTransactionCount"),
            snapshot_min_interval_ms=integer("transactionBufferSnapshotMinTimeInMillis"),
            participant_timeout_ms=integer("transactionBufferClientOperationTimeoutInMills"),
            end_retry_interval_ms=integer("txnbenchTxnEndRetryIntervalMillis"),
            tc_load_wait_ms=integer("txnbenchTcLoadWaitMillis"),
            end_response_timeout_ms=integer("txnbenchTxnEndResponseTimeoutMillis"),
            max_entries_per_ledger=s.int("managedLedgerMaxEntriesPerLedger", 50_000),
        )
        if config.coordinator_count < 1:
            raise InvalidV4Settings(f"setting transactionCoordinatorCount is {config.coordinator_count}; "
                                    "it must be at least 1 when transactions are enabled")
        for name, value in (("transactionBufferClientOperationTimeoutInMills", config.participant_timeout_ms),
                            ("txnbenchTxnEndRetryIntervalMillis", config.end_retry_interval_ms),
                            ("txnbenchTxnEndResponseTimeoutMillis", config.end_response_timeout_ms),
                            ("transactionBufferSnapshotMinTimeInMillis", config.snapshot_min_interval_ms)):
            if value <= 0:
                raise InvalidV4Settings(f"setting {name} is {value}; it must be a positive number of milliseconds")
        return config
