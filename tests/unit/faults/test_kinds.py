"""The kinds' registry: every module in faults/kinds/ is registered once, so a kind is one module
plus one registry entry, and a module left out of the registry fails here, not in a run."""

from __future__ import annotations

import pkgutil

import faults.kinds
from faults.kinds import BY_NAME, KINDS


def test_every_kind_module_is_registered_once_by_its_own_name() -> None:
    modules = {m.name for m in pkgutil.iter_modules(faults.kinds.__path__)} - {"base"}
    assert {getattr(faults.kinds, m).KIND.name for m in modules} == set(BY_NAME)
    assert len(BY_NAME) == len(KINDS) == len(modules)
    for name in modules:
        assert getattr(faults.kinds, name).KIND.name.replace("-", "_") == name
