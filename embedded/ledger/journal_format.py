"""The journal's on-disk layout, and how recovery reads it back (sans-IO).

Theory of operation. The journal is a sequence of segment files. A segment starts
with a header (magic, segment number, the next ledger id when it was opened, CRC)
followed by batches. A batch is one group commit: every record that arrived while
the previous fsync ran, written with one write and made durable with one fsync.

    segment header  [magic 8s][segment_no u64][next_ledger_id u64][crc32c u32]
    batch           [magic u32][seq u64][body_len u32][body_crc u32][header_crc u32][body]

Batch sequence numbers grow by one within a segment and across segments. The writer
writes batch n+1 only after the fsync of batch n returned, and opens a new segment
only after the previous one is complete, so a crash can damage at most the last batch
of the last segment: its bytes may be missing, cut short, or garbage. Recovery
therefore accepts damage only there ("torn tail") and only when no valid batch
follows it; any other damage (a CRC mismatch in the middle, a damaged older
segment, a gap in sequence numbers) raises `JournalCorrupt` instead of silently
losing acknowledged entries. The torn tail was never acknowledged (its fsync did not
return), so dropping it loses nothing a client was told about.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c

from embedded.ledger.records import JournalCorrupt

SEGMENT_MAGIC = b"TBLEDGJ1"
SEGMENT_HEADER = struct.Struct(">8sQQI")
SEGMENT_HEADER_SIZE = SEGMENT_HEADER.size  # 28

BATCH_MAGIC = 0x4C4A424B  # "LJBK"
_BATCH_MAGIC_BYTES = struct.pack(">I", BATCH_MAGIC)
_BATCH_FIELDS = struct.Struct(">IQII")      # magic, seq, body_len, body_crc
_BATCH_HEADER = struct.Struct(">IQIII")     # ... + crc32c of the fields above
BATCH_HEADER_SIZE = _BATCH_HEADER.size      # 24


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(google_crc32c.value(data if isinstance(data, bytes) else bytes(data)))


@dataclass(frozen=True)
class SegmentHeader:
    segment_no: int
    next_ledger_id: int


def encode_segment_header(header: SegmentHeader) -> bytes:
    fields = struct.pack(">8sQQ", SEGMENT_MAGIC, header.segment_no, header.next_ledger_id)
    return fields + struct.pack(">I", crc32c(fields))


def decode_segment_header(buf: bytes) -> SegmentHeader | None:
    """The header at the start of `buf`, or None when it is missing or damaged."""
    if len(buf) < SEGMENT_HEADER_SIZE:
        return None
    magic, segment_no, next_ledger_id, crc = SEGMENT_HEADER.unpack_from(buf, 0)
    if magic != SEGMENT_MAGIC or crc != crc32c(buf[:SEGMENT_HEADER_SIZE - 4]):
        return None
    return SegmentHeader(segment_no, next_ledger_id)


def encode_batch_header(seq: int, body: bytes) -> bytes:
    fields = _BATCH_FIELDS.pack(BATCH_MAGIC, seq, len(body), crc32c(body))
    return fields + struct.pack(">I", crc32c(fields))


@dataclass(frozen=True)
class BatchRef:
    seq: int
    body_start: int   # offset in the segment
    body_end: int


@dataclass(frozen=True)
class SegmentScan:
    """What recovery found in one segment file."""

    header: SegmentHeader | None   # None: a last segment whose header was torn; it holds nothing
    batches: tuple[BatchRef, ...]
    valid_end: int                 # everything after this is a torn tail to cut off
    torn_bytes: int


def _batch_at(buf: bytes, pos: int) -> tuple[BatchRef | None, str]:
    """The batch at `pos`, or None and why not."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        return None, "batch header cut short"
    magic, seq, body_len, body_crc, header_crc = _BATCH_HEADER.unpack_from(buf, pos)
    if magic != BATCH_MAGIC or header_crc != crc32c(buf[pos:pos + BATCH_HEADER_SIZE - 4]):
        return None, "batch header damaged"
    start = pos + BATCH_HEADER_SIZE
    end = start + body_len
    if end > len(buf):
        return None, "batch body cut short"
    if crc32c(buf[start:end]) != body_crc:
        return None, f"batch {seq} body CRC mismatch"
    return BatchRef(seq, start, end), ""


def _valid_batch_after(buf: bytes, pos: int) -> BatchRef | None:
    """Search for any intact batch after damage at `pos` (bounded by the buffer)."""
    find = buf.find
    at = find(_BATCH_MAGIC_BYTES, pos + 1)
    while at != -1:
        batch, _ = _batch_at(buf, at)
        if batch is not None:
            return batch
        at = find(_BATCH_MAGIC_BYTES, at + 1)
    return None


def scan_segment(buf: bytes, *, last: bool, name: str = "segment") -> SegmentScan:
    """Validate one whole segment file's bytes; `last` allows a torn tail.

    Raises JournalCorrupt for damage that a crash of this writer cannot explain.
    """
    header = decode_segment_header(buf)
    if header is None:
        if last and _valid_batch_after(buf, 0) is None:
            return SegmentScan(None, (), 0, len(buf))
        raise JournalCorrupt(f"{name}: segment header is damaged")
    batches: list[BatchRef] = []
    pos = SEGMENT_HEADER_SIZE
    while pos < len(buf):
        batch, why = _batch_at(buf, pos)
        if batch is None:
            later = _valid_batch_after(buf, pos)
            if not last or later is not None:
                where = f"; batch {later.seq} at byte {later.body_start - BATCH_HEADER_SIZE} follows" if later else ""
                raise JournalCorrupt(f"{name}: {why} at byte {pos}{where} (not a torn tail: "
                                     "acknowledged entries may be lost; restore the data directory from a copy "
                                     "or remove it to start empty)")
            return SegmentScan(header, tuple(batches), pos, len(buf) - pos)
        if batches and batch.seq != batches[-1].seq + 1:
            raise JournalCorrupt(f"{name}: batch {batch.seq} follows batch {batches[-1].seq} at byte {pos}")
        batches.append(batch)
        pos = batch.body_end
    return SegmentScan(header, tuple(batches), pos, 0)
