"""A large JSONL history to Parquet with Arrow's JSON parser, not Spark's.

Why: converting a 20-million-event history with Spark's JSON reader was one stage of
242 s of task CPU, more than the checks' budget from JSONL (docs/checks.md, "Profile of
the large end"). Arrow's parser is C++, multi-threaded and strict: a JSON type other than
the schema's, a number out of range, a repeated key, bad UTF-8 or a line that is not an
object stops it. Where it stops, or where this module cannot be sure it reads a file as
Spark's reader would, it raises `NotConvertible`, and the caller converts with Spark,
whose validation names the line and the problem. So this is a faster road to the same
Parquet copy, never a second judge of what a history may hold: the copy is validated by
analysis.history_io as before.

What it makes: the columns of `analysis.history_io._with_derived` (the history's fields,
`file`, and the five typed columns taken from `extra`), one Parquet file per chunk of
input, in input order. `extra` keeps the line's own text of the object; Spark's reader
re-renders the same JSON value (the recorder writes compact JSON, which reads back the
same either way). With `pairs_dir`, the same pass pairs the operations
(analysis.columnar_pairs) and writes them there, chunk by chunk.

Public API:

    NotConvertible                      (why Spark has to convert this history)
    Converted                           (rows written, writers intact, validated)
    convert(files, torn, out_dir, *, chunk_bytes=..., pairs_dir=None) -> Converted
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from analysis.columnar_overview import Overview, Validated
from analysis.columnar_pairs import NotPairable, Pairing
from harness.history.schema import FIELDS

__all__ = ["ARROW_FIELDS", "Converted", "NotConvertible", "convert"]

CHUNK_BYTES = 128 * 1024 * 1024
_BLOCK_BYTES = 8 * 1024 * 1024
_BUFFERS = 3                        # pieces in flight: read, parsed, the one before (_chunks)
_BUFFER_SLACK = 1024 * 1024         # room for the line a piece carries over to the next
MAX_CHUNK_BYTES = 2 ** 31 - 1   # the offsets of an Arrow string array are 32-bit

_EXTRA = pa.struct([
    ("name", pa.string()), ("redelivery", pa.int64()), ("cumulative", pa.bool_()),
    ("intended_ns", pa.int64()), ("delivered_ns", pa.int64()),
])
# The line schema of analysis.history_io.HISTORY_SCHEMA in Arrow's types; `extra` as the
# object's keys the analysis reads (its text is taken from the line).
ARROW_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("schema", pa.int64()), ("run", pa.string()), ("writer", pa.string()), ("process", pa.string()),
    ("index", pa.int64()), ("time_ns", pa.int64()), ("wall_ms", pa.float64()), ("type", pa.string()),
    ("f", pa.string()), ("path", pa.string()), ("txn", pa.string()), ("topic", pa.string()),
    ("segment", pa.string()), ("subscription", pa.string()), ("key", pa.string()), ("value", pa.string()),
    ("inputs", pa.list_(pa.string())), ("msg_id", pa.string()), ("error", pa.string()), ("extra", _EXTRA),
)
assert tuple(name for name, _ in ARROW_FIELDS) == FIELDS, "ARROW_FIELDS must follow harness FIELDS"
_LINE_SCHEMA = pa.schema(list(ARROW_FIELDS))
_DERIVED = (("name", "phase"), ("redelivery", "redelivery"), ("cumulative", "cumulative"),
            ("intended_ns", "intended_ns"), ("delivered_ns", "delivered_ns"))
# `"extra":` once in the line, its object last: the text between is the object's.
_EXTRA_KEY = r'"extra"\s*:'
_EXTRA_TEXT = r'"extra"\s*:\s*(?P<extra>\{.*\})\s*\}\s*$'
_BLANK_LINE = r"^[ \n]*$"
# Columns whose values repeat (names, kinds, topics, ids of a few transactions at a time) are
# dictionary-encoded; the others (values, message ids, times, indexes, `extra`) are written plain.
# Arrow tries a dictionary for every column by default and gives it up page by page where the
# values are all different: writing was the conversion's slowest thread, and without those tries
# it took a quarter less CPU, for smaller files (docs/checks.md).
_DICTIONARY_COLUMNS = frozenset({
    "schema", "run", "writer", "process", "type", "f", "path", "txn", "topic", "segment", "subscription",
    "key", "error", "file", "phase"})


class NotConvertible(Exception):
    """This module cannot be sure to read the history as Spark's reader would."""


