"""Transactional acks held for one subscription, and their conflicts (no I/O).

Theory of operation (Pulsar's `PendingAckHandleImpl` rules). An open transaction may
hold, on one subscription:

* whole entries (individual acks): no other ack of the entry may happen meanwhile, and
  the dispatcher does not deliver it;
* some batch indexes of an entry (an ack with an ack set): other holders may take
  other indexes; the dispatcher masks the held ones;
* one cumulative position (at most one transaction at a time, moving only forward); a
  batch message's keeps its ack set (Pulsar's `AckSetPosition`): the entries before it
  and its batch up to its index are held, the indexes after it are not.

`TransactionConflict` (Pulsar's `TransactionConflictException`) when the entry is
already acknowledged on the cursor, already held by a transaction (Pulsar refuses a
second individual ack of a held entry even from the same transaction), its held batch
indexes overlap, or a cumulative ack is at or before the mark-delete position or the
current holder's position. Unlike Pulsar, the check runs before the op record is
written, so a refused ack leaves no record that a commit could apply.

Ack sets follow Pulsar's convention: bit i set = message i *not* acknowledged. Bits
past the batch mean nothing, so overlaps are checked below the batch size, which an ack
with an ack set must carry (`txn_api.batch_size_of`, as Pulsar takes it from the ack's
message id). Guessing the size from the highest set bit, as this model once did, misses
every conflict over a batch's last message: acking it clears that very bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from embedded.broker.position import Position
from embedded.broker.txn_api import TxnAck, acked_index_named
from harness.wire import TxnId

_WORD = (1 << 64) - 1


class AckConflict(Exception):
    """The ack conflicts with the cursor or another transaction; the message says which."""


class CursorView(Protocol):
    """What the conflict checks need from the subscription's cursor."""

    @property
    def mark_delete_position(self) -> Position: ...

    def is_acked(self, position: Position) -> bool: ...

    def batch_ack_set(self, position: Position) -> list[int] | None: ...


def _held_bits(ack_set: Sequence[int]) -> int:
    """The acknowledged (cleared) indexes of an ack set, as one integer bit mask."""
    value = 0
    for i, word in enumerate(ack_set):
        value |= (~int(word) & _WORD) << (64 * i)
    return value


def _as_int(ack_set: Sequence[int]) -> int:
    value = 0
    for i, word in enumerate(ack_set):
        value |= (int(word) & _WORD) << (64 * i)
    return value


def _batch_mask(ack: TxnAck) -> int:
    """The bits that are messages of the batch `ack` names."""
    if ack.batch_size <= 0:
        raise ValueError(f"an ack of batch indexes of {ack.position} needs its batch size")
    return (1 << ack.batch_size) - 1


def _words(value: int, count: int) -> list[int]:
    return [(value >> (64 * i)) & _WORD for i in range(count)]


@dataclass
class _Partial:
    ack_set: tuple[int, ...]
    held: int


