"""Early scenario checks and `python -m faults`."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from faults.__main__ import main
from faults.validate import check_scenario
from harness.config import SCENARIO_DIR, Target, load_scenario, parse_scenario
from harness.errors import ConfigError
from harness.txn_paths import TxnPath


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIO_DIR.glob("chaos*.yaml")))
def test_every_shipped_chaos_scenario_is_valid_and_faults_every_path(name: str) -> None:
    config = load_scenario(name)
    timelines = check_scenario(config)
    assert set(timelines) == set(config.paths)
    for path, timeline in timelines.items():
        assert timeline.windows, f"{name} has no faults on {path.value}"
        last = timeline.windows[-1]
        assert last.heal_s <= config.phases.faults_s


def test_the_default_chaos_scenario_partitions_kills_and_terminates_on_every_path() -> None:
    config = load_scenario("chaos")
    for path, timeline in check_scenario(config).items():
        assert {"partition", "kill", "terminate"} <= timeline.kinds(), path
    # also when the faults phase is shortened to 30 s (`make chaos DURATION=30`)
    for path, timeline in check_scenario(config.with_duration(30)).items():
        assert {"partition", "kill", "terminate"} <= timeline.kinds(), path
    v5 = check_scenario(config)[TxnPath.V5]
    assert {"split", "merge"} <= v5.kinds()


def test_a_kind_named_in_a_scenario_becomes_a_fault_kind() -> None:
    config = parse_scenario("phases: {faults_s: 10}\nfaults: {schedule: [{kind: kill, target: coordinator, at_s: 1}]}")
    assert config.faults.schedule[0].kind == "kill"   # the config keeps text: the kinds are the faults package's
    for timeline in check_scenario(config).values():
        assert [f.kind.name for f in timeline.faults] == ["kill"]


def test_an_unknown_kind_is_one_line_naming_the_key_and_the_closest_kind() -> None:
    config = parse_scenario("phases: {faults_s: 10}\nfaults:\n  schedule: [{kind: kil, at_s: 1}]\n"
                            "  random: {kinds: [partition, pausee]}\n", source="s.yaml")
    with pytest.raises(ConfigError) as info:
        check_scenario(config, source="s.yaml")
    assert str(info.value) == "s.yaml: faults.schedule[0].kind: 'kil' is not a valid choice; did you mean 'kill'?"
    random_only = dataclasses.replace(config, faults=dataclasses.replace(config.faults, schedule=()))
    with pytest.raises(ConfigError) as info:
        check_scenario(random_only)
    assert str(info.value) == ("scenario scenario: faults.random.kinds[1]: 'pausee' is not a valid choice; "
                               "did you mean 'pause'?")
    nothing_close = parse_scenario("phases: {faults_s: 10}\nfaults: {schedule: [{kind: explode, at_s: 1}]}")
    with pytest.raises(ConfigError, match="use one of: partition, latency, bandwidth, kill, pause, split, merge, "
                                          "terminate, slow-participant, restart, unload"):
        check_scenario(nothing_close)


def test_process_faults_are_rejected_early_on_the_external_target() -> None:
    config = dataclasses.replace(load_scenario("chaos"), target=Target.EXTERNAL)
    # the first process fault of the timeline (chaos.yaml's rolling restarts begin at 0 s)
    with pytest.raises(ConfigError, match=r"faults.schedule\[23\].kind: restart cannot run on the external target: "
                                          r"txnbench cannot kill or pause its processes"):
        check_scenario(config)


def test_a_bad_selector_is_rejected_before_anything_runs() -> None:
    config = parse_scenario("name: bad\nphases: {faults_s: 10}\ncluster: {brokers: 2}\nfaults:\n"
                            "  schedule:\n    - {kind: kill, target: broker:2, at_s: 1}\n", source="bad.yaml")
    with pytest.raises(ConfigError) as info:
        check_scenario(config)
    assert str(info.value) == ("scenario bad: faults.schedule[0].target: 'broker:2': there is no broker 2; "
                               "the cluster has brokers 0-1; pick one that exists")


def test_the_timeline_printer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--path", "v4", "--duration", "30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== chaos on v4: faults phase 30s, quiet 4s after each heal ==")
    assert "client-kill load:random" in out and re.search(r"f\d+ kill coordinator", out) and "on v5" not in out
    assert re.search(r"note: faults\.schedule\[\d+\]: split does not apply to v4; left out", out)


def test_the_timeline_printer_reports_a_bad_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("phases: {faults_s: 10}\nfaults:\n  schedule:\n    - {kind: pause, target: nowhere, at_s: 0}\n")
    assert main([str(bad)]) == 2
    assert "faults.schedule[0].target: 'nowhere' is not a target" in capsys.readouterr().err
