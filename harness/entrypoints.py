"""How one of our modules is started as a process: `python -m <name>`, the name taken from the module.

Why a helper, and why a module object rather than its name: a process started as
`python -m embedded.broker` is a tie between the starter and `embedded.broker` just as an
import is, but a name in a string is a tie the import contracts (`[tool.importlinter]` in
pyproject.toml) cannot see. A starter imports the module it starts (a runnable package,
or its `__main__`) and passes the module here, so the contracts see every such tie and a
module that moves takes its starters' commands with it. tests/unit/test_module_launches.py fails
when a literal module name creeps back into a `-m` command.
"""

from __future__ import annotations

import sys
from types import ModuleType


def runnable_name(module: ModuleType) -> str:
    """The name `python -m` runs `module` by: a package's `__main__` runs as its package.

    Read from the module's spec, so it is right also inside the module's own process
    (where `__name__` is `"__main__"`)."""
    spec = module.__spec__
    name = spec.name if spec is not None else module.__name__
    return name.removesuffix(".__main__")


def python_m(module: ModuleType, *args: str) -> list[str]:
    """`[this interpreter, "-m", <module's name>, *args]`: the command that runs `module`."""
    return [sys.executable, "-m", runnable_name(module), *args]
