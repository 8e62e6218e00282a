"""The anomaly classes: the one list of names the checker reports and scenarios may expect.

The names are part of the results contract, like the history schema (DESIGN.md,
docs/checks.md): `results.json` keys its anomalies by them, a scenario's
`checks.expected` lists them, the report and the comparison show them. So they live
in the base, a leaf importing nothing of the project, where the config that validates
scenarios and the checks that find the anomalies (analysis/checks/) both read them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AnomalyClass"]


class AnomalyClass(StrEnum):
    """The fixed class names of docs/checks.md, in the order results list them."""

    ABORTED_READ = "aborted-read"
    DIRTY_READ = "dirty-read"
    LOST_WRITE = "lost-write"
    PARTIAL_TXN = "partial-txn"
    DUPLICATE = "duplicate"
    UNEXPECTED = "unexpected"
    LOST_ACK = "lost-ack"
    STUCK_ACK = "stuck-ack"
    CTP_DUPLICATE = "ctp-duplicate"
    CTP_LOSS = "ctp-loss"
    NONMONOTONIC = "nonmonotonic"
    STALLED_COMMIT = "stalled-commit"
    UNDELIVERED = "undelivered"
    TXN_ID_REUSE = "txn-id-reuse"
    DOUBLE_ACK = "double-ack"
    UNRESOLVED_TXN = "unresolved-txn"
