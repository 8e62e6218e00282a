"""Triggers: the history tail sees each new line once, whole, and only lines written after it armed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from faults.triggers import HistoryTail, OpenTxns, matches
from harness.config import TriggerOn, TriggerType
from harness.history.events import event_of
from harness.history.schema import OpF, OpType


def _line(f: str, type_: str, index: int, **extra: object) -> str:
    return json.dumps({"writer": "w0", "process": "w0/u1", "index": index, "f": f, "type": type_, **extra}) + "\n"


def test_matches_on_f_and_type() -> None:
    assert matches(event_of("w0", {"f": "txn-commit", "type": "invoke"}), OpF.TXN_COMMIT, OpType.INVOKE)
    assert not matches(event_of("w0", {"f": "txn-commit", "type": "ok"}), OpF.TXN_COMMIT, OpType.INVOKE)
    assert not matches(event_of("w0", {"f": "send", "type": "invoke"}), OpF.TXN_COMMIT, OpType.INVOKE)
    assert set(TriggerOn) <= set(OpF) and set(TriggerType) <= set(OpType)     # what poll reads them as


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
    # Bounds far from both sides (a match returns at once, a timeout after 30 s; 0.1 s against 5 s),
    # so a machine too busy to run the writer thread on time does not fail them.
    started = time.monotonic()
    seen = tail.wait_for("txn-commit", "ok", 30.0, stop)
    writer.join()
    assert seen is not None and seen["txn"] == "1:9" and time.monotonic() - started < 10.0
    started = time.monotonic()
    assert tail.wait_for("txn-commit", "ok", 0.1, stop) is None
    assert time.monotonic() - started < 5.0
    stop.set()
    assert tail.wait_for("txn-commit", "ok", 30.0, stop) is None    # a stopped nemesis does not wait


def test_an_aimed_trigger_takes_a_commit_only_of_a_transaction_seen_open_and_names_where(tmp_path: Path) -> None:
    worker = tmp_path / "w0.jsonl"
    worker.write_text("")
    tail = HistoryTail(tmp_path)
    tail.skip_to_end()
    with worker.open("a") as handle:
        handle.write(_line("txn-commit", "invoke", 0, txn="1:1"))          # its sends were not seen
        handle.write(_line("send", "invoke", 1, txn="0:5", topic="topic://t/n/a"))
        handle.write(_line("send", "ok", 2, txn="0:5", topic="topic://t/n/a", segment="segment://t/n/a/0-f-1"))
        handle.write(_line("ack", "invoke", 3, txn="0:5", topic="persistent://t/n/in",
                           segment="persistent://t/n/in-partition-1"))
    assert tail.poll("txn-commit", "invoke", aimed=True) is None
    with worker.open("a") as handle:
        handle.write(_line("txn-commit", "invoke", 4, txn="0:5"))
    seen = tail.poll("txn-commit", "invoke", aimed=True)
    assert seen is not None and seen["txn"] == "0:5"
    assert seen["participants"] == [["topic://t/n/a", "segment://t/n/a/0-f-1"],
                                    ["persistent://t/n/in", "persistent://t/n/in-partition-1"]]
    with worker.open("a") as handle:                                      # ended: forgotten
        handle.write(_line("txn-commit", "ok", 5, txn="0:5"))
        handle.write(_line("txn-abort", "invoke", 6, txn="0:5"))
    assert tail.poll("txn-abort", "invoke", aimed=True) is None


def test_an_aimed_send_trigger_is_a_transactional_send_and_carries_its_own_segment_first(tmp_path: Path) -> None:
    worker = tmp_path / "w0.jsonl"
    worker.write_text("")
    tail = HistoryTail(tmp_path)
    tail.skip_to_end()
    with worker.open("a") as handle:
        handle.write(_line("send", "ok", 0, txn=None, topic="persistent://t/n/in", segment="p0"))
        handle.write(_line("send", "ok", 1, txn="2:1", topic="topic://t/n/b", segment="s-b"))
        handle.write(_line("send", "ok", 2, txn="2:1", topic="topic://t/n/a", segment="s-a"))
    seen = tail.poll("send", "ok", aimed=True)
    assert seen is not None and seen["index"] == 1 and seen["participants"] == [["topic://t/n/b", "s-b"]]


def test_open_transactions_are_bounded() -> None:
    txns = OpenTxns(limit=3)
    for i in range(10):
        txns.observe(event_of("w0", {"f": "send", "type": "ok", "txn": f"0:{i}", "topic": "t", "segment": "s"}))
    assert txns.participants(event_of("w0", {"f": "txn-commit", "txn": "0:0"})) == []
    assert txns.participants(event_of("w0", {"f": "txn-commit", "txn": "0:9"})) == [("t", "s")]


def test_an_aimed_match_says_which_topics_the_transaction_wrote(tmp_path: Path) -> None:
    worker = tmp_path / "w0.jsonl"
    worker.write_text("")
    tail = HistoryTail(tmp_path)
    tail.skip_to_end()
    with worker.open("a") as handle:
        handle.write(_line("ack", "invoke", 0, txn="0:1", topic="in", segment="in-p0"))
        handle.write(_line("send", "ok", 1, txn="0:1", topic="out", segment="out-p1"))
        handle.write(_line("txn-commit", "invoke", 2, txn="0:1"))
    seen = tail.poll("txn-commit", "invoke", aimed=True)
    assert seen is not None and seen["written"] == ["out"]
    from faults.resolution import Aim

    aim = Aim.from_seen(seen)
    assert aim is not None and aim.writes_only().participants == (("out", "out-p1"),)
    assert Aim("0:1", (("in", None),)).writes_only() == Aim("0:1", (("in", None),))   # not known: all count
