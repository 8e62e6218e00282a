"""Shared fixtures and the skip rules for markers that need things CI may lack."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest


def _docker_engine_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


#: the xdist group of every test that starts processes (clusters, real Pulsar): `make test` runs
#: them one at a time on one worker, as they ran before it had two; their timing bounds assume a
#: machine that is not also running another cluster
PROCESS_GROUP = "processes"
PROCESS_TEST_FOLDERS = ("tests/cluster/", "tests/pulsar/")


def xdist_group_of(nodeid: str) -> str:
    """The group a test runs in under `pytest -n N --dist loadgroup` (`make test`).

    Tests that start processes share one group, so they never run beside each other; every
    other test is grouped by its file, so a module's fixtures (a Spark run, a history written
    once for the module) are built once, on one worker, as without xdist. The process tests
    mostly wait (on sockets, on JVMs starting), so the other worker uses the cores meanwhile.
    (One group for the Spark tests as well, one local session at a time, measured slower:
    12 min 13 s against 11 min 3 s, 2026-11-27.) Every `cluster` or `pulsar` test lives in
    those two folders (the collection hook below holds that), so the path decides.
    """
    path = nodeid.split("::", 1)[0]
    return PROCESS_GROUP if path.startswith(PROCESS_TEST_FOLDERS) else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Our own scheduler for `--dist loadgroup`: xdist's groups tests by rewriting node ids from
    `xdist_group` marks, which pytest 9.2 silently ignores (pytest-xdist#1386: every test was
    scheduled alone, process tests ran side by side on both workers and raced each other's
    caches). Scoping by `xdist_group_of` needs no marks and no rewritten ids."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ProcessTestsTogether(LoadScopeScheduling):   # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return ProcessTestsTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    astray = sorted({item.nodeid.split("::", 1)[0] for item in items
                     if {"cluster", "pulsar"} & {m.name for m in item.iter_markers()}
                     and xdist_group_of(item.nodeid) != PROCESS_GROUP})
    if astray:
        raise pytest.UsageError(f"{', '.join(astray)}: a test marked `cluster` or `pulsar` starts processes, so it "
                                f"belongs under {' or '.join(PROCESS_TEST_FOLDERS)} (`make test` runs those one "
                                f"at a time; see xdist_group_of in tests/conftest.py)")
    if any(item.get_closest_marker("docker") for item in items) and not _docker_engine_available():
        skip = pytest.mark.skip(reason="no Docker engine on this machine (docker info failed)")
        for item in items:
            if item.get_closest_marker("docker"):
                item.add_marker(skip)