@dataclass(frozen=True)
class Converted:
    """What `convert` wrote: `rows`; and whether every writer's lines were seen to be its indexes
    0, 1, 2 ... in order with a clock that never went back (`writers_intact`, known only where the
    lines were paired), so validation may skip its window over each writer; and, where both hold,
    what validating the copy would have found (`validated`)."""

    rows: int
    writers_intact: bool
    validated: Validated | None = None
    """The lines' validation and overview (analysis.columnar_overview), when every line kept the
    rules and every writer was seen intact: then Spark need not read the copy to validate it."""


def convert(files: Sequence[Path], torn: Mapping[Path, bytes], out_dir: Path, *,
            chunk_bytes: int = CHUNK_BYTES, progress: Callable[[str], None] | None = None,
            pairs_dir: Path | None = None) -> Converted:
    """Write `files` as Parquet under `out_dir` (created); say what was written.

    `torn` maps a file to its torn last line (analysis.history_io.torn_tail), which is
    left out as Spark's reading leaves it out. Raises NotConvertible; the caller then
    removes `out_dir` and converts with Spark.

    With `pairs_dir`, the operations paired (analysis.columnar_pairs) go there as Parquet
    too, in the same pass; where the lines cannot be paired as a stream, `pairs_dir` is
    removed (the check then pairs with Spark) and the conversion goes on.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    pairing: Pairing | None = None
    if pairs_dir is not None:
        pairs_dir.mkdir(parents=True, exist_ok=True)
        pairing = Pairing()
    rows = part = 0
    overview = Overview()
    # Three stages at once: the next chunk is parsed (Arrow, outside the GIL) while this one is
    # paired (Python) and the one before is written (Arrow, outside the GIL). One after the other
    # they kept about one core busy.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-writer") as writer, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="json-parser") as parser:
        writing: Future[None] | None = None

        def write(table: pa.Table | None, pairs: pa.Table | None) -> None:
            nonlocal writing
            if writing is not None:
                writing.result()
            writing = writer.submit(_write_part, table, out_dir / f"part-{part:05d}.parquet", pairs,
                                    pairs_dir / f"part-{part:05d}.parquet" if pairs_dir is not None else None)

        for path in files:
            for table in _parsed(parser, _chunks(path, torn.get(path), chunk_bytes), path.name):
                pairs = None
                overview.add(table)
                if pairing is not None:
                    try:
                        pairs = pairing.add(table)
                        overview.add_operations(pairs)
                    except NotPairable:
                        pairing = None
                        if writing is not None:
                            writing.result()
                        assert pairs_dir is not None
                        shutil.rmtree(pairs_dir, ignore_errors=True)
                write(table, pairs)
                rows += table.num_rows
                part += 1
            if progress is not None:
                progress(f"converted {path.name} ({rows:,} lines so far)")
        if pairing is not None:
            last = pairing.finish()
            overview.add_operations(last)
            write(None, last)
        if writing is not None:
            writing.result()
    # Arrow's allocator keeps freed memory for reuse; the check's JVM needs it next. Measured on
    # 20 million events: the process held 0.51 GiB after converting, 0.23 GiB after this.
    pa.default_memory_pool().release_unused()
    intact = pairing is not None and pairing.writers_intact
    return Converted(rows, intact, overview.result() if intact else None)


def _parsed(parser: ThreadPoolExecutor, chunks: Iterator[memoryview], file_name: str) -> Iterator[pa.Table]:
    """`_table` of each chunk, in order, the next one parsed by `parser` while the caller uses this one."""
    ahead: Future[pa.Table] | None = None
    for chunk in chunks:
        following = parser.submit(_table, chunk, file_name)
        if ahead is not None:
            yield ahead.result()
        ahead = following
    if ahead is not None:
        yield ahead.result()


def _write_part(table: pa.Table | None, path: Path, pairs: pa.Table | None, pairs_path: Path | None) -> None:
    if table is not None:
        write_by_kind(table, path)
    if pairs is not None and pairs_path is not None and pairs.num_rows:
        write_by_kind(pairs, pairs_path)


def write_by_kind(table: pa.Table, path: Path) -> None:
    """`table` as one Parquet file whose row groups each hold one kind of operation (`f`).

    Why: the checks read one kind at a time (the sends, the acks, the receives), and Spark skips a
    row group whose statistics say it holds none of the kind asked for; with the kinds mixed in
    every row group, each such read decoded every row of the history. Rows carry no meaning in
    their order (the checks order by index and time), so grouping them by kind changes nothing.
    """
    kinds = table.column("f")
    dictionary = [name for name in table.column_names if name in _DICTIONARY_COLUMNS]
    with pq.ParquetWriter(path, table.schema, use_dictionary=dictionary) as out:
        # Kind by kind in sorted order, nulls last: the rows a stable sort by `f` gives, without
        # sorting. A filter per kind copies each row once, in order; the sort compared strings
        # and gathered every column by index (14 s of converting's CPU at 20 million events).
        for kind in sorted(k for k in pc.unique(kinds).to_pylist() if k is not None):
            out.write_table(table.filter(pc.equal(kinds, kind)))
        if kinds.null_count:
            out.write_table(table.filter(pc.is_null(kinds)))


def _chunks(path: Path, tail: bytes | None, chunk_bytes: int) -> Iterator[memoryview]:
    """The file in pieces of about `chunk_bytes` that end at a newline; the torn tail left out.

    Each piece is read into a buffer behind the line carried over from the one before, and
    handed on as a view of its bytes: a piece is copied once, from the file. The buffers are
    reused, three in turn: a new 128 MB buffer per piece was zero-filled by Python and paged in
    by the kernel first (5.2 s of the converting thread at 20 million events). Three suffice:
    `convert` asks for a piece only after handing the table of the piece before on to be written,
    which waits until the table before that is written, so when a buffer comes round again the
    table of the piece it held is written, whatever of its bytes that table might share (none:
    Arrow's parser, the regular expressions and `take` copy). A buffer too small for a piece is
    replaced, not grown: a view of it may still be held.

    Raises NotConvertible at a carriage return: Spark's reader splits lines on them.
    """
    size = path.stat().st_size
    end_of_data = size - len(tail) if tail is not None else size
    buffers = [bytearray() for _ in range(_BUFFERS)]
    turn = 0
    with path.open("rb") as f:
        carry = b""
        read = 0
        while read < end_of_data:
            wanted = min(chunk_bytes, end_of_data - read)
            needed = len(carry) + wanted
            if len(buffers[turn]) < needed:
                buffers[turn] = bytearray(needed + _BUFFER_SLACK)
            buffer = buffers[turn]
            view = memoryview(buffer)
            view[:len(carry)] = carry
            got = f.readinto(view[len(carry):needed])
            if not got:
                break
            read += got
            filled = len(carry) + got     # less than `needed` after a short read
            if buffer.find(b"\r", len(carry), filled) >= 0:
                raise NotConvertible(f"{path.name}: carriage returns (Spark's reader splits lines on them)")
            cut = buffer.rfind(b"\n", 0, filled) + 1 if read < end_of_data else filled
            if cut == 0:
                carry = bytes(view[:filled])
                continue
            carry = bytes(view[cut:filled])
            yield view[:cut]
            turn = (turn + 1) % _BUFFERS
        if carry:
            yield memoryview(bytearray(carry))
    # Spark drops every line equal to the torn tail, not only the last. Such a line is never
    # read here: a torn tail is not a JSON object, so Arrow's parser stops at it.


def _lines(chunk: bytes | bytearray | memoryview) -> pa.StringArray:
    """Each line of `chunk` with its newline, as one Arrow string array over the chunk's bytes."""
    if len(chunk) > MAX_CHUNK_BYTES:   # one line of about 2 GiB: past a string array's 32-bit offsets
        raise NotConvertible(f"a piece of {len(chunk):,} bytes without a newline")
    data = np.frombuffer(chunk, dtype=np.uint8)
    ends = np.flatnonzero(data == 10) + 1
    if not len(ends) or ends[-1] != len(chunk):
        ends = np.append(ends, len(chunk))
    offsets = np.concatenate(([0], ends)).astype(np.int32)
    lines = pa.StringArray.from_buffers(len(ends), pa.py_buffer(offsets.tobytes()), pa.py_buffer(chunk))
    try:
        lines.validate(full=True)
    except pa.ArrowInvalid as err:
        raise NotConvertible(f"not UTF-8: {err}") from err
    return lines


def _without_blank_lines(lines: pa.StringArray, chunk: bytes | bytearray | memoryview) -> pa.StringArray:
    """`lines` but those of spaces only: Spark's reading keeps a line unless it is blank (`trim`),
    and Arrow's parser skips blank lines, so the two are counted alike.

    A line that starts with `{` (every line the recorder writes) is not blank: the pattern runs
    only on the others, and the lines are copied only where one is blank. Testing every line
    with the pattern and copying them all was 5.4 s of converting's CPU at 20 million events.
    """
    starts = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset:lines.offset + len(lines)]
    data = np.frombuffer(chunk, dtype=np.uint8)
    opens = np.zeros(len(starts), dtype=bool)
    inside = starts < len(data)     # an empty last line starts at the end
    opens[inside] = data[starts[inside]] == ord("{")
    others = np.flatnonzero(~opens)
    if not len(others):
        return lines
    # Anchored at the start, the pattern stops at a line's first other character: no trimmed copy.
    blank = pc.match_substring_regex(lines.take(pa.array(others)), _BLANK_LINE).to_numpy(zero_copy_only=False)
    if not blank.any():
        return lines
    keep = np.ones(len(lines), dtype=bool)
    keep[others[blank]] = False
    return lines.filter(pa.array(keep))


