"""A history's operations paired while Arrow converts it, so a large check pairs without a shuffle.

Why: pairing is a window over every (writer, process) in index order
(analysis.model.pair_operations). On 20 million events that is a shuffle and a sort of
1.4 GB, some 70 s of task CPU of the check's 390 (docs/checks.md, "Profile of the large
end"). The converter (analysis.columnar) reads each file in order anyway, and each
process has at most one operation outstanding, so the pairing is a stream: one pending
event per process, carried from chunk to chunk and from file to file.

Theory of operation. Each chunk's events that are not single events (`SINGLE_FS`) are put
after the events carried from the chunks before, and sorted by (writer, process), stably,
so each process's events stay in index order. An invocation is completed by the next
event of its process when that is a completion of the same `f`; a completion that the
previous event of its process does not claim so is an orphan. The last event of each
process is held back to the next chunk, since what follows it is not read yet, with
whether its own previous event claimed it. At the end, the held-back events are decided
with nothing after them. The rows are exactly `pair_operations(ops, include_orphans=True,
lean=True)`'s (tests/spark/test_columnar_pairs.py compares the two).

The stream needs each writer's lines in index order across the files, as the recorder
writes them. Where they are not (a file edited or reordered), or a field the window
groups or orders by is missing, `NotPairable` says so, and the check pairs with Spark as
before; validation, which Spark runs on the converted copy, then judges the history.

Public API:

    NotPairable                                      (pair with Spark instead)
    PAIR_SCHEMA                                       (LEAN_PAIR_COLUMNS in Arrow's types)
    Pairing().add(table) -> pa.Table; .finish() -> pa.Table
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.model import LEAN_PAIR_COLUMNS, REQUIRED_FIELDS, SINGLE_FS
from harness.history.schema import OpType

__all__ = ["PAIR_SCHEMA", "NotPairable", "Pairing"]

_STRING = pa.string()
PAIR_SCHEMA = pa.schema([
    ("writer", _STRING), ("process", _STRING), ("f", _STRING), ("type", _STRING), ("completed", pa.bool_()),
    ("orphan", pa.bool_()), ("txn", _STRING), ("topic", _STRING), ("segment", _STRING),
    ("subscription", _STRING), ("key", _STRING), ("value", _STRING), ("inputs", pa.list_(_STRING)),
    ("msg_id", _STRING), ("cumulative", pa.bool_()), ("index", pa.int64()), ("complete_index", pa.int64()),
    ("invoke_ns", pa.int64()), ("complete_ns", pa.int64()),
])
assert tuple(PAIR_SCHEMA.names) == LEAN_PAIR_COLUMNS, "PAIR_SCHEMA must follow analysis.model.LEAN_PAIR_COLUMNS"

# What a completion gives its invocation (the lean pairing's results); the rest is the invocation's.
_RESULTS = ("txn", "topic", "segment", "msg_id")
_OWN = ("subscription", "key", "value", "inputs", "cumulative")
_EVENT_COLUMNS = ("writer", "process", "f", "type", "index", "time_ns", *_RESULTS, *_OWN)
_CLAIMED = "_claimed"   # a held-back event: whether the previous event of its process claimed it
_SINGLES = pa.array(SINGLE_FS, _STRING)


class NotPairable(Exception):
    """The history cannot be paired as a stream; Spark's window pairs it."""


