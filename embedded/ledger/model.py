"""The ledger store's vocabulary: states, kinds, metadata, and its definite errors.

Shared by the server (which raises these errors) and the clients (which re-raise
them from error codes), so both sides agree on one set of names. The error codes are
the contract in docs/architecture.md: NoSuchLedger, NoSuchEntry, Fenced,
LedgerClosed, InvalidRequest. Every `LedgerError` is a definite answer: the request
was not applied. `LedgerUnavailable` is the opposite: no answer, outcome unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

MAX_ENTRY_BYTES = 5 * 1024 * 1024 + 128 * 1024
"""Pulsar's 5 MB message limit plus room for the broker's metadata and batch framing."""

MAX_NAME_CHARS = 1024


class LedgerState(Enum):
    """BookKeeper's ledger states: writable, closed by its writer, or fenced by a recoverer."""

    OPEN = "open"
    CLOSED = "closed"
    FENCED = "fenced"


class LedgerKind(Enum):
    """What a ledger holds; labels the per-kind I/O metrics."""

    DATA = "data"
    TXN_LOG = "txn-log"
    PENDING_ACK = "pending-ack"
    CURSOR = "cursor"
    TB_SNAPSHOT = "tb-snapshot"
    OTHER = "other"


class ErrorCode(Enum):
    NO_SUCH_LEDGER = "NoSuchLedger"
    NO_SUCH_ENTRY = "NoSuchEntry"
    FENCED = "Fenced"
    LEDGER_CLOSED = "LedgerClosed"
    INVALID_REQUEST = "InvalidRequest"


class LedgerError(Exception):
    """A definite answer from the ledger store: the request was not applied."""

    code: str = "LedgerError"

    def __init__(self, message: str = "", code: str | None = None) -> None:
        super().__init__(message or (code or self.code))
        if code is not None:
            self.code = code
        self.message = message


class NoSuchLedger(LedgerError):
    code = ErrorCode.NO_SUCH_LEDGER.value


class NoSuchEntry(LedgerError):
    code = ErrorCode.NO_SUCH_ENTRY.value


class Fenced(LedgerError):
    """The ledger was fenced by a recovering reader: this writer is deposed."""

    code = ErrorCode.FENCED.value


class LedgerClosed(LedgerError):
    code = ErrorCode.LEDGER_CLOSED.value


class InvalidRequest(LedgerError):
    code = ErrorCode.INVALID_REQUEST.value


class LedgerUnavailable(Exception):
    """No answer (connection refused or lost, timeout): the request's outcome is unknown."""


_ERRORS_BY_CODE: dict[str, type[LedgerError]] = {
    cls.code: cls for cls in (NoSuchLedger, NoSuchEntry, Fenced, LedgerClosed, InvalidRequest)
}


def error_from_code(code: str, message: str) -> LedgerError:
    """The typed exception for a server error code (a plain LedgerError for others)."""
    cls = _ERRORS_BY_CODE.get(code)
    return cls(message) if cls is not None else LedgerError(message, code=code)


@dataclass(frozen=True)
class LedgerMetadata:
    """What a ledger's creator says about it: its kind (for metrics) and a name (for people)."""

    kind: LedgerKind
    name: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind.value, "name": self.name}

    @classmethod
    def from_json(cls, obj: Any) -> LedgerMetadata:
        """Validate a request's `metadata`; raises InvalidRequest naming the fix."""
        if not isinstance(obj, dict):
            raise InvalidRequest('metadata must be an object {"kind": ..., "name": ...}')
        unknown = set(obj) - {"kind", "name"}
        if unknown:
            raise InvalidRequest(f"metadata has unknown keys {sorted(unknown)}; only kind and name are allowed")
        kinds = [k.value for k in LedgerKind]
        kind = obj.get("kind")
        if kind not in kinds:
            raise InvalidRequest(f"metadata.kind {kind!r} is not one of {kinds}")
        name = obj.get("name", "")
        if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:
            raise InvalidRequest(f"metadata.name must be a string of at most {MAX_NAME_CHARS} characters")
        return cls(LedgerKind(kind), name)


@dataclass(frozen=True)
class LedgerInfo:
    """A ledger as the store reports it; `last_entry_id` counts durable entries only (-1: none)."""

    ledger_id: int
    state: LedgerState
    last_entry_id: int
    metadata: LedgerMetadata

    def to_json(self) -> dict[str, Any]:
        return {"ledger_id": self.ledger_id, "state": self.state.value,
                "last_entry_id": self.last_entry_id, "metadata": self.metadata.to_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> LedgerInfo:
        return cls(int(obj["ledger_id"]), LedgerState(obj["state"]), int(obj["last_entry_id"]),
                   LedgerMetadata.from_json(obj["metadata"]))
