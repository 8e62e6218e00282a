"""What the floor passes of tools.bench.spark_floor and tools.bench.duckdb_floor must count, from a
history's lines in plain Python: both engines' tests hold their passes to it."""

from __future__ import annotations

from pathlib import Path

from harness.history import read_history_dir


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
