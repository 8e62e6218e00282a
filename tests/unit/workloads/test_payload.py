"""Payloads: orjson writes the bytes `json.dumps` wrote before it (issue #27), padded to size."""

from __future__ import annotations

import json

import pytest

from workloads.payload import decode, encode


def _json_encode(value: str, inputs: tuple[str, ...], size: int) -> bytes:
    """The encoding before orjson, kept as the reference."""
    head = json.dumps({"v": value, "i": list(inputs), "p": ""}, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")
    missing = size - len(head)
    return head if missing <= 0 else head[:-2] + b"x" * missing + head[-2:]


@pytest.mark.parametrize(("value", "inputs", "size"), [
    ("w0.3.17", (), 1024), ("w0.3.17", (), 0), ("w1.0.0", ("w0.1.2", "w0.1.3"), 256),
    ("é\u2028\"\\\n\x01 ✓", ("\x7f",), 64), ("w0.0.0", (), 5),
])
def test_encode_writes_the_json_module_bytes(value: str, inputs: tuple[str, ...], size: int) -> None:
    data = encode(value, inputs, size)
    assert data == _json_encode(value, inputs, size)
    assert len(data) == max(size, len(_json_encode(value, inputs, 0)))
    decoded = decode(data)
    assert decoded.value == value and decoded.inputs == inputs
