"""Positions in a managed ledger: (ledger id, entry id), in log order.

Pulsar's `Position`: ledger ids grow as a topic rolls over to new ledgers, so the pair
orders every entry of a topic. `(L, -1)` is the position just before the first entry of
ledger L (what an empty ledger's "last confirmed entry" is); `EARLIEST` and `LATEST`
are the sentinels `MessageId.earliest`/`latest` map to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from harness.wire import MessageId

_I64_MAX = (1 << 63) - 1


@dataclass(frozen=True, order=True, slots=True)
class Position:
    ledger_id: int
    entry_id: int

    EARLIEST: ClassVar[Position]
    LATEST: ClassVar[Position]

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    def message_id(self, batch_index: int = -1, partition: int = -1) -> MessageId:
        return MessageId(self.ledger_id, self.entry_id, batch_index, partition)

    @classmethod
    def of(cls, message_id: MessageId) -> Position:
        """The entry a message id names (its batch index dropped)."""
        return cls(message_id.ledger_id, message_id.entry_id)

    def to_json(self) -> list[int]:
        return [self.ledger_id, self.entry_id]

    @classmethod
    def from_json(cls, value: list[int] | tuple[int, int]) -> Position:
        return cls(int(value[0]), int(value[1]))


Position.EARLIEST = Position(-1, -1)
Position.LATEST = Position(_I64_MAX, _I64_MAX)
