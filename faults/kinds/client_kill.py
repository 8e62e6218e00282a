"""client-kill: kill -9 a Locust worker of the load, so its open transactions are abandoned and the
coordinators must time them out; the one fault the load process carries out (harness.load_control)."""

from __future__ import annotations

from faults.actions import ClientKillAction
from faults.environment import Capability
from faults.kinds.base import Draw, Kind, Refusal, through_load
from faults.resolution import ResolveContext, Target, resolve_load
from faults.selectors import LoadSelector, Selector
from harness.config import RunConfig
from harness.history.schema import FaultEffect
from harness.txn_paths import TxnPath


def _resolve(selector: Selector, _ctx: ResolveContext, _path: TxnPath) -> tuple[Target, ...]:
    assert isinstance(selector, LoadSelector)
    return (resolve_load(selector),)


def _check(_for_s: float, config: RunConfig) -> None:
    """One worker is killed while the others go on: the load needs workers."""
    if config.load.workers < 1:
        raise Refusal("kind", "client-kill kills a Locust worker, and the load runs in one process "
                      "(load.workers 0)", "set load.workers to 2 or more")


KIND = Kind(
    "client-kill", "kill -9 a Locust worker of the load (its open transactions are abandoned); "
                   "a replacement worker takes its users when healed",
    (LoadSelector,), lambda _p: "load:random", _resolve, through_load(ClientKillAction),
    Draw(("load:random",)), needs=frozenset({Capability.LOAD}), check_entry=_check,
    effects=frozenset({FaultEffect.KILLS_CLIENT}))
