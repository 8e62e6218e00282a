"""One pure check per anomaly class of docs/checks.md.

Each check is `CheckContext -> CheckResult` (analysis.checks.base): it reads
the DataFrames `analysis.checks.context.prepare()` derives from a history and
returns ran-or-skipped, a count and a few examples naming the ops. `CHECKS`
lists them in the order results show them; `PLANS` their plans, which
`run_checks` evaluates together (all counts in one Spark job).
"""

from __future__ import annotations

from collections.abc import Callable

from analysis.checks import acks, ctp, delivery, ids, liveness, order, reads, writes
from analysis.checks.acks import lost_ack, stuck_ack
from analysis.checks.base import CheckResult, CheckStatus, Plan, evaluate
from analysis.checks.context import CheckContext, prepare
from analysis.checks.ctp import ctp_duplicate, ctp_loss
from analysis.checks.delivery import undelivered
from analysis.checks.ids import txn_id_reuse
from analysis.checks.liveness import stalled_commit
from analysis.checks.order import nonmonotonic
from analysis.checks.reads import aborted_read, dirty_read, unexpected
from analysis.checks.writes import duplicate, lost_write, partial_txn
from harness.anomalies import AnomalyClass

Check = Callable[[CheckContext], CheckResult]

CHECKS: dict[AnomalyClass, Check] = {
    AnomalyClass.ABORTED_READ: aborted_read,
    AnomalyClass.DIRTY_READ: dirty_read,
    AnomalyClass.LOST_WRITE: lost_write,
    AnomalyClass.PARTIAL_TXN: partial_txn,
    AnomalyClass.DUPLICATE: duplicate,
    AnomalyClass.UNEXPECTED: unexpected,
    AnomalyClass.LOST_ACK: lost_ack,
    AnomalyClass.STUCK_ACK: stuck_ack,
    AnomalyClass.CTP_DUPLICATE: ctp_duplicate,
    AnomalyClass.CTP_LOSS: ctp_loss,
    AnomalyClass.NONMONOTONIC: nonmonotonic,
    AnomalyClass.STALLED_COMMIT: stalled_commit,
    AnomalyClass.UNDELIVERED: undelivered,
    AnomalyClass.TXN_ID_REUSE: txn_id_reuse,
}
assert list(CHECKS) == list(AnomalyClass), "every anomaly class has exactly one check"

PLANS: dict[AnomalyClass, Callable[[CheckContext], Plan]] = {
    AnomalyClass.ABORTED_READ: reads.plan_aborted_read,
    AnomalyClass.DIRTY_READ: reads.plan_dirty_read,
    AnomalyClass.LOST_WRITE: writes.plan_lost_write,
    AnomalyClass.PARTIAL_TXN: writes.plan_partial_txn,
    AnomalyClass.DUPLICATE: writes.plan_duplicate,
    AnomalyClass.UNEXPECTED: reads.plan_unexpected,
    AnomalyClass.LOST_ACK: acks.plan_lost_ack,
    AnomalyClass.STUCK_ACK: acks.plan_stuck_ack,
    AnomalyClass.CTP_DUPLICATE: ctp.plan_ctp_duplicate,
    AnomalyClass.CTP_LOSS: ctp.plan_ctp_loss,
    AnomalyClass.NONMONOTONIC: order.plan_nonmonotonic,
    AnomalyClass.STALLED_COMMIT: liveness.plan_stalled_commit,
    AnomalyClass.UNDELIVERED: delivery.plan_undelivered,
    AnomalyClass.TXN_ID_REUSE: ids.plan_txn_id_reuse,
}
assert list(PLANS) == list(AnomalyClass), "every anomaly class has exactly one plan"


def run_checks(ctx: CheckContext, progress: Callable[[str], None] | None = None,
               *, together: bool = True) -> list[CheckResult]:
    """Run every check, in CHECKS order.

    `together` evaluates all plans in one counting job (fast on small histories,
    where Spark's per-job cost dominates); otherwise each check runs on its own,
    which shows per-check progress on large ones.
    """
    if together:
        if progress is not None:
            progress(f"running the {len(PLANS)} checks")
        return evaluate([plan(ctx) for plan in PLANS.values()])
    results = []
    for number, (name, check) in enumerate(CHECKS.items(), start=1):
        if progress is not None:
            progress(f"check {number}/{len(CHECKS)}: {name}")
        results.append(check(ctx))
    return results


__all__ = [
    "CHECKS", "PLANS", "AnomalyClass", "Check", "CheckContext", "CheckResult", "CheckStatus", "aborted_read",
    "ctp_duplicate", "ctp_loss", "dirty_read", "duplicate", "lost_ack", "lost_write", "nonmonotonic",
    "partial_txn", "prepare", "run_checks", "stalled_commit", "stuck_ack", "txn_id_reuse", "undelivered",
    "unexpected",
]
