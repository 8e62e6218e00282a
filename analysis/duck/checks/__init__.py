"""The sixteen checks in SQL, one module per module of analysis.checks, registered by anomaly class.

`REGISTRY` maps each anomaly class to its plan (`DuckContext -> Plan`) in the order results
show them, as analysis.checks.REGISTRY does; `run_one` evaluates one, `run_checks` all.
"""

from __future__ import annotations

from collections.abc import Callable

from analysis.checks.base import CheckResult
from analysis.duck.checks import (
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
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import evaluate_one
from analysis.duck.frames import DuckContext
from harness.anomalies import AnomalyClass

_MODULES = (abandoned, ack_conflicts, acks, ctp, delivery, ids, liveness, order, reads, writes)
_ALL: dict[AnomalyClass, PlanCheck] = {name: plan for module in _MODULES for name, plan in module.CHECKS.items()}
REGISTRY: dict[AnomalyClass, PlanCheck] = {name: _ALL[name] for name in AnomalyClass}


def run_one(name: AnomalyClass, ctx: DuckContext) -> CheckResult:
    """Run the check of one anomaly class on its own."""
    return evaluate_one(ctx, REGISTRY[name](ctx))


def run_checks(ctx: DuckContext, progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Every check, in REGISTRY order."""
    results = []
    for number, (name, plan) in enumerate(REGISTRY.items(), start=1):
        if progress is not None:
            progress(f"check {number}/{len(REGISTRY)}: {name}")
        results.append(evaluate_one(ctx, plan(ctx)))
    return results


__all__ = ["REGISTRY", "PlanCheck", "run_checks", "run_one"]
