"""ManagedCursor: a subscription's acknowledgement state, persisted to its own ledger.

Theory of operation (Pulsar's ManagedCursorImpl). Acknowledgements change the
in-memory `CursorState` at once; persisting it is a background task per cursor that
appends a snapshot of the whole state (JSON) to the cursor's ledger (kind `cursor`).
At most one append is in flight; everything acknowledged meanwhile goes into the
next snapshot, so persistence is grouped however fast acks arrive. Snapshots follow
acknowledgements no more often than `managedLedgerDefaultMarkDeleteRateLimit` per
second, except when someone waits: `flush()` (an ACK with a request_id) asks for the
next snapshot at once and returns when a snapshot containing its acknowledgement is
durable. So an acknowledgement that got its ACK_RESPONSE survives a broker crash.

Which ledger: `/managed-ledgers/<ml>/<cursor>` names it (CAS). On recovery the new
owner fences that ledger (a zombie owner can append no more), reads its last entry,
and starts a fresh ledger with its first persist (create, append, CAS the record,
delete the old one). A cursor ledger is also replaced after
`managedLedgerCursorMaxEntriesPerLedger` snapshots. A CAS conflict or a fenced cursor
ledger means another broker took the topic: the cursor stops persisting and the
managed ledger is told (its owner unloads the topic).

Non-durable cursors (Readers) keep the same state in memory only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from embedded import tracing
from embedded.broker.managed_ledger.api import CursorClosed, ManagedLedgerError
from embedded.broker.managed_ledger.cursor_state import CursorState
from embedded.broker.managed_ledger.metadata import CursorRecord
from embedded.broker.position import Position
from embedded.ledger.model import Fenced, LedgerError, LedgerKind, LedgerUnavailable, NoSuchLedger
from embedded.metadata.model import MUST_NOT_EXIST, BadVersion, MetadataError, MetadataUnavailable

if TYPE_CHECKING:
    from embedded.broker.managed_ledger.ledger import ManagedLedger

log = logging.getLogger(__name__)

_BACKOFF = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
INLINE_RANGES = 1000   # ranges kept in the metadata record's fallback state


class ManagedCursor:
    def __init__(self, ml: ManagedLedger, name: str, state: CursorState, *, durable: bool,
                 record_version: int | None = None, old_ledger: int | None = None) -> None:
        self.ml = ml
        self._name = name
        self.state = state
        self._durable = durable
        self._record_version = record_version
        self._old_ledger = old_ledger          # the ledger we recovered from: deleted after our first switch
        self._ledger_id: int | None = None     # the ledger we append snapshots to
        self._ledger_entries = 0
        self._version = 0                      # mutations so far
        self._persisted = 0                    # mutations covered by a durable snapshot
        self._persisted_state: dict[str, Any] = state.to_json(0)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._urgent = False
        self._last_persist = 0.0
        self._closed = False
        self._fenced = False
        self._task: asyncio.Task[None] | None = None
        settings = ml.cursor_settings
        rate = float(settings.get("managedLedgerDefaultMarkDeleteRateLimit", 1.0))
        self._min_interval = 1.0 / rate if rate > 0 else 0.0
        self._max_entries = int(settings.get("managedLedgerCursorMaxEntriesPerLedger", 50_000))
        self._max_ranges = int(settings.get("managedLedgerMaxUnackedRangesToPersist", 10_000))
        if durable:
            self._task = asyncio.get_running_loop().create_task(self._persist_loop())

    # ---- opening ------------------------------------------------------------------------------

    @classmethod
    async def open(cls, ml: ManagedLedger, name: str, *, initial_position: Position | None) -> ManagedCursor:
        found = await ml.store.read_cursor(ml.name, name)
        if found is None:
            start = initial_position if initial_position is not None else ml.last_confirmed
            state = CursorState(start, ml.next_position)
            record = CursorRecord(None, state.to_json(INLINE_RANGES))
            try:
                version = await ml.store.put_cursor(ml.name, name, record, MUST_NOT_EXIST)
            except BadVersion:
                return await cls.open(ml, name, initial_position=initial_position)
            log.info("%s: created cursor %s at %s", ml.name, name, start)
            return cls(ml, name, state, durable=True, record_version=version)
        record, version = found
        state_json = record.state
        if record.ledger_id is not None:
            try:
                last = await ml.ledgers.fence(record.ledger_id)
                if last >= 0:
                    (data,) = await ml.ledgers.read(record.ledger_id, last, last)
                    state_json = json.loads(data)
            except NoSuchLedger:
                log.warning("%s: cursor %s ledger %d is gone; using the state in its record",
                            ml.name, name, record.ledger_id)
        if "md" not in state_json:
            state_json = {"md": ml.last_confirmed.to_json()}
        state = CursorState.from_json(state_json, ml.next_position)
        log.info("%s: recovered cursor %s at %s (%d individually acked)", ml.name, name,
                 state.mark_delete, len(state.acked))
        return cls(ml, name, state, durable=True, record_version=version, old_ledger=record.ledger_id)

    @classmethod
    def non_durable(cls, ml: ManagedLedger, name: str, start: Position) -> ManagedCursor:
        return cls(ml, name, CursorState(start, ml.next_position), durable=False)

    # ---- ManagedCursorApi ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def durable(self) -> bool:
        return self._durable

    @property
    def mark_delete_position(self) -> Position:
        return self.state.mark_delete

    @property
    def persisted_mark_delete_position(self) -> Position:
        return Position.from_json(self._persisted_state.get("md", [-1, -1]))

    def is_acked(self, position: Position) -> bool:
        return self.state.is_acked(position)

    def batch_ack_set(self, position: Position) -> list[int] | None:
        return self.state.batch_ack_set(position)

    def acknowledge(self, acks: Sequence[tuple[Position, Sequence[int] | None]]) -> bool:
        moved = False
        state = self.state
        for position, ack_set in acks:
            if state.ack(position, ack_set):
                moved = True
        self._mutated()
        return moved

    def acknowledge_cumulative(self, position: Position, ack_set: Sequence[int] | None = None) -> bool:
        moved = self.state.ack_cumulative(position, ack_set)
        self._mutated()
        return moved

    def reset(self, mark_delete: Position) -> None:
        """Seek: continue after `mark_delete`, forgetting individual acks; persisted promptly."""
        self.state.reset(mark_delete)
        self._mutated(urgent=True)

    async def flush(self) -> None:
        if not self._durable or self._persisted >= self._version:
            return
        if self._closed or self._fenced:
            raise CursorClosed(f"cursor {self._name} of {self.ml.name} is closed")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tracing.track_future(tracing.CallKind.CURSOR_FLUSH, future)
        self._waiters.append((self._version, future))
        self._urgent = True
        self._wake.set()
        await future

    def _mutated(self, urgent: bool = False) -> None:
        if not self._durable:
            return
        self._version += 1
        if urgent:
            self._urgent = True
        self._wake.set()

    # ---- persistence --------------------------------------------------------------------------

    async def _persist_loop(self) -> None:
        failures = 0
        while not self._closed:   # bounded by the cursor's life; cancelled by close()
            await self._wake.wait()
            self._wake.clear()
            if self._persisted >= self._version:
                continue
            due = self._last_persist + self._min_interval
            for _ in range(1000):   # bounded: each round waits for a wake-up or the deadline
                remaining = due - time.monotonic()
                if self._urgent or self._closed or remaining <= 0:
                    break
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), remaining)   # only flush() makes it urgent
            if self._closed:
                return
            self._urgent = False
            target = self._version
            snapshot = self.state.to_json(self._max_ranges)
            try:
                await self._write(snapshot)
            except (BadVersion, Fenced) as err:
                self._on_fenced(err)
                return
            except (LedgerError, LedgerUnavailable, MetadataError, MetadataUnavailable) as err:
                failures += 1
                pause = _BACKOFF[min(failures - 1, len(_BACKOFF) - 1)]
                log.warning("%s: cannot persist cursor %s (%s); retrying in %.2fs", self.ml.name, self._name,
                            err, pause)
                self._urgent = self._urgent or bool(self._waiters)
                await asyncio.sleep(pause)
                self._wake.set()
                continue
            failures = 0
            self._last_persist = time.monotonic()
            self._persisted = target
            self._persisted_state = snapshot
            done = [w for w in self._waiters if w[0] <= target]
            self._waiters = [w for w in self._waiters if w[0] > target]
            for _, future in done:
                if not future.done():
                    future.set_result(None)
            if self._persisted < self._version:
                self._urgent = self._urgent or bool(self._waiters)
                self._wake.set()

    async def _write(self, snapshot: dict[str, Any]) -> None:
        data = json.dumps(snapshot, separators=(",", ":")).encode()
        ledgers = self.ml.ledgers
        metrics = self.ml.metrics
        if self._ledger_id is None or self._ledger_entries >= self._max_entries:
            new_id = await ledgers.create_ledger(LedgerKind.CURSOR, f"{self.ml.name}/{self._name}")
            metrics.ml_ledgers_created.inc(kind=LedgerKind.CURSOR.value)
            try:
                await ledgers.append(new_id, data)
                record = CursorRecord(new_id, self.state.to_json(INLINE_RANGES))
                expected = self._record_version if self._record_version is not None else MUST_NOT_EXIST
                self._record_version = await self.ml.store.put_cursor(self.ml.name, self._name, record, expected)
                metrics.ml_metadata_updates.inc(result="ok")
            except BaseException:
                with contextlib.suppress(Exception):
                    await ledgers.delete_ledger(new_id)
                raise
            old = self._ledger_id if self._ledger_id is not None else self._old_ledger
            self._ledger_id, self._ledger_entries, self._old_ledger = new_id, 1, None
            if old is not None:
                with contextlib.suppress(Exception):
                    await ledgers.delete_ledger(old)
        else:
            await ledgers.append(self._ledger_id, data)
            self._ledger_entries += 1
        metrics.cursor_persists.inc()
        metrics.cursor_persist_bytes.inc(len(data))

    def _on_fenced(self, err: BaseException) -> None:
        self._fenced = True
        log.warning("%s: cursor %s was taken over by another broker (%s)", self.ml.name, self._name, err)
        self._fail_waiters()
        self.ml._fence(f"cursor {self._name} was taken over ({err})")

    def _fail_waiters(self) -> None:
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(CursorClosed(f"cursor {self._name} of {self.ml.name} closed before "
                                                  "the acknowledgement was persisted"))
        self._waiters.clear()

    # ---- closing ------------------------------------------------------------------------------

    async def close(self, persist_timeout_s: float = 2.0) -> None:
        """Persist what is pending (bounded), then stop."""
        if self._closed:
            return
        if self._durable and not self._fenced and self._persisted < self._version:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.flush(), persist_timeout_s)
        self._closed = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._fail_waiters()

    async def delete(self) -> None:
        await self.close(persist_timeout_s=0.5)
        if self._durable:
            await self.ml.store.delete_cursor(self.ml.name, self._name)
            for ledger_id in (self._ledger_id, self._old_ledger):
                if ledger_id is not None:
                    with contextlib.suppress(Exception):
                        await self.ml.ledgers.delete_ledger(ledger_id)

    def stats(self) -> dict[str, Any]:
        return {
            "markDeletePosition": str(self.state.mark_delete),
            "individuallyDeletedMessages": self.state.individually_deleted_text(),
            "persistedMarkDeletePosition": str(self.persisted_mark_delete_position),
            "persistedIndividuallyDeletedMessages": self._persisted_state.get("acked", []),
            "cursorLedger": self._ledger_id if self._ledger_id is not None else self._old_ledger,
            "cursorLedgerLastEntry": self._ledger_entries - 1,
            "durable": self._durable,
            "state": "Closed" if self._closed else ("Fenced" if self._fenced else "Open"),
        }


__all__ = ["CursorClosed", "ManagedCursor", "ManagedLedgerError"]
