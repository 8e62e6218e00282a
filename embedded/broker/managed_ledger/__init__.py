"""Managed ledgers: a topic (or a transaction log) as a list of ledgers on the ledger store.

`api` is what other components may use (the transaction paths included); `ledger`,
`cursor`, `cursor_state`, `ranges`, `cache`, `metadata` and `factory` implement it.
"""

from embedded.broker.managed_ledger.api import (
    CursorClosed,
    EntryListener,
    ManagedCursorApi,
    ManagedLedgerApi,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFactoryApi,
    ManagedLedgerFenced,
    ManagedLedgerTerminated,
)

__all__ = [
    "CursorClosed", "EntryListener", "ManagedCursorApi", "ManagedLedgerApi", "ManagedLedgerConfig",
    "ManagedLedgerError", "ManagedLedgerFactoryApi", "ManagedLedgerFenced", "ManagedLedgerTerminated",
]
