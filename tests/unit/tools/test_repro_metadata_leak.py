"""tools/repro/v5_txn_metadata_leak.py without a cluster: ZooKeeperMain's output read right,
Oxia's children asked for as Pulsar's OxiaMetadataStore asks (a fake key store in Oxia's key
order, no socket), the leak judged from the final count, the plots drawn."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest
from oxia.internal.compare import compare_with_slash

from tools.repro.v5_txn_metadata_leak import (
    OXIA,
    ZOOKEEPER,
    Count,
    OxiaLister,
    OxiaUnreachable,
    ZooKeeperLister,
    connected,
    count_metadata,
    leak_shows,
    load_run,
    main,
    oxia_child_names,
    oxia_children_range,
    parse_ls,
    parse_ls_recursive,
    plot,
    plot_stores,
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

SEG = "persistent%3A%2F%2Fpublic%2Fdefault%2Fleak-1%2Fsegment-0"   # TxnPaths.segmentKey: Codec.encode, no `/`

#: Keys as OxiaMetadataStore lays them out (5.0.1): the path is the key, parents are empty keys
#: that `createParents` put, sequence keys are Oxia's own `<prefix>-<20 digits>`.
OXIA_KEYS = [
    "/txn", "/txn/op", "/txn/segment-events", "/txn/id", "/txn/id/1-0", "/txn/id/1-1",
    "/txn/op/1-1-00000000000000000001", "/txn/op/1-1-00000000000000000002",
    f"/txn/segment-events/{SEG}-00000000000000000001", f"/txn/segment-events/{SEG}-00000000000000000002",
    "/txn/segment-state/watermark/" + SEG,
    "/txn/opx", "/txn/op-old/1-0-00000000000000000001",   # neighbours that are no children of /txn/op
]


def oxia_list(keys: list[str]) -> Callable[[str, str], list[str]]:
    """`list(min, max)` as a one-shard Oxia answers it over `keys`: the keys in [min, max) by
    Oxia's hierarchical order (the oxia client's own comparison)."""
    order = functools.cmp_to_key(compare_with_slash)

    def list_keys(low: str, high: str) -> list[str]:
        return sorted((k for k in keys if order(low) <= order(k) < order(high)), key=order)

    return list_keys


def fake_oxia_list(keys: list[str]) -> OxiaLister:
    return OxiaLister(oxia_list(keys))


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
    lister = ZooKeeperLister("127.0.0.1:1", cli=lambda _zk, *cmd: answers[cmd])
    count = count_metadata(lister, "round 1", 100, 3.5)
    assert (count.op_counters, count.op_records, count.segment_events, count.subscription_events) == (2, 1, 3, 0)


def test_oxia_children_are_the_range_oxia_metadata_store_lists() -> None:
    """`getChildrenFromStore`: list(path + "/", path + "//"), the prefix cut off."""
    assert oxia_children_range("/txn/op") == ("/txn/op/", "/txn/op//")
    assert oxia_children_range("/txn/op/") == ("/txn/op/", "/txn/op//")
    assert oxia_child_names("/txn/op", ["/txn/op/a-01", "/txn/op/b/c", "/txn/opx"]) == ["a-01"]


def test_oxia_range_holds_one_level_in_oxias_key_order() -> None:
    """The range is right only in Oxia's order, where a deeper key sorts after `path//`:
    the fake store answers with the client's comparison, and only the children come back."""
    keys = [*OXIA_KEYS, "/txn/op/1-1", "/txn/op/1-1/deeper"]
    assert oxia_list(keys)(*oxia_children_range("/txn/op")) == [
        "/txn/op/1-1", "/txn/op/1-1-00000000000000000001", "/txn/op/1-1-00000000000000000002"]
    assert fake_oxia_list(keys).children("/txn/subscription-events") == []


def test_oxia_counts_op_records_and_events_without_counters() -> None:
    """On Oxia a sequence is its last key: no `__seq_counter__` key, so counters count 0."""
    count = count_metadata(fake_oxia_list(OXIA_KEYS), "round 1", 2, None)
    assert (count.op_counters, count.op_records, count.segment_events, count.subscription_events) == (0, 2, 2, 0)


