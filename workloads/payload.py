"""Message payloads and the values they carry.

Every message the harness sends is UTF-8 JSON `{"v": value, "i": inputs, "p": padding}`
(docs/history.md): `v` is the message's unique value, `i` the input values a
consume-transform-produce output was made from, and `p` pads the message to the
scenario's `message_size` bytes. Values are unique across a run because each is
`<writer>.<user>.<sequence>` and each load process has its own writer name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import orjson


class PayloadError(ValueError):
    """A received payload is not one of ours."""


@dataclass(frozen=True)
class Decoded:
    value: str
    inputs: tuple[str, ...]


def encode(value: str, inputs: Sequence[str] = (), size: int = 0) -> bytes:
    """The payload carrying `value` (and `inputs`), padded to `size` bytes when it is shorter.

    orjson writes the same bytes as `json.dumps(..., separators=(",", ":"), ensure_ascii=False)`
    for these string fields, at a fraction of the cost (one payload per send; issue #27).
    """
    head = orjson.dumps({"v": value, "i": list(inputs), "p": ""})
    missing = size - len(head)
    if missing <= 0:
        return head
    # the padding goes between the quotes of "p":"" (the last two bytes are `"}`)
    return head[:-2] + b"x" * missing + head[-2:]


def decode(data: bytes) -> Decoded:
    """The value and inputs a payload carries.

    Raises:
        PayloadError: not UTF-8 JSON with a string `v` (and a list of strings `i`).
    """
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, ValueError) as err:
        raise PayloadError(f"not a txnbench payload: {err}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("v"), str):
        raise PayloadError("not a txnbench payload: no string 'v'")
    inputs = obj.get("i") or []
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
        raise PayloadError("not a txnbench payload: 'i' is not a list of strings")
    return Decoded(obj["v"], tuple(inputs))


class ValueSource:
    """Unique values for one process: `<writer>.<user>.<n>`."""

    __slots__ = ("_next", "prefix")

    def __init__(self, writer: str, user: int) -> None:
        self.prefix = f"{writer}.{user}."
        self._next = 0

    def next(self) -> str:
        value = f"{self.prefix}{self._next}"
        self._next += 1
        return value
