"""Write-ahead log codec, segment files and snapshot files."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from embedded.metadata.model import Record, Version
from embedded.metadata.snapshot import (
    CorruptSnapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from embedded.metadata.state import SessionInfo, StateImage
from embedded.metadata.wal import (
    HEADER,
    SegmentWriter,
    decode_records,
    encode_record,
    list_segments,
)


def test_records_round_trip_and_every_torn_prefix_is_detected() -> None:
    payloads = [b'{"lsn":1}', b"x" * 300, b'{"lsn":3,"v":"\xc3\xa9"}']
    stream = b"".join(encode_record(p) for p in payloads)
    full = decode_records(stream)
    assert full.payloads == payloads and not full.torn(len(stream))
    ends = [0]
    for p in payloads:
        ends.append(ends[-1] + HEADER.size + len(p))
    for cut in range(len(stream)):
        part = decode_records(stream[:cut])
        whole = max(i for i, e in enumerate(ends) if e <= cut)
        assert part.payloads == payloads[:whole]
        assert part.valid_bytes == ends[whole]


def test_a_bad_checksum_ends_the_valid_prefix() -> None:
    good, bad = encode_record(b"good"), bytearray(encode_record(b"evil"))
    bad[-1] ^= 0xFF
    decoded = decode_records(good + bytes(bad) + encode_record(b"after"))
    assert decoded.payloads == [b"good"] and decoded.valid_bytes == len(good)
    zero_length = b"\x00" * 16   # a preallocated or zero-filled tail
    assert decode_records(good + zero_length).payloads == [b"good"]


def test_segment_writer_rotates_into_named_segments(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path)
    writer.open(1)
    writer.write(encode_record(b"a") + encode_record(b"b"))
    writer.rotate(3)
    writer.write(encode_record(b"c"))
    writer.sync()
    writer.close()
    segments = list_segments(tmp_path)
    assert [first for first, _ in segments] == [1, 3]
    assert decode_records(segments[0][1].read_bytes()).payloads == [b"a", b"b"]
    assert decode_records(segments[1][1].read_bytes()).payloads == [b"c"]
    with pytest.raises(RuntimeError):
        writer.write(b"x")


def image() -> StateImage:
    records = (
        Record("/a", "1", Version(3, 10, 12, 1, False, None), None, ()),
        Record("/e", "é\n\"x", Version(4, 11, 11, 0, True, 2), "p", (("i1", "k1"), ("i2", "k2"))),
    )
    return StateImage(4, 2, records, (SessionInfo(2, 1000, "broker-0"),))


def test_snapshot_round_trip(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 17, image())
    assert list_snapshots(tmp_path) == [(17, path)]
    loaded = read_snapshot(path)
    assert loaded.lsn == 17 and loaded.image == image()
    assert not list(tmp_path.glob("*.tmp"))


def test_a_damaged_snapshot_is_refused(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 5, image())
    data = bytearray(path.read_bytes())
    data[data.index(b"broker-0")] = ord("B")
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshot, match="checksum"):
        read_snapshot(path)
    path.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(CorruptSnapshot):
        read_snapshot(path)
    assert zlib.crc32(b"") == 0
