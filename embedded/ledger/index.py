"""Where each durable entry lives in the journal, and a bounded cache of recent entries.

Entry ids of a ledger are dense (0, 1, 2 ...), so a ledger's index is two arrays
indexed by entry id: the packed location (segment << 40 | offset) and the size.
That is 12 bytes per entry, so a 1 GB journal of 256-byte entries (about 3.7 million
entries) indexes in about 45 MB, where a dict of tuples would need several times that.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from typing import NamedTuple

_OFFSET_BITS = 40
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1


class EntryLocation(NamedTuple):
    segment: int
    offset: int   # of the payload in the segment file
    size: int


class EntryIndex:
    """Ledger id -> entry id -> location in the journal."""

    def __init__(self) -> None:
        self._locations: dict[int, array[int]] = {}
        self._sizes: dict[int, array[int]] = {}

    def add(self, ledger_id: int, entry_id: int, segment: int, offset: int, size: int) -> None:
        locations = self._locations.get(ledger_id)
        if locations is None:
            locations = self._locations[ledger_id] = array("Q")
            self._sizes[ledger_id] = array("I")
        if entry_id != len(locations):
            raise AssertionError(f"ledger {ledger_id}: indexing entry {entry_id} after {len(locations) - 1}")
        if offset > _OFFSET_MASK:
            raise ValueError(f"segment offset {offset} does not fit in {_OFFSET_BITS} bits")
        locations.append(segment << _OFFSET_BITS | offset)
        self._sizes[ledger_id].append(size)

    def get(self, ledger_id: int, entry_id: int) -> EntryLocation:
        packed = self._locations[ledger_id][entry_id]
        return EntryLocation(packed >> _OFFSET_BITS, packed & _OFFSET_MASK, self._sizes[ledger_id][entry_id])

    def size(self, ledger_id: int, entry_id: int) -> int:
        return self._sizes[ledger_id][entry_id]

    def entries(self, ledger_id: int) -> int:
        locations = self._locations.get(ledger_id)
        return len(locations) if locations is not None else 0

    def drop(self, ledger_id: int) -> None:
        self._locations.pop(ledger_id, None)
        self._sizes.pop(ledger_id, None)


class EntryCache:
    """LRU of entry payloads bounded by total bytes; tailing readers hit it, replays do not."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[int, int], bytes] = OrderedDict()

    def put(self, ledger_id: int, entry_id: int, payload: bytes) -> None:
        if len(payload) > self.max_bytes // 4:
            return  # one huge entry would flush everything else
        key = (ledger_id, entry_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= len(old)
        self._entries[key] = payload
        self.bytes += len(payload)
        while self.bytes > self.max_bytes and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= len(evicted)

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        key = (ledger_id, entry_id)
        payload = self._entries.get(key)
        if payload is not None:
            self._entries.move_to_end(key)
        return payload

    def __len__(self) -> int:
        return len(self._entries)
