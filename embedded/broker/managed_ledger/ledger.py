"""ManagedLedger: one log as a list of ledgers, with an ordered, pipelined append path.

Theory of operation (Pulsar's ManagedLedgerImpl over BookKeeper, on our stores).

Opening. Read the ledger list (`/managed-ledgers/<name>`, created when absent). If its
last ledger is still open (`entries` null) its writer may be alive: *fence* it in the
ledger store, which returns its last entry and stops the old writer, and record its
length. Then create a new ledger and CAS the list. A CAS that fails means another
broker changed the list first: retry (bounded), then give up.

Appending. Appends are issued to the current ledger in call order, each one written
at once (the ledger client pipelines), and confirmed strictly in order: the head of
`_pending` is confirmed only when its answer is the entry id after the last confirmed
one (`_lac`). On confirmation the entry enters the cache, the entry listeners run
(the topic's transaction buffer hears of every entry in log order) and the future
resolves. Any other outcome of the head (an error, a timeout, an unexpected id)
marks the ledger failed: it is closed at `_lac`, every pending append (including
later ones that did succeed: their copies lie past `_lac` and are never read) is put
back in front of the queue, a new ledger is created and the queue re-issued there.
`Fenced` from the store, or a CAS conflict on the list, means another broker owns the
log now: the ledger becomes FENCED, everything pending fails, and the owner is told.

Rolling over. After `max_entries_per_ledger` appends the ledger is closed once its
pending appends are confirmed, and a new one is started the same way. If a new ledger
cannot be created within `managedLedgerAddEntryTimeoutSeconds` (ledger or metadata
store down) the queued appends fail with ManagedLedgerError and the next append tries
again: producers see SEND_ERROR, reconnect and resend, as with Pulsar.

Reading. Entries are served from the broker's entry cache, else read from the ledger
store in runs; only entries up to each ledger's recorded length (closed ledgers) or
`_lac` (the current one) exist for readers.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from embedded import planted_bugs, tracing
from embedded.broker.entry import PLAIN, Entry, EntryInfo
from embedded.broker.managed_ledger.api import (
    EntryListener,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
    ManagedLedgerTerminated,
)
from embedded.broker.managed_ledger.cache import EntryCache
from embedded.broker.managed_ledger.metadata import LedgerRecord, MlInfo, MlMetadataStore
from embedded.broker.position import Position
from embedded.ledger.client import LedgerClient
from embedded.ledger.model import Fenced, LedgerError, LedgerUnavailable, NoSuchLedger
from embedded.metadata.model import BadVersion, MetadataError, MetadataUnavailable

if TYPE_CHECKING:
    from embedded.broker.managed_ledger.cursor import ManagedCursor
    from embedded.broker.metrics import BrokerMetrics

log = logging.getLogger(__name__)

_instance_ids = itertools.count(1)
_RETRY_PAUSES = (0.05, 0.1, 0.2, 0.5, 1.0)


class MlState(enum.Enum):
    OPENING = "opening"
    OPEN = "open"                # a current ledger takes appends
    ROLLING = "rolling"          # creating the next ledger; appends queue
    NO_LEDGER = "no-ledger"      # the last attempt to create one failed; the next append retries
    TERMINATED = "terminated"
    FENCED = "fenced"
    CLOSED = "closed"


class _AddOp:
    __slots__ = ("data", "entry_id", "error", "future", "info", "ledger_id", "started")

    def __init__(self, data: bytes, info: EntryInfo, future: asyncio.Future[Position]) -> None:
        self.data = data
        self.info = info
        self.future = future
        self.ledger_id: int | None = None
        self.entry_id: int | None = None
        self.error: BaseException | None = None
        self.started = 0.0

    def reset(self) -> None:
        self.ledger_id = None
        self.entry_id = None
        self.error = None


class ManagedLedger:
    def __init__(self, name: str, config: ManagedLedgerConfig, *, ledgers: LedgerClient, store: MlMetadataStore,
                 cache: EntryCache, metrics: BrokerMetrics, add_timeout_s: float = 10.0,
                 cursor_settings: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.config = config
        self.ledgers = ledgers
        self.store = store
        self.cache = cache
        self.metrics = metrics
        self.add_timeout_s = add_timeout_s
        self.cursor_settings = dict(cursor_settings or {})
        self.instance_id = next(_instance_ids)
        self.state = MlState.OPENING
        self._kind = config.kind.value
        self._slots: list[LedgerRecord] = []      # closed ledgers, then the current one (entries None)
        self._slot_index: dict[int, int] = {}
        self._version: int | None = None
        self._uncertain: tuple[MlInfo, tuple[int, ...]] | None = None
        self._current: int | None = None
        self._next_entry = 0
        self._lac = -1
        self._last_confirmed = Position(-1, -1)
        self._terminated: Position | None = None
        # a terminate() under way: new appends are refused, and a second terminate() answers its position
        self._terminating: asyncio.Future[Position] | None = None
        self._pending: deque[_AddOp] = deque()
        self._queued: deque[_AddOp] = deque()
        self._roll_requested = False
        self._roll_task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._listeners: list[EntryListener] = []
        self._fenced_listeners: list[Callable[[ManagedLedger], Any]] = []
        self._cursors: dict[str, ManagedCursor] = {}
        self._cursor_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"ManagedLedger({self.name}, {self.state.value}, current={self._current}, lac={self._lac})"

    # ---- opening ------------------------------------------------------------------------------

    async def open(self) -> None:
        last_error: BaseException | None = None
        for attempt in range(8):   # bounded: each round either opens or saw a concurrent change
            try:
                await self._open_once()
                return
            except BadVersion as err:
                last_error = err
                log.info("%s: ledger list changed while opening (attempt %d); retrying", self.name, attempt + 1)
                await asyncio.sleep(_RETRY_PAUSES[min(attempt, len(_RETRY_PAUSES) - 1)])
        raise ManagedLedgerError(f"{self.name}: the ledger list kept changing while opening ({last_error}); "
                                 "is another broker opening the same topic?")

    async def _open_once(self) -> None:
        found = await self.store.read(self.name)
        if found is None:
            info, version = MlInfo(), await self.store.create(self.name, MlInfo())
        else:
            info, version = found
        changed = False
        if info.ledgers and info.ledgers[-1].entries is None:
            last = info.ledgers[-1]
            try:
                last.entries = await self.ledgers.fence(last.ledger_id) + 1
            except NoSuchLedger:
                last.entries = 0
            changed = True
        empty = [r for r in info.ledgers if r.entries == 0]
        if empty:
            info.ledgers = [r for r in info.ledgers if r.entries != 0]
            changed = True
        self._terminated = info.terminated
        if info.terminated is not None:
            if changed:
                version = await self.store.update(self.name, info, version)
            self._install(info, version, current=None)
            self.state = MlState.TERMINATED
            await self._delete_ledgers(r.ledger_id for r in empty)
            return
        new_id = await self.ledgers.create_ledger(self.config.kind, self.name)
        self.metrics.ml_ledgers_created.inc(kind=self._kind)
        info.ledgers.append(LedgerRecord(new_id, None))
        try:
            version = await self.store.update(self.name, info, version)
        except BaseException:
            await self._delete_ledgers([new_id])
            raise
        self._install(info, version, current=new_id)
        self.state = MlState.OPEN
        await self._delete_ledgers(r.ledger_id for r in empty)
        log.info("%s: opened (ledgers %s, writing %d)", self.name,
                 [r.ledger_id for r in info.ledgers[:-1]], new_id)

    async def metadata_unchanged(self) -> bool:
        """Whether the stored ledger list is still the version this instance installed: a broker
        that opened this managed ledger meanwhile (it owned the topic while our session was gone)
        fenced our ledger and wrote its own list, so entries it added are unknown here."""
        found = await self.store.read(self.name)
        return found is not None and found[1] == self._version

    def _install(self, info: MlInfo, version: int, current: int | None) -> None:
        self._slots = info.ledgers
        self._slot_index = {r.ledger_id: i for i, r in enumerate(self._slots)}
        self._version = version
        self._current = current
        self._next_entry = 0
        self._lac = -1
        self._last_confirmed = self._compute_last_confirmed()

    def _compute_last_confirmed(self) -> Position:
        if self._current is not None and self._lac >= 0:
            return Position(self._current, self._lac)
        for record in reversed(self._slots):
            if record.entries:
                return Position(record.ledger_id, record.entries - 1)
        first = self._slots[0].ledger_id if self._slots else -1
        return Position(first, -1)

    async def _settle(self) -> None:
        """Resolve a ledger-list write whose answer was lost: adopt it if it applied.

        Raises BadVersion when the list changed in a way that is not our write (another
        broker took over), MetadataUnavailable when the store is still unreachable.
        """
        if self._uncertain is None:
            return
        tried, created = self._uncertain
        found = await self.store.read(self.name)
        if found is not None and found[0].to_json() == tried.to_json():
            self._uncertain = None
            last = tried.ledgers[-1] if tried.ledgers else None
            self._terminated = tried.terminated
            self._install(tried.copy(), found[1],
                          current=last.ledger_id if last is not None and last.entries is None else None)
            return
        if found is not None and found[1] == self._version:
            self._uncertain = None
            await self._delete_ledgers(created)
            return
        raise BadVersion(f"{self.name}: the ledger list changed while our update's answer was lost")

    async def _update(self, info: MlInfo, created: tuple[int, ...] = ()) -> int:
        """CAS the ledger list against our version; a lost answer leaves it to `_settle`."""
        await self._settle()
        if self._version is None:
            raise ManagedLedgerError(f"{self.name}: no known version of the ledger list")
        try:
            version = await self.store.update(self.name, info, self._version)
        except BadVersion:
            self.metrics.ml_metadata_updates.inc(result="conflict")
            raise
        except MetadataUnavailable:
            self.metrics.ml_metadata_updates.inc(result="unknown")
            self._uncertain = (info.copy(), created)
            raise
        self.metrics.ml_metadata_updates.inc(result="ok")
        return version

    # ---- positions ----------------------------------------------------------------------------

    @property
    def last_confirmed(self) -> Position:
        return self._last_confirmed

    @property
    def terminated_position(self) -> Position | None:
        return self._terminated

    @property
    def current_ledger_id(self) -> int | None:
        return self._current

    def ledger_ids(self) -> list[int]:
        return [r.ledger_id for r in self._slots]

    def ledger_infos(self) -> list[dict[str, Any]]:
        out = []
        for r in self._slots:
            entries = self._lac + 1 if r.ledger_id == self._current else r.entries
            out.append({"ledgerId": r.ledger_id, "entries": entries, "open": r.ledger_id == self._current})
        return out

    def _entries_of(self, ledger_id: int) -> int | None:
        """Readable entries of a ledger of ours; None when it is not in the list."""
        i = self._slot_index.get(ledger_id)
        if i is None:
            return None
        if ledger_id == self._current:
            return self._lac + 1
        return self._slots[i].entries or 0

    def _first_after(self, ledger_id: int) -> Position | None:
        """The first position of the first ledger after `ledger_id` that has (or will get) entries."""
        for record in self._slots:
            if record.ledger_id > ledger_id and (record.ledger_id == self._current or (record.entries or 0) > 0):
                return Position(record.ledger_id, 0)
        return None

    def next_position(self, position: Position) -> Position:
        ledger_id, entry_id = position.ledger_id, position.entry_id
        if ledger_id == self._current:
            return Position(ledger_id, entry_id + 1)
        count = self._entries_of(ledger_id)
        if count is not None and entry_id + 1 < count:
            return Position(ledger_id, entry_id + 1)
        following = self._first_after(ledger_id)
        if following is not None:
            return following
        return Position(ledger_id, max(entry_id + 1, count or 0))

    def first_position(self) -> Position:
        return self.next_position(Position.EARLIEST)

    def normalize(self, position: Position) -> Position:
        """The first readable-or-future position at or after `position`."""
        if position.ledger_id == self._current:
            return Position(position.ledger_id, max(0, position.entry_id))
        count = self._entries_of(position.ledger_id)
        if count and position.entry_id < count:
            return Position(position.ledger_id, max(0, position.entry_id))
        following = self._first_after(position.ledger_id)
        return following if following is not None else position

    def entries_between(self, after: Position, upto: Position) -> int:
        """How many entries lie in (after, upto]."""
        if upto <= after:
            return 0
        total = 0
        for record in self._slots:
            count = self._entries_of(record.ledger_id) or 0
            if count == 0:
                continue
            lo = 0 if record.ledger_id > after.ledger_id else after.entry_id + 1 if record.ledger_id == after.ledger_id else count
            hi = count - 1 if record.ledger_id < upto.ledger_id else upto.entry_id if record.ledger_id == upto.ledger_id else -1
            if hi >= lo:
                total += hi - lo + 1
        return total

    def entries_from(self, start: Position, upto: Position) -> int:
        """How many entries lie in [start, upto]."""
        return self.entries_between(Position(start.ledger_id, start.entry_id - 1), upto)

    def total_entries(self) -> int:
        return sum(self._entries_of(r.ledger_id) or 0 for r in self._slots)

    # ---- listeners ----------------------------------------------------------------------------

    def add_listener(self, listener: EntryListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: EntryListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def add_fenced_listener(self, listener: Callable[[ManagedLedger], Any]) -> None:
        self._fenced_listeners.append(listener)

    # ---- appending ----------------------------------------------------------------------------

    def append(self, data: bytes, info: EntryInfo = PLAIN) -> asyncio.Future[Position]:
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        state = self.state
        if state is MlState.TERMINATED or self._terminated is not None or self._terminating is not None:
            future.set_exception(ManagedLedgerTerminated(
                f"{self.name} was terminated at {self._terminated}" if self._terminated is not None
                else f"{self.name} is being terminated"))
            return future
        if state is MlState.FENCED:
            future.set_exception(ManagedLedgerFenced(f"{self.name} is now written by another broker"))
            return future
        if state in (MlState.CLOSED, MlState.OPENING):
            future.set_exception(ManagedLedgerError(f"{self.name} is {state.value}"))
            return future
        op = _AddOp(data, info, future)
        tracing.track_future(tracing.CallKind.LEDGER_APPEND, future)
        self._idle.clear()
        if state is MlState.OPEN and not self._roll_requested and not self._queued:
            self._issue(op)
        else:
            self._queued.append(op)
            if state is MlState.NO_LEDGER:
                self._start_roll("retry")
        return future

    def _issue(self, op: _AddOp) -> None:
        ledger_id = self._current
        assert ledger_id is not None
        op.ledger_id = ledger_id
        op.started = time.monotonic()
        self._next_entry += 1
        self._pending.append(op)
        task = asyncio.get_running_loop().create_task(self.ledgers.append(ledger_id, op.data))
        task.add_done_callback(functools.partial(self._on_appended, op, ledger_id))
        if self._next_entry >= self.config.max_entries_per_ledger:
            self._roll_requested = True

    def _on_appended(self, op: _AddOp, ledger_id: int, task: asyncio.Task[int]) -> None:
        if op.ledger_id != ledger_id or ledger_id != self._current:
            return   # a stale answer for an op already re-issued elsewhere
        if task.cancelled():
            op.error = LedgerUnavailable("append cancelled")
        elif task.exception() is not None:
            op.error = task.exception()
        else:
            op.entry_id = task.result()
        self._confirm()

    def _confirm(self) -> None:
        pending = self._pending
        metrics = self.metrics
        kind_key = (self._kind,)
        while pending:
            head = pending[0]
            if head.error is None and head.entry_id is None:
                break
            if head.error is not None or head.entry_id != self._lac + 1:
                self._ledger_failed(head.error or LedgerError(
                    f"ledger {self._current} answered entry {head.entry_id}, expected {self._lac + 1}"))
                return
            pending.popleft()
            self._lac += 1
            position = Position(head.ledger_id, self._lac)   # type: ignore[arg-type]
            self._last_confirmed = position
            if self.config.cache_entries:
                self.cache.put(self.instance_id, Entry(position, head.data, head.info))
            values = metrics.ml_add_entries.values
            values[kind_key] = values.get(kind_key, 0.0) + 1
            values = metrics.ml_add_bytes.values
            values[kind_key] = values.get(kind_key, 0.0) + len(head.data)
            metrics.storage_write_latency.observe((time.monotonic() - head.started) * 1000.0)
            for listener in self._listeners:
                try:
                    listener(position, head.info)
                except Exception:
                    log.exception("%s: entry listener failed", self.name)
            if not head.future.done():
                head.future.set_result(position)
        if not pending:
            if self._roll_requested and self.state is MlState.OPEN:
                self._start_roll("full")
            elif not self._queued and self._roll_task is None:
                self._idle.set()

    def _ledger_failed(self, error: BaseException) -> None:
        if isinstance(error, Fenced):
            self._fence(f"ledger {self._current} was fenced by another writer ({error})")
            return
        self.metrics.ml_add_errors.inc(kind=self._kind)
        log.warning("%s: append to ledger %s failed (%s); rolling over to a new ledger",
                    self.name, self._current, error)
        requeue = list(self._pending)
        self._pending.clear()
        for op in requeue:
            op.reset()
        self._queued.extendleft(reversed(requeue))
        self._start_roll("failure")

    def _start_roll(self, reason: str) -> None:
        if self._roll_task is not None and not self._roll_task.done():
            return
        if self.state in (MlState.FENCED, MlState.CLOSED, MlState.TERMINATED):
            return
        self.state = MlState.ROLLING
        self._idle.clear()
        self._roll_task = asyncio.get_running_loop().create_task(self._roll(reason))

    async def _roll(self, reason: str) -> None:
        try:
            await self._roll_inner(reason)
        except Exception as err:   # a bug must not leave appends hanging
            log.exception("%s: rollover failed unexpectedly", self.name)
            self._give_up(err)
        finally:
            self._roll_task = None
            if not self._pending and not self._queued:
                self._idle.set()

    async def _roll_inner(self, reason: str) -> None:
        old = self._current
        if old is not None:
            self._slots[self._slot_index[old]].entries = self._lac + 1
            self._current = None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ledgers.close_ledger(old), 2.0)
        deadline = time.monotonic() + self.add_timeout_s
        for attempt in itertools.count():   # bounded by the deadline
            new_id: int | None = None
            try:
                await self._settle()   # may adopt a ledger an earlier attempt added
                if self._current is None:
                    new_id = await self.ledgers.create_ledger(self.config.kind, self.name)
                    self.metrics.ml_ledgers_created.inc(kind=self._kind)
                    info = MlInfo([LedgerRecord(r.ledger_id, r.entries) for r in self._slots if r.entries != 0]
                                  + [LedgerRecord(new_id, None)], self._terminated)
                    version = await self._update(info, (new_id,))
                    dropped = [r.ledger_id for r in self._slots if r.entries == 0]
                    self._install(info, version, current=new_id)
                    await self._delete_ledgers(dropped)
            except BadVersion:
                if new_id is not None and self._uncertain is None:
                    await self._delete_ledgers([new_id])
                self._fence("the ledger list was changed by another broker")
                return
            except (LedgerError, LedgerUnavailable, MetadataError, MetadataUnavailable, ManagedLedgerError) as err:
                if new_id is not None and self._uncertain is None:
                    await self._delete_ledgers([new_id])
                if time.monotonic() >= deadline or self.state is MlState.CLOSED:
                    self._give_up(err)
                    return
                log.info("%s: cannot start a new ledger yet (%s); retrying", self.name, err)
                await asyncio.sleep(_RETRY_PAUSES[min(attempt, len(_RETRY_PAUSES) - 1)])
                continue
            self._roll_requested = False
            self.state = MlState.OPEN
            self.metrics.ml_rollovers.inc(kind=self._kind, reason=reason)
            log.info("%s: rolled over (%s) from ledger %s to %s", self.name, reason, old, self._current)
            if self.config.trim_consumed:
                await self._trim()
            while self._queued and self.state is MlState.OPEN and not self._roll_requested:
                self._issue(self._queued.popleft())
            if self._roll_requested and not self._pending:
                self._start_roll("full")
            return

    def _give_up(self, error: BaseException) -> None:
        if self.state not in (MlState.FENCED, MlState.CLOSED):
            self.state = MlState.NO_LEDGER
        failed = list(self._queued)
        self._queued.clear()
        self.metrics.ml_add_errors.inc(len(failed), kind=self._kind)
        log.warning("%s: no ledger to write to (%s); failing %d appends", self.name, error, len(failed))
        for op in failed:
            if not op.future.done():
                op.future.set_exception(ManagedLedgerError(
                    f"{self.name}: cannot write to the ledger store now ({error})"))

    def _fence(self, reason: str) -> None:
        if self.state is MlState.FENCED:
            return
        log.warning("%s: fenced: %s", self.name, reason)
        self.state = MlState.FENCED
        ops = list(self._pending) + list(self._queued)
        self._pending.clear()
        self._queued.clear()
        for op in ops:
            if not op.future.done():
                op.future.set_exception(ManagedLedgerFenced(f"{self.name}: {reason}"))
        self._idle.set()
        for listener in list(self._fenced_listeners):
            try:
                listener(self)
            except Exception:
                log.exception("%s: fenced listener failed", self.name)

    async def _trim(self) -> None:
        """Delete closed ledgers every durable cursor has fully acknowledged (logs only)."""
        durable = [c for c in self._cursors.values() if c.durable]
        if not durable:
            return
        slowest = min(c.mark_delete_position for c in durable)
        if planted_bugs.on(planted_bugs.LEDGER_TRIM_OFF_BY_ONE):
            # DELIBERATE FAULT (txnbench self-test): <= keeps nothing of the slowest cursor's ledger
            doomed = [r for r in self._slots if r.ledger_id != self._current and r.ledger_id <= slowest.ledger_id]
        else:
            doomed = [r for r in self._slots if r.ledger_id != self._current and (
                r.ledger_id < slowest.ledger_id or (r.ledger_id == slowest.ledger_id and (r.entries or 0) - 1 <= slowest.entry_id))]
        if not doomed:
            return
        keep = [LedgerRecord(r.ledger_id, r.entries) for r in self._slots if r not in doomed]
        try:
            version = await self._update(MlInfo(keep, self._terminated))
        except (BadVersion, MetadataError, MetadataUnavailable) as err:
            log.info("%s: trimming skipped (%s)", self.name, err)
            return
        # Appends to the current ledger may have been issued and confirmed while the list was
        # written (the ledger is open again by then): keep its counters, which _install resets.
        next_entry, lac = self._next_entry, self._lac
        self._install(MlInfo(keep, self._terminated), version, current=self._current)
        self._next_entry, self._lac = next_entry, lac
        self._recompute_after_trim()
        await self._delete_ledgers(r.ledger_id for r in doomed)

    def _recompute_after_trim(self) -> None:
        self._last_confirmed = self._compute_last_confirmed()

    async def _delete_ledgers(self, ledger_ids: Any) -> None:
        for ledger_id in list(ledger_ids):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ledgers.delete_ledger(ledger_id), 2.0)

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait (bounded) until no append is pending or queued."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    # ---- reading ------------------------------------------------------------------------------

    async def read(self, start: Position, max_entries: int, *, max_position: Position | None = None) -> list[Entry]:
        limit = self._last_confirmed
        if max_position is not None and max_position < limit:
            limit = max_position
        out: list[Entry] = []
        position = self.normalize(start)
        for _ in range(len(self._slots) + max_entries + 1):   # each round reads or moves on
            if len(out) >= max_entries or position > limit:
                break
            count = self._entries_of(position.ledger_id)
            if not count:
                break
            last = count - 1
            if position.ledger_id == limit.ledger_id:
                last = min(last, limit.entry_id)
            if position.entry_id > last:
                break
            last = min(last, position.entry_id + (max_entries - len(out)) - 1)
            await self._read_run(position.ledger_id, position.entry_id, last, out)
            position = self.normalize(Position(position.ledger_id, last + 1))
        return out

    async def _read_run(self, ledger_id: int, first: int, last: int, out: list[Entry]) -> None:
        cache, ml_id = self.cache, self.instance_id
        entry_id = first
        while entry_id <= last:
            cached = cache.get(ml_id, Position(ledger_id, entry_id))
            if cached is not None:
                out.append(cached)
                self.metrics.ml_cache_hits.inc()
                entry_id += 1
                continue
            run_end = entry_id
            while run_end < last and cache.get(ml_id, Position(ledger_id, run_end + 1)) is None:
                run_end += 1
            datas = await self.ledgers.read(ledger_id, entry_id, run_end)
            size = 0
            for i, data in enumerate(datas):
                size += len(data)
                out.append(Entry(Position(ledger_id, entry_id + i), data, EntryInfo.parse(data)))
            self.metrics.ml_read_entries.inc(len(datas), kind=self._kind)
            self.metrics.ml_read_bytes.inc(size, kind=self._kind)
            entry_id = run_end + 1

    async def read_entry(self, position: Position) -> Entry:
        entries = await self.read(position, 1, max_position=position)
        if not entries or entries[0].position != position:
            raise ManagedLedgerError(f"{self.name}: no entry at {position}")
        return entries[0]

    def acknowledged(self, position: Position) -> bool:
        """Whether `position` is an entry this ledger confirmed to a writer (and has not trimmed).

        An entry in that range that the ledger store cannot return is data lost after it
        was acknowledged, not an entry that does not exist yet.
        """
        count = self._entries_of(position.ledger_id)
        return count is not None and 0 <= position.entry_id < count

    async def read_positions(self, positions: list[Position]) -> list[Entry]:
        """Entries at the given positions (sorted), skipping any that do not exist."""
        out: list[Entry] = []
        i = 0
        while i < len(positions):
            first = positions[i]
            j = i
            while (j + 1 < len(positions) and positions[j + 1].ledger_id == first.ledger_id
                   and positions[j + 1].entry_id == positions[j].entry_id + 1):
                j += 1
            count = self._entries_of(first.ledger_id) or 0
            last = min(positions[j].entry_id, count - 1)
            if first.ledger_id == self._last_confirmed.ledger_id:
                last = min(last, self._last_confirmed.entry_id)
            if first.entry_id <= last and first.entry_id >= 0:
                await self._read_run(first.ledger_id, first.entry_id, last, out)
            i = j + 1
        return out

    async def find_first(self, predicate: Callable[[Entry], bool]) -> Position | None:
        """The first entry for which the (monotone) predicate holds, by binary search; None if none."""
        positions: list[tuple[int, int]] = []   # (ledger, count) for ledgers with entries
        for record in self._slots:
            count = self._entries_of(record.ledger_id) or 0
            if count:
                positions.append((record.ledger_id, count))
        total = sum(c for _, c in positions)

        def at(index: int) -> Position:
            for ledger_id, count in positions:
                if index < count:
                    return Position(ledger_id, index)
                index -= count
            raise IndexError(index)

        lo, hi = 0, total
        for _ in range(70):   # bounded: binary search over < 2**64 entries
            if lo >= hi:
                break
            mid = (lo + hi) // 2
            if predicate(await self.read_entry(at(mid))):
                hi = mid
            else:
                lo = mid + 1
        return at(lo) if lo < total else None

    # ---- cursors ------------------------------------------------------------------------------

    async def open_cursor(self, name: str, *, initial_position: Position | None = None) -> ManagedCursor:
        from embedded.broker.managed_ledger.cursor import ManagedCursor

        async with self._cursor_lock:
            cursor = self._cursors.get(name)
            if cursor is None:
                cursor = await ManagedCursor.open(self, name, initial_position=initial_position)
                self._cursors[name] = cursor
            return cursor

    def non_durable_cursor(self, name: str, start: Position) -> ManagedCursor:
        """A cursor kept in memory only (a Reader), positioned after `start`."""
        from embedded.broker.managed_ledger.cursor import ManagedCursor

        return ManagedCursor.non_durable(self, name, start)

    async def delete_cursor(self, name: str) -> None:
        async with self._cursor_lock:
            cursor = self._cursors.pop(name, None)
            if cursor is not None:
                await cursor.delete()
            else:
                await self.store.delete_cursor(self.name, name)

    def cursors(self) -> Mapping[str, ManagedCursor]:
        return dict(self._cursors)

    async def cursor_names(self) -> list[str]:
        return await self.store.list_cursors(self.name)

    # ---- terminate, close, delete ---------------------------------------------------------------

    async def terminate(self) -> Position:
        """Terminate the log at its last confirmed entry; its position.

        A terminate while one is under way (two operators, or a seal and a split's, on one
        segment) answers that one's position, as Pulsar's `asyncTerminate` answers a second
        call with the last confirmed entry (its state is Terminated from the first call on).
        Before, the second wrote the ledger list with the version the first had just replaced,
        lost that CAS and fenced the log its own broker serves."""
        if self._terminated is not None:
            return self._terminated
        if self._terminating is not None:
            return await asyncio.shield(self._terminating)
        if self.state in (MlState.FENCED, MlState.CLOSED):
            raise ManagedLedgerError(f"{self.name} is {self.state.value}")
        # Refuse new appends from here on: one confirmed while the ledger list is written would
        # lie past the terminated position, acknowledged and never readable (a split's parent
        # lost a transactional send that way; Pulsar fails them with ManagedLedgerTerminated).
        done: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self._terminating = done
        try:
            await self.wait_idle(self.add_timeout_s)
            position = self._last_confirmed
            info = MlInfo([LedgerRecord(r.ledger_id, self._entries_of(r.ledger_id)) for r in self._slots
                           if (self._entries_of(r.ledger_id) or 0) > 0], position)
            try:
                version = await self._update(info)
            except BadVersion:
                self._fence("the ledger list was changed by another broker")
                raise ManagedLedgerFenced(f"{self.name} is now written by another broker") from None
        except BaseException as err:
            self._terminating = None
            _fail(done, err)
            raise
        old = self._current
        self._terminated = position
        self._install(info, version, current=None)
        self._last_confirmed = position
        self.state = MlState.TERMINATED
        done.set_result(position)
        if old is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ledgers.close_ledger(old), 2.0)
        log.info("%s: terminated at %s", self.name, position)
        return position

    async def close(self) -> None:
        """Close cursors (persisting them) and the current ledger, recording its length (best effort)."""
        if self.state in (MlState.CLOSED,):
            return
        await self.wait_idle(2.0)
        for cursor in list(self._cursors.values()):
            await cursor.close()
        previous = self.state
        self.state = MlState.CLOSED
        if self._roll_task is not None:
            self._roll_task.cancel()
        for op in list(self._pending) + list(self._queued):
            if not op.future.done():
                op.future.set_exception(ManagedLedgerError(f"{self.name} was closed"))
        self._pending.clear()
        self._queued.clear()
        current = self._current
        if current is not None and previous is not MlState.FENCED:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ledgers.close_ledger(current), 2.0)
            info = MlInfo([LedgerRecord(r.ledger_id, self._entries_of(r.ledger_id)) for r in self._slots
                           if (self._entries_of(r.ledger_id) or 0) > 0], self._terminated)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._update(info), 2.0)
        self.cache.drop(self.instance_id)
        self._idle.set()

    async def delete(self) -> None:
        for name in list(self._cursors):
            await self.delete_cursor(name)
        for name in await self.store.list_cursors(self.name):
            await self.store.delete_cursor(self.name, name)
        await self.close()
        await self._delete_ledgers(self.ledger_ids())
        await self.store.delete(self.name)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    """End `future` as `error` ended the work it stands for; nobody may be waiting for it."""
    if isinstance(error, asyncio.CancelledError):
        future.cancel()
        return
    future.set_exception(error)
    future.exception()   # retrieved here: with no second terminate waiting, asyncio would log it as lost
    future.exception()   # retrieved: a failure nobody else waited for must not be logged as lost
