"""Records, versions, notifications and error codes shared by the store and its clients.

These mirror Oxia's client-visible types (`Version`, `Notification`, the status codes
KeyNotFound / UnexpectedVersionId / SessionNotFound / InvalidOptions) so that code written
against this store reads like code written against Oxia. Everything here is an immutable
value; the wire form is the JSON dict given by `to_wire()` / `from_wire()`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

#: `expected_version` meaning "the record must not exist" (Oxia's EXPECTED_RECORD_DOES_NOT_EXIST).
MUST_NOT_EXIST = -1


class ErrorCode(enum.StrEnum):
    """Definite error answers of the store (RpcError.code on the wire)."""

    KEY_NOT_FOUND = "KeyNotFound"
    UNEXPECTED_VERSION_ID = "UnexpectedVersionId"
    SESSION_NOT_FOUND = "SessionNotFound"
    INVALID_OPTIONS = "InvalidOptions"


class MetadataError(Exception):
    """A definite failure: the operation did not happen."""

    code: ErrorCode = ErrorCode.INVALID_OPTIONS

    def __init__(self, message: str = "") -> None:
        super().__init__(f"{self.code.value}: {message}" if message else self.code.value)
        self.message = message


class KeyNotFound(MetadataError):
    code = ErrorCode.KEY_NOT_FOUND


class BadVersion(MetadataError):
    """A CAS failed: the record's version is not the expected one (Oxia UnexpectedVersionId)."""

    code = ErrorCode.UNEXPECTED_VERSION_ID


class SessionExpired(MetadataError):
    """The session does not exist (expired or closed); its ephemeral records are gone."""

    code = ErrorCode.SESSION_NOT_FOUND


class InvalidOptions(MetadataError):
    code = ErrorCode.INVALID_OPTIONS


class MetadataUnavailable(Exception):
    """No answer (connection lost, refused, timed out): the outcome is unknown."""


ERRORS_BY_CODE: dict[str, type[MetadataError]] = {
    cls.code.value: cls for cls in (KeyNotFound, BadVersion, SessionExpired, InvalidOptions)
}


def error_from_code(code: str, message: str) -> Exception:
    """The typed exception for an error code from the wire; unknown codes stay generic."""
    cls = ERRORS_BY_CODE.get(code)
    if cls is not None:
        return cls(message)
    return MetadataError(f"{code}: {message}")


class Comparison(enum.StrEnum):
    """How `get` matches a key (Oxia KeyComparisonType)."""

    EQUAL = "equal"
    FLOOR = "floor"        # the highest key <= the given key
    CEILING = "ceiling"    # the lowest key >= the given key
    LOWER = "lower"        # the highest key < the given key
    HIGHER = "higher"      # the lowest key > the given key


class EventType(enum.StrEnum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


@dataclass(frozen=True)
class Version:
    """A record's version; `version_id` is store-wide increasing and is the CAS token."""

    version_id: int
    created_ms: int
    modified_ms: int
    modifications_count: int
    ephemeral: bool
    session_id: int | None

    def to_wire(self) -> dict[str, Any]:
        return {
            "version_id": self.version_id,
            "created_ms": self.created_ms,
            "modified_ms": self.modified_ms,
            "modifications_count": self.modifications_count,
            "ephemeral": self.ephemeral,
            "session_id": self.session_id,
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Version:
        return cls(int(d["version_id"]), int(d["created_ms"]), int(d["modified_ms"]),
                   int(d["modifications_count"]), bool(d["ephemeral"]),
                   None if d.get("session_id") is None else int(d["session_id"]))


@dataclass(frozen=True)
class Record:
    """A stored record. `secondary_indexes` is a sorted tuple of (index name, secondary key)."""

    key: str
    value: str
    version: Version
    partition_key: str | None = None
    secondary_indexes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class GetResult:
    """What `get`, `range_scan` return per record; `value` is None when not requested."""

    key: str
    value: str | None
    version: Version
    secondary_key: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "value": self.value, "version": self.version.to_wire()}
        if self.secondary_key is not None:
            out["secondary_key"] = self.secondary_key
        return out

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> GetResult:
        return cls(str(d["key"]), d.get("value"), Version.from_wire(d["version"]), d.get("secondary_key"))


@dataclass(frozen=True)
class PutResult:
    key: str
    version: Version


@dataclass(frozen=True)
class Notification:
    """One change to one key, in commit order; `version_id` is the deleted version on delete."""

    type: EventType
    key: str
    version_id: int

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.type.value, "key": self.key, "version_id": self.version_id}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Notification:
        return cls(EventType(d["type"]), str(d["key"]), int(d["version_id"]))
