"""Being ported from analysis.checks.order (issue #45): until then this module registers no check."""

from __future__ import annotations

from analysis.duck.checks.registry import PlanCheck
from harness.anomalies import AnomalyClass

CHECKS: dict[AnomalyClass, PlanCheck] = {}
