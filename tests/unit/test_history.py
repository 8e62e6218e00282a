from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from harness.errors import DefiniteError, IndeterminateError
from harness.history import (
    FIELDS,
    HistoryMisuse,
    HistoryRecorder,
    OpF,
    OpType,
    RunClock,
    read_history_dir,
)
from harness.history.reader import HistoryFormatError, history_bytes, iter_history_file


def _recorder(tmp_path: Path, writer: str = "w0") -> HistoryRecorder:
    return HistoryRecorder(tmp_path, "run-1", writer, RunClock.start(), txn_path="v4")


def test_lines_follow_schema_1(tmp_path: Path) -> None:
    with _recorder(tmp_path) as rec:
        inv = rec.invoke("w0/u1", OpF.SEND, txn="1:2", topic="persistent://public/default/t",
                         key="k", value="v1", extra={"intended_ns": 5})
        rec.ok(inv, msg_id="3:4:-1")
    lines = (tmp_path / "w0.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(x) for x in lines)
    assert list(first) == list(FIELDS)
    assert first["schema"] == 1 and first["run"] == "run-1" and first["writer"] == "w0"
    assert first["type"] == "invoke" and first["f"] == "send" and first["index"] == 0
    assert first["msg_id"] is None
    assert second["type"] == "ok" and second["index"] == 1 and second["msg_id"] == "3:4:-1"
    assert second["value"] == "v1" and second["txn"] == "1:2" and second["extra"] == {"intended_ns": 5}
    assert second["time_ns"] >= first["time_ns"] >= 0


def test_invoke_is_on_disk_before_the_operation_runs(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    seen: list[str] = []
    with rec.operation("w0/u1", OpF.TXN_OPEN) as inv:
        seen.append((tmp_path / "w0.jsonl").read_text())
        inv.result["txn"] = "0:1"
    rec.close()
    assert '"type":"invoke"' in seen[0]
    ops, _ = read_history_dir(tmp_path)
    assert [o["type"] for o in ops] == ["invoke", "ok"] and ops[1]["txn"] == "0:1"


def test_definite_error_is_fail_and_indeterminate_is_info(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    with pytest.raises(DefiniteError), rec.operation("p1", OpF.ACK, value="a"):
        raise DefiniteError("TransactionConflict")
    with pytest.raises(IndeterminateError), rec.operation("p1", OpF.TXN_COMMIT, txn="1:1"):
        raise IndeterminateError("timed out")
    with pytest.raises(ValueError), rec.operation("p1", OpF.SEND, value="b"):
        raise ValueError("bug")
    rec.close()
    ops, _ = read_history_dir(tmp_path)
    completions = [o for o in ops if o["type"] != "invoke"]
    assert [o["type"] for o in completions] == ["fail", "info", "info"]
    assert completions[0]["error"] == "DefiniteError: TransactionConflict"


def test_one_outstanding_op_per_process(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    rec.invoke("p1", OpF.SEND)
    with pytest.raises(HistoryMisuse):
        rec.invoke("p1", OpF.SEND)
    rec.invoke("p2", OpF.SEND)


def test_completion_without_invocation_is_refused(tmp_path: Path) -> None:
    a, b = _recorder(tmp_path, "a"), _recorder(tmp_path, "b")
    inv = a.invoke("p", OpF.SEND)
    with pytest.raises(HistoryMisuse):
        b.ok(inv)
    a.ok(inv)
    with pytest.raises(HistoryMisuse):
        a.ok(inv)


def test_single_events_and_phases(tmp_path: Path) -> None:
    rec = _recorder(tmp_path, "drain")
    rec.event("drain", OpF.READ, topic="t", value="v", msg_id="1:2:-1")
    rec.phase("drain-complete", topics=["t"], subscriptions=[])
    with pytest.raises(HistoryMisuse):
        rec.event("drain", OpF.SEND)
    with pytest.raises(HistoryMisuse):
        rec.invoke("drain", OpF.READ)
    rec.close()
    ops, _ = read_history_dir(tmp_path)
    assert [o["type"] for o in ops] == ["ok", "ok"]
    assert ops[1]["extra"] == {"name": "drain-complete", "topics": ["t"], "subscriptions": []}


def test_one_file_per_writer_never_overwritten(tmp_path: Path) -> None:
    _recorder(tmp_path, "w0").close()
    with pytest.raises(FileExistsError):
        _recorder(tmp_path, "w0")


def test_threads_do_not_interleave_lines(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)

    def work(n: int) -> None:
        for i in range(200):
            with rec.operation(f"p{n}", OpF.SEND, value=f"{n}-{i}" + "x" * 300):
                pass

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    rec.close()
    ops, scan = read_history_dir(tmp_path)
    assert len(ops) == 8 * 200 * 2 and not scan.torn_tails
    assert [o["index"] for o in ops] == list(range(len(ops)))


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    rec.event("p", OpF.READ, value="a")
    rec.close()
    with (tmp_path / "w0.jsonl").open("a") as f:
        f.write('{"schema":1,"run":"run-1","wri')
    ops, scan = read_history_dir(tmp_path)
    assert [o["value"] for o in ops] == ["a"]
    assert scan.torn_tails == [tmp_path / "w0.jsonl"]


def test_bad_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "w0.jsonl"
    f.write_text('{"a":1}\nnot json\n{"a":2}\n')
    with pytest.raises(HistoryFormatError, match="line 2"):
        list(iter_history_file(f))


_CHILD = r"""
import sys, time
from pathlib import Path
from harness.history import HistoryRecorder, OpF, RunClock
rec = HistoryRecorder(Path(sys.argv[1]), "run-k", "w0", RunClock.start(), txn_path="v5")
done = rec.invoke("w0/u0", OpF.TXN_OPEN)
rec.ok(done, txn="5:1")
rec.invoke("w0/u0", OpF.TXN_COMMIT, txn="5:1")
print("invoked", flush=True)
time.sleep(60)
"""


def test_killed_writer_leaves_a_readable_history_ending_in_an_invoke(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                             text=True, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "invoked"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    ops, scan = read_history_dir(tmp_path)
    assert not scan.torn_tails
    assert [(o["f"], o["type"]) for o in ops] == [
        ("txn-open", "invoke"), ("txn-open", "ok"), ("txn-commit", "invoke")]
    assert ops[-1]["txn"] == "5:1"


def test_clock_is_shared_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = RunClock.start()
    env: dict[str, str] = {}
    clock.export(env)
    monkeypatch.setenv("TXNBENCH_RUN_BASE_NS", env["TXNBENCH_RUN_BASE_NS"])
    child = RunClock.from_env()
    assert child.base_ns == clock.base_ns
    time.sleep(0.001)
    assert child.now_ns() > 0


def test_optypes_are_the_contract() -> None:
    assert {t.value for t in OpType} == {"invoke", "ok", "fail", "info"}
    assert {f.value for f in OpF} == {"txn-open", "send", "ack", "txn-commit", "txn-abort", "receive",
                                      "read", "fault", "heal", "phase", "txn-state"}


def test_orjson_lines_read_back_as_the_json_lines() -> None:
    """The recorder's encoder (orjson) writes what `json` would: every field, the same values."""
    from harness.history.schema import Op

    ops = [
        Op(run="r", writer="w0", process="w0/u1/l2", index=3, time_ns=123456789012, wall_ms=1764200000000.125,
           type=OpType.OK, f=OpF.SEND, path="v4", txn="1:2", topic="persistent://t/n/é", key="k", value="v-1",
           inputs=("a", "b"), msg_id="1:2:-1", error=None,
           extra=cast(dict[str, Any], {"n": 1, "ratio": 1.5e-7, 7: "int key"})),   # an int key on purpose
        Op(run="r", writer="w0", process="w0/u1", index=4, time_ns=1, wall_ms=2.0, type=OpType.INFO,
           f=OpF.TXN_COMMIT, path="v5", error="timeout", extra={"big": 1 << 70}),   # past 64 bits: json fallback
    ]
    for op in ops:
        assert json.loads(op.to_json_bytes()) == json.loads(op.to_json())
        assert list(json.loads(op.to_json_bytes())) == list(json.loads(op.to_json()))   # field order too
        assert op.to_json_line() == op.to_json_bytes() + b"\n"     # what the recorder writes: same bytes


def test_a_completion_carries_the_invocation_fields_and_merges_extra(tmp_path: Path) -> None:
    """The completion line: the invocation's fields, the result's on top, `extra` merged, `path` kept."""
    rec = _recorder(tmp_path)
    inv = rec.invoke("w0/u1", OpF.SEND, txn="1:2", topic="t", key="k", value="v", inputs=["a"],
                     extra={"intended_ns": 5})
    done = rec.ok(inv, msg_id="1:0:-1", segment="t-partition-0", extra={"late": True}, path="v5")
    assert (done.txn, done.topic, done.key, done.value, done.inputs) == ("1:2", "t", "k", "v", ("a",))
    assert (done.msg_id, done.segment, done.path) == ("1:0:-1", "t-partition-0", "v4")
    assert done.extra == {"intended_ns": 5, "late": True} and inv.op.extra == {"intended_ns": 5}
    inv2 = rec.invoke("w0/u1", OpF.TXN_COMMIT, txn="1:2")
    failed = rec.info(inv2, "OperationTimeoutError: x", extra={})
    assert failed.extra is None and failed.error == "OperationTimeoutError: x" and failed.type is OpType.INFO
    rec.close()
    lines = [json.loads(line) for line in (tmp_path / "w0.jsonl").read_bytes().splitlines()]
    assert [line["type"] for line in lines] == ["invoke", "ok", "invoke", "info"]
    assert lines[1]["inputs"] == ["a"] and lines[1]["extra"] == {"intended_ns": 5, "late": True}


def test_recorder_lines_are_whole_and_in_order(tmp_path: Path) -> None:
    rec = HistoryRecorder(tmp_path, "r", "w0", RunClock.start(), txn_path="v4")
    for i in range(50):
        inv = rec.invoke(f"w0/u{i % 3}", OpF.SEND, topic="t", value=f"v{i}", extra={"i": i})
        rec.ok(inv, msg_id=f"1:{i}:-1")
    rec.close()
    lines = (tmp_path / "w0.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    ops = [json.loads(line) for line in lines[:-1]]
    assert [op["index"] for op in ops] == list(range(100))
    assert [op["value"] for op in ops if op["type"] == "ok"] == [f"v{i}" for i in range(50)]


def test_history_bytes_counts_the_history_files_only(tmp_path: Path) -> None:
    assert history_bytes(tmp_path / "missing") == 0
    (tmp_path / "w0.jsonl").write_bytes(b"x" * 10)
    (tmp_path / "w1.jsonl").write_bytes(b"y" * 5)
    (tmp_path / "notes.txt").write_bytes(b"z" * 100)
    (tmp_path / "dir.jsonl").mkdir()
    assert history_bytes(tmp_path) == 15
