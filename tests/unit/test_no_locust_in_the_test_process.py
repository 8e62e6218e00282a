"""Locust monkey-patches the interpreter with gevent when imported (workloads.users says so):
after ssl is loaded, that breaks ssl with a RecursionError in whatever imports Locust next.
Only the load process may import it. Collection imports every test module before any test
runs, so by the time this runs, a test module anywhere in the session that pulled Locust in
(directly or through workloads.users / workloads.runner) is caught here, naming the fix."""

from __future__ import annotations

import sys


def test_no_test_module_imports_locust() -> None:
    leaked = sorted(name for name in ("locust", "workloads.users", "workloads.runner") if name in sys.modules)
    assert not leaked, (f"{leaked} imported into the test process; test what you need through a module "
                        "without Locust (e.g. workloads.topology) or run the load as a subprocess")
