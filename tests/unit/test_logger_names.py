"""A module's logger is named after the module, so a log line says where it came from.

Why: 29 of 62 literal logger names had drifted from their modules as files moved
(`embedded.broker.ml` in managed_ledger/ledger.py, `embedded.broker.v5.buffer` in
v5/txn/buffer.py), and two modules shared one name by accident. `__name__` cannot drift; a
module run with `python -m` is `__main__` there, so it spells its own dotted name instead.
"""

from __future__ import annotations

import ast

from tests.unit.test_module_launches import _runnable, _trees

#: modules that log under another module's name on purpose
SHARED_LOGGERS = {"embedded.broker.txn_commands": "embedded.broker.server_cnx"}


def test_each_modules_logger_is_named_after_it() -> None:
    trees = _trees()
    runnable = _runnable(trees)
    astray = []
    for name, (path, tree) in trees.items():
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "getLogger"
                    and node.value.args):
                continue
            arg = node.value.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                ok = name not in runnable and path.name != "__main__.py"
            else:
                expected = SHARED_LOGGERS.get(name, name.removesuffix(".__main__"))
                ok = isinstance(arg, ast.Constant) and arg.value == expected and (
                    name in runnable or path.name == "__main__.py" or name in SHARED_LOGGERS)
            if not ok:
                astray.append(f"{path.name}:{node.lineno} {ast.unparse(node.value)} in {name}")
    assert not astray, "use logging.getLogger(__name__) (a runnable module: its own dotted name):\n" + "\n".join(astray)
