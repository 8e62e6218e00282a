"""The type every SQL check module registers its plans under (`CHECKS`, by anomaly class)."""

from __future__ import annotations

from collections.abc import Callable

from analysis.duck.evaluate import Plan
from analysis.duck.frames import DuckContext

PlanCheck = Callable[[DuckContext], Plan]

__all__ = ["PlanCheck"]
