from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.verdicts import expectations_of, judge, judge_run
from harness.config import ChecksConfig, ExpectationScope, ExpectedAnomalies, parse_scenario
from harness.errors import ConfigError
from harness.txn_paths import TxnPath

REASON = "PIP-31 markers cannot be written to a terminated topic"
SCENARIO = f"""
checks:
  expected:
    - paths: [v4, v4-batched]
      anomalies: [partial-txn, stalled-commit]
      scope: terminated-topics
      reason: {REASON}
"""
TERMINATED = "persistent://public/t/ap-2"


def test_expected_anomalies_are_per_path() -> None:
    config = parse_scenario(SCENARIO)
    on_v4 = config.checks.expected_on(TxnPath.V4)
    assert set(on_v4) == {"partial-txn", "stalled-commit"}
    assert on_v4["partial-txn"].scope is ExpectationScope.TERMINATED_TOPICS
    assert config.checks.expected_on(TxnPath.V5) == {}
    from_manifest = expectations_of({"path": "v4-batched", "config": config.to_dict()}, "manifest.json")
    assert {a: (e.reason, e.scope) for a, e in from_manifest.items()} == {
        "partial-txn": (REASON, "terminated-topics"),
        "stalled-commit": (REASON, "terminated-topics")}
    assert from_manifest == config.checks.expected_on(TxnPath.V4_BATCHED)     # the manifest round trip


def test_a_manifest_without_a_path_or_checks_expects_nothing() -> None:
    assert expectations_of({}, "manifest.json") == {}
    assert expectations_of({"path": "v4", "config": {}}, "manifest.json") == {}
    assert expectations_of({"path": "v4", "config": {"checks": {"stall_after_s": 10.0}}}, "manifest.json") == {}


def test_a_damaged_manifest_is_a_config_error_naming_it() -> None:
    checks = {"expected": [{"paths": ["v4"], "anomalies": ["partial-tx"], "reason": "r"}]}
    with pytest.raises(ConfigError) as info:
        expectations_of({"path": "v4", "config": {"checks": checks}}, "run/manifest.json")
    assert str(info.value).startswith("run/manifest.json: config.checks.expected[0].anomalies:")


def test_unscoped_expectations_cover_every_instance() -> None:
    why = ExpectedAnomalies((TxnPath.V4,), ("partial-txn", "lost-write"), "why")
    expected = ChecksConfig(expected=(why,)).expected_on(TxnPath.V4)
    only = judge(False, {"partial-txn": {"count": 1}}, expected)
    assert only.only_expected and only.expected == {"partial-txn": "why"} and only.not_seen == ("lost-write",)
    mixed = judge(False, {"partial-txn": {}, "lost-ack": {}}, expected)
    assert not mixed.only_expected and mixed.unexpected == ("lost-ack",)
    clean = judge(True, {}, expected)
    assert not clean.only_expected and clean.not_seen == ("partial-txn", "lost-write")
    assert not judge("unknown", {}, expected).only_expected


def _run(tmp_path: Path, anomalies: dict) -> Path:  # type: ignore[type-arg]
    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    (run / "analysis").mkdir()
    config = parse_scenario(SCENARIO).to_dict()
    (run / "manifest.json").write_text(json.dumps({"path": "v4", "config": config}))
    (run / "analysis" / "results.json").write_text(json.dumps({"valid": False, "anomalies": anomalies}))
    (run / "history" / "nemesis.jsonl").write_text(json.dumps(
        {"f": "fault", "type": "ok", "extra": {"kind": "terminate", "targets": [TERMINATED]}}) + "\n")
    sends = [{"f": "send", "type": "invoke", "txn": "1:1", "topic": TERMINATED},
             {"f": "send", "type": "invoke", "txn": "1:1", "topic": "persistent://public/t/ap-3"},
             {"f": "send", "type": "invoke", "txn": "1:2", "topic": "persistent://public/t/ap-3"}]
    (run / "history" / "w0.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sends))
    return run


def test_scoped_expectation_covers_only_instances_on_terminated_topics(tmp_path: Path) -> None:
    on_terminated = {"txn": "1:1", "op": {"f": "txn-commit", "txn": "1:1"}}
    elsewhere = {"txn": "1:2", "op": {"f": "txn-commit", "txn": "1:2"}}
    missing_on_terminated = {"txn": "1:1", "missing": [{"topic": TERMINATED}]}
    judged = judge_run(_run(tmp_path / "a", {
        "stalled-commit": {"count": 1, "examples": [on_terminated]},
        "partial-txn": {"count": 1, "examples": [missing_on_terminated]}}))
    assert judged is not None and judged.only_expected and judged.expected == {
        "stalled-commit": REASON, "partial-txn": REASON}
    judged = judge_run(_run(tmp_path / "b", {
        "stalled-commit": {"count": 2, "examples": [on_terminated, elsewhere]}}))
    assert judged is not None and not judged.only_expected
    assert judged.unexpected == ("stalled-commit",)
    assert judged.notes == {"stalled-commit": "1 of 2 instance(s) touch a terminated topic"}


def test_more_instances_than_examples_cannot_be_explained(tmp_path: Path) -> None:
    judged = judge_run(_run(tmp_path, {"stalled-commit": {"count": 3, "examples": [{"txn": "1:1"}]}}))
    assert judged is not None and judged.unexpected == ("stalled-commit",)


def test_partitions_of_a_terminated_topic_count(tmp_path: Path) -> None:
    run = _run(tmp_path, {"partial-txn": {"count": 1, "examples": [
        {"missing": [{"topic": "persistent://public/t/x", "segment": f"{TERMINATED}-partition-1"}]}]}})
    judged = judge_run(run)
    assert judged is not None and judged.only_expected


@pytest.mark.parametrize("entry, key", [
    ("{paths: [v4], anomalies: [partial-tx], reason: r}", "checks.expected[0].anomalies"),
    ("{paths: [v4], anomalies: [partial-txn], reason: ''}", "checks.expected[0].reason"),
    ("{paths: [], anomalies: [partial-txn], reason: r}", "checks.expected[0].paths"),
    ("{paths: [v4], anomalies: [partial-txn], reason: r, scope: terminated}", "checks.expected[0].scope"),
])
def test_bad_expectations_are_config_errors(entry: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_scenario(f"checks:\n  expected:\n    - {entry}\n", source="s.yaml")
    assert str(info.value).startswith(f"s.yaml: {key}:")


OLD_MANIFEST = Path(__file__).parents[1] / "data" / "old-manifests" / "chaos-v4.json"


def test_a_manifest_written_before_the_expectations_merged_is_judged_as_then(tmp_path: Path) -> None:
    run = _run(tmp_path, {
        "partial-txn": {"count": 1, "examples": [{"txn": "1:1", "missing": [{"topic": TERMINATED}]}]},
        "stalled-commit": {"count": 1, "examples": [{"txn": "1:2", "op": {"f": "txn-commit", "txn": "1:2"}}]},
        "lost-ack": {"count": 1, "examples": [{"txn": "1:1"}]}})
    (run / "manifest.json").write_text(OLD_MANIFEST.read_text())
    judged = judge_run(run)
    assert judged is not None and not judged.only_expected
    assert list(judged.expected) == ["partial-txn"]
    assert judged.expected["partial-txn"].startswith("PIP-31 writes commit markers into the topic's data stream")
    assert judged.unexpected == ("stalled-commit", "lost-ack")
    assert judged.notes == {"stalled-commit": "0 of 1 instance(s) touch a terminated topic"}
    assert judged.not_seen == ("lost-write",)
