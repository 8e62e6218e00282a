"""A scalable topic's segment DAG (PIP-460), as Pulsar 5.0 models it (`SegmentLayout`, no I/O).

Theory of operation. A scalable topic `topic://t/ns/x` is a DAG of segments; each
covers an inclusive range of the 16-bit key-hash space [0x0000, 0xFFFF] and is an
ordinary topic `segment://t/ns/x/<start:04x>-<end:04x>-<id>`. The active segments
(the leaves) partition the whole space at every epoch. Operations return new layouts:

* `initial(n)`: n root segments of (near) equal width, ids 0..n-1, epoch 0;
* `split(id)`: seal an active segment and add two children covering its halves
  ([start, mid] and [mid + 1, end], mid = start + (end - start) // 2);
* `merge(a, b)`: seal two adjacent active segments and add one child over both;

each bumps the epoch, and sealing records the epoch and time. Ids only grow
(`next_segment_id`), so a segment name is never reused. The JSON form is Pulsar's
`ScalableTopicMetadata` (`epoch`, `nextSegmentId`, `segments` by id, `properties`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

MIN_HASH = 0x0000
MAX_HASH = 0xFFFF
MAX_INITIAL_SEGMENTS = 1024


class LayoutError(ValueError):
    """An operation does not apply to this layout; the message says why."""


class SegmentState(enum.Enum):
    ACTIVE = "ACTIVE"
    SEALED = "SEALED"


@dataclass(frozen=True, order=True)
class HashRange:
    start: int
    end: int

    def __post_init__(self) -> None:
        if not (MIN_HASH <= self.start <= self.end <= MAX_HASH):
            raise LayoutError(f"hash range [{self.start:#06x}, {self.end:#06x}] is not within "
                              f"[{MIN_HASH:#06x}, {MAX_HASH:#06x}] with start <= end")

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def contains(self, value: int) -> bool:
        return self.start <= value <= self.end

    def adjacent(self, other: HashRange) -> bool:
        return self.end + 1 == other.start or other.end + 1 == self.start

    def halves(self) -> tuple[HashRange, HashRange]:
        if self.size < 2:
            raise LayoutError(f"a segment of one hash value ({self.start:#06x}) cannot be split")
        mid = self.start + (self.end - self.start) // 2
        return HashRange(self.start, mid), HashRange(mid + 1, self.end)

    def merged(self, other: HashRange) -> HashRange:
        if not self.adjacent(other):
            raise LayoutError(f"ranges {self} and {other} are not adjacent")
        return HashRange(min(self.start, other.start), max(self.end, other.end))

    def __str__(self) -> str:
        return f"{self.start:04x}-{self.end:04x}"


@dataclass(frozen=True)
class SegmentInfo:
    segment_id: int
    hash_range: HashRange
    state: SegmentState = SegmentState.ACTIVE
    parent_ids: tuple[int, ...] = ()
    child_ids: tuple[int, ...] = ()
    created_at_epoch: int = 0
    sealed_at_epoch: int = -1
    created_at_ms: int = 0
    sealed_at_ms: int = -1

    @property
    def active(self) -> bool:
        return self.state is SegmentState.ACTIVE

    @property
    def descriptor(self) -> str:
        """`<start:04x>-<end:04x>-<id>`: the last part of the segment's topic name."""
        return f"{self.hash_range}-{self.segment_id}"

    def sealed(self, epoch: int, now_ms: int, children: tuple[int, ...]) -> SegmentInfo:
        return replace(self, state=SegmentState.SEALED, child_ids=children, sealed_at_epoch=epoch,
                       sealed_at_ms=now_ms)

    def to_json(self) -> dict[str, Any]:
        return {"segmentId": self.segment_id,
                "hashRange": {"start": self.hash_range.start, "end": self.hash_range.end},
                "state": self.state.value, "parentIds": list(self.parent_ids), "childIds": list(self.child_ids),
                "createdAtEpoch": self.created_at_epoch, "sealedAtEpoch": self.sealed_at_epoch,
                "createdAtMs": self.created_at_ms, "sealedAtMs": self.sealed_at_ms,
                "legacyTopicName": None, "entryBucketSplits": []}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SegmentInfo:
        hr = data["hashRange"]
        return cls(int(data["segmentId"]), HashRange(int(hr["start"]), int(hr["end"])),
                   SegmentState(data.get("state", "ACTIVE")), tuple(int(p) for p in data.get("parentIds", ())),
                   tuple(int(c) for c in data.get("childIds", ())), int(data.get("createdAtEpoch", 0)),
                   int(data.get("sealedAtEpoch", -1)), int(data.get("createdAtMs", 0)),
                   int(data.get("sealedAtMs", -1)))


