"""A subscription's pending acknowledgements, without I/O (Pulsar's PendingAckHandleImpl bookkeeping).

Theory of operation (PIP-31's acknowledgement states). A message a consumer
acknowledges inside a transaction goes from delivered to PENDING_ACK: it is held for
that transaction, the dispatcher does not deliver it again, and no other transaction
may acknowledge it. When the transaction commits the acknowledgement is applied to the
subscription's cursor (ACKED); when it aborts the message is released and delivered
again. Only the handle decides; the cursor is changed by the caller.

Conflicts (TransactionConflict), as Pulsar checks them:

* individual ack of a whole entry: the entry is already acknowledged on the cursor, or
  held (wholly or partly) by any transaction, the same one included;
* individual ack of batch indexes (an ack set): the entry is already acknowledged; or
  an index it acknowledges is already acknowledged on the cursor, or held by a
  transaction; or the entry is held whole;
* cumulative ack: the position is at or before the cursor's mark-delete position, or
  a transaction already holds a cumulative ack (another transaction, or this one at the
  same or a later position).

Ack sets are words of a bit set where a *set* bit is a batch index that stays
unacknowledged (Pulsar's and the wire's convention); `acked_bits` turns one into the
indexes it acknowledges, within the batch size.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from embedded.broker.position import Position
from embedded.broker.txn_api import TxnError, acked_index_named
from embedded.broker.v4.batched_writer import LogPosition
from harness.wire import ServerError, TxnId

_U64 = (1 << 64) - 1


class AckState(enum.Enum):
    NONE = "None"                # not acknowledged
    PENDING_ACK = "PendingAck"   # held by an open transaction
    ACKED = "Acked"              # acknowledged on the cursor


class CursorView(Protocol):
    @property
    def mark_delete_position(self) -> Position: ...

    def is_acked(self, position: Position) -> bool: ...

    def batch_ack_set(self, position: Position) -> list[int] | None: ...


def mask(batch_size: int) -> list[int]:
    words = [_U64] * ((batch_size + 63) // 64)
    if batch_size % 64:
        words[-1] = (1 << (batch_size % 64)) - 1
    return words


def acked_bits(ack_set: Sequence[int], batch_size: int) -> list[int]:
    """The batch indexes an ack set acknowledges (set bits), within `batch_size`."""
    limit = mask(batch_size)
    return [(~(ack_set[i] if i < len(ack_set) else 0)) & limit[i] for i in range(len(limit))]


def _or(a: Sequence[int], b: Sequence[int]) -> list[int]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) | (b[i] if i < len(b) else 0) for i in range(n)]


def _overlap(a: Sequence[int], b: Sequence[int]) -> bool:
    return any(x & y for x, y in zip(a, b, strict=False))


@dataclass(frozen=True)
class HeldAck:
    """One acknowledgement of a transaction: an entry, optionally only some batch indexes."""

    position: Position
    ack_set: tuple[int, ...] | None = None   # set bit: stays unacknowledged
    batch_size: int = 0


@dataclass
class TxnAcks:
    individual: dict[Position, HeldAck] = field(default_factory=dict)
    cumulative: HeldAck | None = None
    log_positions: list[LogPosition] = field(default_factory=list)


class PendingAckState:
    def __init__(self) -> None:
        self.txns: dict[TxnId, TxnAcks] = {}
        self.whole: dict[Position, TxnId] = {}
        self.partial: dict[Position, dict[TxnId, list[int]]] = {}   # acked bits per transaction
        self.cumulative: tuple[TxnId, HeldAck] | None = None

    # ---- checks -------------------------------------------------------------------------------

    def held_bits(self, position: Position) -> list[int] | None:
        """Batch indexes of `position` held by open transactions' individual acks (set bits), or None:
        what the dispatcher masks. A pending cumulative ack masks nothing, as Pulsar's
        `filterEntriesForConsumer` asks `getPositionInPendingAck`, which knows individual acks only."""
        holders = self.partial.get(position)
        out: list[int] | None = None
        if holders:
            for bits in holders.values():
                out = bits if out is None else _or(out, bits)
        return out

    def check_individual(self, txn: TxnId, acks: Sequence[HeldAck], cursor: CursorView) -> None:
        seen: dict[Position, list[int] | None] = {}
        for ack in acks:
            position = ack.position
            if cursor.is_acked(position):
                raise TxnError(ServerError.TransactionConflict,
                               f"Transaction {txn} try to ack message {position} already acked before.")
            if position in self.whole:
                raise TxnError(ServerError.TransactionConflict,
                               f"Transaction {txn} try to ack message {position} in pending ack status.")
            if ack.ack_set is None:
                if position in self.partial or position in seen:
                    raise TxnError(ServerError.TransactionConflict,
                                   f"Transaction {txn} try to ack message {position} in pending ack status.")
                seen[position] = None
                continue
            bits = acked_bits(ack.ack_set, ack.batch_size)
            cursor_set = cursor.batch_ack_set(position)
            if cursor_set is not None and _overlap(bits, acked_bits(cursor_set, ack.batch_size)):
                raise TxnError(ServerError.TransactionConflict,
                               f"Transaction {txn} try to ack message {position} already acked before.")
            held = self.held_bits(position)
            earlier = seen.get(position, [])
            if position in seen and earlier is None:
                raise TxnError(ServerError.TransactionConflict,
                               f"Transaction {txn} try to ack batch message {position} in pending ack status.")
            if (held is not None and _overlap(bits, held)) or _overlap(bits, earlier or []):
                raise TxnError(ServerError.TransactionConflict,
                               f"Transaction {txn} try to ack batch message {position} in pending ack status.")
            seen[position] = _or(earlier or [], bits)

    def check_cumulative(self, txn: TxnId, position: Position, cursor: CursorView,
                         ack_set: Sequence[int] | None = None) -> None:
        if position <= cursor.mark_delete_position:
            raise TxnError(ServerError.TransactionConflict,
                           f"Transaction {txn} try to cumulative ack position {position} within range of cursor's "
                           f"markDeletePosition {cursor.mark_delete_position}")
        named = acked_index_named(ack_set, cursor.batch_ack_set(position))
        if named is not None:
            raise TxnError(ServerError.TransactionConflict,
                           f"Transaction {txn} try to cumulative ack batch message {position} index {named}, "
                           "already acknowledged (Pulsar accepts it: the model refuses, see acked_index_named)")
        if self.cumulative is not None:
            holder, held = self.cumulative
            if holder != txn or position <= held.position:
                raise TxnError(ServerError.TransactionConflict,
                               f"Transaction {txn} try to cumulative ack position {position} within range of "
                               f"current position {held.position} (held by {holder})")

    # ---- holding and releasing ----------------------------------------------------------------

    def hold_individual(self, txn: TxnId, acks: Sequence[HeldAck]) -> None:
        mine = self.txns.setdefault(txn, TxnAcks())
        for ack in acks:
            position = ack.position
            if ack.ack_set is None:
                self.whole[position] = txn
                mine.individual[position] = ack
                continue
            bits = acked_bits(ack.ack_set, ack.batch_size)
            holders = self.partial.setdefault(position, {})
            holders[txn] = _or(holders.get(txn, []), bits)
            known = mine.individual.get(position)
            if known is not None and known.ack_set is not None:   # AND the two ack sets (both acknowledge)
                merged = tuple(a & b for a, b in zip(known.ack_set, ack.ack_set, strict=False))
                mine.individual[position] = HeldAck(position, merged, max(known.batch_size, ack.batch_size))
            else:
                mine.individual[position] = ack

    def hold_cumulative(self, txn: TxnId, ack: HeldAck) -> None:
        self.txns.setdefault(txn, TxnAcks()).cumulative = ack
        self.cumulative = (txn, ack)

    def record(self, txn: TxnId, at: LogPosition) -> bool:
        """Remember where an ACK record of `txn` is; False when the transaction ended meanwhile."""
        mine = self.txns.get(txn)
        if mine is None:
            return False
        mine.log_positions.append(at)
        return True

    def release(self, txn: TxnId) -> TxnAcks | None:
        """The transaction ended here: forget what it held, and return it."""
        mine = self.txns.pop(txn, None)
        if mine is None:
            return None
        for position, ack in mine.individual.items():
            if ack.ack_set is None:
                if self.whole.get(position) == txn:
                    del self.whole[position]
            else:
                holders = self.partial.get(position)
                if holders is not None:
                    holders.pop(txn, None)
                    if not holders:
                        del self.partial[position]
        if self.cumulative is not None and self.cumulative[0] == txn:
            self.cumulative = None
        return mine

    # ---- what the dispatcher asks -------------------------------------------------------------

    def is_pending(self, position: Position) -> bool:
        """Whether an open transaction's individual ack holds the whole entry: the dispatcher skips it.
        Entries a pending cumulative ack covers are dispatched again when a single active consumer's
        cursor rewinds (Pulsar filters by individual pending acks only), so a Failover subscription
        keeps its order; acking them again conflicts with the cumulative holder."""
        return position in self.whole

    def covered_by_cumulative(self, position: Position) -> bool:
        if self.cumulative is None:
            return False
        _, ack = self.cumulative
        return position < ack.position or (position == ack.position and ack.ack_set is None)

    def cumulative_batch_at(self, position: Position) -> bool:
        """A pending cumulative ack names part of this entry's batch."""
        return self.cumulative is not None and self.cumulative[1].position == position

    def state_of(self, position: Position, cursor: CursorView) -> AckState:
        if cursor.is_acked(position):
            return AckState.ACKED
        if self.is_pending(position) or position in self.partial or self.covered_by_cumulative(position):
            return AckState.PENDING_ACK
        return AckState.NONE
