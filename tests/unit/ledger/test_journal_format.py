"""Journal bytes: record codec, batch framing, torn tails versus corruption (no files)."""

from __future__ import annotations

import pytest

from embedded.ledger.journal_format import (
    BATCH_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    SegmentHeader,
    encode_batch_header,
    encode_segment_header,
    scan_segment,
)
from embedded.ledger.model import LedgerKind, LedgerMetadata, LedgerState
from embedded.ledger.records import (
    CreateRecord,
    DeleteRecord,
    EntryRecord,
    JournalCorrupt,
    Record,
    RecordType,
    SealRecord,
    decode_metadata_record,
    decode_seal_record,
    encode_record,
    iter_records,
)


def _segment(batches: list[list[bytes]], first_seq: int = 1) -> tuple[bytes, list[int]]:
    """A segment's bytes and the offset where each batch starts."""
    data = bytearray(encode_segment_header(SegmentHeader(3, 42)))
    starts = []
    for i, records in enumerate(batches):
        body = b"".join(records)
        starts.append(len(data))
        data += encode_batch_header(first_seq + i, body) + body
    return bytes(data), starts


def _entry_batch(ledger: int, first: int, n: int) -> list[bytes]:
    return [encode_record(EntryRecord(ledger, first + i, b"payload-%d" % (first + i))) for i in range(n)]


def test_records_round_trip() -> None:
    metadata = LedgerMetadata(LedgerKind.PENDING_ACK, "persistent://t/n/x-sub__transaction_pending_ack")
    records: list[Record] = [CreateRecord(5, metadata), EntryRecord(5, 0, b"\x00\xffdata"),
               SealRecord(5, LedgerState.FENCED, 0), DeleteRecord(5)]
    body = b"".join(encode_record(r) for r in records)
    refs = iter_records(body, 0, len(body))
    assert [r.type for r in refs] == [RecordType.CREATE, RecordType.ENTRY, RecordType.SEAL, RecordType.DELETE]
    payload = lambda ref: body[ref.payload_offset:ref.payload_offset + ref.payload_size]  # noqa: E731
    assert decode_metadata_record(refs[0], payload(refs[0])) == records[0]
    assert (refs[1].ledger_id, refs[1].aux, payload(refs[1])) == (5, 0, b"\x00\xffdata")
    assert decode_seal_record(refs[2], payload(refs[2])) == records[2]
    assert refs[3].ledger_id == 5


def test_a_clean_segment_scans_whole() -> None:
    data, _ = _segment([_entry_batch(1, 0, 3), _entry_batch(1, 3, 2)])
    scan = scan_segment(data, last=False)
    assert scan.header == SegmentHeader(3, 42)
    assert [b.seq for b in scan.batches] == [1, 2]
    assert (scan.valid_end, scan.torn_bytes) == (len(data), 0)
    refs = [r for b in scan.batches for r in iter_records(data, b.body_start, b.body_end)]
    assert [r.aux for r in refs] == [0, 1, 2, 3, 4]


def test_a_tail_torn_at_any_byte_is_cut_at_the_last_whole_batch() -> None:
    data, starts = _segment([_entry_batch(1, 0, 2), _entry_batch(1, 2, 2), _entry_batch(1, 4, 2)])
    last_start = starts[-1]
    for cut in range(last_start, len(data)):
        scan = scan_segment(data[:cut], last=True)
        assert [b.seq for b in scan.batches] == [1, 2], cut
        assert scan.valid_end == last_start
        assert scan.torn_bytes == cut - last_start


def test_garbage_or_zeros_after_the_last_batch_are_a_torn_tail() -> None:
    data, _ = _segment([_entry_batch(1, 0, 2)])
    for tail in (bytes(4096), b"\x13\x37" * 100):
        scan = scan_segment(data + tail, last=True)
        assert len(scan.batches) == 1 and scan.torn_bytes == len(tail)


def test_a_damaged_last_batch_is_a_torn_tail_only_in_the_last_segment() -> None:
    data, starts = _segment([_entry_batch(1, 0, 2), _entry_batch(1, 2, 2)])
    damaged = bytearray(data)
    damaged[starts[1] + BATCH_HEADER_SIZE + 3] ^= 0xFF
    scan = scan_segment(bytes(damaged), last=True)
    assert [b.seq for b in scan.batches] == [1] and scan.valid_end == starts[1]
    with pytest.raises(JournalCorrupt, match="CRC"):
        scan_segment(bytes(damaged), last=False)


def test_a_crc_mismatch_in_the_middle_is_corruption_not_a_tail() -> None:
    data, starts = _segment([_entry_batch(1, 0, 2), _entry_batch(1, 2, 2), _entry_batch(1, 4, 2)])
    damaged = bytearray(data)
    damaged[starts[1] + BATCH_HEADER_SIZE + 5] ^= 0x01
    with pytest.raises(JournalCorrupt, match=r"batch 2 body CRC mismatch.*batch 3"):
        scan_segment(bytes(damaged), last=True)


def test_a_damaged_batch_header_in_the_middle_is_corruption() -> None:
    data, starts = _segment([_entry_batch(1, 0, 1), _entry_batch(1, 1, 1), _entry_batch(1, 2, 1)])
    damaged = bytearray(data)
    damaged[starts[1] + 9] ^= 0x40    # inside the seq field: header CRC fails
    with pytest.raises(JournalCorrupt, match="header damaged"):
        scan_segment(bytes(damaged), last=True)


def test_a_gap_in_batch_sequence_is_corruption() -> None:
    first, _ = _segment([_entry_batch(1, 0, 1)], first_seq=1)
    second, starts = _segment([_entry_batch(1, 1, 1)], first_seq=3)
    with pytest.raises(JournalCorrupt, match="batch 3 follows batch 1"):
        scan_segment(first + second[starts[0]:], last=True)


def test_a_torn_segment_header_means_an_empty_last_segment() -> None:
    header = encode_segment_header(SegmentHeader(9, 1))
    for cut in range(SEGMENT_HEADER_SIZE):
        assert scan_segment(header[:cut], last=True).header is None
        with pytest.raises(JournalCorrupt):
            scan_segment(header[:cut], last=False)


def test_a_damaged_segment_header_with_batches_after_it_is_corruption() -> None:
    data, _ = _segment([_entry_batch(1, 0, 1)])
    damaged = b"X" + data[1:]
    with pytest.raises(JournalCorrupt, match="segment header"):
        scan_segment(damaged, last=True)
