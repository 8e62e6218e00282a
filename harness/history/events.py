"""The history as typed events: the one reading of its lines outside Spark.

Why: the drain (which transactions may be open, which values must show up, which cannot have
committed), the checker's killed-writer and commit-blocked windows, the verdicts' fault windows
and transaction spans, the held-horizon account, the shrink's and the coverage's fault records
and the release matrix's drain observations each read a few fields of every line. Each
read raw dicts with its own `.get`s and defaults, so they could drift from each other and from
the checker's model. Here a line becomes an `Event` once: `f` and `type` as the schema's `OpF`
and `OpType` (the names analysis.model's Spark columns compare with), absent text as None,
`time_ns` as an int (0 when absent), `extra` as a mapping ({} when absent or not an object).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.history.reader import HistoryFormatError, history_files, iter_history_file
from harness.history.schema import FIELDS, FaultEffect, OpF, OpType, recorded_effects

_F = {f.value: f for f in OpF}
_TYPES = {t.value: t for t in OpType}


@dataclass(frozen=True, slots=True)
class Event:
    """One history line, with the fields the passes outside Spark need (docs/history.md).

    `writer` is the file's name: invocations pair with completions per (writer, process).
    `f` or `type` is None for a value schema 1 does not name (no pass matches on it).
    """

    writer: str
    process: str
    time_ns: int
    wall_ms: float
    type: OpType | None
    f: OpF | None
    txn: str | None = None
    topic: str | None = None
    segment: str | None = None
    value: str | None = None
    msg_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fault_key(self) -> str:
        """The fault a nemesis event is about: its fault id (the supervisor records every server's
        exit under one process), else its process."""
        return str(self.extra.get("fault_id") or self.process)

    @property
    def effects(self) -> frozenset[FaultEffect]:
        """A nemesis event's fault effects (`extra.effects`, or its kind's in a history recorded before
        faults carried them: harness.history.schema `recorded_effects`)."""
        return recorded_effects(self.extra)

    @property
    def phase(self) -> str | None:
        """A `phase` event's name (`extra.name`); None for any other event."""
        name = self.extra.get("name") if self.f is OpF.PHASE else None
        return None if name is None else str(name)


# The fields are the line's (FIELDS), as the Spark model's columns are (analysis.model OPS_COLUMNS).
assert {f.name for f in fields(Event)} <= set(FIELDS), "Event must name its fields as the history does"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def event_of(writer: str, line: Mapping[str, Any]) -> Event:
    """The typed event of one parsed line of `writer`'s file."""
    extra = line.get("extra")
    times = line.get("time_ns") or 0, line.get("wall_ms") or 0.0
    if any(isinstance(t, bool) or not isinstance(t, int | float) for t in times):
        raise HistoryFormatError(f"{writer}: a line's time_ns or wall_ms {times!r} is not a number")
    return Event(writer=writer, process=str(line.get("process") or ""), time_ns=int(times[0]),
                 wall_ms=float(times[1]), type=_TYPES.get(line.get("type", "")), f=_F.get(line.get("f", "")),
                 txn=_text(line.get("txn")), topic=_text(line.get("topic")), segment=_text(line.get("segment")),
                 value=_text(line.get("value")), msg_id=_text(line.get("msg_id")),
                 extra=extra if isinstance(extra, Mapping) else {})


def file_events(path: Path, fs: Collection[OpF] | None = None, *, skip_damaged: bool = False) -> Iterator[Event]:
    """The events of one history file (a torn last line left out); `fs`: only events of these
    operations (the others are not even typed: the drain reads every line of the load).

    A line that does not parse raises `HistoryFormatError`; with `skip_damaged` the file ends
    there instead (for an account that explains: the checker reports the damage).
    """
    wanted = None if fs is None else {f.value for f in fs}
    try:
        for line in iter_history_file(path):
            if wanted is None or line.get("f") in wanted:
                yield event_of(path.stem, line)
    except HistoryFormatError:
        if not skip_damaged:
            raise


def read_events(history_dir: Path, *, writers: Collection[str] | None = None, exclude: Collection[str] = (),
                fs: Collection[OpF] | None = None, skip_damaged: bool = False) -> Iterator[Event]:
    """The events of `history_dir`'s files (`file_events`), in file then line order. `writers`:
    only these files (by writer name, e.g. `NEMESIS_WRITER`); `exclude`: not these."""
    for path in history_files(history_dir):
        if (writers is None or path.stem in writers) and path.stem not in exclude:
            yield from file_events(path, fs, skip_damaged=skip_damaged)
