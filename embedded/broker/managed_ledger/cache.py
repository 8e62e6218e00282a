"""The broker's entry cache: recently appended entries, so tailing consumers never hit the store.

One cache per broker, bounded in bytes (Pulsar's `managedLedgerCacheSizeMB`), evicting
the oldest insertions first. Keys are (managed ledger instance id, ledger, entry); an
instance id is never reused, so a reopened ledger never sees a stale entry.
"""

from __future__ import annotations

from collections import OrderedDict

from embedded.broker.entry import Entry
from embedded.broker.position import Position


class EntryCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self.size = 0
        self._entries: OrderedDict[tuple[int, int, int], Entry] = OrderedDict()

    def put(self, ml_id: int, entry: Entry) -> None:
        if self.max_bytes == 0:
            return
        key = (ml_id, entry.position.ledger_id, entry.position.entry_id)
        if key in self._entries:
            return
        self._entries[key] = entry
        self.size += len(entry.data)
        while self.size > self.max_bytes and self._entries:
            _, old = self._entries.popitem(last=False)
            self.size -= len(old.data)

    def get(self, ml_id: int, position: Position) -> Entry | None:
        return self._entries.get((ml_id, position.ledger_id, position.entry_id))

    def drop(self, ml_id: int) -> None:
        for key in [k for k in self._entries if k[0] == ml_id]:
            self.size -= len(self._entries.pop(key).data)

    def __len__(self) -> int:
        return len(self._entries)
