"""Toxics as configuration: names, kinds, attributes, and their JSON form.

A toxic is what the API creates: a name unique within its proxy, a type, the stream
it affects (`upstream` = client to server, `downstream` = server to client), a
toxicity (the probability that it applies to a given connection) and integer
attributes whose names, defaults (0) and units are Toxiproxy's (the vocabulary and its
table are in `harness.toxiproxy.model`, shared with the client and the fault actions).

What it does to a stream is in `faultproxy.behaviours`. A `Toxic` is immutable; an
update makes a new one with the same `uid` and the next `revision`, so a link can tell
"changed" from "removed and added again".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from types import MappingProxyType
from typing import Any

from faultproxy.errors import ApiError, bad_request, invalid_stream, invalid_toxic_type
from harness.toxiproxy.model import ATTRIBUTES, Stream, ToxicType

_uids = itertools.count(1)


def new_uid() -> int:
    return next(_uids)


@dataclass(frozen=True)
class Toxic:
    name: str
    type: ToxicType
    stream: Stream
    toxicity: float
    attributes: Mapping[str, int]
    uid: int = field(default_factory=new_uid, compare=False)
    revision: int = 0

    def attr(self, key: str) -> int:
        return self.attributes[key]

    def to_json(self) -> dict[str, Any]:
        """Toxiproxy's shape: every attribute of the type is listed, defaults included."""
        return {
            "attributes": dict(self.attributes),
            "name": self.name,
            "type": self.type.value,
            "stream": self.stream.value,
            "toxicity": self.toxicity,
        }


def _as_int(kind: ToxicType, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(f"{kind} attribute {key!r} must be a whole number, got {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise bad_request(f"{kind} attribute {key!r} must be a whole number, got {value!r}")
    number = int(value)
    if number < 0:
        raise bad_request(f"{kind} attribute {key!r} must not be negative, got {number}")
    return number


def _attributes(kind: ToxicType, raw: object, base: Mapping[str, int]) -> Mapping[str, int]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise bad_request(f"attributes must be a JSON object, got {raw!r}")
    known = ATTRIBUTES[kind]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise bad_request(f"{kind} has no attribute {', '.join(map(repr, unknown))}; "
                          f"its attributes are {', '.join(known)}")
    values = {key: _as_int(kind, key, raw[key]) if key in raw else base.get(key, 0) for key in known}
    if kind is ToxicType.SLICER:
        if values["average_size"] <= 0:
            raise bad_request("slicer attribute 'average_size' must be at least 1 byte")
        if values["size_variation"] >= values["average_size"]:
            raise bad_request("slicer attribute 'size_variation' must be smaller than 'average_size'")
    return MappingProxyType(values)


def _toxicity(raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0.0 <= raw <= 1.0:
        raise bad_request(f"toxicity must be a number from 0 to 1, got {raw!r}")
    return float(raw)


def parse_toxic(body: object) -> Toxic:
    """A new toxic from a POST body; Toxiproxy's defaults (downstream, toxicity 1, name type_stream)."""
    if not isinstance(body, dict):
        raise bad_request(f"expected a JSON object, got {body!r}")
    raw_type = body.get("type")
    if raw_type not in [t.value for t in ToxicType]:
        raise invalid_toxic_type(raw_type, [t.value for t in ToxicType])
    kind = ToxicType(raw_type)
    raw_stream = body.get("stream") or Stream.DOWNSTREAM.value
    if raw_stream not in [s.value for s in Stream]:
        raise invalid_stream(raw_stream)
    stream = Stream(raw_stream)
    name = body.get("name") or f"{kind.value}_{stream.value}"
    if not isinstance(name, str) or "/" in name:
        raise bad_request(f"toxic name must be a string without '/', got {name!r}")
    toxicity = _toxicity(body["toxicity"]) if body.get("toxicity") is not None else 1.0
    return Toxic(name=name, type=kind, stream=stream, toxicity=toxicity,
                 attributes=_attributes(kind, body.get("attributes"), {}))


def updated_toxic(toxic: Toxic, body: object) -> Toxic:
    """An update: given attributes replace the current ones, others stay; so does the stream."""
    if not isinstance(body, dict):
        raise bad_request(f"expected a JSON object, got {body!r}")
    for fixed in ("type", "stream", "name"):
        if fixed in body and body[fixed] not in (None, getattr(toxic, fixed)):
            raise ApiError(f"a toxic's {fixed} cannot be changed; delete {toxic.name!r} and create "
                           "it again", HTTPStatus.BAD_REQUEST)
    toxicity = _toxicity(body["toxicity"]) if body.get("toxicity") is not None else toxic.toxicity
    return replace(toxic, toxicity=toxicity, revision=toxic.revision + 1,
                   attributes=_attributes(toxic.type, body.get("attributes"), toxic.attributes))
