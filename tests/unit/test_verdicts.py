from __future__ import annotations

import pytest

from harness.config import parse_scenario
from harness.errors import ConfigError
from harness.txn_paths import TxnPath
from harness.verdicts import expected_from_manifest_config, judge

SCENARIO = """
checks:
  expected:
    - paths: [v4, v4-batched]
      anomalies: [partial-txn, lost-write]
      reason: PIP-31 markers cannot be written to a terminated topic
"""


def test_expected_anomalies_are_per_path() -> None:
    config = parse_scenario(SCENARIO)
    assert config.checks.expected_on(TxnPath.V4) == {
        "partial-txn": "PIP-31 markers cannot be written to a terminated topic",
        "lost-write": "PIP-31 markers cannot be written to a terminated topic"}
    assert config.checks.expected_on(TxnPath.V5) == {}
    assert expected_from_manifest_config(config.to_dict(), "v4-batched") == config.checks.expected_on(
        TxnPath.V4_BATCHED)


def test_judging_separates_expected_from_unexpected() -> None:
    expected = {"partial-txn": "why", "lost-write": "why"}
    only = judge(False, {"partial-txn": {"count": 1}}, expected)
    assert only.only_expected and only.expected == {"partial-txn": "why"} and only.not_seen == ("lost-write",)
    mixed = judge(False, {"partial-txn": {}, "lost-ack": {}}, expected)
    assert not mixed.only_expected and mixed.unexpected == ("lost-ack",)
    clean = judge(True, {}, expected)
    assert not clean.only_expected and clean.not_seen == ("partial-txn", "lost-write")
    assert not judge("unknown", {}, expected).only_expected


@pytest.mark.parametrize("entry, key", [
    ("{paths: [v4], anomalies: [partial-tx], reason: r}", "checks.expected[0].anomalies"),
    ("{paths: [v4], anomalies: [partial-txn], reason: ''}", "checks.expected[0].reason"),
    ("{paths: [], anomalies: [partial-txn], reason: r}", "checks.expected[0].paths"),
])
def test_bad_expectations_are_config_errors(entry: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_scenario(f"checks:\n  expected:\n    - {entry}\n", source="s.yaml")
    assert str(info.value).startswith(f"s.yaml: {key}:")
