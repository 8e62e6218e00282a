"""Triggers: the history tail sees each new line once, whole, and only lines written after it armed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from faults.triggers import HistoryTail, matches


def _line(f: str, type_: str, index: int, **extra: object) -> str:
    return json.dumps({"writer": "w0", "process": "w0/u1", "index": index, "f": f, "type": type_, **extra}) + "\n"


def test_matches_on_f_and_type() -> None:
    assert matches({"f": "txn-commit", "type": "invoke"}, "txn-commit", "invoke")
    assert not matches({"f": "txn-commit", "type": "ok"}, "txn-commit", "invoke")
    assert not matches({"f": "send", "type": "invoke"}, "txn-commit", "invoke")


def test_only_lines_after_arming_count_and_a_torn_line_waits_for_its_end(tmp_path: Path) -> None:
    worker = tmp_path / "w0.jsonl"
    worker.write_text(_line("txn-commit", "invoke", 0))            # before: never a trigger
    own = tmp_path / "nemesis.jsonl"
    tail = HistoryTail(tmp_path, skip=[own])
    tail.skip_to_end()
    assert tail.poll("txn-commit", "invoke") is None
    own.write_text(_line("txn-commit", "invoke", 0))                # the nemesis's own file is skipped
    line = _line("txn-commit", "invoke", 1, txn="1:7")
    with worker.open("a") as handle:
        handle.write(_line("send", "invoke", 1) + line[:20])
    assert tail.poll("txn-commit", "invoke") is None                # half a line: not yet
    with worker.open("a") as handle:
        handle.write(line[20:])
    seen = tail.poll("txn-commit", "invoke")
    assert seen is not None and seen["txn"] == "1:7"
    assert tail.poll("txn-commit", "invoke") is None                # consumed


def test_wait_for_returns_the_next_match_from_a_new_writer_or_times_out(tmp_path: Path) -> None:
    tail = HistoryTail(tmp_path)
    stop = threading.Event()

    def write_later() -> None:
        time.sleep(0.05)
        (tmp_path / "w1.jsonl").write_text(_line("txn-commit", "ok", 0, txn="1:9"))

    writer = threading.Thread(target=write_later)
    writer.start()
    started = time.monotonic()
    seen = tail.wait_for("txn-commit", "ok", 5.0, stop)
    writer.join()
    assert seen is not None and seen["txn"] == "1:9" and time.monotonic() - started < 2.0
    started = time.monotonic()
    assert tail.wait_for("txn-commit", "ok", 0.1, stop) is None
    assert time.monotonic() - started < 1.0
    stop.set()
    assert tail.wait_for("txn-commit", "ok", 30.0, stop) is None    # a stopped nemesis does not wait
