"""Message ids as positions and names: analysis.checks.context's `message_position` and
`message_name` in SQL, for every SQL check that places or names a message.

Spark's `rlike` is Java's `find`, whose `$` (without MULTILINE) also matches before one line
terminator that ends the text; RE2's does not, so that terminator is spelled out. The numbers
are cast with TRY_CAST: one beyond a long gives a null position rather than a failed query (where
Spark's ANSI cast fails the whole check).
"""

from __future__ import annotations

from analysis.duck.sql import literal

__all__ = ["message_key", "message_name", "message_position"]

_END = r"(?:\r\n|[\n\r\x{85}\x{2028}\x{2029}])?$"
_POSITION = literal(r"^-?[0-9]+:-?[0-9]+(:-?[0-9]+)?" + _END)
_NUMBER = "(0|-?[1-9][0-9]{0,17})"
_PRINTED_POSITION = literal(f"^{_NUMBER}:{_NUMBER}:{_NUMBER}{_END}")


def _numbers(msg_id: str) -> tuple[str, str, str]:
    """The ledger, entry and batch of an id in a position's form."""
    part = f"string_split({msg_id}, ':')"
    batch = f"CASE WHEN len({part}) >= 3 THEN {part}[3] ELSE '-1' END"
    return f"TRY_CAST({part}[1] AS BIGINT)", f"TRY_CAST({part}[2] AS BIGINT)", f"TRY_CAST({batch} AS BIGINT)"


def message_position(msg_id: str) -> str:
    """`{ledger, entry, batch}` (longs, orderable), null when `msg_id` is not in that form."""
    ledger, entry, batch = _numbers(msg_id)
    return (f"(CASE WHEN regexp_matches({msg_id}, {_POSITION}) "
            f"THEN {{'ledger': {ledger}, 'entry': {entry}, 'batch': {batch}}} END)")


def message_name(msg_id: str) -> str:
    """The position as `ledger:entry:batch` (an id already printed so is its own name), or null."""
    ledger, entry, batch = _numbers(msg_id)
    return (f"(CASE WHEN regexp_matches({msg_id}, {_PRINTED_POSITION}) THEN {msg_id} "
            f"WHEN regexp_matches({msg_id}, {_POSITION}) "
            f"THEN concat_ws(':', {ledger}::VARCHAR, {entry}::VARCHAR, {batch}::VARCHAR) END)")


def message_key(msg_id: str, value: str) -> str:
    """analysis.checks.ack_conflicts' `_msg`: the message's name, else its raw id, else its value."""
    return f"coalesce({message_name(msg_id)}, {msg_id}, 'value ' || {value})"
