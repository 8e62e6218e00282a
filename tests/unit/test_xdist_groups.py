"""`make test`'s two workers: which tests may run beside which (tests/conftest.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import (
    LONG_PROCESS_FILES,
    LONG_PROCESS_GROUP,
    PROCESS_GROUP,
    REAL_PULSAR_GROUP,
    xdist_group_of,
)

REPO = Path(__file__).resolve().parents[2]


def test_process_starting_tests_share_a_group_per_kind_of_cluster_and_others_group_by_file() -> None:
    """Embedded-cluster tests in two groups, real-Pulsar tests in a third, each one at a time, the
    three beside each other: one embedded group made its worker the whole of `make test`'s time."""
    assert xdist_group_of("tests/cluster/test_v5_failover.py::test_a[v5]") == PROCESS_GROUP
    assert xdist_group_of("tests/cluster/test_run_scenarios.py::test_e") == LONG_PROCESS_GROUP
    assert xdist_group_of("tests/pulsar/test_pulsar_smoke.py::test_b") == REAL_PULSAR_GROUP
    assert xdist_group_of("tests/pulsar/test_oldest_release_real.py::test_f") == REAL_PULSAR_GROUP
    assert xdist_group_of("tests/unit/test_cli.py::test_c") == "tests/unit/test_cli.py"
    assert xdist_group_of("tests/spark/test_report.py::test_d[x::y]") == "tests/spark/test_report.py"


def test_every_file_of_the_long_group_exists() -> None:
    """A renamed file would leave the long group silently and unbalance the two."""
    missing = sorted(name for name in LONG_PROCESS_FILES if not (REPO / name).is_file())
    assert not missing, missing


def test_two_workers_keep_each_group_on_one_worker() -> None:
    """The schedule itself, not only the rule: pytest 9.2 made xdist's own `loadgroup` drop its
    groups without a word, and two process tests then raced on the two workers (CI, 2026-11-27)."""
    files = ["tests/unit/test_outage_windows.py", "tests/unit/pulsar/test_txn_check.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                           "-p", "no:cacheprovider", *files],
                          cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", done.stdout, re.MULTILINE):
        workers[xdist_group_of(nodeid)].add(worker)
    assert set(workers) == set(files), done.stdout[-3000:]
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
