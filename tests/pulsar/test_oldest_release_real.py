"""`txnbench releases --check` on the oldest release of the table, for real.

What it proves: Pulsar 2.10.5 (the oldest release the Maven mirror serves from 2.10 on) resolves
through maven/pom.xml's profile for it, starts on Java 17 with the settings its line needs
(`versions.LINE_2_10`: no PIP-160 setting, the NIC speed its broker insists on), its brokers reach
the bookie through the link faults act on (its BookKeeper 4.14 client would dial around it:
targets/pulsar/bookie_endpoint.py; the cluster refuses to call itself ready otherwise), commits a
transaction on v4, is stopped, and the check is recorded where `txnbench releases` reads it.
About 30-90 s once the jars are cached (a first use resolves them with Maven).

Nightly (`make test-slow`), not in `make test`: its own 2.10.5 cluster cost `make test` (over its 15
minutes) about a minute, and the nightly's release matrix starts 2.10.5 and runs its chaos every
night besides (docs/results.md, `#2026-12-02-pycache`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from targets.pulsar.jars import CACHE_ENV, cache_root
from tests.cluster.test_run_scenarios import processes_mentioning, txnbench
from tests.prerequisites import or_skip, real_pulsar_ready

pytestmark = [pytest.mark.pulsar, pytest.mark.slow, pytest.mark.timeout(1500)]

OLDEST = "2.10.5"
CHECK_TIMEOUT_S = 1200   # a first use resolves the jars (minutes); later ones take about a minute


def test_the_oldest_release_resolves_starts_and_is_recorded(tmp_path: Path) -> None:
    with or_skip():   # mvn, Java 17 and go: one line when one is missing
        real_pulsar_ready(OLDEST)
    # the jars just resolved, seen from a cache of the test's own (its record and cluster stay in tmp_path)
    (tmp_path / OLDEST).symlink_to(cache_root() / OLDEST, target_is_directory=True)
    env = {CACHE_ENV: str(tmp_path)}
    done = txnbench("releases", "--check", OLDEST, env=env, timeout=CHECK_TIMEOUT_S)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-6000:]}"
    assert f"{OLDEST} v4: a transaction committed; stopped" in done.stderr
    record = json.loads((tmp_path / "releases.json").read_text())["releases"][OLDEST]
    assert record["resolves"] and record["starts"] == ["v4"] and record["note"] == "", record
    assert record["components"]["zookeeper"] == "3.6.4" and record["components"]["bookkeeper"] == "4.14.7"
    listing = json.loads(txnbench("releases", "--json", OLDEST, env=env).stdout)
    assert listing[0]["source"] == "here" and listing[0]["runs"]
    assert not processes_mentioning(str(tmp_path / "check-cluster")), "processes left after the check"
