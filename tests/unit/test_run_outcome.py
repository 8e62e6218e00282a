"""Exit statuses of runs and matrices, including anomalies a scenario expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.verdicts import judge
from harness.config import ChecksConfig, ExpectedAnomalies
from harness.results import RunDir, RunStatus
from harness.txn_paths import TxnPath
from orchestrator.outcome import RunOutcome, Verdict

EXPECTED = ChecksConfig(expected=(ExpectedAnomalies((TxnPath.V4,), ("partial-txn",),
                                                     "v4 markers on a terminated topic"),)).expected_on(TxnPath.V4)


def _outcome(status: RunStatus, verdict: Verdict, anomalies: dict | None = None) -> RunOutcome:
    valid = {Verdict.VALID: True, Verdict.INVALID: False}.get(verdict, "unknown")
    return RunOutcome(RunDir(Path("/nonexistent")), status, verdict,
                      judgement=judge(valid, anomalies or {}, EXPECTED))


@pytest.mark.parametrize("outcome, code", [
    (_outcome(RunStatus.COMPLETE, Verdict.VALID), 0),
    (_outcome(RunStatus.COMPLETE, Verdict.INVALID, {"partial-txn": {}}), 0),
    (_outcome(RunStatus.COMPLETE, Verdict.INVALID, {"partial-txn": {}, "lost-ack": {}}), 1),
    (_outcome(RunStatus.COMPLETE, Verdict.INVALID, {"lost-ack": {}}), 1),
    (_outcome(RunStatus.COMPLETE, Verdict.UNKNOWN), 2),
    (_outcome(RunStatus.FAILED, Verdict.NONE), 2),
    (_outcome(RunStatus.INTERRUPTED, Verdict.NONE), 130),
])
def test_exit_code(outcome: RunOutcome, code: int) -> None:
    assert outcome.exit_code == code


def test_an_expected_anomaly_keeps_the_verdict_invalid() -> None:
    outcome = _outcome(RunStatus.COMPLETE, Verdict.INVALID, {"partial-txn": {}})
    assert outcome.verdict is Verdict.INVALID and outcome.judgement is not None
    assert outcome.judgement.to_json()["only_expected"] is True
