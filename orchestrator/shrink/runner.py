"""One candidate, run for real: the same `Run` as `txnbench run`, judged by the same verdict code.

Why only the checker and not the whole analysis: a candidate is evidence for the search, and the
performance analysis and the report (plots, HTML) would add a minute per candidate; the checker
(`analysis.check.check_run`) and `analysis.verdicts.judge_run` decide what a run's exit status
does, and their verdict and judgement go into the candidate's manifest as a run's would.
`txnbench report RUN_DIR` builds a candidate's report later. The runs share this process's one
SparkSession, so Spark starts once per shrink.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from analysis.verdicts import judge_run
from harness.config import RunConfig
from harness.errors import TxnbenchError
from harness.results import MatrixDir, RunStatus
from orchestrator.outcome import RunOptions, Verdict
from orchestrator.run import Run
from orchestrator.shrink.driver import Attempt


class RunCandidates:
    """Runs candidates into `out/runs/<candidate>`; a candidate fails when its run shows every class
    of `classes` unexpected."""

    def __init__(self, out: MatrixDir, classes: Sequence[str], *, allow_planted_bugs: bool,
                 progress: Callable[[str], None] | None = None) -> None:
        self.out = out
        self.classes = tuple(classes)
        self.allow_planted_bugs = allow_planted_bugs
        self.progress = progress

    def __call__(self, config: RunConfig, folder: str) -> Attempt:
        started = time.monotonic()
        options = RunOptions(matrix=self.out, folder=folder, analyze=False, command="shrink",
                             allow_planted_bugs=self.allow_planted_bugs, progress=self.progress)
        outcome = Run(config, options).execute()
        path = outcome.run_dir.path
        if outcome.status is not RunStatus.COMPLETE:
            return Attempt(str(path), outcome.status.value, Verdict.NONE.value, (), False,
                           time.monotonic() - started, outcome.error or "")
        from analysis.check import check_run

        try:
            results = check_run(path)
        except TxnbenchError as err:   # Spark could not judge it: no verdict, not a failure of the schedule
            return Attempt(str(path), outcome.status.value, Verdict.UNKNOWN.value, (), False,
                           time.monotonic() - started, f"the checker failed: {err}")
        judgement = judge_run(path, results)
        valid = results.get("valid")
        verdict = Verdict.VALID if valid is True else Verdict.INVALID if valid is False else Verdict.UNKNOWN
        outcome.run_dir.update_manifest(verdict=verdict.value,
                                        judgement=judgement.to_json() if judgement is not None else None)
        unexpected = tuple(judgement.unexpected) if judgement is not None else ()
        return Attempt(str(path), outcome.status.value, verdict.value, unexpected,
                       all(c in unexpected for c in self.classes), time.monotonic() - started,
                       _unreached(outcome.run_dir.read_manifest()))


def _unreached(manifest: dict[str, object]) -> str:
    """A note when planned windows never ran (the timeline slipped past the faults phase)."""
    progress = manifest.get("faults_progress")
    missed = progress.get("unreached") if isinstance(progress, dict) else None
    if isinstance(missed, list) and missed:
        return f"{len(missed)} planned window(s) never ran (raise --margin)"
    return ""

