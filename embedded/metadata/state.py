"""The metadata store's state machine: pure, deterministic, no I/O, time passed in.

Theory of operation. The state is a map key -> `Record` (immutable values), a sorted
key list (natural order of code points, which equals UTF-8 byte order), one sorted
list of `(secondary_key, primary_key)` per secondary index, and the sessions with the
keys of their ephemeral records. Mutations are `Command` values (frozen dataclasses);
`apply(command, now_ms)` either raises a `MetadataError` and changes nothing, or
changes the state and returns an `Applied` with the result and the notifications it
produced. The durable layer logs each command that mutated the state together with
its `now_ms`; replaying the log through `apply` rebuilds exactly the same state,
version ids included, because nothing here reads a clock or iterates an unordered
collection when assigning ids.

Invariants:
* `last_version_id` only grows; every put takes the next one (Oxia's store-wide
  version id, the CAS token). `expected_version=-1` means "must not exist".
* Every record's `secondary_indexes` entries are exactly the entries in the indexes;
  they are removed or replaced together with their record.
* An ephemeral record belongs to exactly one live session and is deleted with it.
* Sequence keys follow Oxia: the next key of `prefix` is derived from the highest
  existing key `prefix-<%020d>[-<%020d>...]`, adding the deltas part by part.
* Session deadlines are runtime-only (keepalives are not logged): they are not part
  of replay, and a recovered store gives every session a fresh `now + timeout`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sortedcontainers import SortedList

from embedded.metadata.model import (
    MUST_NOT_EXIST,
    BadVersion,
    Comparison,
    EventType,
    GetResult,
    InvalidOptions,
    KeyNotFound,
    Notification,
    PutResult,
    Record,
    SessionExpired,
    Version,
)

T = TypeVar("T")

SEQUENCE_DIGITS = 20
_MAX_SEQUENCE = 2**64 - 1


# ---- commands (the mutations the write-ahead log records) ---------------------------------------

@dataclass(frozen=True)
class Put:
    key: str
    value: str
    expected_version: int | None = None
    ephemeral: bool = False
    session_id: int | None = None
    partition_key: str | None = None
    sequence_keys_deltas: tuple[int, ...] | None = None
    secondary_indexes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Delete:
    key: str
    expected_version: int | None = None


@dataclass(frozen=True)
class DeleteRange:
    min: str
    max: str


@dataclass(frozen=True)
class SessionOpen:
    timeout_ms: int
    client: str = ""


@dataclass(frozen=True)
class SessionClose:
    session_id: int


@dataclass(frozen=True)
class SessionExpire:
    session_id: int


Command = Put | Delete | DeleteRange | SessionOpen | SessionClose | SessionExpire

MIN_SESSION_TIMEOUT_MS = 100
MAX_SESSION_TIMEOUT_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class Applied(Generic[T]):
    """The outcome of a command that did not fail. `mutated` False: nothing to log."""

    result: T
    notifications: tuple[Notification, ...] = ()
    mutated: bool = True


@dataclass(frozen=True)
class SessionInfo:
    session_id: int
    timeout_ms: int
    client: str


@dataclass(frozen=True)
class StateImage:
    """An immutable copy of everything replay needs (for snapshots); cheap to take."""

    last_version_id: int
    last_session_id: int
    records: tuple[Record, ...]
    sessions: tuple[SessionInfo, ...]


@dataclass
class _Session:
    info: SessionInfo
    deadline_ms: int
    keys: set[str] = field(default_factory=set)


# ---- wire forms of commands ----------------------------------------------------------------------

def _req_str(d: dict[str, Any], name: str, *, allow_empty: bool = False) -> str:
    value = d.get(name)
    if not isinstance(value, str) or (not allow_empty and value == ""):
        raise InvalidOptions(f"`{name}` must be a {'string' if allow_empty else 'non-empty string'}, got {value!r}")
    return value


def _opt_int(d: dict[str, Any], name: str) -> int | None:
    value = d.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"`{name}` must be an integer, got {value!r}")
    return value


def _opt_str(d: dict[str, Any], name: str) -> str | None:
    value = d.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidOptions(f"`{name}` must be a string, got {value!r}")
    return value


def put_from_wire(d: dict[str, Any]) -> Put:
    deltas_raw = d.get("sequence_keys_deltas")
    deltas: tuple[int, ...] | None = None
    if deltas_raw is not None:
        if not isinstance(deltas_raw, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in deltas_raw):
            raise InvalidOptions(f"`sequence_keys_deltas` must be a list of integers, got {deltas_raw!r}")
        deltas = tuple(deltas_raw)
    indexes_raw = d.get("secondary_indexes") or {}
    if not isinstance(indexes_raw, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in indexes_raw.items()):
        raise InvalidOptions("`secondary_indexes` must map non-empty index names to string secondary keys")
    ephemeral = d.get("ephemeral", False)
    if not isinstance(ephemeral, bool):
        raise InvalidOptions(f"`ephemeral` must be true or false, got {ephemeral!r}")
    return Put(
        key=_req_str(d, "key"),
        value=_req_str(d, "value", allow_empty=True),
        expected_version=_opt_int(d, "expected_version"),
        ephemeral=ephemeral,
        session_id=_opt_int(d, "session_id"),
        partition_key=_opt_str(d, "partition_key"),
        sequence_keys_deltas=deltas,
        secondary_indexes=tuple(sorted(indexes_raw.items())),
    )


def command_from_wire(d: dict[str, Any]) -> Command:
    """Parse a command from its JSON form (a request header or a log record)."""
    op = d.get("op")
    if op == "put":
        return put_from_wire(d)
    if op == "delete":
        return Delete(_req_str(d, "key"), _opt_int(d, "expected_version"))
    if op == "delete_range":
        return DeleteRange(_req_str(d, "min", allow_empty=True), _req_str(d, "max", allow_empty=True))
    if op == "session_open":
        timeout = _opt_int(d, "timeout_ms")
        if timeout is None:
            raise InvalidOptions("`timeout_ms` is required")
        return SessionOpen(timeout, _opt_str(d, "client") or "")
    if op in ("session_close", "session_expire"):
        sid = _opt_int(d, "session_id")
        if sid is None:
            raise InvalidOptions("`session_id` is required")
        return SessionClose(sid) if op == "session_close" else SessionExpire(sid)
    raise InvalidOptions(f"not a mutation: {op!r}")


def command_to_wire(cmd: Command) -> dict[str, Any]:
    """The JSON form of a command, without defaults (what the log stores)."""
    if isinstance(cmd, Put):
        out: dict[str, Any] = {"op": "put", "key": cmd.key, "value": cmd.value}
        if cmd.expected_version is not None:
            out["expected_version"] = cmd.expected_version
        if cmd.ephemeral:
            out["ephemeral"] = True
        if cmd.session_id is not None:
            out["session_id"] = cmd.session_id
        if cmd.partition_key is not None:
            out["partition_key"] = cmd.partition_key
        if cmd.sequence_keys_deltas is not None:
            out["sequence_keys_deltas"] = list(cmd.sequence_keys_deltas)
        if cmd.secondary_indexes:
            out["secondary_indexes"] = dict(cmd.secondary_indexes)
        return out
    if isinstance(cmd, Delete):
        out = {"op": "delete", "key": cmd.key}
        if cmd.expected_version is not None:
            out["expected_version"] = cmd.expected_version
        return out
    if isinstance(cmd, DeleteRange):
        return {"op": "delete_range", "min": cmd.min, "max": cmd.max}
    if isinstance(cmd, SessionOpen):
        return {"op": "session_open", "timeout_ms": cmd.timeout_ms, "client": cmd.client}
    if isinstance(cmd, SessionClose):
        return {"op": "session_close", "session_id": cmd.session_id}
    return {"op": "session_expire", "session_id": cmd.session_id}


KEY_SPACE_END = "\U0010ffff"


def prefix_end(prefix: str) -> str:
    """The smallest string greater than every string starting with `prefix`.

    For `list(prefix, prefix_end(prefix))`: a prefix scan in natural key order. With
    nothing to increment (the empty prefix) it is `KEY_SPACE_END`, past any real key.
    """
    chars = list(prefix)
    while chars and ord(chars[-1]) == 0x10FFFF:
        chars.pop()
    if not chars:
        return KEY_SPACE_END
    nxt = ord(chars[-1]) + 1
    if 0xD800 <= nxt <= 0xDFFF:   # skip the surrogate block: not valid in UTF-8 keys
        nxt = 0xE000
    chars[-1] = chr(nxt)
    return "".join(chars)


# ---- the state machine ---------------------------------------------------------------------------

class MetadataState:
    """The whole store in memory. Not thread-safe: one owner (the event loop) calls it."""

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}
        self._keys: SortedList = SortedList()
        self._indexes: dict[str, SortedList] = {}
        self._sessions: dict[int, _Session] = {}
        self.last_version_id = 0
        self.last_session_id = 0

    # -- introspection --

    @property
    def record_count(self) -> int:
        return len(self._records)

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    def session_ids(self) -> list[int]:
        return sorted(self._sessions)

    def session_keys(self, session_id: int) -> set[str]:
        session = self._sessions.get(session_id)
        return set(session.keys) if session else set()

    def index_names(self) -> list[str]:
        return sorted(name for name, entries in self._indexes.items() if entries)

    # -- dispatch --

    def apply(self, cmd: Command, now_ms: int) -> Applied[Any]:
        if isinstance(cmd, Put):
            return self.put(cmd, now_ms)
        if isinstance(cmd, Delete):
            return self.delete(cmd, now_ms)
        if isinstance(cmd, DeleteRange):
            return self.delete_range(cmd, now_ms)
        if isinstance(cmd, SessionOpen):
            return self.session_open(cmd, now_ms)
        if isinstance(cmd, SessionClose):
            return self.session_close(cmd, now_ms)
        if isinstance(cmd, SessionExpire):
            return self.session_expire(cmd, now_ms)
        raise InvalidOptions(f"unknown command {cmd!r}")

    # -- writes --

    def put(self, cmd: Put, now_ms: int) -> Applied[PutResult]:
        key = cmd.key
        if cmd.sequence_keys_deltas is not None:
            key = self._next_sequence_key(cmd)
        elif cmd.expected_version is not None and cmd.expected_version < MUST_NOT_EXIST:
            raise InvalidOptions(f"expected_version must be -1 (must not exist) or a version id, got {cmd.expected_version}")
        if cmd.ephemeral:
            if cmd.session_id is None:
                raise InvalidOptions(f"ephemeral put of {key!r} needs a session_id: open a session first")
            if cmd.session_id not in self._sessions:
                raise SessionExpired(f"session {cmd.session_id} does not exist (expired or closed)")
        existing = self._records.get(key)
        if cmd.sequence_keys_deltas is None:
            self._check_version(key, existing, cmd.expected_version)

        self.last_version_id += 1
        if existing is None:
            version = Version(self.last_version_id, now_ms, now_ms, 0, cmd.ephemeral,
                              cmd.session_id if cmd.ephemeral else None)
            event = EventType.CREATED
            self._keys.add(key)
        else:
            version = Version(self.last_version_id, existing.version.created_ms, now_ms,
                              existing.version.modifications_count + 1, cmd.ephemeral,
                              cmd.session_id if cmd.ephemeral else None)
            event = EventType.MODIFIED
            self._unlink(existing)
        record = Record(key, cmd.value, version, cmd.partition_key, cmd.secondary_indexes)
        self._records[key] = record
        self._link(record)   # also files an ephemeral record under its session
        return Applied(PutResult(key, version), (Notification(event, key, version.version_id),))

    def delete(self, cmd: Delete, now_ms: int) -> Applied[bool]:
        existing = self._records.get(cmd.key)
        self._check_version(cmd.key, existing, cmd.expected_version)
        if existing is None:
            return Applied(False, (), mutated=False)
        self._remove(existing)
        return Applied(True, (Notification(EventType.DELETED, cmd.key, existing.version.version_id),))

    def delete_range(self, cmd: DeleteRange, now_ms: int) -> Applied[int]:
        doomed = [self._records[k] for k in self._key_range(cmd.min, cmd.max)]
        for record in doomed:
            self._remove(record)
        events = tuple(Notification(EventType.DELETED, r.key, r.version.version_id) for r in doomed)
        return Applied(len(doomed), events, mutated=bool(doomed))

    def session_open(self, cmd: SessionOpen, now_ms: int) -> Applied[int]:
        if not MIN_SESSION_TIMEOUT_MS <= cmd.timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            raise InvalidOptions(f"session timeout_ms must be in [{MIN_SESSION_TIMEOUT_MS}, "
                                 f"{MAX_SESSION_TIMEOUT_MS}], got {cmd.timeout_ms}")
        self.last_session_id += 1
        sid = self.last_session_id
        self._sessions[sid] = _Session(SessionInfo(sid, cmd.timeout_ms, cmd.client), now_ms + cmd.timeout_ms)
        return Applied(sid)

    def session_close(self, cmd: SessionClose, now_ms: int) -> Applied[int]:
        return self._end_session(cmd.session_id)

    def session_expire(self, cmd: SessionExpire, now_ms: int) -> Applied[int]:
        return self._end_session(cmd.session_id)

    # -- sessions (runtime only, never logged) --

    def keepalive(self, session_id: int, now_ms: int) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionExpired(f"session {session_id} does not exist (expired or closed)")
        session.deadline_ms = now_ms + session.info.timeout_ms

    def session_deadline(self, session_id: int) -> int | None:
        session = self._sessions.get(session_id)
        return session.deadline_ms if session else None

    def due_sessions(self, now_ms: int) -> list[int]:
        """Sessions whose deadline has passed; the caller expires them through `apply`."""
        return sorted(sid for sid, s in self._sessions.items() if s.deadline_ms <= now_ms)

    def reset_session_deadlines(self, now_ms: int) -> None:
        """After recovery: every session gets `now + timeout`, as after an Oxia leader change."""
        for session in self._sessions.values():
            session.deadline_ms = now_ms + session.info.timeout_ms

    # -- reads --

    def get(self, key: str, comparison: Comparison = Comparison.EQUAL, *,
            use_index: str | None = None, include_value: bool = True) -> GetResult:
        if use_index is not None:
            return self._get_by_index(key, comparison, use_index, include_value)
        found = self._find_key(key, comparison)
        if found is None:
            raise KeyNotFound(f"no record {'at' if comparison is Comparison.EQUAL else comparison.value + ' of'} {key!r}")
        return self._result(self._records[found], include_value)

    def list(self, min_key: str, max_key: str, *, use_index: str | None = None) -> builtins.list[str]:
        if use_index is not None:
            return [pk for _, pk in self._index_range(use_index, min_key, max_key)]
        return list(self._key_range(min_key, max_key))

    def range_scan(self, min_key: str, max_key: str, *, use_index: str | None = None,
                   limit: int | None = None, include_value: bool = True) -> builtins.list[GetResult]:
        if limit is not None and limit < 0:
            raise InvalidOptions(f"limit must be >= 0, got {limit}")
        out: builtins.list[GetResult] = []
        if use_index is not None:
            for sk, pk in self._index_range(use_index, min_key, max_key):
                if limit is not None and len(out) >= limit:
                    break
                out.append(self._result(self._records[pk], include_value, sk))
            return out
        for key in self._key_range(min_key, max_key):
            if limit is not None and len(out) >= limit:
                break
            out.append(self._result(self._records[key], include_value))
        return out

    # -- snapshots --

    def export(self) -> StateImage:
        return StateImage(self.last_version_id, self.last_session_id, tuple(self._records.values()),
                          tuple(s.info for s in self._sessions.values()))

    @classmethod
    def from_image(cls, image: StateImage, now_ms: int) -> MetadataState:
        state = cls()
        state.last_version_id = image.last_version_id
        state.last_session_id = image.last_session_id
        for info in image.sessions:
            state._sessions[info.session_id] = _Session(info, now_ms + info.timeout_ms)
        state._records = {r.key: r for r in image.records}
        state._keys = SortedList(state._records)
        entries: dict[str, list[tuple[str, str]]] = {}
        for record in image.records:   # bulk-build: one sort per index instead of an insert per entry
            for name, sk in record.secondary_indexes:
                entries.setdefault(name, []).append((sk, record.key))
            if record.version.ephemeral and record.version.session_id in state._sessions:
                state._sessions[record.version.session_id].keys.add(record.key)
        state._indexes = {name: SortedList(items) for name, items in entries.items()}
        return state

    # -- internals --

    @staticmethod
    def _check_version(key: str, existing: Record | None, expected: int | None) -> None:
        if expected is None:
            return
        if expected == MUST_NOT_EXIST:
            if existing is not None:
                raise BadVersion(f"{key!r} exists at version {existing.version.version_id}, expected none")
        elif existing is None:
            raise BadVersion(f"{key!r} does not exist, expected version {expected}")
        elif existing.version.version_id != expected:
            raise BadVersion(f"{key!r} is at version {existing.version.version_id}, expected {expected}")

    def _next_sequence_key(self, cmd: Put) -> str:
        deltas = cmd.sequence_keys_deltas or ()
        if not cmd.partition_key:
            raise InvalidOptions(f"sequence_keys_deltas on {cmd.key!r} need a partition_key (Oxia keeps a sequence in one shard)")
        if cmd.expected_version is not None:
            raise BadVersion(f"sequence_keys_deltas on {cmd.key!r} cannot be combined with expected_version "
                             f"(Oxia answers UNEXPECTED_VERSION_ID)")
        if not deltas:
            raise InvalidOptions("sequence_keys_deltas must not be empty")
        if deltas[0] <= 0 or any(d < 0 for d in deltas[1:]):
            raise InvalidOptions(f"sequence_keys_deltas: the first delta must be > 0 and the rest >= 0, got {list(deltas)}")
        last = self._last_sequence_parts(cmd.key)
        if len(last) > len(deltas):
            raise InvalidOptions(f"sequence {cmd.key!r} has {len(last)} parts but the put gives {len(deltas)} deltas")
        parts = [(last[i] if i < len(last) else 0) + d for i, d in enumerate(deltas)]
        if any(p > _MAX_SEQUENCE for p in parts):
            raise InvalidOptions(f"sequence {cmd.key!r} overflows 20 digits")
        return cmd.key + "".join(f"-{p:0{SEQUENCE_DIGITS}d}" for p in parts)

    def _last_sequence_parts(self, prefix: str) -> builtins.list[int]:
        lo, hi = prefix + "-0", prefix + "-:"   # ':' sorts right after '9'
        pos = self._keys.bisect_left(hi) - 1
        if pos < 0:
            return []
        last = self._keys[pos]
        if last < lo:
            return []
        parts = last[len(prefix) + 1:].split("-")
        if not all(len(p) == SEQUENCE_DIGITS and p.isdigit() for p in parts):
            raise InvalidOptions(f"{last!r} is in the sequence range of {prefix!r} but is not a sequence key")
        return [int(p) for p in parts]

    def _find_key(self, key: str, comparison: Comparison) -> str | None:
        keys = self._keys
        if comparison is Comparison.EQUAL:
            return key if key in self._records else None
        if comparison is Comparison.FLOOR:
            pos = keys.bisect_right(key) - 1
        elif comparison is Comparison.LOWER:
            pos = keys.bisect_left(key) - 1
        elif comparison is Comparison.CEILING:
            pos = keys.bisect_left(key)
        else:
            pos = keys.bisect_right(key)
        return keys[pos] if 0 <= pos < len(keys) else None

    def _get_by_index(self, key: str, comparison: Comparison, index: str, include_value: bool) -> GetResult:
        entries = self._indexes.get(index)
        entry: tuple[str, str] | None = None
        if entries:
            first_ge = entries.bisect_left((key,))
            first_gt = self._first_after(entries, key)
            if comparison is Comparison.EQUAL:
                entry = entries[first_ge] if first_ge < first_gt else None
            elif comparison is Comparison.CEILING:
                entry = entries[first_ge] if first_ge < len(entries) else None
            elif comparison is Comparison.HIGHER:
                entry = entries[first_gt] if first_gt < len(entries) else None
            elif comparison is Comparison.FLOOR:
                # Oxia: the first entry of an equal secondary key, else the last lower one.
                if first_ge < first_gt:
                    entry = entries[first_ge]
                elif first_ge > 0:
                    entry = entries[first_ge - 1]
            elif first_ge > 0:   # LOWER
                entry = entries[first_ge - 1]
        if entry is None:
            raise KeyNotFound(f"no entry {comparison.value} {key!r} in index {index!r}")
        return self._result(self._records[entry[1]], include_value, entry[0])

    @staticmethod
    def _first_after(entries: SortedList, secondary_key: str) -> int:
        """Position of the first entry whose secondary key is > `secondary_key`."""
        lo, hi = entries.bisect_left((secondary_key,)), len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if entries[mid][0] <= secondary_key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _key_range(self, min_key: str, max_key: str) -> Iterable[str]:
        if min_key >= max_key:
            return iter(())
        return self._keys.irange(min_key, max_key, inclusive=(True, False))

    def _index_range(self, index: str, min_key: str, max_key: str) -> Iterable[tuple[str, str]]:
        entries = self._indexes.get(index)
        if not entries or min_key >= max_key:
            return iter(())
        return entries.irange((min_key,), (max_key,), inclusive=(True, False))

    @staticmethod
    def _result(record: Record, include_value: bool, secondary_key: str | None = None) -> GetResult:
        return GetResult(record.key, record.value if include_value else None, record.version, secondary_key)

    def _link(self, record: Record) -> None:
        for name, sk in record.secondary_indexes:
            self._indexes.setdefault(name, SortedList()).add((sk, record.key))
        if record.version.ephemeral and record.version.session_id is not None:
            session = self._sessions.get(record.version.session_id)
            if session is not None:
                session.keys.add(record.key)

    def _unlink(self, record: Record) -> None:
        for name, sk in record.secondary_indexes:
            entries = self._indexes[name]
            entries.remove((sk, record.key))
            if not entries:
                del self._indexes[name]
        if record.version.ephemeral and record.version.session_id is not None:
            session = self._sessions.get(record.version.session_id)
            if session is not None:
                session.keys.discard(record.key)

    def _remove(self, record: Record) -> None:
        self._unlink(record)
        del self._records[record.key]
        self._keys.remove(record.key)

    def _end_session(self, session_id: int) -> Applied[int]:
        session = self._sessions.pop(session_id, None)
        if session is None:
            raise SessionExpired(f"session {session_id} does not exist (expired or closed)")
        events: builtins.list[Notification] = []
        for key in sorted(session.keys):
            record = self._records.get(key)
            if record is None or record.version.session_id != session_id:
                continue
            self._remove(record)
            events.append(Notification(EventType.DELETED, key, record.version.version_id))
        return Applied(len(events), tuple(events))
