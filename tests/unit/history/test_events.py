"""The one typed reading of history lines (harness.history.events): what the passes outside Spark rely on."""

import json
from pathlib import Path

import pytest

from harness.history import HistoryFormatError, OpF, OpType
from harness.history.events import file_events, read_events
from harness.history.schema import NEMESIS_WRITER


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines))
    return path


def test_a_line_becomes_typed_with_the_absent_made_plain(tmp_path: Path) -> None:
    write(tmp_path / "w0.jsonl", [json.dumps({"f": "send", "type": "ok", "process": "w0/u1", "time_ns": 5,
                                              "txn": "1:2", "msg_id": "3:4:-1", "extra": None}),
                                  json.dumps({"f": "bogus", "type": "odd"}), '{"torn'])
    sent, odd = read_events(tmp_path)
    assert (sent.writer, sent.process, sent.time_ns, sent.f, sent.type) == ("w0", "w0/u1", 5, OpF.SEND, OpType.OK)
    assert (sent.txn, sent.msg_id, sent.topic, sent.extra) == ("1:2", "3:4:-1", None, {})
    assert (odd.f, odd.type, odd.time_ns, odd.process) == (None, None, 0, "")


def test_writers_and_operations_select_and_damage_raises_unless_skipped(tmp_path: Path) -> None:
    fault = {"f": "fault", "type": "invoke", "process": "nemesis", "extra": {"fault_id": "f1"}}
    write(tmp_path / f"{NEMESIS_WRITER}.jsonl", [json.dumps(fault), json.dumps({"f": "heal", "type": "ok"})])
    write(tmp_path / "run.jsonl", [json.dumps({"f": "phase", "type": "ok", "extra": {"name": "faults"}}),
                                   "not json", json.dumps({"f": "phase", "type": "ok"}), ""])
    assert [e.fault_key for e in read_events(tmp_path, writers=(NEMESIS_WRITER,), fs=(OpF.FAULT,))] == ["f1"]
    with pytest.raises(HistoryFormatError):
        list(read_events(tmp_path, exclude=(NEMESIS_WRITER,)))
    assert [e.phase for e in file_events(tmp_path / "run.jsonl", skip_damaged=True)] == ["faults"]
