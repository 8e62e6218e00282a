"""The planted-bug catalogue (orchestrator/planted.py), its switch (embedded/planted_bugs.py) and the guard.

A planted bug must be a real guarded branch in the file the catalogue names, off by
default everywhere, impossible to switch on in `bench`, `chaos` or `sweep`, and named
by every manifest and report of a run that had it on.
"""

from __future__ import annotations

import dataclasses
import re
from itertools import pairwise
from pathlib import Path

import pytest

from analysis.checks.base import AnomalyClass
from analysis.report.run_report import _intro
from embedded import planted_bugs
from embedded.broker.config import DEFAULTS, Settings
from harness.config import ColdReads, load_scenario
from harness.errors import ConfigError
from harness.results import PLANTED_BUG_PREFIX, planted_bugs_of
from harness.txn_paths import TxnPath
from orchestrator.cli import main
from orchestrator.outcome import RunOptions
from orchestrator.planted import (
    BY_ID,
    CATALOGUE,
    PlantedBug,
    banner,
    planted_in,
    refuse_planted_bugs,
)
from orchestrator.run import Run
from targets.embedded import EmbeddedCluster, path_settings
from workloads.topology import plan

REPO = Path(__file__).resolve().parents[2]
# the classes of DESIGN.md's list; `undelivered` and `txn-id-reuse` are checked by their own modules
KNOWN_ANOMALIES = {c.value for c in AnomalyClass} | {"undelivered", "txn-id-reuse"}
A_BUG = CATALOGUE[0].id


def _constant_of(bug_id: str) -> str:
    names = [name for name, value in vars(planted_bugs).items() if value == bug_id and name.isupper()]
    assert len(names) == 1, f"{bug_id} needs exactly one constant in embedded/planted_bugs.py"
    return names[0]


def test_catalogue_holds_at_least_twelve_unique_bugs() -> None:
    ids = [bug.id for bug in CATALOGUE]
    assert len(ids) >= 12
    assert len(set(ids)) == len(ids)
    assert set(BY_ID) == set(ids)
    assert tuple(ids) == planted_bugs.IDS, "the switch knows every catalogued bug, in catalogue order"


@pytest.mark.parametrize("bug", CATALOGUE, ids=lambda b: b.id)
def test_each_entry_is_complete(bug: PlantedBug) -> None:
    assert bug.id.startswith(planted_bugs.PREFIX) and re.fullmatch(r"[A-Za-z0-9]+", bug.id)
    assert bug.paths and set(bug.paths) <= {p.value for p in TxnPath}
    assert bug.title and bug.description
    assert bug.citations and all(c.strip() for c in bug.citations)
    assert any("apache/pulsar#" in c or "apache/bookkeeper#" in c or "../shared/reference/" in c
               for c in bug.citations)
    assert bug.catches and set(bug.catches) <= KNOWN_ANOMALIES


@pytest.mark.parametrize("bug", CATALOGUE, ids=lambda b: b.id)
def test_each_bug_has_a_catching_scenario_on_its_path(bug: PlantedBug) -> None:
    config = load_scenario(bug.scenario)
    assert TxnPath(bug.paths[0]) in config.paths
    assert config.faults.enabled or bug.scenario.startswith("selftest-")
    assert not planted_in(config.cluster.settings), "a scenario never switches a planted bug on by itself"


def test_the_sealed_segment_bug_is_sought_with_warm_reads_on_written_segments() -> None:
    """A reload recovers a sealed segment from its op records and headers, healing the lost
    decisions: cold final reads made the bug invisible (missed in
    20261125-030651-selftest-catalogue). Its seals must also hit segments the load writes
    transactionally (segment:random chose read-only topics 6 times in 8)."""
    bug = BY_ID[planted_bugs.V5_SEALED_SEGMENT_STOPS_LISTENING]
    config = load_scenario(bug.scenario)
    assert config.phases.cold_reads is ColdReads.NONE
    topics = plan(config, "probe").topics
    written = {t for t in topics if t.split("-")[-2] in ("ap", "out")}   # <run>-ap-<i>, <run>-ctp-out-<i>
    for fault in config.faults.schedule:
        index = int(fault.target.split(":")[1])
        assert topics[index] in written, f"{fault.kind} {fault.target} seals a topic nobody writes in a transaction"
        assert fault.trigger is not None and fault.trigger.op.value == "txn-commit"


def test_the_gc_bug_is_sought_with_a_gc_that_force_deletes() -> None:
    """With Pulsar 5.0's re-drive the GC keeps what participants still need, so a 30 ms window
    loses nothing (79 re-drives and no anomaly in 20261125-030651-selftest-catalogue)."""
    bug = BY_ID[planted_bugs.V5_GC_RETENTION_UNITS]
    settings = load_scenario(bug.scenario).cluster.settings
    assert settings["txnbenchV5GcLeftoverOps"] == "force-delete"
    assert settings["transactionCoordinatorScalableTopicsGcRetentionSeconds"] >= 30


def test_the_gc_bug_slows_every_brokers_metadata_link_in_turn() -> None:
    """The GC sweeper runs on the broker that leads coordinator 0, and which broker wins that
    election differs between runs. A delay on the sweeper's own link slows the GC as much as
    the participants, so nothing outlives even the bug's 30 ms window: one random broker per
    run slowed only the sweeper in 20261125-044557-selftest-catalogue (0 force-deletes, missed).
    Every broker's link must be slowed, one at a time."""
    bug = BY_ID[planted_bugs.V5_GC_RETENTION_UNITS]
    config = load_scenario(bug.scenario)
    targets = [fault.target for fault in config.faults.schedule]
    assert {str(fault.kind) for fault in config.faults.schedule} == {"latency"}
    assert set(targets) == {f"broker-metadata:{i}" for i in range(config.cluster.brokers)}
    assert all(a != b for a, b in pairwise(targets)), "the brokers take turns"


