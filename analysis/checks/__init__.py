"""One pure check per anomaly class of docs/checks.md.

Each check is a plan, `CheckContext -> Plan` (analysis.checks.base): it reads the
DataFrames `analysis.checks.context.prepare()` derives from a history and gives a
finished result (skipped with a reason, or clean) or the anomaly rows still to
count. `REGISTRY` maps every anomaly class to its plan, in the order results show
them: the one place a check is registered. `run_checks` evaluates them all
(`evaluate` counts every plan in one Spark job), `run_one` evaluates one.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import DataFrame

from analysis.checks import (
    abandoned,
    ack_conflicts,
    acks,
    ctp,
    delivery,
    ids,
    liveness,
    order,
    reads,
    writes,
)
from analysis.checks.base import CheckResult, CheckStatus, Plan, evaluate, evaluate_with_tallies
from analysis.checks.context import CheckContext, prepare
from harness.anomalies import AnomalyClass

PlanCheck = Callable[[CheckContext], Plan]

REGISTRY: dict[AnomalyClass, PlanCheck] = {
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
    AnomalyClass.DOUBLE_ACK: ack_conflicts.plan_double_ack,
    AnomalyClass.UNRESOLVED_TXN: abandoned.plan_unresolved_txn,
}
assert list(REGISTRY) == list(AnomalyClass), "every anomaly class has exactly one check"


def run_one(name: AnomalyClass, ctx: CheckContext) -> CheckResult:
    """Run the check of one anomaly class on its own."""
    return evaluate([REGISTRY[name](ctx)])[0]


def run_checks(ctx: CheckContext, progress: Callable[[str], None] | None = None,
               *, together: bool = True) -> list[CheckResult]:
    """Run every check, in REGISTRY order.

    `together` evaluates all plans in one counting job (fast on small histories,
    where Spark's per-job cost dominates); otherwise each check runs on its own,
    which shows per-check progress on large ones.
    """
    return run_checks_with_tallies(ctx, progress, together=together)[0]


def run_checks_with_tallies(ctx: CheckContext, progress: Callable[[str], None] | None = None, *,
                            together: bool = True, tallies: DataFrame | None = None, threads: int = 1
                            ) -> tuple[list[CheckResult], dict[str, int]]:
    """`run_checks`, and the counts of the caller's `tallies` (analysis.checks.base.evaluate):
    in the one counting job when `together`, else in a job of their own.

    Check by check (`together` false), `threads` above 1 runs that many checks at once once the
    first has run alone (it computes the frames every check shares): one check's Spark job mostly
    keeps one core busy (a stage of a few tasks, then the driver planning the next), so two at once
    fill two cores. The results are the same in any order; they are returned in REGISTRY order."""
    if together:
        if progress is not None:
            progress(f"running the {len(REGISTRY)} checks")
        return evaluate_with_tallies([plan(ctx) for plan in REGISTRY.values()], tallies)
    names = list(REGISTRY)

    def check(number: int) -> CheckResult:
        if progress is not None:
            progress(f"check {number}/{len(names)}: {names[number - 1]}")
        return run_one(names[number - 1], ctx)

    def count() -> dict[str, int]:
        if tallies is None:
            return {}
        if progress is not None:
            progress("counting operations and transactions")
        return evaluate_with_tallies([], tallies)[1]

    results = [check(1)]
    if threads <= 1:
        results.extend(check(number) for number in range(2, len(names) + 1))
        return results, count()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="check") as pool:
        checks = [pool.submit(check, number) for number in range(2, len(names) + 1)]
        counted = pool.submit(count)
        try:
            results.extend(future.result() for future in checks)
            return results, counted.result()
        except BaseException:
            # Interrupted, or one check failed: the others' Spark jobs stop too, so the pool's
            # threads end instead of running every remaining check first.
            for check_future in checks:
                check_future.cancel()
            counted.cancel()
            ctx.pairs.sparkSession.sparkContext.cancelAllJobs()
            raise


__all__ = [
    "REGISTRY", "AnomalyClass", "CheckContext", "CheckResult", "CheckStatus", "PlanCheck", "prepare",
    "run_checks", "run_checks_with_tallies", "run_one",
]
