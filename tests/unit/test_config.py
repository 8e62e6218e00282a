from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import (
    RunConfig,
    Target,
    WorkloadKind,
    available_scenarios,
    load_scenario,
    parse_scenario,
)
from harness.errors import ConfigError
from harness.txn_paths import TxnPath


def test_every_shipped_scenario_loads() -> None:
    names = available_scenarios()
    assert {"atomic-produce", "consume-transform-produce", "ack-only", "mixed", "bench", "chaos"} <= set(names)
    for name in names:
        config = load_scenario(name)
        assert config.name == name
        assert config.phases.steady_s > 0


def test_defaults_and_types() -> None:
    config = parse_scenario("workload: {kind: ack-only, abort_ratio: 0.5}\nload: {rate_per_user: 3}",
                            default_name="x")
    assert config.name == "x"
    assert config.workload.kind is WorkloadKind.ACK_ONLY
    assert config.workload.abort_ratio == 0.5
    assert config.load.rate_per_user == 3.0
    assert config.path is TxnPath.V4
    assert config.paths == (TxnPath.V4, TxnPath.V4_BATCHED, TxnPath.V5)
    assert config.target is Target.EMBEDDED


def test_config_is_frozen() -> None:
    config = parse_scenario("seed: 3")
    with pytest.raises(AttributeError):
        config.seed = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.cluster.settings["x"] = 1  # type: ignore[index]


def _error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_scenario(text, source="s.yaml")
    return info.value


def test_misspelled_key_names_file_key_and_fix() -> None:
    err = _error("workload:\n  abort_ratoi: 0.2\n")
    assert str(err) == "s.yaml: workload.abort_ratoi: unknown key; did you mean 'abort_ratio'?"
    assert "\n" not in str(err)


def test_wrong_type() -> None:
    err = _error("load:\n  users: many\n")
    assert "load.users" in str(err) and "whole number" in str(err)
    assert "s.yaml" in str(err)


def test_bool_is_not_a_number() -> None:
    assert "load.users" in str(_error("load: {users: true}"))


def test_out_of_range() -> None:
    err = _error("workload: {abort_ratio: 1.5}")
    assert "workload.abort_ratio" in str(err) and "maximum 1" in str(err)


def test_bad_enum_suggests() -> None:
    err = _error("path: v4batched")
    assert "did you mean 'v4-batched'" in str(err)


def test_cross_field_rule() -> None:
    err = _error("workload: {topics: 2, topics_per_txn: 3}")
    assert str(err).startswith("s.yaml: workload.topics_per_txn:")


def test_fault_needs_exactly_one_timing() -> None:
    assert "exactly one of at_s" in str(_error(
        "phases: {faults_s: 10}\nfaults: {schedule: [{kind: kill, at_s: 1, every_s: 2}]}"))
    config = parse_scenario("phases: {faults_s: 10}\nfaults: {schedule: [{kind: kill, target: coordinator, at_s: 1}]}")
    assert config.faults.schedule[0].kind == "kill"   # text here; tests/unit/faults/test_validate.py names it
    assert config.faults.enabled


def test_faults_need_a_faults_phase() -> None:
    assert "phases.faults_s" in str(_error("faults: {schedule: [{kind: kill, at_s: 1}]}"))


