"""What a run ends with: its phases, its verdict, its outcome and exit status, and how it is printed.

Shared by one run (orchestrator.run), the matrices (orchestrator.matrix) and the self-test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from analysis.verdicts import Judgement
from harness.errors import TxnbenchError
from harness.results import MatrixDir, RunDir, RunStatus
from harness.target import ClusterTarget


class Phase(StrEnum):
    SETUP = "setup"
    WARMUP = "warmup"
    STEADY = "steady"
    FAULTS = "faults"
    RECOVERY = "recovery"
    DRAIN = "drain"
    COLLECT = "collect"


class Verdict(StrEnum):
    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"
    NONE = "none"          # the run did not get far enough to be checked

    @property
    def exit_code(self) -> int:
        return {Verdict.VALID: 0, Verdict.INVALID: 1}.get(self, 2)


@dataclass
class RunOutcome:
    run_dir: RunDir
    status: RunStatus
    verdict: Verdict = Verdict.NONE
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    judgement: Judgement | None = None

    @property
    def exit_code(self) -> int:
        """130 interrupted, 2 failed or unknown, 1 anomalies the scenario does not expect, else 0.

        A run whose only anomalies are the ones its scenario provokes on purpose
        (`checks.expected`) is still reported invalid, but does not fail the command.
        """
        if self.status is RunStatus.INTERRUPTED:
            return 130
        if self.status is RunStatus.FAILED:
            return 2
        if self.verdict is Verdict.INVALID and self.judgement is not None and self.judgement.only_expected:
            return 0
        return self.verdict.exit_code


@dataclass
class RunOptions:
    results_root: Path = Path("results")
    matrix: MatrixDir | None = None
    analyze: bool = True
    progress: Callable[[str], None] | None = None
    cluster_dir: Path | None = None      # embedded: where the run's cluster lives (default: a temp dir)
    folder: str | None = None            # a matrix run's folder under runs/ (default: its path)
    command: str = "run"                 # the command that asked for the run (bench, chaos, selftest, ...)
    allow_planted_bugs: bool = False     # only `run --allow-planted-bugs` and `selftest` set it
    target: ClusterTarget | None = None  # a cluster started by the caller (peer): used as is, not started again
    coverage: bool = False               # embedded: coverage.py; pulsar: JaCoCo; data in <run>/coverage/
    load_cpus: frozenset[int] | None = None   # pin the load process (and its workers) to these CPUs (peer)


class LoadProcessDied(TxnbenchError):
    exit_code = 2


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def print_outcome(outcome: RunOutcome) -> None:
    line = f"run {outcome.run_dir.run_id}: {outcome.status.value}"
    if outcome.status is RunStatus.COMPLETE:
        line += f", verdict {outcome.verdict.value}"
        anomalies = outcome.summary.get("anomalies") or {}
        if anomalies:
            line += " (" + ", ".join(f"{k}: {v.get('count')}" for k, v in anomalies.items()) + ")"
        judgement = outcome.judgement
        if judgement is not None and judgement.expected:
            reasons = sorted(set(judgement.expected.values()))
            which = "all expected" if judgement.only_expected else f"expected: {', '.join(judgement.expected)}"
            line += f"; {which} ({'; '.join(reasons)})"
        for lost in outcome.summary.get("lost_workers") or []:
            line += f"; {lost}"
    if outcome.error:
        line += f": {outcome.error}"
    say(line)
