"""The tail between a stuck read and a stale stated end, without processes (orchestrator/load/undeliverable.py)."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.load.undeliverable import aborted_transactions, tail_positions


def test_the_tail_runs_from_after_the_last_read_to_the_last_confirmed_entry() -> None:
    stats = {"ledgers": [{"ledgerId": 3, "entries": 20}, {"ledgerId": 7, "entries": 0}],
             "lastConfirmedEntry": "7:1"}
    assert tail_positions(stats, (3, 18)) == [(3, 19), (7, 0), (7, 1)]
    from_start = tail_positions(stats, None, limit=100)
    assert from_start is not None
    assert from_start[:2] == [(3, 0), (3, 1)]
    assert tail_positions(stats, (7, 1)) == []


def test_a_tail_longer_than_the_bound_or_without_an_end_decides_nothing() -> None:
    stats = {"ledgers": [{"ledgerId": 3, "entries": 20}], "lastConfirmedEntry": "3:19"}
    assert tail_positions(stats, None, limit=5) is None
    assert tail_positions({"ledgers": [], "lastConfirmedEntry": "3:-1"}, None) is None
    assert tail_positions({"ledgers": []}, None) is None


def test_aborted_means_no_commit_could_have_happened(tmp_path: Path) -> None:
    """An abort answered ok, a commit that definitely failed, or no commit asked for (abandoned:
    2.10.5's stale tails held messages of the 34 transactions the load left open); a commit of
    unknown outcome (1:3) or answered ok (1:4) is not aborted."""
    ops = [{"f": "txn-abort", "type": "ok", "txn": "1:1"}, {"f": "txn-commit", "type": "invoke", "txn": "1:2"},
           {"f": "txn-commit", "type": "fail", "txn": "1:2"},
           {"f": "txn-commit", "type": "invoke", "txn": "1:3"}, {"f": "txn-commit", "type": "info", "txn": "1:3"},
           {"f": "txn-commit", "type": "invoke", "txn": "1:4"}, {"f": "txn-commit", "type": "ok", "txn": "1:4"},
           {"f": "txn-abort", "type": "info", "txn": "1:5"}, {"f": "send", "type": "ok", "txn": "1:6"}]
    lines = [{"schema": 1, "run": "r", "writer": "w0", "process": "w0/u0", "index": i, "time_ns": i,
              "path": "v4", **op} for i, op in enumerate(ops)]
    (tmp_path / "w0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert aborted_transactions(tmp_path, []) == {"1:1", "1:2", "1:5", "1:6"}
    assert aborted_transactions(tmp_path, [tmp_path / "w0.jsonl"]) == set()