def test_a_quiet_tail_needs_a_longer_faults_phase_and_no_fault_that_needs_the_load() -> None:
    kill = "{kind: kill, target: coordinator, at_s: 1}"
    config = parse_scenario(f"phases: {{faults_s: 10, quiet_tail_s: 4}}\nfaults: {{schedule: [{kill}]}}")
    assert config.phases.quiet_tail_s == 4
    assert "faults phase longer" in str(_error(f"phases: {{faults_s: 4, quiet_tail_s: 4}}\nfaults: {{schedule: [{kill}]}}"))
    assert "phases.quiet_tail_s" in str(_error("phases: {steady_s: 5, quiet_tail_s: 2}"))
    assert "client-kill" in str(_error(
        "phases: {faults_s: 10, quiet_tail_s: 4}\nfaults: {schedule: [{kind: client-kill, at_s: 1}]}"))
    assert "client-kill" in str(_error(
        "phases: {faults_s: 10, quiet_tail_s: 4}\nfaults: {schedule: [{kind: partition, target: 'broker:0', "
        "at_s: 1, overlap: [{kind: client-kill, after_s: 1}]}]}"))
    assert "waits for a load operation" in str(_error(
        "phases: {faults_s: 10, quiet_tail_s: 4}\nfaults: {schedule: [{kind: unload, target: 'topic:trigger', "
        "at_s: 7, for_s: 0, trigger: {op: send}}]}"))
    with pytest.raises(ConfigError, match="quiet tail"):
        config.with_duration(4)
    assert config.with_duration(5).phases.faults_s == 5
    assert "drawn schedule" in str(_error(
        "phases: {faults_s: 10, quiet_tail_s: 4}\nfaults: {generated: {from_s: 1, until_s: 5}}"))


def test_invalid_yaml_names_the_line() -> None:
    err = _error("seed: 1\nload:\n  users: 2\n    bad: [\n")
    assert "s.yaml: line" in str(err) and "not valid YAML" in str(err)


def test_top_level_must_be_a_mapping() -> None:
    assert "expected a mapping" in str(_error("- a\n- b\n"))


def test_missing_scenario_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_scenario("no-such-scenario")
    assert "not found" in str(info.value) and "atomic-produce" in str(info.value)


def test_scenario_by_path(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("seed: 9\n")
    config = load_scenario(str(f))
    assert config.name == "mine" and config.seed == 9


def test_with_duration_changes_the_main_phase() -> None:
    bench = parse_scenario("phases: {steady_s: 60}")
    assert bench.with_duration(20).phases.steady_s == 20
    chaos = load_scenario("chaos")
    shortened = chaos.with_duration(30)
    assert shortened.phases.faults_s == 30
    assert shortened.phases.steady_s == chaos.phases.steady_s


def test_to_dict_is_plain_json() -> None:
    import json

    data = load_scenario("mixed").to_dict()
    json.dumps(data)
    assert data["workload"]["kind"] == "mixed"
    assert data["workload"]["mix"] == {"atomic-produce": 2, "consume-transform-produce": 1, "ack-only": 1}


def test_name_must_be_folder_safe() -> None:
    assert "folder name" in str(_error("name: 'a/b'"))


def test_run_config_default_constructs() -> None:
    assert RunConfig().workload.kind is WorkloadKind.ATOMIC_PRODUCE


def test_setting_pairs_read_json_values_and_refuse_a_pair_without_a_value() -> None:
    from harness.config import parse_setting_pairs

    assert parse_setting_pairs(["n=64", "on=true", "name=x=y", "text=abc"]) == {
        "n": 64, "on": True, "name": "x=y", "text": "abc"}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_setting_pairs(["oops"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_setting_pairs(["=1"])


def test_from_plain_rebuilds_the_config_without_its_cross_field_rules() -> None:
    config = load_scenario("chaos")
    assert RunConfig.from_plain(config.to_dict(), "spec: config") == config
    unchecked = {**config.to_dict(), "phases": {**config.to_dict()["phases"], "faults_s": 0.0}}
    assert RunConfig.from_plain(unchecked, "spec: config").phases.faults_s == 0.0   # trusted: not re-checked
    with pytest.raises(ConfigError, match=r"phases\.faults_s"):
        parse_scenario(json_text(unchecked))
    with pytest.raises(ConfigError, match=r"spec: config: workload\.topics"):   # still converted and bounded
        RunConfig.from_plain({**config.to_dict(), "workload": {"topics": 0}}, "spec: config")


def json_text(data: object) -> str:
    import json

    return json.dumps(data)   # JSON is YAML
