"""The ledger store's state machine: pure, no I/O, so every rule is unit-testable.

Theory of operation. The book holds every ledger's state and answers each command
at once, in the order commands arrive, returning the journal record that makes the
change durable. Two positions per ledger follow BookKeeper's writer:

* `last_pushed`: the last entry id handed out. An append is validated against the
  ledger's state, gets `last_pushed + 1`, and its record goes to the journal.
* `last_confirmed`: the last entry id whose record is durable (`confirm`). Reads and
  `info` expose only confirmed entries, so nothing a reader sees can vanish in a crash.

A close or a fence takes effect immediately (later appends fail at once) and records
the current `last_pushed`. Its answer is sent only once its record is durable; the
journal is a single ordered log, so by then every append accepted before it is
durable too and the returned last entry id is exact. That is what makes fencing a
safe hand-over: a recovering reader fences, gets `last_entry_id`, and can read every
entry up to it, while the deposed writer's further appends fail `Fenced`.

State transitions (`SEAL_TRANSITIONS`): close moves open and fenced ledgers to
closed (a recoverer closes what it fenced, as BookKeeper's recovery does) and is
idempotent on closed ones; fence moves open ledgers to fenced and leaves closed
ones closed (nothing left to fence). Appends need an open ledger.

A creation is applied when its record is durable: until then the id is reserved
(ids only grow, never reused) but the ledger is not listed, so an id can never be
seen by anyone and then lost in a crash. Deletions apply at once.

Recovery replays the journal's records in order through `replay` / `replay_entry`,
which say whether each record applied. Reclaiming segments (see `reclaim`) removes a
deleted ledger's records from some segments but not others, so replay may meet
records of a ledger it never saw created (`UNKNOWN_LEDGER`) or a deleted ledger's
entries with a gap (`INCONSISTENT`). Both are fine exactly when that ledger's
deletion comes later in the journal; the caller (recovery) checks that at the end
and otherwise reports the journal as corrupt.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from embedded.ledger.model import (
    MAX_ENTRY_BYTES,
    Fenced,
    InvalidRequest,
    LedgerClosed,
    LedgerInfo,
    LedgerKind,
    LedgerMetadata,
    LedgerState,
    NoSuchEntry,
    NoSuchLedger,
)
from embedded.ledger.records import (
    CreateRecord,
    DeleteRecord,
    EntryRecord,
    JournalCorrupt,
    Record,
    SealRecord,
)

FIRST_LEDGER_ID = 1

SEAL_TRANSITIONS: dict[tuple[str, LedgerState], LedgerState] = {
    ("close", LedgerState.OPEN): LedgerState.CLOSED,
    ("close", LedgerState.CLOSED): LedgerState.CLOSED,
    ("close", LedgerState.FENCED): LedgerState.CLOSED,
    ("fence", LedgerState.OPEN): LedgerState.FENCED,
    ("fence", LedgerState.CLOSED): LedgerState.CLOSED,
    ("fence", LedgerState.FENCED): LedgerState.FENCED,
}


class Replayed(Enum):
    APPLIED = "applied"
    UNKNOWN_LEDGER = "unknown ledger"
    INCONSISTENT = "inconsistent with earlier records"


@dataclass
class Ledger:
    ledger_id: int
    metadata: LedgerMetadata
    state: LedgerState = LedgerState.OPEN
    last_pushed: int = -1
    last_confirmed: int = -1

    def info(self) -> LedgerInfo:
        return LedgerInfo(self.ledger_id, self.state, self.last_confirmed, self.metadata)


class LedgerBook:
    """All ledgers: commands return journal records; `confirm` marks them durable."""

    def __init__(self, next_ledger_id: int = FIRST_LEDGER_ID) -> None:
        self.next_ledger_id = next_ledger_id
        self.ledgers: dict[int, Ledger] = {}
        self.state_counts: dict[LedgerState, int] = dict.fromkeys(LedgerState, 0)

    # ---- commands ------------------------------------------------------------------------------

    def create(self, metadata: LedgerMetadata) -> CreateRecord:
        ledger_id = self.next_ledger_id
        self.next_ledger_id += 1
        return CreateRecord(ledger_id, metadata)

    def append(self, ledger_id: int, payload: bytes) -> EntryRecord:
        if len(payload) > MAX_ENTRY_BYTES:
            raise InvalidRequest(f"entry of {len(payload)} bytes exceeds the limit of {MAX_ENTRY_BYTES} bytes "
                                 "(5 MB plus framing); split it into smaller entries")
        ledger = self._get(ledger_id)
        if ledger.state is LedgerState.FENCED:
            raise Fenced(f"ledger {ledger_id} is fenced (last entry {ledger.last_pushed}): "
                         "a reader recovered it; this writer must stop and open a new ledger")
        if ledger.state is LedgerState.CLOSED:
            raise LedgerClosed(f"ledger {ledger_id} is closed at entry {ledger.last_pushed}; "
                               "append to a new ledger")
        ledger.last_pushed += 1
        return EntryRecord(ledger_id, ledger.last_pushed, payload)

    def close(self, ledger_id: int) -> SealRecord:
        return self._seal("close", ledger_id)

    def fence(self, ledger_id: int) -> SealRecord:
        return self._seal("fence", ledger_id)

    def delete(self, ledger_id: int) -> DeleteRecord:
        ledger = self._get(ledger_id)
        self._remove(ledger)
        return DeleteRecord(ledger_id)

    def _seal(self, action: str, ledger_id: int) -> SealRecord:
        ledger = self._get(ledger_id)
        self._set_state(ledger, SEAL_TRANSITIONS[(action, ledger.state)])
        return SealRecord(ledger_id, ledger.state, ledger.last_pushed)

    # ---- durability ----------------------------------------------------------------------------

    def confirm(self, record: Record) -> None:
        """`record` (returned by a command) is durable now; records are confirmed in order."""
        if isinstance(record, EntryRecord):
            ledger = self.ledgers.get(record.ledger_id)
            if ledger is not None:  # None: deleted while the append was in flight
                if record.entry_id != ledger.last_confirmed + 1:
                    raise AssertionError(f"ledger {record.ledger_id}: confirmed entry {record.entry_id} "
                                         f"after {ledger.last_confirmed}")
                ledger.last_confirmed = record.entry_id
        elif isinstance(record, CreateRecord):
            self._add(Ledger(record.ledger_id, record.metadata))

    # ---- queries -------------------------------------------------------------------------------

    def info(self, ledger_id: int) -> LedgerInfo:
        return self._get(ledger_id).info()

    def list_ledgers(self, kind: LedgerKind | None = None) -> list[LedgerInfo]:
        return [self.ledgers[i].info() for i in sorted(self.ledgers)
                if kind is None or self.ledgers[i].metadata.kind is kind]

    def kind_of(self, ledger_id: int) -> LedgerKind | None:
        ledger = self.ledgers.get(ledger_id)
        return ledger.metadata.kind if ledger is not None else None

    def check_read(self, ledger_id: int, first: int, last: int) -> None:
        """Raise unless entries first..last exist and are durable."""
        if first < 0 or last < first:
            raise InvalidRequest(f"read range {first}..{last} is empty or negative; need 0 <= first <= last")
        ledger = self._get(ledger_id)
        if last > ledger.last_confirmed:
            have = f"entries 0..{ledger.last_confirmed}" if ledger.last_confirmed >= 0 else "no entries"
            raise NoSuchEntry(f"ledger {ledger_id} has {have}; entry {max(first, ledger.last_confirmed + 1)} "
                              "does not exist (yet)")

    # ---- recovery ------------------------------------------------------------------------------

    def replay(self, record: CreateRecord | SealRecord | DeleteRecord) -> Replayed:
        """Apply a durable record read back from the journal (in journal order)."""
        if isinstance(record, CreateRecord):
            if record.ledger_id in self.ledgers:
                raise JournalCorrupt(f"ledger {record.ledger_id} is created twice")
            self._add(Ledger(record.ledger_id, record.metadata))
            self.next_ledger_id = max(self.next_ledger_id, record.ledger_id + 1)
            return Replayed.APPLIED
        ledger = self.ledgers.get(record.ledger_id)
        if ledger is None:
            self.next_ledger_id = max(self.next_ledger_id, record.ledger_id + 1)
            return Replayed.UNKNOWN_LEDGER
        if isinstance(record, DeleteRecord):
            self._remove(ledger)
            return Replayed.APPLIED
        if record.last_entry_id != ledger.last_pushed:
            return Replayed.INCONSISTENT
        self._set_state(ledger, record.state)
        return Replayed.APPLIED

    def replay_entry(self, ledger_id: int, entry_id: int) -> Replayed:
        """The hot path of recovery: an entry read back from the journal."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            self.next_ledger_id = max(self.next_ledger_id, ledger_id + 1)
            return Replayed.UNKNOWN_LEDGER
        if entry_id != ledger.last_pushed + 1 or ledger.state is not LedgerState.OPEN:
            return Replayed.INCONSISTENT
        ledger.last_pushed = ledger.last_confirmed = entry_id
        return Replayed.APPLIED

    # ---- internals -----------------------------------------------------------------------------

    def _get(self, ledger_id: int) -> Ledger:
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            raise NoSuchLedger(f"no ledger {ledger_id} (never created, or deleted)")
        return ledger

    def _add(self, ledger: Ledger) -> None:
        self.ledgers[ledger.ledger_id] = ledger
        self.state_counts[ledger.state] += 1

    def _remove(self, ledger: Ledger) -> None:
        del self.ledgers[ledger.ledger_id]
        self.state_counts[ledger.state] -= 1

    def _set_state(self, ledger: Ledger, state: LedgerState) -> None:
        self.state_counts[ledger.state] -= 1
        ledger.state = state
        self.state_counts[state] += 1
