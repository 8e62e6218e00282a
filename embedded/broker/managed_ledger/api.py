"""The managed-ledger API other components use: topics, and the transaction paths' logs.

Theory of operation (Pulsar's ManagedLedger / ManagedCursor, on our ledger store).
A managed ledger is an append-only log named like `t/ns/persistent/x`. It is a list of
ledgers in the ledger store; the list lives in the metadata store at
`/managed-ledgers/<name>` and is changed only by compare-and-set, so two brokers can
never both believe they write it. Opening a managed ledger *fences* its last ledger
(the previous writer, if alive, can append no more) and starts a new one.

* `append(data, info)` returns a future of the entry's `Position`; appends are issued
  in call order and confirmed in call order. A future resolves only once the entry is
  durable. Entry listeners (`add_listener`) are called for each confirmed entry, in
  log order, *before* its future resolves.
* A failed append (ledger store unreachable, timeout) rolls over to a new ledger and
  re-issues the failed and later appends there, as Pulsar does; entries the old ledger
  may hold past its last *confirmed* entry are never read. If no new ledger can be
  created in time, the appends fail with `ManagedLedgerError` (the producer's client
  reconnects and resends).
* `ManagedLedgerFenced`: another broker took the log over (it fenced our ledger or
  changed the ledger list). Nothing more can be written; the owner must let go.
* Cursors (`open_cursor`) keep a subscription's position: the mark-delete position
  (everything up to it is acknowledged), individually acknowledged entries after it,
  and per-entry batch-index ack sets. Acknowledgements are applied in memory at once
  and persisted to the cursor's own ledger (kind `cursor`) in groups; `flush()`
  returns once everything acknowledged before the call is durable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from embedded.broker.entry import PLAIN, Entry, EntryInfo
from embedded.broker.position import Position
from embedded.ledger.model import LedgerKind


class ManagedLedgerError(Exception):
    """An operation failed; the entry (if an append) was not written."""


class ManagedLedgerFenced(ManagedLedgerError):
    """Another broker has taken this managed ledger over; this one can no longer write it."""


class ManagedLedgerTerminated(ManagedLedgerError):
    """The managed ledger was terminated: no more appends (Pulsar's TopicTerminatedError)."""


class CursorClosed(ManagedLedgerError):
    """The cursor was closed (its topic unloaded) before the operation finished."""


EntryListener = Callable[[Position, EntryInfo], None]
"""Called for every confirmed entry, in log order, before the append's future resolves."""


@dataclass(frozen=True)
class ManagedLedgerConfig:
    """How one managed ledger behaves.

    Attributes:
        kind: labels its ledgers for the ledger store's I/O metrics (`data`, `txn-log`,
            `pending-ack`, `tb-snapshot`, ...); its cursors' ledgers are always `cursor`.
        max_entries_per_ledger: roll over to a new ledger after this many entries
            (Pulsar's `managedLedgerMaxEntriesPerLedger`).
        trim_consumed: delete ledgers every durable cursor has fully acknowledged
            (logs such as the coordinator log); data topics keep everything
            (infinite retention, so a final read from the earliest position sees all).
        cache_entries: keep recently appended entries in the broker's entry cache.
    """

    kind: LedgerKind = LedgerKind.DATA
    max_entries_per_ledger: int = 50_000
    trim_consumed: bool = False
    cache_entries: bool = True


class ManagedCursorApi(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def mark_delete_position(self) -> Position:
        """Everything at or before this position is acknowledged."""
        ...

    def is_acked(self, position: Position) -> bool: ...

    def batch_ack_set(self, position: Position) -> list[int] | None:
        """The entry's batch ack set (bit i set: message i is not yet acknowledged), if partly acked."""
        ...

    def acknowledge(self, acks: Sequence[tuple[Position, Sequence[int] | None]]) -> bool:
        """Individual acks; an ack set acknowledges only the batch indexes whose bits are clear.

        Returns whether the mark-delete position moved.
        """
        ...

    def acknowledge_cumulative(self, position: Position, ack_set: Sequence[int] | None = None) -> bool:
        """Everything before `position`, and `position` itself (or, with `ack_set`, part of its batch)."""
        ...

    async def flush(self) -> None:
        """Return once every acknowledgement made before the call is durable (CursorClosed if closed first)."""
        ...


class ManagedLedgerApi(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ManagedLedgerConfig: ...

    @property
    def last_confirmed(self) -> Position:
        """The last durable entry; `(L, -1)` when the ledger has no entry yet."""
        ...

    @property
    def terminated_position(self) -> Position | None: ...

    async def metadata_unchanged(self) -> bool:
        """Whether the stored ledger list is still the version this instance installed (another
        broker that opened the ledger meanwhile replaced it). Raises what the store raises."""
        ...

    def append(self, data: bytes, info: EntryInfo = PLAIN) -> asyncio.Future[Position]:
        """Append one entry; the future resolves with its position once it is durable."""
        ...

    async def read(self, start: Position, max_entries: int, *, max_position: Position | None = None) -> list[Entry]:
        """Up to `max_entries` entries from `start` (inclusive) onwards, none past `max_position`."""
        ...

    async def read_entry(self, position: Position) -> Entry: ...

    def next_position(self, position: Position) -> Position:
        """The position of the entry after `position` (possibly not yet written)."""
        ...

    def add_listener(self, listener: EntryListener) -> None: ...

    def remove_listener(self, listener: EntryListener) -> None: ...

    async def open_cursor(self, name: str, *, initial_position: Position | None = None) -> ManagedCursorApi:
        """Open (or create) the durable cursor `name`; a new one starts after `initial_position`
        (default: the last confirmed entry, i.e. only new entries)."""
        ...

    async def delete_cursor(self, name: str) -> None: ...

    def cursors(self) -> Mapping[str, ManagedCursorApi]: ...

    async def terminate(self) -> Position:
        """No more appends; returns the last entry's position."""
        ...

    async def close(self) -> None: ...

    async def delete(self) -> None:
        """Delete the managed ledger, its cursors and its ledgers."""
        ...


class ManagedLedgerFactoryApi(Protocol):
    async def open(self, name: str, config: ManagedLedgerConfig = ManagedLedgerConfig()) -> ManagedLedgerApi:
        """Open (creating when absent) the managed ledger `name` (e.g. `pulsar/system/persistent/x`)."""
        ...

    async def exists(self, name: str) -> bool: ...

    async def delete(self, name: str) -> None: ...
