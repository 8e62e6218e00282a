"""Message ids and transaction ids: ordering, history text form, protobuf conversion.

A `MessageId` follows Java's `MessageIdImpl`/`BatchMessageIdImpl`: ledger and entry
are signed 64-bit values (`MessageId.EARLIEST` is -1:-1, `LATEST` is
Long.MAX_VALUE:Long.MAX_VALUE) although the proto declares them `uint64`; the
conversion maps negative values to their two's-complement wire form and back, exactly
as the Java client does when it writes a `long` into a `uint64` field.

Ordering is log order: ledger, entry, then batch index (a non-batched id, batch index
-1, sorts before index 0 of the same entry), then partition as a tie-breaker so the
order is total. `batch_size` is informational and takes no part in equality or order.

Text forms match the history contract (harness/history/schema.py): a message id is
`"<ledger>:<entry>:<batch_index>"`, a transaction id `"<most>:<least>"`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.wire import proto

_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def _to_u64(value: int) -> int:
    return value % _U64 if value < 0 else value


def _to_i64(value: int) -> int:
    return value - _U64 if value > _I64_MAX else value


@dataclass(frozen=True, order=True, slots=True)
class MessageId:
    """Where a message is: ledger, entry, index within a batch, and the partition."""

    ledger_id: int
    entry_id: int
    batch_index: int = -1
    partition: int = -1
    batch_size: int = field(default=0, compare=False)

    EARLIEST: ClassVar[MessageId]
    LATEST: ClassVar[MessageId]

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}:{self.batch_index}"

    @classmethod
    def parse(cls, text: str, partition: int = -1) -> MessageId:
        """The id from its history form `"<ledger>:<entry>:<batch_index>"`.

        Raises:
            ValueError: `text` is not three colon-separated integers.
        """
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(
                f"message id {text!r} is not '<ledger>:<entry>:<batch_index>' (e.g. '12:3:-1')"
            )
        try:
            ledger, entry, batch = (int(part) for part in parts)
        except ValueError:
            raise ValueError(
                f"message id {text!r} has a non-integer part; expected e.g. '12:3:-1'"
            ) from None
        return cls(ledger, entry, batch, partition)

    @property
    def is_batched(self) -> bool:
        """Whether the id names one message inside a batch entry."""
        return self.batch_index >= 0

    def entry(self) -> MessageId:
        """The id of the whole entry (batch index dropped), as the broker tracks positions."""
        return MessageId(self.ledger_id, self.entry_id, -1, self.partition)

    def to_proto(self, target: Any = None) -> Any:
        """This id as `MessageIdData`, filled into `target` when given (e.g. a sub-message).

        `partition` and `batch_index` are only written when set (>= 0), matching the
        Java client, so the field defaults (-1) carry the "none" meaning on the wire.
        """
        data = proto.MessageIdData() if target is None else target
        data.ledgerId = _to_u64(self.ledger_id)
        data.entryId = _to_u64(self.entry_id)
        if self.partition >= 0:
            data.partition = self.partition
        if self.batch_index >= 0:
            data.batch_index = self.batch_index
        if self.batch_size > 0:
            data.batch_size = self.batch_size
        return data

    @classmethod
    def from_proto(cls, data: Any) -> MessageId:
        """The id a `MessageIdData` carries (ledger and entry read as signed 64-bit)."""
        return cls(
            _to_i64(data.ledgerId),
            _to_i64(data.entryId),
            data.batch_index,
            data.partition,
            data.batch_size,
        )


MessageId.EARLIEST = MessageId(-1, -1)
MessageId.LATEST = MessageId(_I64_MAX, _I64_MAX)


@dataclass(frozen=True, order=True, slots=True)
class TxnId:
    """A transaction id: `most` is the coordinator (TC) id, `least` its sequence there."""

    most: int
    least: int

    def __str__(self) -> str:
        return f"{self.most}:{self.least}"

    @classmethod
    def parse(cls, text: str) -> TxnId:
        """The id from its history form `"<most>:<least>"`.

        Raises:
            ValueError: `text` is not two colon-separated non-negative integers.
        """
        parts = text.split(":")
        try:
            most, least = (int(part) for part in parts)
        except ValueError:
            raise ValueError(f"transaction id {text!r} is not '<most>:<least>' (e.g. '3:17')") from None
        if most < 0 or least < 0:
            raise ValueError(f"transaction id {text!r} has a negative part; both are uint64")
        return cls(most, least)

    @classmethod
    def from_fields(cls, body: Any) -> TxnId | None:
        """The id in a message's `txnid_most_bits`/`txnid_least_bits`, or None if absent.

        Presence, not value, decides: (0, 0) is a valid id (coordinator 0's first
        transaction), so a message without both fields set is non-transactional.
        """
        if body.HasField("txnid_most_bits") or body.HasField("txnid_least_bits"):
            return cls(body.txnid_most_bits, body.txnid_least_bits)
        return None

    def fill(self, body: Any) -> Any:
        """Write this id into `body`'s `txnid_most_bits`/`txnid_least_bits`; returns `body`."""
        body.txnid_most_bits = self.most
        body.txnid_least_bits = self.least
        return body
