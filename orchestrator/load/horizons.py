"""Why a v4 partition hides committed values: its read horizon, and the transaction holding it.

Theory of operation. A v4 partition dispatches nothing past its max read position: the
position before the first entry of the oldest transaction still open on it. When the drain
ends with committed values missing from a partition, either they are lost, or something
holds that horizon back, and the two call for different write-ups (issue #47: 3,037 lost
writes on Pulsar 4.0.8 whose drain noted thousands of entries in the brokers' backlogs). So
for each partition of such a topic the drain asks the owner (admin API, Pulsar's own views,
no guessing):

* the transaction buffer's stats: `maxReadPosition`, `ongoingTxnSize`, the low watermarks
  it learned from each coordinator;
* the partition's last confirmed entry (internal stats): when it lies past the horizon,
  entries are written but not dispatchable;
* the transaction of the entry right after the horizon (getMessageById's `X-Pulsar-txnid-*`
  headers): the holder;
* the holder's coordinator's view (transactionMetadata): OPEN, COMMITTING, ... or
  NOT_FOUND (ended and forgotten).

A partition held by a transaction its coordinator no longer knows, or knows as ended, is
a horizon no one will move: every committed value behind it stays invisible. The drain
records what it found (`drain-complete` `extra.held_horizons`, the manifest's drain notes);
the checker's verdict does not depend on it. Bounded: one pass, `MAX_PARTITIONS` partitions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.history.positions import ledger_entry

MAX_PARTITIONS = 64
#: the coordinator's answers that mean nobody will end the holder (it ended or was forgotten)
ENDED = frozenset({"NOT_FOUND", "COMMITTED", "ABORTED"})


@dataclass(frozen=True)
class HeldHorizon:
    """One partition whose written entries lie past its read horizon."""

    partition: str
    max_read_position: str
    last_confirmed: str
    ongoing: int | None
    holder: str | None             # "<most>:<least>" of the entry after the horizon
    holder_status: str | None      # its coordinator's status, NOT_FOUND, or UNKNOWN
    low_watermarks: dict[str, Any]

    @property
    def stuck_for_good(self) -> bool:
        """No coordinator will end the holder: the horizon never moves again."""
        return self.holder_status in ENDED

    def describe(self) -> str:
        who = (f"transaction {self.holder}, which its coordinator says is {self.holder_status}"
               if self.holder else "an entry whose transaction the broker did not name")
        watermark = ""
        if self.holder:
            most = self.holder.split(":", 1)[0]
            if most in self.low_watermarks:
                watermark = f"; the partition's low watermark for coordinator {most} is {self.low_watermarks[most]}"
        return (f"{self.partition}: read horizon held at {self.max_read_position} (last entry "
                f"{self.last_confirmed}, {self.ongoing} open transaction(s)) by {who}{watermark}")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "stuck_for_good": self.stuck_for_good}


def held_horizon(admin: Any, partition: str) -> HeldHorizon | None:
    """The partition's held horizon, or None when nothing written lies past it (or the broker
    would not say: embedded brokers and old releases may lack these admin calls)."""
    try:
        stats = admin.transaction_buffer_stats(partition)
        internal = admin.internal_stats(partition)
    except Exception:
        return None
    horizon, last = ledger_entry(stats.get("maxReadPosition")), ledger_entry(internal.get("lastConfirmedEntry"))
    if horizon is None or last is None or last <= horizon:
        return None
    holder: str | None = None
    status: str | None = None
    try:
        found = admin.entry_transaction(partition, horizon[0], horizon[1] + 1)
    except Exception:
        found = None
    if found is not None:
        holder = f"{found[0]}:{found[1]}"
        try:
            meta = admin.transaction_metadata(*found)
            status = "NOT_FOUND" if meta is None else str(meta.get("status"))
        except Exception:
            status = "UNKNOWN"
    ongoing = stats.get("ongoingTxnSize")
    marks = stats.get("lowWaterMarks")
    return HeldHorizon(partition, f"{horizon[0]}:{horizon[1]}", f"{last[0]}:{last[1]}",
                       int(ongoing) if isinstance(ongoing, int | float) else None, holder, status,
                       dict(marks) if isinstance(marks, dict) else {})


def held_horizons(admin: Any, partitions: list[str]) -> list[HeldHorizon]:
    """`held_horizon` of each partition (at most MAX_PARTITIONS), those that hold something back."""
    out: list[HeldHorizon] = []
    for partition in partitions[:MAX_PARTITIONS]:
        found = held_horizon(admin, partition)
        if found is not None:
            out.append(found)
    return out
