"""Which anomaly instances lie behind a read horizon the drain found held.

Why: on real Pulsar one transaction nobody will end (its coordinator forgot it, or a terminated
partition cannot take its marker) holds a v4 partition's max read position for good, and every
value committed after it there stays invisible: `make chaos TARGET=pulsar` on 5.0.1 reported
8,084 lost writes whose every value lay behind three such horizons
(`results/20261129-122837-chaos-chaos`, docs/findings/v4-commit-marker-skipped-on-bundle-unload.md).
The drain asks each partition's owner what holds its horizon and records it (orchestrator/load/horizons.py,
`drain-complete` `extra.held_horizons`); the report said nothing of it, so the reader of a run
had to join instances and horizons by hand to see that thousands of instances are a few holders.

An instance is *behind* a held horizon when it names at least one acknowledged send and every one
of them lies on a held partition past the horizon recorded there (past every horizon recorded for
it, when the live and the cold drain both recorded one). The account counts such instances per
class and per holder. It explains; the verdict, the expectations and their attribution stay as
they are: an instance behind a held horizon is still an anomaly, and still unexpected unless a
terminate caused it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.history.events import read_events
from harness.history.positions import ledger_entry
from harness.history.schema import PHASE_DRAIN_COMPLETE, OpF, OpType

#: the drain-complete extras that list held horizons (the live drain's and the cold one's)
HELD_KEYS = ("held_horizons", "live_held_horizons")
ENDS = {OpF.TXN_COMMIT: "commit", OpF.TXN_ABORT: "abort"}


@dataclass(frozen=True)
class HeldPartition:
    """A partition whose horizon the drain found held: the furthest horizon recorded for it, and
    how the load's client saw the holder end (`ended`: e.g. "commit ok at 173.9 s")."""

    partition: str
    horizon: tuple[int, int]
    holder: str | None
    holder_status: str | None
    ended: str | None = None

    def label(self) -> str:
        if self.holder:
            client = f"; the client: {self.ended}" if self.ended else "; the client never ended it"
            who = f"transaction {self.holder} (its coordinator: {self.holder_status or 'no answer'}{client})"
        else:
            who = "an entry whose transaction the broker did not name"
        return f"{self.partition.rsplit('/', 1)[-1]} at {self.horizon[0]}:{self.horizon[1]} by {who}"


@dataclass
class HeldAccount:
    """One anomaly class's instances behind held horizons."""

    total: int
    behind: int = 0
    by_holder: dict[str, int] = field(default_factory=dict)     # HeldPartition.label() -> instances

    def to_json(self) -> dict[str, Any]:
        return {"instances": self.total, "behind_held_horizons": self.behind, "by_holder": dict(self.by_holder)}

    def describe(self) -> str:
        holders = "; ".join(f"{label}: {n}" for label, n in sorted(self.by_holder.items(), key=lambda kv: -kv[1]))
        return (f"{self.behind} of {self.total} instance(s) lie behind read horizons the drain found held "
                f"(orchestrator/load/horizons.py), per partition and holder: {holders}")


def held_partitions(history_dir: Path) -> dict[str, HeldPartition]:
    """Every held horizon the history's `drain-complete` events recorded, by partition, with how
    the client's last commit or abort of each holder completed."""
    found: dict[str, HeldPartition] = {}
    ends: dict[str, tuple[int, str]] = {}       # txn -> (time_ns, "commit ok") of its last end
    # a damaged file says nothing past its damage; the checker reports the damage
    for op in read_events(history_dir, fs=(*ENDS, OpF.PHASE), skip_damaged=True):
        end = ENDS.get(op.f) if op.f is not None else None
        if end and op.type is not OpType.INVOKE and op.txn and op.time_ns >= ends.get(op.txn, (-1, ""))[0]:
            ends[op.txn] = (op.time_ns, f"{end} {op.type} at {op.time_ns / 1e9:.1f} s")
        if op.phase == PHASE_DRAIN_COMPLETE:
            for key in HELD_KEYS:
                for row in op.extra.get(key) or []:
                    _add(found, row)
    return {part: replace(held, ended=ends[held.holder][1]) if held.holder in ends else held
            for part, held in found.items()}


def _add(found: dict[str, HeldPartition], row: Any) -> None:
    if not isinstance(row, Mapping):
        return
    partition, horizon = row.get("partition"), ledger_entry(row.get("max_read_position"))
    if not isinstance(partition, str) or horizon is None:
        return
    known = found.get(partition)
    if known is None or horizon > known.horizon:
        holder = row.get("holder")
        status = row.get("holder_status")
        found[partition] = HeldPartition(partition, horizon, str(holder) if holder else None,
                                         str(status) if status else None)


def account(instances: Iterable[Any], total: int, held: Mapping[str, HeldPartition],
            sends_of: Any) -> HeldAccount:
    """Count `instances` (`total` of the class in all) behind `held`; `sends_of(instance)` gives
    (partition, (ledger, entry)) of each acknowledged send it names."""
    result = HeldAccount(total)
    for instance in instances:
        sends = sends_of(instance)
        if not sends or not all(p in held and pos > held[p].horizon for p, pos in sends):
            continue
        result.behind += 1
        for label in sorted({held[p].label() for p, _ in sends}):
            result.by_holder[label] = result.by_holder.get(label, 0) + 1
    return result
