"""Shared fixtures and the skip rules for markers that need things CI may lack."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest

from analysis.spark import CDS_ENV, CDS_MAP_ONLY

# No test process writes the driver JVM's class archive (every `txnbench` command a test starts
# inherits this): writing one took 38 s of an idle machine and about 2 min of a loaded `make test`,
# once per kind of session and again in every clean clone (CI), for the few later sessions that
# map it. An archive that exists is still mapped. tests/unit/test_spark_cds.py tests the writing.
os.environ.setdefault(CDS_ENV, CDS_MAP_ONLY)


def _docker_engine_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


#: the xdist group of the tests that start embedded clusters: at most two of them at a time,
#: one per group, never two from one group
PROCESS_GROUP = "processes"
#: the second embedded-cluster group: the files that run whole `txnbench` command lines or a
#: JVM client against their cluster, the longest ones. Chosen by their measured time so the two
#: groups take about as long (beside a release-matrix cell, 2026-11-29: 595 s of these files
#: against 557 s of the rest); a new long file in tests/cluster/ belongs here when the first
#: group grows past it
LONG_PROCESS_GROUP = "processes-long"
LONG_PROCESS_FILES = frozenset({
    "tests/cluster/test_run_scenarios.py",
    "tests/cluster/test_broker_store_restart.py",
    "tests/cluster/test_java_txn_check.py",
    "tests/cluster/test_workloads_runner.py",
    "tests/cluster/test_v4_on_zookeeper.py",
})
#: the xdist group of the tests that start real Apache Pulsar: one at a time, beside the
#: embedded ones
REAL_PULSAR_GROUP = "real-pulsar"
PROCESS_GROUPS = (PROCESS_GROUP, LONG_PROCESS_GROUP, REAL_PULSAR_GROUP)
PROCESS_TEST_FOLDERS = ("tests/cluster/", "tests/pulsar/")


def xdist_group_of(nodeid: str) -> str:
    """The group a test runs in under `pytest -n N --dist loadgroup` (`make test`).

    Tests that start embedded clusters are in two groups and the real-Pulsar tests in a third;
    a group's tests run one at a time on one worker. Every other test is grouped by its file, so
    a module's fixtures (a Spark run, a history written once for the module) are built once, on
    one worker, as without xdist. Why three process groups on three workers: with one, every
    process test ran in series and that worker was `make test`'s whole wall time (1,137 of
    1,170 s beside a chaos run, 2026-11-29); with the real-Pulsar tests apart, the embedded group
    still was (1,152 of 1,243 s beside a release-matrix cell, 2026-11-29), so it is split in two.
    Tests of one group share nothing with another group's but the build caches, which lock
    (targets/cache_lock.py), and ports, which are retried when taken. (One group for the Spark
    tests as well, one local session at a time, measured slower: 12 min 13 s against 11 min 3 s,
    2026-11-27.) Every `cluster` or `pulsar` test lives in those two folders (the collection hook
    below holds that), so the path decides.
    """
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/pulsar/"):
        return REAL_PULSAR_GROUP
    if path in LONG_PROCESS_FILES:
        return LONG_PROCESS_GROUP
    return PROCESS_GROUP if path.startswith(PROCESS_TEST_FOLDERS) else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Our own scheduler for `--dist loadgroup`: xdist's groups tests by rewriting node ids from
    `xdist_group` marks, which pytest 9.2 silently ignores (pytest-xdist#1386: every test was
    scheduled alone, process tests ran side by side on both workers and raced each other's
    caches). Scoping by `xdist_group_of` needs no marks and no rewritten ids."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ProcessTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return ProcessTestsTogether(config, log)


#: the marker every test of a folder carries, so its files need not say it
FOLDER_MARKERS = {"tests/cluster/": "cluster", "tests/spark/": "spark", "tests/docker/": "docker",
                  "tests/browser/": "browser"}


@pytest.hookimpl(tryfirst=True)   # before `-m` selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = next((f for f in FOLDER_MARKERS if item.nodeid.startswith(f)), None)
        if folder is not None:
            item.add_marker(FOLDER_MARKERS[folder])
    astray = sorted({item.nodeid.split("::", 1)[0] for item in items
                     if {"cluster", "pulsar"} & {m.name for m in item.iter_markers()}
                     and xdist_group_of(item.nodeid) not in PROCESS_GROUPS})
    if astray:
        raise pytest.UsageError(f"{', '.join(astray)}: a test marked `cluster` or `pulsar` starts processes, so it "
                                f"belongs under {' or '.join(PROCESS_TEST_FOLDERS)} (`make test` runs each "
                                f"group of those one test at a time; see xdist_group_of in tests/conftest.py)")
    if any(item.get_closest_marker("docker") for item in items) and not _docker_engine_available():
        skip = pytest.mark.skip(reason="no Docker engine on this machine (docker info failed)")
        for item in items:
            if item.get_closest_marker("docker"):
                item.add_marker(skip)
