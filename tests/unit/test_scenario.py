"""orchestrator.scenario.load: a scenario parsed, adjusted by the command line and validated once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.config import RunConfig, Target, load_scenario
from harness.errors import ConfigError
from orchestrator import scenario


def test_a_valid_scenario_loads_as_the_parser_reads_it() -> None:
    assert scenario.load("chaos") == load_scenario("chaos")


def test_a_run_hands_its_nemesis_the_timeline_load_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    config = scenario.load("chaos")
    monkeypatch.setattr(scenario, "check_scenario", None)   # planned by load, not again
    assert all(scenario.timeline(config.for_path(txn_path)).faults for txn_path in config.paths)
    monkeypatch.undo()
    shorter = config.with_duration(7)   # made after load: planned once, when first asked for
    assert scenario.timeline(shorter) is scenario.timeline(shorter) and scenario.timeline(shorter).duration_s == 7


def test_bad_faults_are_refused_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "typo.yaml"
    bad.write_text("phases: {faults_s: 10}\nfaults:\n  schedule:\n    - {kind: kill, target: 'brokr:1', at_s: 1}\n")
    load_scenario(str(bad))   # the parser alone accepts it: the selector is the faults package's
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.target") as info:
        scenario.load(str(bad))
    assert "\n" not in str(info.value)


def test_the_adjusted_config_is_what_gets_validated() -> None:
    """The command line's overrides come first: a kill cannot run on an external cluster."""
    def external(config: RunConfig) -> RunConfig:
        cluster = dataclasses.replace(config.cluster, service_url="pulsar://127.0.0.1:6650")
        return dataclasses.replace(config, target=Target.EXTERNAL, cluster=cluster)

    assert scenario.load("chaos", lambda c: c).target is Target.EMBEDDED
    with pytest.raises(ConfigError, match="external target"):
        scenario.load("chaos", external)


def test_an_unknown_fault_kind_is_refused_with_the_one_line_error_of_the_parser(tmp_path: Path) -> None:
    """The kinds are the faults package's (faults/kinds/), so the config keeps a kind as text;
    the error is the one the parser gave when the config held the enum: file, key, closest kind."""
    bad = tmp_path / "kinds.yaml"
    bad.write_text("phases: {faults_s: 10}\nfaults:\n  schedule:\n    - {kind: kil, at_s: 1}\n")
    with pytest.raises(ConfigError) as info:
        scenario.load(str(bad))
    assert str(info.value) == f"{bad}: faults.schedule[0].kind: 'kil' is not a valid choice; did you mean 'kill'?"
    bad.write_text("phases: {faults_s: 10}\nfaults:\n  random: {kinds: [partition, pausee]}\n")
    with pytest.raises(ConfigError) as info:
        scenario.load(str(bad))
    assert str(info.value) == f"{bad}: faults.random.kinds[1]: 'pausee' is not a valid choice; did you mean 'pause'?"


def on_pulsar(version: str | None = None, **changes: Any) -> Callable[[RunConfig], RunConfig]:
    def adjust(config: RunConfig) -> RunConfig:
        cluster = dataclasses.replace(config.cluster, pulsar_version=version)
        return dataclasses.replace(config, target=Target.PULSAR, cluster=cluster, **changes)
    return adjust


def test_the_pulsar_target_runs_a_pinned_release_and_v5_only_where_pip_473_is() -> None:
    from harness.txn_paths import TxnPath

    assert scenario.load("chaos", on_pulsar()).target is Target.PULSAR   # chaos.yaml's faults all fit
    assert scenario.load("bench", on_pulsar("4.0.8", paths=(TxnPath.V4,))).cluster.pulsar_version == "4.0.8"
    with pytest.raises(ConfigError, match=r"v5 needs PIP-473 \(Pulsar 5\.0\), which Pulsar 4\.0\.8 does not have"):
        scenario.load("bench", on_pulsar("4.0.8"))
    with pytest.raises(ConfigError, match=r"cluster\.pulsar_version.*5\.0\.1, 4\.0\.8"):
        scenario.load("bench", on_pulsar("5.0.0"))


def test_one_brokers_link_to_the_bookie_is_refused_on_the_pulsar_target(tmp_path: Path) -> None:
    file = tmp_path / "ledger-link.yaml"
    file.write_text("phases: {faults_s: 10}\nfaults:\n  schedule:\n"
                    "    - {kind: partition, target: 'broker-ledger:0', at_s: 1, for_s: 2}\n")
    assert scenario.load(str(file)).target is Target.EMBEDDED
    with pytest.raises(ConfigError, match=r"one shared link.*broker-ledger:random"):
        scenario.load(str(file), on_pulsar())
    file.write_text(file.read_text().replace("broker-ledger:0", "broker-ledger:random"))
    assert scenario.load(str(file), on_pulsar()).target is Target.PULSAR