def _table(chunk: bytes | bytearray | memoryview, file_name: str) -> pa.Table:
    lines = _lines(chunk)
    kept = _without_blank_lines(lines, chunk)
    try:
        parsed = pj.read_json(
            pa.BufferReader(chunk),
            read_options=pj.ReadOptions(use_threads=True, block_size=_BLOCK_BYTES),
            parse_options=pj.ParseOptions(explicit_schema=_LINE_SCHEMA, unexpected_field_behavior="ignore",
                                          newlines_in_values=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise NotConvertible(f"{file_name}: {err}") from err
    if parsed.num_rows != len(kept):
        raise NotConvertible(f"{file_name}: {parsed.num_rows} objects in {len(kept)} lines")
    parsed = parsed.combine_chunks()
    extra = parsed.column("extra").chunk(0) if parsed.num_rows else pa.array([], _EXTRA)
    columns: dict[str, pa.Array] = {name: parsed.column(name).chunk(0) if parsed.num_rows
                                    else pa.array([], typ) for name, typ in ARROW_FIELDS}
    columns["extra"] = _extra_text(kept, extra, file_name)
    columns["file"] = pa.repeat(pa.scalar(file_name, pa.string()), parsed.num_rows)
    for key, name in _DERIVED:
        columns[name] = pc.struct_field(extra, key)
    return pa.table(columns)


def _extra_text(lines: pa.StringArray, extra: pa.StructArray, file_name: str) -> pa.StringArray:
    """The text of each line's `extra` object; null where `extra` is null or absent."""
    present = pc.is_valid(extra)
    with_extra = lines.filter(present)
    if not len(with_extra):
        return pa.nulls(len(lines), pa.string())
    if not pc.all(pc.equal(pc.count_substring_regex(with_extra, _EXTRA_KEY), 1)).as_py():
        raise NotConvertible(f"{file_name}: a line names \"extra\" more than once")
    found = pc.extract_regex(with_extra, _EXTRA_TEXT)
    texts = pc.struct_field(found, "extra")
    if texts.null_count:
        raise NotConvertible(f"{file_name}: a line's \"extra\" is not its last field")
    _one_object_each(texts, file_name)
    positions = np.flatnonzero(present.to_numpy(zero_copy_only=False))
    indices = np.full(len(lines), -1, dtype=np.int64)
    indices[positions] = np.arange(len(positions))
    return texts.take(pa.array(indices, mask=indices < 0))


def _joined(strings: pa.StringArray) -> pa.Buffer:
    """The strings' bytes one after another: the slice of their data buffer they cover."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)[strings.offset:strings.offset + len(strings) + 1]
    data = strings.buffers()[2]
    return data.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def _one_object_each(texts: pa.StringArray, file_name: str) -> None:
    """Each text must be exactly one JSON object, or the capture took more than `extra`."""
    body = _joined(pc.binary_join_element_wise(texts, "", "\n"))
    try:
        again = pj.read_json(pa.BufferReader(body), read_options=pj.ReadOptions(use_threads=True),
                             parse_options=pj.ParseOptions(explicit_schema=pa.schema([]),
                                                           unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise NotConvertible(f"{file_name}: a line's \"extra\" is not one object: {err}") from err
    if again.num_rows != len(texts):
        raise NotConvertible(f"{file_name}: a line's \"extra\" is not one object")
