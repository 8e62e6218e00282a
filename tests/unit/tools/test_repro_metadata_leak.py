"""tools/repro/v5_txn_metadata_leak.py without a cluster: ZooKeeperMain's output read right,
the leak judged from the final count, the plot drawn."""

from __future__ import annotations

from pathlib import Path

from tools.repro.v5_txn_metadata_leak import (
    Count,
    connected,
    count_metadata,
    leak_shows,
    parse_ls,
    parse_ls_recursive,
    plot,
)

LS_OUTPUT = """Connecting to 127.0.0.1:2181
WATCHER::
WatchedEvent state:SyncConnected type:None path:null zxid: -1
[1-0__seq_counter__, 1-0:op-0000000001, 2-7__seq_counter__]
"""

LS_R_OUTPUT = """Connecting to 127.0.0.1:2181
/txn/segment-events
/txn/segment-events/seg-a
/txn/segment-events/seg-a/0000000001
/txn/segment-events/seg-a/0000000002
"""


def test_the_children_are_read_from_the_last_list_line() -> None:
    assert parse_ls(LS_OUTPUT) == ["1-0__seq_counter__", "1-0:op-0000000001", "2-7__seq_counter__"]
    assert parse_ls("Connecting\n[]\n") == []
    assert parse_ls("Node does not exist: /txn/op\n") == []


def test_a_recursive_listing_counts_every_node_below_the_root() -> None:
    assert parse_ls_recursive(LS_R_OUTPUT, "/txn/segment-events") == 3
    assert parse_ls_recursive("Node does not exist: /txn/segment-events\n", "/txn/segment-events") == 0


def test_counters_and_records_are_counted_apart() -> None:
    answers = {("ls", "/txn/op"): LS_OUTPUT, ("ls", "-R", "/txn/segment-events"): LS_R_OUTPUT,
               ("ls", "-R", "/txn/subscription-events"): "Node does not exist\n"}
    count = count_metadata("127.0.0.1:1", "round 1", 100, 3.5, cli=lambda _zk, *cmd: answers[cmd])
    assert (count.op_counters, count.op_records, count.segment_events, count.subscription_events) == (2, 1, 3, 0)


def test_the_leak_shows_when_anything_is_left_under_txn_op(tmp_path: Path) -> None:
    before = Count("before", 0, 0, 0, 0, 0, None)
    after = Count("round 1", 100, 100, 40, 100, 50, 12.0)
    final = Count("+150s", 100, 100, 0, 100, 50, None)
    assert leak_shows(final) and not leak_shows(before)
    plot([before, after, final], tmp_path / "leak.png")
    assert (tmp_path / "leak.png").stat().st_size > 0


def test_a_listing_without_a_connected_session_is_not_a_count() -> None:
    """The first real run passed an empty address: ZooKeeperMain never connected, and every
    count read 0 (results/20261129-103532-v5-metadata-leak, stopped)."""
    assert connected(LS_OUTPUT)
    assert not connected("Connecting to \nWATCHER::\nWatchedEvent state:Disconnected type:None path:null\n[]\n")


def test_a_runs_json_draws_the_same_plot_again(tmp_path: Path) -> None:
    import json
    from dataclasses import asdict

    from tools.repro.v5_txn_metadata_leak import replot

    counts = [Count("before", 0, 1, 0, 2, 0, None), Count("round 1", 100, 101, 0, 103, 0, 25.8)]
    (tmp_path / "leak.json").write_text(json.dumps({"topic": "t", "counts": [asdict(c) for c in counts]}))
    replot(tmp_path / "leak.json", tmp_path / "again.png")
    assert (tmp_path / "again.png").stat().st_size > 0
