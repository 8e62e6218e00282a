"""No project module is started by a literal `python -m` name: the import contracts see every tie.

Why: starting `python -m embedded.broker` ties the starter to `embedded.broker` as surely
as an import does, but a name in a string is invisible to the contracts of
`[tool.importlinter]` (test_import_layers.py), so a layer could be crossed unseen (the
targets once started the cluster from the ground floor this way). Starters import the
module they start and derive the name from it (`harness.entrypoints.python_m`).

How the source is checked (an AST scan of the packages the contracts cover, the
`root_packages`; tests are outside the contracts and may name modules):

* an element after `"-m"` in a list, tuple or call must not be a string literal;
* no string literal may equal the dotted name of a runnable project module (a package
  with a `__main__.py`, or a module with an `if __name__ == "__main__"` block), wherever
  it stands (a table of service modules, a default argument), except as a logger's name
  (a top-level name such as `faults` is also an ordinary word, a phase, so only dotted
  names count here; a `-m` before one is caught by the first rule);
* the one exception: `workloads/entrypoints.py` names the gevent entry points (importing
  them would monkey-patch the starter); each name there must be a module imported beside
  it under `TYPE_CHECKING`, which the contracts count.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import itertools
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS: list[str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
NAMED_ENTRYPOINTS = REPO / "workloads" / "entrypoints.py"


def _sources() -> Iterator[tuple[str, Path]]:
    """(dotted module name, file) of every module of the root packages."""
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def _has_main_block(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)]
            texts = [n.value for n in ast.walk(node.test) if isinstance(n, ast.Constant)]
            if "__name__" in names and "__main__" in texts:
                return True
    return False


def _runnable(trees: dict[str, tuple[Path, ast.Module]]) -> set[str]:
    """The project modules `python -m` can run: packages with a `__main__`, modules with a main block."""
    runnable = set()
    for name, (path, tree) in trees.items():
        if name.endswith(".__main__"):
            runnable.add(name.removesuffix(".__main__"))
        elif path.name != "__init__.py" and _has_main_block(tree):
            runnable.add(name)
    return runnable


@functools.cache
def _trees() -> dict[str, tuple[Path, ast.Module]]:
    return {name: (path, ast.parse(path.read_text(encoding="utf-8"), str(path))) for name, path in _sources()}


def _logger_names(tree: ast.Module) -> set[int]:
    """ids of the string constants that name a logger (`logging.getLogger("embedded.metadata")`)."""
    ids = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getLogger"
                and node.args and isinstance(node.args[0], ast.Constant)):
            ids.add(id(node.args[0]))
    return ids


def _after_dash_m(tree: ast.Module) -> Iterator[ast.expr]:
    """Every expression that follows a literal "-m" in a list, a tuple or a call's arguments."""
    for node in ast.walk(tree):
        items: list[ast.expr] = []
        if isinstance(node, ast.List | ast.Tuple):
            items = list(node.elts)
        elif isinstance(node, ast.Call):
            items = list(node.args)
        for before, after in itertools.pairwise(items):
            if isinstance(before, ast.Constant) and before.value == "-m":
                yield after


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"


def test_no_module_is_started_by_a_literal_name() -> None:
    trees = _trees()
    runnable = _runnable(trees)
    assert {"embedded.broker", "faultproxy", "embedded.nullbroker", "targets.zk_watchdog"} <= runnable
    found = []
    for _name, (path, tree) in trees.items():
        for after in _after_dash_m(tree):
            if isinstance(after, ast.Constant | ast.JoinedStr):
                found.append(f"{_where(path, after)}: `-m` followed by a literal ({ast.unparse(after)})")
        if path == NAMED_ENTRYPOINTS:
            continue
        loggers = _logger_names(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in runnable
                    and "." in node.value and id(node) not in loggers):
                found.append(f"{_where(path, node)}: the module name {node.value!r} as a string")
    assert not found, ("import the module you start and run it with harness.entrypoints.python_m, "
                       "so the import contracts see the tie:\n" + "\n".join(found))


def test_the_named_entry_points_are_the_modules_imported_beside_them() -> None:
    """workloads/entrypoints.py: each name is a runnable module that the file imports under TYPE_CHECKING."""
    tree = ast.parse(NAMED_ENTRYPOINTS.read_text(encoding="utf-8"))
    guarded = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            guarded |= {alias.name for stmt in node.body if isinstance(stmt, ast.Import) for alias in stmt.names}
    named = {node.value.value for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
             and isinstance(node.value.value, str)}
    assert named, "workloads/entrypoints.py names no entry point"
    assert named == guarded, f"names {sorted(named)} but imports {sorted(guarded)} under TYPE_CHECKING"
    runnable = _runnable(_trees())
    for name in named:
        assert name in runnable, f"{name} is not a runnable module"
        assert importlib.util.find_spec(name) is not None, name


def test_the_command_is_taken_from_the_module() -> None:
    """A package runs by its own name, its `__main__` by its package's; a module by its name."""
    import embedded.broker
    import embedded.broker.__main__ as broker_main
    import targets.zk_watchdog
    from harness.entrypoints import python_m, runnable_name

    assert runnable_name(embedded.broker) == "embedded.broker"
    assert runnable_name(broker_main) == "embedded.broker"
    assert python_m(targets.zk_watchdog, "--parent", "1")[1:] == ["-m", "targets.zk_watchdog", "--parent", "1"]
