"""Users a chaos run lost after a client-kill, with real Locust runners (tests/cluster/locust_drill.py).

results/20261129-024544-chaos-chaos (v4): a client-kill of worker w0 at ~20 s; 60 s later
Locust dropped the dead worker and dispatched every user again from zero at the spawn rate;
the workers lost the users they were stopping when the ramp's second message came, and the
run went on with 8 of its 14 users (committed txn/s near 0) for its last five minutes. Each
drill runs without the fix first, to show it still reproduces what Locust does, then with it.
The four run side by side (they mostly sleep): about half a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def start(drill: str, *, fixed: bool) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.cluster.locust_drill", drill,
                             *(["--fixed"] if fixed else [])],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0 and out.strip(), f"drill failed ({proc.returncode}): {err[-3000:]}"
    return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def drills() -> dict[tuple[str, bool], dict[str, Any]]:
    runs = {(drill, fixed): start(drill, fixed=fixed)
            for drill in ("ramp-during-stop", "killed-worker") for fixed in (False, True)}
    try:
        return {key: result(proc) for key, proc in runs.items()}
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_a_dispatch_during_a_graceful_stop_leaves_the_worker_at_its_target(
        drills: dict[tuple[str, bool], dict[str, Any]]) -> None:
    unguarded = drills[("ramp-during-stop", False)]
    target = unguarded["target"]
    assert target == {"HelperUser": 2, "TxnUser": 4}
    # what Locust does by itself: the users the first message stopped (3) are gone for good
    assert sum(unguarded["live"].values()) < 6 and unguarded["respawned"] == 0, (
        f"Locust no longer loses the stopping users ({unguarded}): is workloads.user_guard still needed?")
    guarded = drills[("ramp-during-stop", True)]
    assert guarded["live"] == target and guarded["respawned"] == 3, guarded


def test_a_killed_worker_is_dropped_at_once_so_only_its_replacement_dispatches(
        drills: dict[tuple[str, bool], dict[str, Any]]) -> None:
    left = drills[("killed-worker", False)]
    # Locust's own removal of the dead worker, later, dispatches every user again from zero (its
    # workers lose users under it as above, most times: the users' phase decides, so not asserted)
    assert left["dispatches"] == 2 and not left["dropped"], left
    dropped = drills[("killed-worker", True)]
    assert dropped == {"dropped": True, "dispatches": 1, "clients": 2, "live": 6}, dropped
