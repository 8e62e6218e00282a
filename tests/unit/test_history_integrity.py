"""The record of what a run wrote to its history, and the damage found against it (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.history.integrity import (
    MIN_BLOCK_BYTES,
    Damage,
    block_bytes,
    record_history,
    verify_history,
    verify_writers,
)


def _line(index: int) -> bytes:
    return json.dumps({"schema": 1, "writer": "w0", "index": index, "pad": "x" * 40}).encode() + b"\n"


def _history(tmp_path: Path, lines: int = 1000) -> Path:
    history = tmp_path / "history"
    history.mkdir()
    (history / "w0.jsonl").write_bytes(b"".join(_line(i) for i in range(lines)))
    (history / "run.jsonl").write_bytes(_line(0) + _line(1))
    return history


def _one(damage: list[Damage]) -> Damage:
    assert len(damage) == 1, [str(d) for d in damage]
    return damage[0]


def test_an_unchanged_history_and_a_torn_tail_the_run_left_are_no_damage(tmp_path: Path) -> None:
    history = _history(tmp_path)
    with (history / "w1.jsonl").open("wb") as f:           # a writer killed mid-write, before the record
        f.write(_line(0) + _line(1)[:25])
    record = record_history(history)
    assert record["files"]["w1.jsonl"]["lines"] == 1 and record["files"]["w0.jsonl"]["lines"] == 1000
    assert verify_history(history, record) == []


def test_a_file_cut_at_half_its_bytes_names_the_line_it_was_cut_in(tmp_path: Path) -> None:
    history = _history(tmp_path)
    record = record_history(history)
    w0 = history / "w0.jsonl"
    data = w0.read_bytes()
    half = len(data) // 2
    w0.write_bytes(data[:half])
    damage = _one(verify_history(history, record))
    line = data[:half].count(b"\n") + 1
    assert (damage.file, damage.line) == ("w0.jsonl", line)
    assert str(damage).startswith(f"history/w0.jsonl: line {line}: cut in the middle of this line")
    assert "not a torn last line" in str(damage) and f"{len(data) - half:,} of its {len(data):,} bytes" in str(damage)


def test_a_file_cut_at_a_line_end_names_the_first_missing_line(tmp_path: Path) -> None:
    history = _history(tmp_path)
    record = record_history(history)
    w0 = history / "w0.jsonl"
    w0.write_bytes(b"".join(_line(i) for i in range(400)))
    damage = _one(verify_history(history, record))
    assert damage.line == 401 and "cut after line 400" in damage.problem and "1,000 line(s)" in damage.problem


def test_a_corrupt_line_in_the_middle_is_named(tmp_path: Path) -> None:
    history = _history(tmp_path)
    record = record_history(history)
    w0 = history / "w0.jsonl"
    lines = w0.read_bytes().splitlines(keepends=True)
    lines[499] = b'{"schema": 1, "broken\n'
    w0.write_bytes(b"".join(lines))
    damage = _one(verify_history(history, record))
    assert damage.line == 500 and "not the line the run wrote: not valid JSON" in damage.problem


def test_a_changed_value_that_is_still_json_is_placed_in_its_block(tmp_path: Path) -> None:
    history = _history(tmp_path, lines=30_000)             # several blocks of 1 MiB
    record = record_history(history)
    assert len(record["files"]["w0.jsonl"]["blocks"]) >= 2
    w0 = history / "w0.jsonl"
    data = bytearray(w0.read_bytes())
    at = data.index(b'"index": 25000,')
    data[at + 10] = ord("7")                               # 25000 -> 27000, valid JSON still
    w0.write_bytes(bytes(data))
    damage = _one(verify_history(history, record))
    assert damage.line is not None and damage.line <= 25_001
    assert "differs from what the run wrote" in damage.problem
    first, last = (int(n.replace(",", "")) for n in damage.problem.split("lines ")[1].split(" ")[0].split("-"))
    assert first <= 25_001 <= last


@pytest.mark.parametrize("where", [0, MIN_BLOCK_BYTES - 1, MIN_BLOCK_BYTES, MIN_BLOCK_BYTES + 1])
def test_damage_at_a_block_boundary_names_the_right_line(tmp_path: Path, where: int) -> None:
    history = _history(tmp_path, lines=30_000)
    record = record_history(history)
    w0 = history / "w0.jsonl"
    data = bytearray(w0.read_bytes())
    data[where] = ord("#")
    w0.write_bytes(bytes(data))
    damage = _one(verify_history(history, record))
    assert damage.line == bytes(data[:where]).count(b"\n") + 1


def test_missing_grown_and_foreign_files_are_damage(tmp_path: Path) -> None:
    history = _history(tmp_path)
    record = record_history(history)
    (history / "run.jsonl").unlink()
    with (history / "w0.jsonl").open("ab") as f:
        f.write(_line(1000))
    (history / "w9.jsonl").write_bytes(_line(0))
    (history / "empty.jsonl").write_bytes(b"")              # an empty file holds nothing to judge
    found = {d.file: d for d in verify_history(history, record)}
    assert set(found) == {"run.jsonl", "w0.jsonl", "w9.jsonl"}
    assert found["run.jsonl"].problem.startswith("missing: the run wrote 2 line(s)")
    assert found["w0.jsonl"].line == 1001 and "written after the run ended" in found["w0.jsonl"].problem
    assert "not among the files the run wrote" in found["w9.jsonl"].problem


def test_an_unreadable_record_is_damage_not_a_crash(tmp_path: Path) -> None:
    history = _history(tmp_path)
    assert "cannot be read" in _one(verify_history(history, {"schema": 1})).problem
    record = record_history(history)
    del record["files"]["w0.jsonl"]["blocks"]
    assert _one(verify_history(history, record)).file == "w0.jsonl"


def test_writers_the_manifest_names_must_have_their_file(tmp_path: Path) -> None:
    history = _history(tmp_path)
    assert verify_writers(history, ["w0", "run"]) == []
    assert [str(d) for d in verify_writers(history, ["w0", "r1"])] == [
        "history/r1.jsonl: missing: the manifest names this writer, so the run had its history"]


def test_a_large_file_keeps_a_small_record() -> None:
    assert block_bytes(0) == block_bytes(MIN_BLOCK_BYTES * 256) == MIN_BLOCK_BYTES
    big = 7 * 10**9
    assert block_bytes(big) % MIN_BLOCK_BYTES == 0 and -(-big // block_bytes(big)) <= 256