def _codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a string column and the strings they stand for."""
    encoded = pc.dictionary_encode(column)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks != 1 else encoded.chunk(0)
    return (encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
            encoded.dictionary.to_pylist())


def _mask(values: np.ndarray) -> pa.BooleanArray:
    return pa.array(values, pa.bool_())


def _nulls_where(values: pa.Array, keep: np.ndarray) -> pa.Array:
    """`values` where `keep`, null elsewhere."""
    return pc.if_else(_mask(keep), values, pa.nulls(len(values), values.type))


class Pairing:
    """Pairs the rows of a history given chunk by chunk, in file order (the module's docstring)."""

    def __init__(self) -> None:
        self._held: pa.Table | None = None
        self._last_index: dict[str, int] = {}
        self._last_time: dict[str, int] = {}
        self.writers_intact = True
        """Every writer's lines so far are its indexes 0, 1, 2 ... in file order, its `time_ns` never
        going back: the writer integrity analysis.history_io checks with a window over each writer,
        which may then skip it. False says only that the window must look."""

    def add(self, table: pa.Table) -> pa.Table:
        """The operations `table` (rows of analysis.columnar's conversion) completes, as PAIR_SCHEMA rows."""
        rows = table.select(list(_EVENT_COLUMNS))
        for name in REQUIRED_FIELDS:
            if rows.column(name).null_count:
                raise NotPairable(f"a line without `{name}`")
        self._check_order(rows)
        single = pc.is_in(rows.column("f"), value_set=_SINGLES)
        singles = _single_operations(rows.filter(single))
        events = rows.filter(pc.invert(single))
        events = events.append_column(_CLAIMED, pa.nulls(events.num_rows, pa.bool_()))
        return pa.concat_tables([singles, self._pair(events, final=False)])

    def finish(self) -> pa.Table:
        """The operations of the events still held back: nothing follows them."""
        empty = pa.table({name: pa.array([], PAIR_SCHEMA.field(name).type if name in PAIR_SCHEMA.names
                                         else pa.int64()) for name in _EVENT_COLUMNS})
        return self._pair(empty.append_column(_CLAIMED, pa.array([], pa.bool_())), final=True)

    def _check_order(self, rows: pa.Table) -> None:
        """Each writer's indexes must rise line by line, across chunks and files; notes whether they
        also go 0, 1, 2 ... with a clock that never goes back (`writers_intact`)."""
        if not rows.num_rows:
            return
        writers, names = _codes(rows.column("writer"))
        index = rows.column("index").to_numpy()
        times = rows.column("time_ns").to_numpy()
        for code, writer in enumerate(names):
            mine = writers == code
            indexes, clock = index[mine], times[mine]
            before = self._last_index.get(writer)
            if (before is not None and indexes[0] <= before) or bool(np.any(np.diff(indexes) <= 0)):
                raise NotPairable(f"writer {writer}'s lines are not in index order")
            start, since = (before + 1 if before is not None else 0), self._last_time.get(writer, clock[0])
            if indexes[0] != start or indexes[-1] - indexes[0] != len(indexes) - 1 or clock[0] < since \
                    or bool(np.any(np.diff(clock) < 0)):
                self.writers_intact = False
            self._last_index[writer], self._last_time[writer] = int(indexes[-1]), int(clock[-1])

    def _pair(self, events: pa.Table, *, final: bool) -> pa.Table:
        """Operations of the held-back events and `events`; holds back each process's last event unless `final`."""
        if self._held is not None and self._held.num_rows:
            events = pa.concat_tables([self._held, events], promote_options="permissive")
        self._held = None
        if not events.num_rows:
            return PAIR_SCHEMA.empty_table()
        events = events.combine_chunks()
        writers, _ = _codes(events.column("writer"))
        processes, process_names = _codes(events.column("process"))
        fs, _ = _codes(events.column("f"))
        types, type_names = _codes(events.column("type"))
        invoke = types == (type_names.index(OpType.INVOKE.value) if OpType.INVOKE.value in type_names else -1)
        # Stable: a process's events keep their order (held-back first, then this chunk's in file order).
        order = np.argsort(writers * (len(process_names) + 1) + processes, kind="stable")
        group = (writers * (len(process_names) + 1) + processes)[order]
        f, inv = fs[order], invoke[order]
        n = len(order)
        boundary = group[1:] != group[:-1]
        first = np.concatenate(([True], boundary))
        last = np.concatenate((boundary, [True]))
        carried = pc.fill_null(events.column(_CLAIMED), False).to_numpy().astype(bool)[order]
        same_f_before = np.concatenate(([False], f[1:] == f[:-1]))
        claimed = np.where(first, carried, np.concatenate(([False], inv[:-1])) & same_f_before)
        done = ~last & np.concatenate((~inv[1:], [False])) & np.concatenate((f[1:] == f[:-1], [False]))
        hold = last if not final else np.zeros(n, dtype=bool)
        if hold.any():
            kept = order[hold]
            self._held = events.take(pa.array(kept)).set_column(
                events.schema.get_field_index(_CLAIMED), _CLAIMED, _mask(claimed[hold]))
        at = np.arange(n)
        invoked = inv & ~hold
        orphaned = ~inv & ~claimed & ~hold
        return pa.concat_tables([
            _invocations(events, order[invoked], order[np.minimum(at[invoked] + 1, n - 1)], done[invoked]),
            _orphans(events.take(pa.array(order[orphaned]))),
        ])


def _invocations(events: pa.Table, own: np.ndarray, following: np.ndarray, done: np.ndarray) -> pa.Table:
    """Invocations (rows `own`) with their completion (rows `following`, where `done`), or `info`."""
    mine = events.take(pa.array(own))
    after = events.take(pa.array(following))
    done_mask = _mask(done)
    columns: dict[str, pa.Array] = {
        "writer": mine.column("writer"), "process": mine.column("process"), "f": mine.column("f"),
        "type": pc.if_else(done_mask, after.column("type"), pa.scalar(OpType.INFO.value, _STRING)),
        "completed": done_mask, "orphan": pa.repeat(pa.scalar(False), len(own)),
    }
    for name in _RESULTS:
        columns[name] = pc.if_else(done_mask, pc.coalesce(after.column(name), mine.column(name)), mine.column(name))
    for name in _OWN:
        columns[name] = mine.column(name)
    columns["index"] = mine.column("index")
    columns["complete_index"] = _nulls_where(after.column("index").combine_chunks(), done)
    columns["invoke_ns"] = mine.column("time_ns")
    columns["complete_ns"] = _nulls_where(after.column("time_ns").combine_chunks(), done)
    return _shaped(columns)


def _orphans(rows: pa.Table) -> pa.Table:
    """Completions no invocation claims: their own fields, no invocation time."""
    return _complete_as_recorded(rows, orphan=True)


def _single_operations(rows: pa.Table) -> pa.Table:
    """Events complete on their own (receive, read, phase, txn-state): one operation each."""
    return _complete_as_recorded(rows, orphan=False)


def _complete_as_recorded(rows: pa.Table, *, orphan: bool) -> pa.Table:
    """Each row an operation of its own fields; an orphan has no invocation time, a single event
    is invoked and completed at its one time."""
    count = rows.num_rows
    columns: dict[str, pa.Array] = {
        "writer": rows.column("writer"), "process": rows.column("process"), "f": rows.column("f"),
        "type": rows.column("type"), "completed": pa.repeat(pa.scalar(True), count),
        "orphan": pa.repeat(pa.scalar(orphan), count),
        **{name: rows.column(name) for name in (*_RESULTS, *_OWN)},
        "index": rows.column("index"), "complete_index": rows.column("index"),
        "invoke_ns": pa.nulls(count, pa.int64()) if orphan else rows.column("time_ns"),
        "complete_ns": rows.column("time_ns"),
    }
    return _shaped(columns)


def _shaped(columns: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Table:
    return pa.table({name: columns[name] for name in PAIR_SCHEMA.names}, schema=PAIR_SCHEMA)
