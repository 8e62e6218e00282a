"""The `txnbench shrink` command: read the failing run, make the shrink's folder, search, print the result.

The search and its files are the package's (orchestrator/shrink/__init__.py says how it works);
this module only wires them to the command line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.config import Target
from harness.results import MatrixDir, create_unique_dir
from orchestrator.outcome import say
from orchestrator.shrink.driver import Shrinker, ShrinkOptions
from orchestrator.shrink.record import FailingRun, read_failing_run, run_topics
from orchestrator.shrink.report import write_reports
from orchestrator.shrink.runner import RunCandidates
from orchestrator.shrink.schedule import shrink_faults

MARGIN_S = 10.0
PULSAR_MARGIN_S = 30.0


def main_shrink(args: argparse.Namespace) -> int:
    """Shrink the run in `args.run_dir`; prints the shrunk scenario's path and the reproduce command.
    Exit status 0, or 130 when interrupted (the best schedule found is written either way)."""
    run = read_failing_run(Path(args.run_dir), tuple(args.anomaly or ()))
    faults = shrink_faults(run, run_topics(run))
    out = MatrixDir(create_unique_dir(Path(args.results), f"{run.run_id}-shrink"))
    out.runs_dir.mkdir()
    options = ShrinkOptions(max_runs=args.max_runs, budget_s=args.budget, tries=args.tries,
                            margin_s=args.margin if args.margin is not None else default_margin_s(run))
    say(f"shrink {out.matrix_id}: {len(faults)} faults of {run.run_id} ({run.config.target.value} target, "
        f"{run.config.path.value}, seed {run.config.seed}) towards {', '.join(run.classes)} unexpected; "
        f"at most {options.max_runs} runs" + (f" or {options.budget_s:g} s" if options.budget_s else "")
        + f" -> {out.path}")
    for fault in faults:
        if not fault.pinned:
            say(f"shrink: {fault.fault_id} keeps {fault.target!r}: {fault.note}")
    runner = RunCandidates(out, run.classes, allow_planted_bugs=bool(run.planted_bugs))
    shrinker = Shrinker(run, faults, out.path, runner, options, say=say, write=write_reports).shrink()
    say(f"shrink {out.matrix_id}: {shrinker.stopped}; {len(shrinker.best)} of {len(faults)} faults after "
        f"{shrinker.runs} runs ({out.path / 'shrink.md'})")
    say(f"reproduce: {shrinker.reproduce_command()}")
    print(shrinker.scenario_path)
    return 130 if shrinker.interrupted else 0


def default_margin_s(run: FailingRun) -> float:
    """10 s; 30 s on the pulsar target, whose kills and restarts are healed by starting a JVM."""
    return PULSAR_MARGIN_S if run.config.target is Target.PULSAR else MARGIN_S
