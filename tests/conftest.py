"""Shared fixtures and the skip rules for markers that need things CI may lack."""

from __future__ import annotations

import shutil
import subprocess

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


def xdist_group_of(path: str, markers: set[str]) -> str:
    """The group a test runs in under `pytest -n N --dist loadgroup` (`make test`).

    Tests that start processes share one group, so they never run beside each other; every
    other test is grouped by its file, so a module's fixtures (a Spark run, a history written
    once for the module) are built once, on one worker, as without xdist. The process tests
    mostly wait (on sockets, on JVMs starting), so the other worker uses the cores meanwhile.
    (One group for the Spark tests as well, one local session at a time, measured slower:
    12 min 13 s against 11 min 3 s, 2026-11-27.)
    """
    if markers & {"cluster", "pulsar"} or path.startswith(("tests/cluster/", "tests/pulsar/")):
        return PROCESS_GROUP
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(path, {m.name for m in item.iter_markers()})))
    if any(item.get_closest_marker("docker") for item in items) and not _docker_engine_available():
        skip = pytest.mark.skip(reason="no Docker engine on this machine (docker info failed)")
        for item in items:
            if item.get_closest_marker("docker"):
                item.add_marker(skip)