@dataclass(frozen=True)
class SegmentLayout:
    epoch: int
    next_segment_id: int
    segments: Mapping[int, SegmentInfo]
    properties: Mapping[str, str] = field(default_factory=dict)

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def initial(cls, count: int, now_ms: int, properties: Mapping[str, str] | None = None) -> SegmentLayout:
        if not 1 <= count <= MAX_INITIAL_SEGMENTS:
            raise LayoutError(f"a scalable topic starts with 1 to {MAX_INITIAL_SEGMENTS} segments, not {count}")
        width, extra = divmod(MAX_HASH + 1, count)
        segments: dict[int, SegmentInfo] = {}
        start = MIN_HASH
        for i in range(count):
            end = start + width - 1 + (1 if i < extra else 0)
            segments[i] = SegmentInfo(i, HashRange(start, end), created_at_ms=now_ms)
            start = end + 1
        return cls(0, count, segments, dict(properties or {}))

    # ---- queries ------------------------------------------------------------------------------

    def get(self, segment_id: int) -> SegmentInfo:
        found = self.segments.get(segment_id)
        if found is None:
            known = ", ".join(str(s) for s in sorted(self.segments))
            raise LayoutError(f"segment {segment_id} does not exist (segments: {known})")
        return found

    @property
    def active(self) -> list[SegmentInfo]:
        return sorted((s for s in self.segments.values() if s.active), key=lambda s: s.hash_range.start)

    def route(self, hash_value: int) -> SegmentInfo:
        for segment in self.active:
            if segment.hash_range.contains(hash_value):
                return segment
        raise LayoutError(f"no active segment covers hash {hash_value:#06x} at epoch {self.epoch}")

    def ancestors(self, segment_id: int) -> list[SegmentInfo]:
        """Every segment whose data precedes this one's for some key (parents first, transitively)."""
        seen: set[int] = set()
        order: list[SegmentInfo] = []

        def visit(sid: int) -> None:
            for parent in self.get(sid).parent_ids:
                if parent in self.segments and parent not in seen:
                    seen.add(parent)
                    visit(parent)
                    order.append(self.segments[parent])

        visit(segment_id)
        return order

    def check(self) -> None:
        """The invariants: active ranges tile the hash space; parent/child links agree."""
        cursor = MIN_HASH
        for segment in self.active:
            if segment.hash_range.start != cursor:
                raise LayoutError(f"epoch {self.epoch}: active segments leave a gap or overlap at {cursor:#06x}")
            cursor = segment.hash_range.end + 1
        if cursor != MAX_HASH + 1:
            raise LayoutError(f"epoch {self.epoch}: active segments stop at {cursor - 1:#06x}")
        for segment in self.segments.values():
            if segment.active and segment.child_ids:
                raise LayoutError(f"active segment {segment.segment_id} has children")
            for child in segment.child_ids:
                if child in self.segments and segment.segment_id not in self.segments[child].parent_ids:
                    raise LayoutError(f"segment {child} does not list its parent {segment.segment_id}")

    # ---- operations ---------------------------------------------------------------------------

    def split(self, segment_id: int, now_ms: int) -> SegmentLayout:
        segment = self.get(segment_id)
        if not segment.active:
            raise LayoutError(f"segment {segment_id} is sealed; only active segments can be split")
        low, high = segment.hash_range.halves()
        epoch = self.epoch + 1
        a, b = self.next_segment_id, self.next_segment_id + 1
        segments = dict(self.segments)
        segments[segment_id] = segment.sealed(epoch, now_ms, (a, b))
        segments[a] = SegmentInfo(a, low, parent_ids=(segment_id,), created_at_epoch=epoch, created_at_ms=now_ms)
        segments[b] = SegmentInfo(b, high, parent_ids=(segment_id,), created_at_epoch=epoch, created_at_ms=now_ms)
        return SegmentLayout(epoch, self.next_segment_id + 2, segments, self.properties)

    def merge(self, first_id: int, second_id: int, now_ms: int) -> SegmentLayout:
        first, second = self.get(first_id), self.get(second_id)
        if first_id == second_id:
            raise LayoutError("a segment cannot be merged with itself")
        if not (first.active and second.active):
            raise LayoutError(f"segments {first_id} and {second_id} must both be active to be merged")
        merged_range = first.hash_range.merged(second.hash_range)
        epoch = self.epoch + 1
        child = self.next_segment_id
        segments = dict(self.segments)
        segments[first_id] = first.sealed(epoch, now_ms, (child,))
        segments[second_id] = second.sealed(epoch, now_ms, (child,))
        segments[child] = SegmentInfo(child, merged_range, parent_ids=(first_id, second_id), created_at_epoch=epoch,
                                      created_at_ms=now_ms)
        return SegmentLayout(epoch, self.next_segment_id + 1, segments, self.properties)

    # ---- JSON ---------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "nextSegmentId": self.next_segment_id,
                "segments": {str(sid): seg.to_json() for sid, seg in sorted(self.segments.items())},
                "properties": dict(self.properties)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SegmentLayout:
        try:
            segments = {int(k): SegmentInfo.from_json(v) for k, v in dict(data["segments"]).items()}
            return cls(int(data["epoch"]), int(data["nextSegmentId"]), segments,
                       {str(k): str(v) for k, v in dict(data.get("properties") or {}).items()})
        except (KeyError, TypeError, ValueError) as err:
            raise LayoutError(f"scalable topic metadata is malformed: {err}") from None