def test_oxia_counts_below_every_level_as_ls_r_does() -> None:
    keys = ["/a", "/a/b", "/a/b/c", "/a/b/c/d", "/a/e", "/ab/x"]
    assert fake_oxia_list(keys).count_below("/a") == 4
    assert fake_oxia_list(keys).count_below("/missing") == 0
    bounded = fake_oxia_list(keys)
    bounded.max_depth = 2
    assert bounded.count_below("/a") == 3


def test_a_list_oxia_never_answers_is_no_count() -> None:
    release = threading.Event()

    def hangs(_low: str, _high: str) -> list[str]:
        release.wait(5)
        return []

    with pytest.raises(OxiaUnreachable, match="no answer"):
        OxiaLister(hangs, call_timeout_s=0.1).children("/txn/op")
    release.set()


def test_an_oxia_error_reaches_the_caller() -> None:
    def fails(_low: str, _high: str) -> list[str]:
        raise RuntimeError("UNAVAILABLE")

    with pytest.raises(RuntimeError, match="UNAVAILABLE"):
        OxiaLister(fails).children("/txn/op")


def test_the_leak_shows_when_a_path_keeps_more_than_before(tmp_path: Path) -> None:
    before = Count("before", 0, 1, 0, 2, 0, None)
    after = Count("round 1", 100, 101, 40, 103, 50, 12.0)
    final = Count("+150s", 100, 101, 0, 103, 50, None)
    assert leak_shows(before, final) and not leak_shows(before, before)
    oxia_final = Count("+150s", 100, 0, 0, 101, 0, None)   # /txn/op empty, the events stay
    assert leak_shows(Count("before", 0, 0, 0, 1, 0, None), oxia_final)
    plot([before, after, final], tmp_path / "leak.png", OXIA)
    assert (tmp_path / "leak.png").stat().st_size > 0


def test_a_listing_without_a_connected_session_is_not_a_count() -> None:
    """The first real run passed an empty address: ZooKeeperMain never connected, and every
    count read 0 (results/20261129-103532-v5-metadata-leak, stopped)."""
    assert connected(LS_OUTPUT)
    assert not connected("Connecting to \nWATCHER::\nWatchedEvent state:Disconnected type:None path:null\n[]\n")


def test_a_runs_json_draws_the_same_plot_again(tmp_path: Path) -> None:
    counts = [Count("before", 0, 1, 0, 2, 0, None), Count("round 1", 100, 101, 0, 103, 0, 25.8)]
    (tmp_path / "leak.json").write_text(json.dumps({"topic": "t", "counts": [asdict(c) for c in counts]}))
    assert load_run(tmp_path / "leak.json") == (ZOOKEEPER, counts)   # written before the store was recorded
    assert main(["plot", str(tmp_path / "leak.json"), "--out", str(tmp_path / "again.png")]) == 0
    assert (tmp_path / "again.png").stat().st_size > 0


def test_two_stores_runs_are_drawn_side_by_side(tmp_path: Path) -> None:
    zk = [Count("before", 0, 1, 0, 2, 0, None), Count("round 1", 100, 101, 0, 103, 0, 25.8),
          Count("+150s", 100, 101, 0, 103, 0, None)]
    ox = [Count("before", 0, 0, 0, 1, 0, None), Count("round 1", 100, 0, 0, 101, 0, 4.1),
          Count("+150s", 100, 0, 0, 101, 0, None)]
    (tmp_path / "ox.json").write_text(json.dumps({"topic": "t", "store": OXIA, "counts": [asdict(c) for c in ox]}))
    assert load_run(tmp_path / "ox.json") == (OXIA, ox)
    plot_stores([(ZOOKEEPER, zk), (OXIA, ox)], tmp_path / "both.png")
    assert (tmp_path / "both.png").stat().st_size > 0


def test_one_store_is_named_by_host_and_port(tmp_path: Path) -> None:
    """Checked before anything connects: a bad address is exit 2, two stores a usage error."""
    assert main(["pulsar://x:1", "http://x:2", "--oxia", "6648", "--out", str(tmp_path)]) == 2
    with pytest.raises(SystemExit):
        main(["pulsar://x:1", "http://x:2", "--oxia", "h:1", "--zookeeper", "h:2", "--out", str(tmp_path)])
