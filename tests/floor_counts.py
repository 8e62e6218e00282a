"""What the floor passes of tools.bench.spark_floor and tools.bench.duckdb_floor must count, from a
history's lines in plain Python: both engines' tests hold their passes to it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.history import read_history_dir
from tools.bench.spark_floor import PassCost


def expected_floor_counts(run: Path) -> dict[str, int]:
    """Each pass's name and the rows it must count, in the passes' order."""
    lines, _ = read_history_dir(run / "history")
    sends = [line for line in lines if line["f"] == "send" and line["type"] == "invoke"]
    read = {line["value"] for line in lines
            if line["f"] == "read" and line["value"] is not None and not line["process"].startswith("drain-live")}
    sent = {line["value"] for line in sends}
    return {
        "sends scanned": len(sends),
        "transactions grouped": len({line["txn"] for line in lines if line["txn"] is not None
                                     and line["f"] != "txn-state"}),
        "sends never read": sum(1 for line in sends if line["value"] not in read),
        "receives of a send": sum(1 for line in lines if line["f"] == "receive" and line["value"] in sent),
        "sends kept, wide": len(sends),
        "sends kept, narrow": len(sends),
    }


def assert_every_pass_counts_what_it_names(costs: Sequence[PassCost], run: Path, *, rounds: int = 2) -> None:
    """`costs` are every pass in order, `rounds` times, each counting the rows the history's lines say;
    the history has sends never read and receives of a send, so no count is trivially zero."""
    expected = expected_floor_counts(run)
    assert expected["sends never read"] > 0 and expected["receives of a send"] > 0
    assert [(c.name, c.round) for c in costs] == [(name, r) for r in range(1, rounds + 1) for name in expected]
    for cost in costs:
        assert cost.rows == expected[cost.name], cost.name
        assert cost.wall_s >= 0
