"""Is a stuck read at the end of what any reader can be given?

Why: up to 3.2 Apache Pulsar answers GET_LAST_MESSAGE_ID with the partition's last confirmed
entry (2.10-3.1) or its max read position (3.2), and with transactions that entry is nearly
always a commit or abort marker, or a message of an aborted transaction: entries the broker
never dispatches. A reader that reads "to the last message id" (ours, or Java's
`hasMessageAvailable` loop) then waits for an entry that never comes (apache/pulsar#11877;
4.0 and 5.0 answer the last *dispatchable* position instead). Every drain on such a release
stopped short and every verdict was unknown, so the release matrix could not judge them.

So when a read of a v4 partition stops short, the drain asks the partition's owner for every
entry between the last one read and the last confirmed one, or the transaction buffer's max read
position when that comes first (admin getMessageById, at most `MAX_TAIL` of them): what 3.3 and
later answer as the last dispatchable position. When each is a server-only marker, or a message of a transaction the
load's own history shows cannot have committed (`aborted_transactions`), the read did reach the
end of what a reader is given: the
partition counts as read, and the stale end is recorded (`UndeliverableEnd`) for the report.
Anything else in the tail (a message of a committed or undecided transaction, a plain message)
decides nothing: the read stays incomplete and the verdict unknown, as before.

When the owner cannot show the tail (an entry it does not return, no answer, a tail longer than
the bound), the reader's own cursor can still tell: its `readPosition` (internalStats) past the
bound means the broker's dispatcher read every entry up to it and gave the reader none after the
last one read, so nothing there is for a reader. Why: on 2.10-4.0.3 a terminated topic loaded
again answers getMessageById with HTTP 500 (the NullPointerException of apache/pulsar#24063), and
the 2.10.5 matrix cell stayed unknown on exactly that (`results/20261129-112947-release-matrix-chaos`).
What the skipped entries were is then unknown (`UndeliverableEnd.seen_by_cursor`); the checker
judges the values by what the reads lack, as always.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.history import OpF, OpType
from harness.history.events import read_events
from harness.history.positions import ledger_entry
from harness.history.reader import HistoryFormatError

MAX_TAIL = 1000      # entries between the last read and the end, at most, asked one by one (a chaos run ends with
                     # many aborts: 2.10.5 had more than 64 markers and aborted messages after a last value)


@dataclass(frozen=True)
class UndeliverableEnd:
    """A partition whose stated end lies past every entry a reader is given."""

    partition: str
    last_read: tuple[int, int] | None     # None: nothing was read from it
    end: tuple[int, int]                  # its last confirmed entry
    markers: int                          # entries between that are transaction markers
    aborted: int                          # entries between that are messages of aborted transactions
    horizon: tuple[int, int] | None = None   # the max read position, when before `end`: entries past it are held
    seen_by_cursor: bool = False          # the owner could not show the tail; the reader's cursor had read past it

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition,
                "last_read": None if self.last_read is None else f"{self.last_read[0]}:{self.last_read[1]}",
                "end": f"{self.end[0]}:{self.end[1]}", "markers": self.markers, "aborted": self.aborted,
                "horizon": None if self.horizon is None else f"{self.horizon[0]}:{self.horizon[1]}",
                "seen_by_cursor": self.seen_by_cursor}


def aborted_transactions(history_dir: Path, skip: Iterable[Path]) -> set[str]:
    """Transactions of the load that cannot have committed: an abort answered ok, a commit answered
    with a definite failure (the client then aborts), or no commit ever asked for (left open, or
    abandoned by a client that died: the coordinator aborts it at its timeout; a coordinator
    commits only when asked). A commit whose outcome is unknown is not here."""
    seen: set[str] = set()
    commit_asked: set[str] = set()
    aborted: set[str] = set()
    try:
        for op in read_events(history_dir, exclude={p.stem for p in skip}):
            if not op.txn:
                continue
            seen.add(op.txn)
            if op.f is OpF.TXN_COMMIT and op.type is OpType.INVOKE:
                commit_asked.add(op.txn)
            if (op.f is OpF.TXN_ABORT and op.type is OpType.OK) or (op.f is OpF.TXN_COMMIT and op.type is OpType.FAIL):
                aborted.add(op.txn)
    except HistoryFormatError:
        return set()     # no knowledge: nothing is called aborted
    return aborted | (seen - commit_asked)


def tail_positions(stats: Mapping[str, Any], after: tuple[int, int] | None,
                   limit: int = MAX_TAIL, end: tuple[int, int] | None = None) -> list[tuple[int, int]] | None:
    """The positions after `after` up to `end` (default: the last confirmed entry, internalStats),
    in order; None when there are more than `limit` or the stats do not say where the end is. The
    ledger list's entry count of the ledger being written may lag, so `end`'s ledger ends at `end`."""
    end = end or ledger_entry(stats.get("lastConfirmedEntry"))
    if end is None or end[1] < 0:
        return None
    counts: dict[int, int] = {}
    for row in stats.get("ledgers") or []:
        if isinstance(row, dict) and "ledgerId" in row:
            counts[int(row["ledgerId"])] = int(row.get("entries") or 0)
    counts[end[0]] = end[1] + 1
    out: list[tuple[int, int]] = []
    for ledger_id in sorted(counts):
        if ledger_id > end[0] or (after is not None and ledger_id < after[0]):
            continue
        first = after[1] + 1 if after is not None and ledger_id == after[0] else 0
        for entry_id in range(first, counts[ledger_id]):
            if len(out) >= limit:
                return None
            out.append((ledger_id, entry_id))
    return out


def undeliverable_end(admin: Any, partition: str, last_read: tuple[int, int] | None,
                      aborted: set[str], limit: int = MAX_TAIL, *,
                      subscription: str | None = None) -> UndeliverableEnd | str:
    """The partition's stale end when everything after `last_read` is undeliverable, else why not
    (for the drain's account of a read it could not finish). `subscription`: the stuck reader's,
    whose cursor speaks when the owner cannot show the tail."""
    try:
        stats = admin.internal_stats(partition)
    except Exception as err:     # no answer is no evidence
        return f"no internal stats ({type(err).__name__})"
    end = ledger_entry(stats.get("lastConfirmedEntry"))
    if end is None:
        return "no last confirmed entry in its stats"
    horizon = _read_horizon(admin, partition)
    bound = horizon if horizon is not None and horizon < end else end
    held = horizon if bound != end else None

    def unseen(why: str) -> UndeliverableEnd | str:
        cursor = _cursor_read_position(stats, subscription)
        if cursor is None or cursor <= bound:
            at = "" if cursor is None else f"; the reader's cursor reads next at {cursor[0]}:{cursor[1]}"
            return why + at
        return UndeliverableEnd(partition, last_read, end, 0, 0, held, seen_by_cursor=True)

    positions = tail_positions(stats, last_read, limit, bound)
    if positions is None:
        return unseen(f"more than {limit} entries between the last read and {bound[0]}:{bound[1]}")
    if not positions:
        # the reader has every entry up to the bound: up to the horizon when entries past it are held
        # (a terminated topic's undecided transactions), or all of them when only the broker's end of
        # topic never came; 3.1.0's matrix cell stayed unknown on exactly this (20261129-140446)
        return UndeliverableEnd(partition, last_read, end, 0, 0, held)
    markers = aborted_entries = 0
    for position in positions:
        at = f"{position[0]}:{position[1]}"
        try:
            entry = admin.stored_entry(partition, *position)
        except Exception as err:
            return unseen(f"no answer for {at} ({type(err).__name__})")
        if not entry.found:
            return unseen(f"{at} not returned (HTTP {entry.status})")
        if entry.marker_type is not None:
            markers += 1
        elif entry.txn is not None and entry.txn in aborted:
            aborted_entries += 1
        elif entry.txn is not None:
            return f"{at} is a message of transaction {entry.txn}, not known aborted"
        else:
            return f"{at} is a message outside any transaction"
    return UndeliverableEnd(partition, last_read, end, markers, aborted_entries, held)


def _cursor_read_position(stats: Mapping[str, Any], subscription: str | None) -> tuple[int, int] | None:
    """Where `subscription`'s cursor reads next (internalStats `cursors[...].readPosition`)."""
    if subscription is None:
        return None
    cursor = (stats.get("cursors") or {}).get(subscription)
    return ledger_entry(cursor.get("readPosition")) if isinstance(cursor, Mapping) else None


def _read_horizon(admin: Any, partition: str) -> tuple[int, int] | None:
    """The transaction buffer's max read position: no reader is given anything past it (entries
    behind an undecided transaction, as on a terminated topic, are held there, and the checker
    judges them by what the reads lack). None when the owner does not say."""
    try:
        return ledger_entry(admin.transaction_buffer_stats(partition).get("maxReadPosition"))
    except Exception:
        return None
