"""From a planned fault to a `Fault`: its targets chosen now, its parameters completed.

Resolution runs at injection time, because what a selector means changes during a
run: which broker hosts a coordinator, which segments are active, which processes
are up and which links other faults hold. Each kind's own step is its `Kind.resolve`
(faults/kinds/); this module only adds what every kind shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from faults.model import Fault
from faults.resolution import ResolveContext
from faults.schedule import PlannedFault
from faults.selectors import NoTarget
from harness.txn_paths import TxnPath


def resolve_fault(planned: PlannedFault, ctx: ResolveContext, *, txn_path: TxnPath, for_s: float,
                  settings: Mapping[str, Any]) -> Fault:
    """Choose the targets. Raises SelectorError (NoTarget when nothing is free right now)."""
    kind = planned.kind
    targets = kind.resolve(planned.selector, ctx, txn_path)
    params = dict(planned.params)
    if kind.fill_params is not None:
        kind.fill_params(params, settings)
    busy = [t for t in targets if t.resource in ctx.busy]
    if busy:
        raise NoTarget(f"{', '.join(map(str, busy))} is held by another fault")
    return Fault(fault_id=planned.fault_id, kind=kind.name, selector=planned.target, targets=targets,
                 params=MappingProxyType(params), for_s=for_s, healable=planned.healable,
                 source=planned.source, effects=kind.effects)
