"""Stored positions as the history and the admin API write them.

A message id in the history (`"ledger:entry:batch"`) and a managed-ledger position in Pulsar's
admin answers (`"ledger:entry"`: `maxReadPosition`, `lastConfirmedEntry`, a cursor's
`readPosition`) compare by (ledger, entry). The drain, its horizon and tail probes and the
checker all order them; one parser keeps them agreeing on what is a position.
"""

from __future__ import annotations

from typing import Any


def ledger_entry(text: Any) -> tuple[int, int] | None:
    """(ledger, entry) of `"ledger:entry[:...]"` (or of what prints so: a message id object);
    None when `text` is not one (None, a number, an empty or malformed string)."""
    if text is None:
        return None
    parts = str(text).split(":")
    if len(parts) < 2:
        return None
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None
