"""The racing decisions of a run (perf.json `races`, issue #43) as report tables.

A chaos run makes decisions race on purpose: transactions acking the same message of a Shared
subscription, commits held until the transaction timeout, a second client's abort beside a
commit, END_TXN sent again after the connection carrying it was cut. A run in which none of
that happened tested none of it, so the run report and the comparison show how many each run
made, and how they ended, beside the load's ack conflicts. docs/report.md defines each column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.report.model import ABSENT, NA, Cell, Table, fmt_count

__all__ = ["RACE_HEADERS", "race_cells", "races_table"]

RACE_HEADERS = ("ack races", "ack conflicts", "acked in two txns", "ack steals", "commits at the timeout",
                "END_TXN resent after a lost connection", "second client's aborts")
CAPTION = ("Racing decisions (whole run). Ack races: acks refused because another transaction had acked the message "
           "(ack conflicts, from the load) plus messages acked ok on one subscription in two transactions (from the "
           "history, whatever their outcomes); ack steals: transactions that also acked a message a sibling consumer "
           "held. Commits at the timeout: invoked within 1 s of their transaction's timeout, ok / fail / info, and how "
           "many were invoked past it (of which committed). END_TXN resent: by the client after the connection "
           "carrying it was lost. Second client's aborts: of transactions being committed, ok / fail / info; "
           "'both ok' counts transactions whose commit and abort were both answered ok (one answer is false)")


def _ended(block: Mapping[str, Any] | None, *, extra: str = "") -> str | Cell:
    if not isinstance(block, Mapping):
        return Cell(ABSENT, "absent")
    count = int(block.get("count") or 0)
    if not count:
        return "0"
    text = (f"{count:,} ({int(block.get('ok') or 0):,} ok / {int(block.get('fail') or 0):,} fail / "
            f"{int(block.get('info') or 0):,} info)")
    return text + extra


def race_cells(races: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """One run's cells under RACE_HEADERS; `absent` where the run measured none of it."""
    if not isinstance(races, Mapping):
        return tuple(Cell(ABSENT, "absent") for _ in RACE_HEADERS)

    def count(key: str) -> str | Cell:
        value = races.get(key)
        return Cell(ABSENT, "absent") if value is None else fmt_count(value)

    timeout = races.get("timeout_commits")
    after = (f"; {int(timeout.get('after') or 0):,} past it, {int(timeout.get('after_ok') or 0):,} committed"
             if isinstance(timeout, Mapping) and timeout.get("count") else "")
    foreign = races.get("foreign_aborts")
    both = int(foreign.get("both_ok") or 0) if isinstance(foreign, Mapping) else 0
    both_text = f"; both ok: {both:,}" if isinstance(foreign, Mapping) and foreign.get("count") else ""
    foreign_cell = _ended(foreign, extra=both_text)
    if both and not isinstance(foreign_cell, Cell):
        foreign_cell = Cell(foreign_cell, "bad")
    return (count("ack_races"), count("ack_conflicts"), count("acked_in_two_txns"), count("ack_steals"),
            _ended(timeout, extra=after), count("end_txn_resends"), foreign_cell)


def races_table(rows: Sequence[tuple[str, Mapping[str, Any] | None]], *, label: str = "path") -> Table:
    """A table of runs (label, perf.json `races`); with one unlabelled run, its cells alone."""
    if len(rows) == 1 and not rows[0][0]:
        return Table.of(RACE_HEADERS, [race_cells(rows[0][1])], caption=CAPTION)
    return Table.of((label, *RACE_HEADERS), [(name or NA, *race_cells(races)) for name, races in rows],
                    caption=CAPTION)
