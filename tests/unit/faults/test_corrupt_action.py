"""The `corrupt` kind's action (faults.actions.CorruptAction) with fake process control, no processes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from faults.actions import CorruptAction
from faults.kinds import corrupt
from faults.model import Fault, NotInjected
from faults.resolution import ServiceTarget
from harness.target import CorruptionControl, NothingToDamage
from tests.unit.faults.fakes import FakeControl


@dataclass
class FakeCorruption(FakeControl):
    damaged: list[tuple[str, int, str]] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    refuses: bool = True
    nothing: bool = False

    def corrupt(self, service: str, seed: int, which: str) -> dict[str, object]:
        if self.nothing:
            raise NothingToDamage(f"{service} has no {which} file its recovery reads whole (yet)")
        self.damaged.append((service, seed, which))
        self._do("kill", service, "stopped")
        if not self.refuses:
            self._do("start", service, "running")
        return {"damaged": f"{which}: bit 1 of byte 2 flipped", "refused": self.refuses, "said": "CRC mismatch"}

    def repair(self, service: str) -> None:
        self.repaired.append(service)
        self._do("start", service, "running")


def _fault(fault_id: str = "f7", **params: str) -> Fault:
    return Fault(fault_id, "corrupt", "metadata", (ServiceTarget("metadata"),), dict(params), 3.0,
                 True, "faults.schedule[7]")


def test_a_corruption_records_what_the_store_said_and_is_repaired_on_heal() -> None:
    control = FakeCorruption(["metadata"])
    assert isinstance(control, CorruptionControl)
    action = CorruptAction(control)
    effect = action.inject(_fault(file="snapshot"))
    assert effect == {"metadata": {"damaged": "snapshot: bit 1 of byte 2 flipped", "refused": True,
                                   "said": "CRC mismatch"}}
    ((service, seed, which),) = control.damaged
    assert (service, which) == ("metadata", "snapshot")
    action.inject(_fault())
    assert control.damaged[1] == ("metadata", seed, "log")       # the seed is the fault's; log by default
    action.heal(_fault())
    assert control.repaired == ["metadata"] and control.state["metadata"] == "running"


def test_a_store_with_nothing_to_damage_is_not_injected() -> None:
    control = FakeCorruption(["metadata"], nothing=True)
    with pytest.raises(NotInjected, match="reads whole"):
        CorruptAction(control).inject(_fault())


def test_a_target_that_cannot_damage_files_is_not_corrupted() -> None:
    control = FakeControl(["metadata"])
    with pytest.raises(NotInjected, match="cannot damage"):
        CorruptAction(control).inject(_fault())
    assert control.calls == []


def test_the_file_param_is_log_or_snapshot() -> None:
    assert corrupt.KIND.validate_params({}) == {"file": "log"}
    with pytest.raises(ValueError, match="not one of"):
        corrupt.KIND.validate_params({"file": "index"})
