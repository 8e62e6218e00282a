"""The load's process entry points, named for whoever starts one.

Why names here and not the modules themselves (as `harness.entrypoints` asks elsewhere):
`workloads.runner` and `workloads.worker_host` monkey-patch the standard library for
gevent as the first thing they do, so importing either in a process that only starts one
(the orchestrator, the capacity measurement) would patch that process too. Their names
live in this one place instead, beside imports of the modules under `TYPE_CHECKING`: the
import contracts count those (import-linter includes type-checking imports), so they
still see who starts the load, and tests/unit/test_module_launches.py checks that each
name here is the module imported beside it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # the ties, for the import contracts; never imported at run time (gevent)
    import workloads.runner
    import workloads.worker_host  # noqa: F401

RUNNER = "workloads.runner"
"""The load process: `python -m workloads.runner --spec F` (a run's master, or one of its workers)."""

WORKER_HOST = "workloads.worker_host"
"""`txnbench worker`: Locust workers on a load machine, joining a run's master."""


def python_m(name: str, *args: str) -> list[str]:
    """`[this interpreter, "-m", name, *args]` for one of the names above."""
    return [sys.executable, "-m", name, *args]