class PendingAcks:
    def __init__(self) -> None:
        self._whole: dict[Position, TxnId] = {}
        self._partial: dict[Position, dict[TxnId, _Partial]] = {}
        self._cumulative: tuple[TxnId, TxnAck] | None = None
        self._by_txn: dict[TxnId, list[TxnAck]] = {}

    # ---- checks -------------------------------------------------------------------------------

    def check_individual(self, txn: TxnId, acks: Sequence[TxnAck], cursor: CursorView) -> None:
        for ack in acks:
            p = ack.position
            if cursor.is_acked(p):
                raise AckConflict(f"{txn} acks {p}, which is already acknowledged")
            holder = self._whole.get(p)
            if holder is not None:
                raise AckConflict(f"{txn} acks {p}, which is held by the pending ack of {holder}")
            partial = self._partial.get(p)
            cursor_set = cursor.batch_ack_set(p)
            if ack.ack_set is None:
                if partial:
                    other = next(iter(partial))
                    raise AckConflict(f"{txn} acks all of {p}, part of which {other} holds")
                continue
            mine = _held_bits(ack.ack_set) & _batch_mask(ack)
            if cursor_set is not None and mine & _held_bits(cursor_set):
                raise AckConflict(f"{txn} acks batch indexes of {p} already acknowledged")
            for other, held in (partial or {}).items():
                if mine & held.held:
                    raise AckConflict(f"{txn} acks batch indexes of {p} held by the pending ack of {other}")

    def check_cumulative(self, txn: TxnId, position: Position, cursor: CursorView,
                         ack_set: Sequence[int] | None = None) -> None:
        if position <= cursor.mark_delete_position:
            raise AckConflict(f"{txn} acks cumulatively up to {position}, within the mark-delete position "
                              f"{cursor.mark_delete_position}")
        named = acked_index_named(ack_set, cursor.batch_ack_set(position))
        if named is not None:   # Pulsar accepts it; the model refuses (txn_api.acked_index_named)
            raise AckConflict(f"{txn} acks cumulatively up to index {named} of {position}, already acknowledged")
        if self._cumulative is not None:
            holder, held = self._cumulative
            if holder != txn or position <= held.position:
                raise AckConflict(f"{txn} acks cumulatively up to {position}; {holder} holds a cumulative ack "
                                  f"up to {held.position}")

    # ---- holding ------------------------------------------------------------------------------

    def hold_individual(self, txn: TxnId, acks: Iterable[TxnAck]) -> None:
        kept = self._by_txn.setdefault(txn, [])
        for ack in acks:
            if ack.ack_set is None:
                self._whole[ack.position] = txn
            else:
                entry = self._partial.setdefault(ack.position, {})
                known = entry.get(txn)
                held = _held_bits(ack.ack_set) | (known.held if known else 0)
                entry[txn] = _Partial(tuple(ack.ack_set), held)
            kept.append(ack)

    def hold_cumulative(self, txn: TxnId, ack: TxnAck) -> None:
        self._cumulative = (txn, ack)
        self._by_txn.setdefault(txn, [])

    def release(self, txn: TxnId) -> list[Position]:
        """Drop everything `txn` holds; returns the positions it held (to redeliver on abort)."""
        positions: list[Position] = []
        for ack in self._by_txn.pop(txn, []):
            if ack.ack_set is None:
                if self._whole.get(ack.position) == txn:
                    del self._whole[ack.position]
                    positions.append(ack.position)
            else:
                entry = self._partial.get(ack.position)
                if entry is not None and entry.pop(txn, None) is not None:
                    positions.append(ack.position)
                    if not entry:
                        del self._partial[ack.position]
        if self._cumulative is not None and self._cumulative[0] == txn:
            positions.append(self._cumulative[1].position)
            self._cumulative = None
        return sorted(set(positions))

    # ---- queries ------------------------------------------------------------------------------

    def holds(self, txn: TxnId) -> bool:
        return txn in self._by_txn

    def transactions(self) -> list[TxnId]:
        return list(self._by_txn)

    def is_pending(self, position: Position, mark_delete: Position) -> bool:
        """Whether an individual ack holds the whole entry (the dispatcher skips it). Entries a pending
        cumulative ack covers are not skipped, as in Pulsar (`getPositionInPendingAck` knows individual
        acks only): a Failover consumer's rewound cursor delivers them again, in order."""
        return position in self._whole

    def held_cumulatively(self, position: Position, mark_delete: Position) -> bool:
        """A pending cumulative ack covers this entry, or part of its batch."""
        return self._cumulative is not None and mark_delete < position <= self._cumulative[1].position

    def pending_ack_set(self, position: Position) -> list[int] | None:
        """Words with the held batch indexes set (what the dispatcher must not deliver)."""
        entry = self._partial.get(position)
        if not entry:
            return None
        held = 0
        words = 1
        for partial in entry.values():
            held |= partial.held   # bits past the batch are masked by the dispatcher (it knows the size)
            words = max(words, len(partial.ack_set))
        return _words(held, words)

    def stats(self) -> dict[str, int]:
        return {"transactions": len(self._by_txn), "heldEntries": len(self._whole),
                "partlyHeldEntries": len(self._partial), "cumulative": 1 if self._cumulative else 0}
