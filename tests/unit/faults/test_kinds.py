"""The kinds' registry: every module in faults/kinds/ is registered once, so a kind is one module
plus one registry entry, and a module left out of the registry fails here, not in a run."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import faults
import faults.kinds
from faults.kinds import BY_NAME, KINDS
from harness.history.schema import LEGACY_KIND_EFFECTS, FaultEffect, recorded_effects


def test_every_kind_module_is_registered_once_by_its_own_name() -> None:
    modules = {m.name for m in pkgutil.iter_modules(faults.kinds.__path__)} - {"base"}
    assert {getattr(faults.kinds, m).KIND.name for m in modules} == set(BY_NAME)
    assert len(BY_NAME) == len(KINDS) == len(modules)
    for name in modules:
        assert getattr(faults.kinds, name).KIND.name.replace("-", "_") == name


def test_no_generic_module_of_faults_names_a_kind() -> None:
    """The schedule, generation, resolution, checks and nemesis read a kind's facts, never its name."""
    kind_modules = {m.name for m in pkgutil.iter_modules(faults.kinds.__path__)} - {"base"}
    for module in sorted(Path(faults.__file__).parent.glob("*.py")):
        nodes = list(ast.walk(ast.parse(module.read_text(encoding="utf-8"))))
        names = {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)} & set(BY_NAME)
        names |= {f"{n.module}.{a.name}" for n in nodes if isinstance(n, ast.ImportFrom) and n.module
                  for a in n.names if n.module.startswith("faults.kinds")
                  and ({a.name, n.module.rsplit(".", 1)[-1]} & kind_modules)}
        assert not names, f"{module.name} names the kind(s) {sorted(names)}"


def test_the_effects_old_histories_are_read_by_are_what_their_kinds_declare() -> None:
    """A history recorded before faults carried `extra.effects` is read through
    LEGACY_KIND_EFFECTS; each kind it names declares the same effects today (the supervisor's
    `exit` stops its server), so an old run re-checked is judged as a new one would be."""
    for name, effects in LEGACY_KIND_EFFECTS.items():
        if name == "exit":
            assert effects == {FaultEffect.STOPS}
        else:
            assert BY_NAME[name].effects == effects, name
    assert recorded_effects({"kind": "kill"}) == {FaultEffect.STOPS}
    assert recorded_effects({"kind": "kill", "effects": []}) == frozenset()   # recorded: taken as it is
    assert recorded_effects({"kind": "split"}) == frozenset()
    assert recorded_effects({"kind": "x", "effects": ["cuts", "not-a-schema-1-effect"]}) == {FaultEffect.CUTS}
