"""Journal records: what the ledger store writes, and their byte encoding (sans-IO).

Every change to the store is one record in the journal, in the order the store
accepted it: a ledger's creation, one entry, a seal (close or fence, with the last
entry id at that moment) and a deletion. Replaying the records in journal order
rebuilds the store exactly (see `book.LedgerBook.replay`).

Encoding of one record: `[type u8][ledger_id u64][aux i64][length u32][payload]`,
big-endian, where `aux` is the entry id (ENTRY) or the last entry id (SEAL), and the
payload is the entry (ENTRY), the metadata as JSON (CREATE), the resulting state
(SEAL) or nothing (DELETE). Records carry no checksum of their own: the batch that
holds them does (`journal_format`).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from embedded.ledger.model import LedgerMetadata, LedgerState

RECORD_HEADER = struct.Struct(">BQqI")
RECORD_HEADER_SIZE = RECORD_HEADER.size  # 21


class RecordType(IntEnum):
    CREATE = 1
    ENTRY = 2
    SEAL = 3
    DELETE = 4


@dataclass(frozen=True)
class CreateRecord:
    ledger_id: int
    metadata: LedgerMetadata


@dataclass(frozen=True)
class EntryRecord:
    ledger_id: int
    entry_id: int
    payload: bytes


@dataclass(frozen=True)
class SealRecord:
    """A close or a fence: the ledger's state afterwards and its last entry id then."""

    ledger_id: int
    state: LedgerState
    last_entry_id: int


@dataclass(frozen=True)
class DeleteRecord:
    ledger_id: int


Record = CreateRecord | EntryRecord | SealRecord | DeleteRecord


class JournalCorrupt(Exception):
    """The journal cannot be replayed as written: damage that is not a torn tail, or records
    that contradict each other. Recovery stops rather than guess; the message says where."""


class RecordFormatError(JournalCorrupt):
    """A record inside a checksummed batch does not parse."""


def encode_record(record: Record) -> bytes:
    if isinstance(record, EntryRecord):
        return RECORD_HEADER.pack(RecordType.ENTRY, record.ledger_id, record.entry_id,
                                  len(record.payload)) + record.payload
    if isinstance(record, CreateRecord):
        body = json.dumps(record.metadata.to_json(), separators=(",", ":")).encode()
        return RECORD_HEADER.pack(RecordType.CREATE, record.ledger_id, 0, len(body)) + body
    if isinstance(record, SealRecord):
        body = record.state.value.encode()
        return RECORD_HEADER.pack(RecordType.SEAL, record.ledger_id, record.last_entry_id, len(body)) + body
    return RECORD_HEADER.pack(RecordType.DELETE, record.ledger_id, 0, 0)


class RecordRef(NamedTuple):
    """A record found in a journal buffer; entries are located, not copied.

    A NamedTuple rather than a frozen dataclass: recovery makes millions of these and a
    tuple is several times cheaper to build.
    """

    type: RecordType
    ledger_id: int
    aux: int
    payload_offset: int   # into the buffer that was scanned
    payload_size: int


def iter_records(buf: bytes, start: int, end: int) -> list[RecordRef]:
    """Split the batch body `buf[start:end]` into records; offsets are into `buf`."""
    out: list[RecordRef] = []
    pos = start
    unpack = RECORD_HEADER.unpack_from
    types = _RECORD_TYPES
    while pos < end:
        if end - pos < RECORD_HEADER_SIZE:
            raise RecordFormatError(f"record header cut at byte {pos}")
        rtype, ledger_id, aux, size = unpack(buf, pos)
        payload_at = pos + RECORD_HEADER_SIZE
        if payload_at + size > end:
            raise RecordFormatError(f"record at byte {pos} runs past its batch")
        kind = types.get(rtype)
        if kind is None:
            raise RecordFormatError(f"unknown record type {rtype} at byte {pos}")
        out.append(RecordRef(kind, ledger_id, aux, payload_at, size))
        pos = payload_at + size
    return out


_RECORD_TYPES = {t.value: t for t in RecordType}


def decode_metadata_record(ref: RecordRef, payload: bytes) -> CreateRecord:
    try:
        return CreateRecord(ref.ledger_id, LedgerMetadata.from_json(json.loads(payload)))
    except Exception as err:
        raise RecordFormatError(f"bad metadata of ledger {ref.ledger_id}: {err}") from None


def decode_seal_record(ref: RecordRef, payload: bytes) -> SealRecord:
    try:
        return SealRecord(ref.ledger_id, LedgerState(payload.decode()), ref.aux)
    except ValueError as err:
        raise RecordFormatError(f"bad seal of ledger {ref.ledger_id}: {err}") from None
