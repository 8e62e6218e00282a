"""Triggers: inject a fault at a critical moment of the load, read from the run's history.

Theory of operation. A window that fails a transaction only when it strikes while the
transaction is being ended (v4's END_TXN fan-out to the participants, v5's decision
written to the metadata store and read by the participants) lasts milliseconds; a
fault started at a fixed second rarely hits it. The load already writes every
operation to `history/<writer>.jsonl`, line by line and flushed, before it starts
(`invoke`) and when it completes (`ok`), on the same host. So a trigger follows those
files: when a triggered window is due, `HistoryTail.wait_for` reads what the writers
append from then on (every writer but the nemesis itself) and returns the first line
whose `f` and `type` match, e.g. the next `txn-commit` invoke (a coordinator is about to
end a transaction with its participants) or `txn-commit` ok (its markers or decision
were just written). The nemesis then injects at once, a few milliseconds later.

A trigger can also aim the fault at the load's state (`topic:trigger`,
`segment:trigger`, `coordinator:trigger`): a seal, split, merge, unload or kill of
what a transaction is open on, or of the coordinator a commit is in flight to. For
that the tail keeps, from the lines it reads, the topics and segments (v4:
partitions) each open transaction sent to or acknowledged on (`OpenTxns`), and an
aimed wait takes only a line whose transaction has some: a transactional send or
ack (the line's own segment), or a commit or abort of a transaction whose sends the
tail saw. The match then carries them (`participants`), and the fault's target is
chosen among them (faults.selectors, `Aim`).

Each new line is read once as a typed `Event` (harness.history.events, the one reading of
the history, so `f` and `type` are the schema's `OpF` and `OpType`, as for every other
pass); a line that is not JSON or not an event is skipped. A match is the raw line: the
nemesis records its fields (`index` too) as the trigger's `seen`. Matching is a pure
function of one event (`matches`); the tail keeps one offset per file and the bytes of a
line not yet complete, so a line is seen once, whole. Every wait is bounded by its timeout
and by the stop event; files are polled every `POLL_S`, and one poll reads at most
`MAX_READ` bytes per file (a writer far ahead is caught up over a few polls, newest lines
not skipped).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.history.events import Event, event_of
from harness.history.schema import OpF, OpType

POLL_S = 0.005
MAX_READ = 1 << 20
MAX_OPEN_TXNS = 20_000      # transactions remembered at once; the oldest are forgotten first
_ENDS = frozenset({OpF.TXN_COMMIT, OpF.TXN_ABORT})
_WRITES = frozenset({OpF.SEND, OpF.ACK})


def matches(event: Event, on: OpF, type_: OpType) -> bool:
    """True when the history event is the operation a trigger waits for. A `send` or `ack`
    counts only inside a transaction: a trigger times a fault to the load's transactions, and
    a non-transactional send (a feeder's) says nothing about one being open."""
    if event.f in _WRITES and not event.txn:
        return False
    return event.f is on and event.type is type_


class OpenTxns:
    """The topics and segments each open transaction wrote to or acknowledged on, as far as
    the lines read show; a transaction is forgotten when its commit or abort completes."""

    def __init__(self, limit: int = MAX_OPEN_TXNS) -> None:
        self.limit = limit
        self._parts: dict[str, dict[tuple[str, str | None], None]] = {}
        self._written: dict[str, set[str]] = {}      # txn -> topics it sent to (not only acked on)

    def observe(self, event: Event) -> None:
        txn, f, topic = event.txn, event.f, event.topic
        if txn is None:
            return
        if f in _ENDS and event.type is not OpType.INVOKE:
            self._parts.pop(txn, None)
            self._written.pop(txn, None)
            return
        if f not in _WRITES or topic is None:
            return
        if f is OpF.SEND:
            self._written.setdefault(txn, set()).add(topic)
        parts = self._parts.setdefault(txn, {})
        if event.segment is not None:
            parts.pop((topic, None), None)
            parts[(topic, event.segment)] = None
        elif not any(t == topic for t, _ in parts):
            parts[(topic, None)] = None
        while len(self._parts) > self.limit:
            oldest = next(iter(self._parts))
            del self._parts[oldest]
            self._written.pop(oldest, None)

    def participants(self, event: Event) -> list[tuple[str, str | None]]:
        """Where the event's transaction is open: its known topics and segments (the event's own first)."""
        if event.txn is None:
            return []
        own = [(event.topic, event.segment)] if event.f in _WRITES and event.topic is not None else []
        return own + [p for p in self._parts.get(event.txn, {}) if p not in own]

    def written(self, event: Event) -> list[str]:
        """The topics the event's transaction sent to (a send's own topic included)."""
        if event.txn is None:
            return []
        own = {event.topic} if event.f is OpF.SEND and event.topic is not None else set()
        return sorted(self._written.get(event.txn, set()) | own)


class HistoryTail:
    """Follows the `*.jsonl` files of a history folder from where each ends when first seen."""

    def __init__(self, directory: Path, skip: Iterable[Path] = ()) -> None:
        self.directory = directory
        self.skip = {p.resolve() for p in skip}
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self.open_txns = OpenTxns()

    def _files(self) -> list[Path]:
        return [p for p in sorted(self.directory.glob("*.jsonl")) if p.resolve() not in self.skip]

    def skip_to_end(self) -> None:
        """Forget everything written so far: only lines appended after this call count."""
        for path in self._files():
            try:
                self._offsets[path] = path.stat().st_size
            except FileNotFoundError:
                continue
            self._partial[path] = b""

    def _new_lines(self, path: Path) -> list[bytes]:
        offset = self._offsets.get(path, 0)
        try:
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read(MAX_READ)
        except FileNotFoundError:
            return []
        if not data:
            return []
        self._offsets[path] = offset + len(data)
        data = self._partial.get(path, b"") + data
        *lines, rest = data.split(b"\n")
        self._partial[path] = rest
        return lines

    def poll(self, on: str, type_: str, *, aimed: bool = False) -> dict[str, Any] | None:
        """The first new line matching, or None; every new line is consumed either way. With
        `aimed`, only a line whose transaction is known to be open somewhere matches, and the
        match carries `participants` ([topic, segment] pairs) and `written`."""
        want, want_type = OpF(on), OpType(type_)      # the trigger's TriggerOn, TriggerType, as the schema's
        found: dict[str, Any] | None = None
        for path in self._files():
            for line in self._new_lines(path):
                try:       # a blank line, or one that is not JSON or not an event, is skipped
                    op = json.loads(line)
                    event = event_of(path.stem, op) if isinstance(op, dict) else None
                except (ValueError, TypeError):
                    continue
                if event is None:
                    continue
                if found is None and matches(event, want, want_type):
                    parts = self.open_txns.participants(event)
                    if parts or not aimed:
                        found = {**op, "participants": [list(p) for p in parts],
                                 "written": self.open_txns.written(event)} if aimed else op
                self.open_txns.observe(event)
        return found

    def wait_for(self, on: str, type_: str, timeout_s: float, stop: threading.Event, *,
                 aimed: bool = False) -> dict[str, Any] | None:
        """The next matching line appended after this call, or None after `timeout_s` (or on stop)."""
        self.skip_to_end()
        deadline = time.monotonic() + timeout_s
        while True:
            seen = self.poll(on, type_, aimed=aimed)
            if seen is not None:
                return seen
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stop.wait(min(POLL_S, remaining)):
                return None
