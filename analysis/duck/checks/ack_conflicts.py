"""Being ported from analysis.checks.ack_conflicts (issue #45): until then this module registers no check."""

from __future__ import annotations

from analysis.duck.checks.registry import PlanCheck
from harness.anomalies import AnomalyClass

CHECKS: dict[AnomalyClass, PlanCheck] = {}
