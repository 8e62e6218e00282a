"""Entries: what a topic's managed ledger stores, and what the broker knows about each.

An entry is the SEND's "headers and payload" exactly as the client sent it
(`[0x0e01][crc][size][MessageMetadata][data]`), stored and dispatched unchanged, as
Pulsar does. `EntryInfo` is the little the broker must know per entry without parsing
it again on every dispatch: how many messages it holds (permits are counted in
messages), its transaction, and whether it is a marker (transaction commit/abort
markers are skipped by dispatchers and acknowledged on the subscription's behalf).
It comes from the SEND command when an entry is published, and from the stored
metadata when an entry is read back from the ledger store.
"""

from __future__ import annotations

from dataclasses import dataclass

from embedded.broker.position import Position
from harness.wire import MessageFormatError, Payload, TxnId


@dataclass(frozen=True, slots=True)
class EntryInfo:
    num_messages: int = 1
    txn: TxnId | None = None
    marker: bool = False

    @classmethod
    def parse(cls, data: bytes) -> EntryInfo:
        """From a stored entry's metadata (an unparseable entry counts as one plain message)."""
        try:
            meta = Payload.parse(data, verify=False).metadata
        except MessageFormatError:
            return PLAIN
        txn = TxnId(meta.txnid_most_bits, meta.txnid_least_bits) if (
            meta.HasField("txnid_most_bits") or meta.HasField("txnid_least_bits")) else None
        return cls(max(1, meta.num_messages_in_batch), txn, meta.HasField("marker_type"))


PLAIN = EntryInfo()


@dataclass(frozen=True, slots=True)
class Entry:
    position: Position
    data: bytes
    info: EntryInfo


def publish_time_of(data: bytes) -> int:
    """The entry's `publish_time` (ms), for seek by time; 0 when it cannot be read."""
    try:
        return int(Payload.parse(data, verify=False).metadata.publish_time)
    except MessageFormatError:
        return 0


def largest_batch_index(data: bytes) -> int:
    """GET_LAST_MESSAGE_ID's batch index: `num_messages_in_batch - 1` when the field is set, else -1."""
    try:
        meta = Payload.parse(data, verify=False).metadata
    except MessageFormatError:
        return -1
    return meta.num_messages_in_batch - 1 if meta.HasField("num_messages_in_batch") else -1