@pytest.mark.parametrize("bug", CATALOGUE, ids=lambda b: b.id)
def test_each_bug_is_a_guarded_branch_in_the_file_it_names(bug: PlantedBug) -> None:
    file = REPO / bug.where.split(":")[0]
    assert file.is_file(), bug.where
    source = file.read_text()
    assert f"planted_bugs.on(planted_bugs.{_constant_of(bug.id)})" in source
    assert "DELIBERATE" in source, "the faulty branch says it is deliberate"


def test_nothing_is_planted_by_default() -> None:
    assert planted_bugs.active() == frozenset()
    assert not any(k.startswith(planted_bugs.PREFIX) for k in DEFAULTS)
    assert planted_bugs.enabled_in(Settings()) == []
    for path in TxnPath:
        assert planted_bugs.enabled_in(path_settings(path)) == []
    for scenario in sorted((REPO / "scenarios").glob("*.yaml")):
        assert planted_in(load_scenario(str(scenario)).cluster.settings) == [], scenario.name
    assert not any(planted_bugs.on(bug.id) for bug in CATALOGUE)


def test_activation_is_by_setting_and_exact() -> None:
    try:
        assert planted_bugs.enabled_in({A_BUG: "true", "txnbenchDispatchHorizonPollMillis": 5}) == [A_BUG]
        assert planted_bugs.enabled_in({A_BUG: False}) == []
        assert planted_bugs.activate([A_BUG]) == {A_BUG}
        assert planted_bugs.on(A_BUG)
        assert not planted_bugs.on(CATALOGUE[1].id)
    finally:
        planted_bugs.activate(())
    assert not planted_bugs.on(A_BUG)
    with pytest.raises(planted_bugs.UnknownPlantedBug, match="txnbenchBugNoSuchThing"):
        planted_bugs.enabled_in({"txnbenchBugNoSuchThing": True})
    with pytest.raises(planted_bugs.UnknownPlantedBug):
        planted_bugs.activate(["txnbenchBugNoSuchThing"])


@pytest.mark.parametrize("command", ["bench", "chaos", "sweep"])
def test_matrices_refuse_planted_bugs_always(command: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="planted bug"):
        refuse_planted_bugs({A_BUG: True}, command, allowed=False)
    assert main([command, "--set", f"{A_BUG}=true", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert A_BUG in err and "selftest" in err
    assert list(tmp_path.iterdir()) == [], "refused before any results folder exists"


def test_run_refuses_planted_bugs_without_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "chaos", "--set", f"{A_BUG}=true", "--results", str(tmp_path)]) == 2
    assert "--allow-planted-bugs" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    config = load_scenario("chaos")
    config = dataclasses.replace(config, cluster=dataclasses.replace(
        config.cluster, settings={**config.cluster.settings, A_BUG: True}))
    for command in ("run", "bench", "chaos", "sweep"):
        with pytest.raises(ConfigError):
            Run(config, RunOptions(results_root=tmp_path, command=command))
    assert list(tmp_path.iterdir()) == []


def test_a_run_hands_the_planted_bugs_it_allowed_to_the_embedded_target(tmp_path: Path) -> None:
    """The target writes them into the stores' configs; it does not read the catalogue itself."""
    config = load_scenario("chaos")
    config = dataclasses.replace(config, cluster=dataclasses.replace(
        config.cluster, settings={**config.cluster.settings, A_BUG: True}))
    run = Run(config, RunOptions(results_root=tmp_path / "results", cluster_dir=tmp_path / "cluster",
                                 allow_planted_bugs=True))
    target = run._make_target()
    assert isinstance(target, EmbeddedCluster) and target.spec.planted_bugs == (A_BUG,)


def test_a_misspelt_planted_bug_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="names no planted bug"):
        refuse_planted_bugs({"txnbenchBugV4Typo": True}, "run", allowed=True)


def test_manifests_and_reports_name_the_planted_bugs() -> None:
    assert PLANTED_BUG_PREFIX == planted_bugs.PREFIX
    assert planted_bugs_of({"planted_bugs": [A_BUG]}) == [A_BUG]
    assert planted_bugs_of({"config": {"cluster": {"settings": {A_BUG: True, "x": 1}}}}) == [A_BUG]
    assert planted_bugs_of({"config": {"cluster": {"settings": {A_BUG: False}}}}) == []
    assert planted_bugs_of({"planted_bugs": []}) == []
    assert A_BUG in banner([A_BUG]) and "PLANTED BUGS ON" in banner([A_BUG]) and banner([]) == ""
    intro = _intro({"path": "v4"}, {"planted_bugs": [A_BUG]})
    assert "PLANTED BUGS ON" in intro[0] and A_BUG in intro[0]
    assert not any("PLANTED" in line for line in _intro({"path": "v4"}, {"planted_bugs": []}))


def test_cluster_up_refuses_planted_bugs_without_the_flag(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "--dir", str(tmp_path / "c"), "up", "--set", f"{A_BUG}=true"]) == 2
    assert "--allow-planted-bugs" in capsys.readouterr().err
    assert not (tmp_path / "c").exists(), "refused before anything started"
