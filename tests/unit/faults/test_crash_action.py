"""The `crash` kind's action (faults.actions.CrashAction) with fake process control, no processes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from faults.actions import CrashAction
from faults.kinds import crash
from faults.model import Fault, NotInjected
from faults.resolution import ServiceTarget
from harness.target import CrashAim
from tests.unit.faults.fakes import FakeControl


@dataclass
class FakePowerLoss(FakeControl):
    crashes: list[tuple[str, int, float]] = field(default_factory=list)
    aims: list[CrashAim] = field(default_factory=list)

    def crash(self, service: str, seed: int, aim_s: float, aim: CrashAim = CrashAim.WRITE) -> str:
        self.crashes.append((service, seed, aim_s))
        self.aims.append(aim)
        self._do("kill", service, "stopped")
        return f"{service}: kept 10 of 20 bytes, 10 truncate"


def _fault(fault_id: str = "f3", aim_ms: int = 1500, **params: str) -> Fault:
    return Fault(fault_id, "crash", "ledger", (ServiceTarget("ledger"),), {"aim_ms": aim_ms, **params},
                 1.0, True, "faults.schedule[3]")


def test_a_crash_tears_through_the_target_and_is_healed_by_a_start() -> None:
    control = FakePowerLoss(["ledger"])
    action = CrashAction(control)
    effect = action.inject(_fault())
    assert effect == {"lost": {"ledger": "ledger: kept 10 of 20 bytes, 10 truncate"}}
    ((service, seed, aim_s),) = control.crashes
    assert (service, aim_s) == ("ledger", 1.5)
    action.inject(_fault())
    assert control.crashes[1][1] == seed           # the seed is the fault's: a run reproduces
    action.inject(_fault("f4"))
    assert control.crashes[2][1] != seed
    action.heal(_fault())
    assert control.calls[-1] == ("start", "ledger") and control.clean()


def test_a_target_that_cannot_lose_unsynced_writes_is_not_crashed() -> None:
    control = FakeControl(["ledger"])
    with pytest.raises(NotInjected, match="cannot crash"):
        CrashAction(control).inject(_fault())
    assert control.calls == []


def test_aim_defaults_and_bounds() -> None:
    assert crash.KIND.validate_params({}) == {"aim_ms": 2000, "aim": "write"}
    with pytest.raises(ValueError):
        crash.KIND.validate_params({"aim_ms": 60_000})
    with pytest.raises(ValueError, match="not one of"):
        crash.KIND.validate_params({"aim": "header"})


def test_the_aim_reaches_the_target() -> None:
    control = FakePowerLoss(["ledger"])
    action = CrashAction(control)
    action.inject(_fault())
    action.inject(_fault("f4", aim="crash-loop"))
    assert control.aims == [CrashAim.WRITE, CrashAim.CRASH_LOOP]
