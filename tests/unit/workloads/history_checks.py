"""Small assertions about recorded histories, shared by the workload tests."""

from __future__ import annotations

from collections import Counter
from typing import Any

SINGLE = {"receive", "read", "phase"}


def assert_well_formed(ops: list[dict[str, Any]]) -> None:
    """Indexes count up, every completion follows its own invocation, one op per process at a time."""
    assert [op["index"] for op in ops] == list(range(len(ops)))
    open_ops: dict[str, dict[str, Any]] = {}
    for op in ops:
        if op["f"] in SINGLE:
            assert op["type"] == "ok", op
            continue
        if op["type"] == "invoke":
            assert op["process"] not in open_ops, f"two outstanding ops in {op['process']}: {op}"
            open_ops[op["process"]] = op
        else:
            inv = open_ops.pop(op["process"], None)
            assert inv is not None and inv["f"] == op["f"], f"completion without invocation: {op}"
            for name in ("txn", "topic", "key", "value", "subscription"):
                if inv[name] is not None:
                    assert op[name] == inv[name], (name, inv, op)
    assert not open_ops, f"invocations left open: {list(open_ops.values())}"


def sent_values(ops: list[dict[str, Any]]) -> list[str]:
    return [op["value"] for op in ops if op["f"] == "send" and op["type"] == "invoke"]


def assert_unique_values(ops: list[dict[str, Any]]) -> None:
    counts = Counter(sent_values(ops))
    assert counts and max(counts.values()) == 1, [v for v, n in counts.items() if n > 1]


def transactions(ops: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """txn id -> its completed ops (not invocations), in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for op in ops:
        if op["type"] != "invoke" and op["txn"] is not None:
            out.setdefault(op["txn"], []).append(op)
    return out
