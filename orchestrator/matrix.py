"""The matrices: bench and chaos (one scenario over its paths), and the concurrency sweep.

A matrix (bench, chaos) runs the scenario once per path into `results/<matrix_id>/runs/<path>/`
and compares the paths; a sweep runs that matrix once per user count, lowest first, and
compares each level and all levels. An interrupted run stops the matrix; what ran is compared.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from harness.config import RunConfig, Target
from harness.errors import ConfigError
from harness.results import MatrixDir, RunStatus, new_matrix, write_json_atomic, write_text_atomic
from harness.txn_paths import TxnPath
from orchestrator.capacity import ensure_capacity
from orchestrator.outcome import RunOptions, RunOutcome, print_outcome, say
from orchestrator.planted import refuse_planted_bugs
from orchestrator.run import Run
from orchestrator.summary import summary_lines


def main_matrix(config: RunConfig, args: argparse.Namespace, kind: str) -> int:
    """`txnbench bench` and `chaos`: `config` comes validated from orchestrator.scenario.load."""
    return run_matrix(config, args, kind)[1]


def run_matrix(config: RunConfig, args: argparse.Namespace, kind: str, *,
               lts_baseline: bool = True) -> tuple[MatrixDir, int]:
    """One matrix of `config` over its paths; the folder and the exit status. `lts_baseline=False`
    leaves out the pulsar bench's v4-on-4.0 run (the fidelity report compares one release)."""
    refuse_planted_bugs(config.cluster.settings, kind)
    matrix = new_matrix(kind, config.name, root=args.results,
                        info={"paths": [p.value for p in config.paths], "config": config.to_dict()})
    say(f"{kind} matrix {matrix.matrix_id}: {config.name} over {', '.join(p.value for p in config.paths)}")
    if kind == "bench" and not getattr(args, "no_capacity", False):
        ensure_capacity(config)
    coverage = bool(getattr(args, "coverage", False))
    if coverage and config.target not in (Target.EMBEDDED, Target.PULSAR):
        raise ConfigError(f"scenario {config.name}", "--coverage",
                          f"coverage is measured on the embedded cluster and on the pulsar target, not "
                          f"{config.target.value}", "drop --coverage or use --target embedded or pulsar")
    config, baseline = pulsar_releases(config, kind)
    baseline = baseline if lts_baseline else None
    outcomes, interrupted = _run_paths(config, matrix, args.results, kind, coverage=coverage)
    if baseline is not None and not interrupted:
        say(f"== {kind}: v4 on Apache Pulsar {baseline.cluster.pulsar_version} (the LTS baseline) ==")
        more, interrupted = _run_paths(baseline, matrix, args.results, kind,
                                       suffix=f"-pulsar-{baseline.cluster.pulsar_version}")
        outcomes += more
    _compare(matrix, outcomes)
    if coverage:
        _coverage(matrix, outcomes, config.target)
    if config.faults.generated is not None:
        _reproduce(matrix, config, getattr(args, "scenario", None) or config.name, outcomes)
    return matrix, _finish_matrix(matrix, outcomes, interrupted, kind)


def reproduce_command(scenario: str, txn_path: str, seed: int, faults_s: float) -> str:
    """The one command that runs one path of a generated schedule again: same seed, same schedule."""
    return f"txnbench run {scenario} --path {txn_path} --seed {seed} --duration {faults_s:g}"


def _reproduce(matrix: MatrixDir, config: RunConfig, scenario: str, outcomes: list[RunOutcome]) -> None:
    """A generated schedule's seed and, per path, the command that reproduces it (compare.md, reproduce.md)."""
    lines = [f"Fault schedule generated from seed {config.seed} (faults/generate.py). Each path reproduces with:", ""]
    for outcome in outcomes:
        txn_path = outcome.run_dir.path.name
        mark = "" if outcome.exit_code == 0 else f" (exit {outcome.exit_code}, verdict {outcome.verdict.value})"
        lines.append(f"- {txn_path}{mark}: `{reproduce_command(scenario, txn_path, config.seed, config.phases.faults_s)}`")
    text = "\n".join(lines) + "\n"
    write_text_atomic(matrix.path / "reproduce.md", "# Reproduce\n\n" + text)
    compare = matrix.path / "compare.md"
    if compare.is_file():
        write_text_atomic(compare, compare.read_text().rstrip("\n") + "\n\n## Reproduce\n\n" + text)
    for line in lines:
        if line:
            say(line.replace("`", ""))


def pulsar_releases(config: RunConfig, kind: str) -> tuple[RunConfig, RunConfig | None]:
    """On the pulsar target: every path on one release (5.0's unless the user chose), named in each
    run's config so the comparison labels them; a bench on the default release also runs v4 on the
    4.0 LTS release as the baseline a 4.x user compares against."""
    if config.target is not Target.PULSAR:
        return config, None
    from targets.pulsar.versions import DEFAULT_RELEASE, PULSAR_4_LTS, release

    chosen = release(config.cluster.pulsar_version)
    pinned = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, pulsar_version=chosen.version))
    if kind != "bench" or chosen is not DEFAULT_RELEASE or TxnPath.V4 not in config.paths:
        return pinned, None
    lts = dataclasses.replace(config, paths=(TxnPath.V4,), path=TxnPath.V4,
                              cluster=dataclasses.replace(config.cluster, pulsar_version=PULSAR_4_LTS.version))
    return pinned, lts


def main_sweep(config: RunConfig, args: argparse.Namespace, levels: Sequence[int]) -> int:
    """Experiment 1: every path at each user count, a comparison per count, lines against users.

    Levels run in increasing order, all paths at one level before the next, so an
    interrupted sweep still holds complete levels to compare.
    """
    refuse_planted_bugs(config.cluster.settings, "sweep")
    paths = ", ".join(p.value for p in config.paths)
    matrix = new_matrix("sweep", config.name, root=args.results,
                        info={"paths": [p.value for p in config.paths], "levels": list(levels),
                              "config": config.to_dict()})
    say(f"sweep {matrix.matrix_id}: {config.name} over {paths} at {', '.join(map(str, levels))} users")
    shaped = [with_users(config, users) for users in levels]
    if not getattr(args, "no_capacity", False):
        for level_config in shaped:
            ensure_capacity(level_config)
    outcomes: list[RunOutcome] = []
    interrupted = False
    for index, level_config in enumerate(shaped, start=1):
        users = level_config.load.users
        say(f"=== sweep level {index}/{len(shaped)}: {users} users ===")
        level, interrupted = _run_paths(level_config, matrix, args.results, "sweep", suffix=f"-u{users}")
        outcomes += level
        if interrupted:
            break
    _compare_sweep(matrix, outcomes)
    return _finish_matrix(matrix, outcomes, interrupted, "sweep")


def with_users(config: RunConfig, users: int) -> RunConfig:
    """The scenario at `users` concurrent users, all spawned at once (the sweep measures steady state)."""
    load = dataclasses.replace(config.load, users=users, spawn_rate=max(config.load.spawn_rate, float(users)))
    return dataclasses.replace(config, load=load)


def _run_paths(config: RunConfig, matrix: MatrixDir, results_root: Path, kind: str,
               suffix: str = "", coverage: bool = False) -> tuple[list[RunOutcome], bool]:
    """Run `config` on each of its paths into the matrix; stop at the first interrupted run."""
    outcomes: list[RunOutcome] = []
    for index, txn_path in enumerate(config.paths, start=1):
        say(f"== {kind} {index}/{len(config.paths)}: {txn_path.value}{suffix} ==")
        options = RunOptions(results_root=results_root, matrix=matrix,
                             folder=f"{txn_path.value}{suffix}" if suffix else None, command=kind,
                             coverage=coverage)
        outcome = Run(config.for_path(txn_path), options).execute()
        outcomes.append(outcome)
        print_outcome(outcome)
        if outcome.status is RunStatus.INTERRUPTED:
            return outcomes, True
    return outcomes, False


def _finish_matrix(matrix: MatrixDir, outcomes: list[RunOutcome], interrupted: bool, kind: str) -> int:
    """Write matrix-status.json, print the results table and the folder, and return the matrix's exit status."""
    for line in summary_lines(outcomes, kind):
        say(line)
    write_json_atomic(matrix.path / "matrix-status.json", {
        "runs": [{"path": o.run_dir.path.name, "run_id": o.run_dir.run_id, "status": o.status.value,
                  "verdict": o.verdict.value, "exit_code": o.exit_code,
                  "judgement": o.judgement.to_json() if o.judgement else None, "error": o.error}
                 for o in outcomes],
        "interrupted": interrupted,
    })
    print(matrix.path)
    if interrupted:
        return 130
    if any(o.status is RunStatus.FAILED for o in outcomes):
        return 2
    codes = [o.exit_code for o in outcomes]
    return 1 if 1 in codes else (2 if 2 in codes else 0)


def _compare(matrix: MatrixDir, outcomes: list[RunOutcome]) -> None:
    complete = [o for o in outcomes if o.status is RunStatus.COMPLETE]
    if not complete:
        return
    try:
        from analysis.pipeline import analyze_matrix
    except ImportError:
        say("comparison report not available in this build")
        return
    try:
        analyze_matrix(matrix.path)
        say(f"comparison: {matrix.path / 'compare.html'}")
    except Exception as err:
        say(f"comparison report failed: {err}")


def _coverage(matrix: MatrixDir, outcomes: list[RunOutcome], target: Target = Target.EMBEDDED) -> None:
    """coverage.json/.md of the recovery code over the runs that finished (orchestrator/coverage.py;
    on the pulsar target orchestrator/pulsar_coverage.py, from each run's own report)."""
    from orchestrator.coverage import repository_root, summary_lines, write_matrix_coverage

    runs = {o.run_dir.path.name: o.run_dir.path for o in outcomes}
    if target is Target.PULSAR:
        from orchestrator import pulsar_coverage

        try:
            pulsar = pulsar_coverage.write_matrix(matrix.path, runs, say)
        except Exception as err:   # a report that cannot be made must not hide the verdicts
            say(f"transaction-code coverage failed: {type(err).__name__}: {err}")
            return
        if pulsar is not None:
            for line in pulsar_coverage.summary_lines(pulsar):
                say(line.replace("**", ""))
            say(f"transaction-code coverage: {matrix.path / 'coverage.md'}")
        return
    try:
        result = write_matrix_coverage(matrix.path, runs, repository_root())
    except Exception as err:   # a report that cannot be made must not hide the verdicts
        say(f"recovery-code coverage failed: {type(err).__name__}: {err}")
        return
    for line in summary_lines(result):
        say(line.replace("**", ""))
    say(f"recovery-code coverage: {matrix.path / 'coverage.md'}")


def _compare_sweep(matrix: MatrixDir, outcomes: list[RunOutcome]) -> None:
    if not any(o.status is RunStatus.COMPLETE for o in outcomes):
        return
    try:
        from analysis.pipeline import analyze_sweep

        analyze_sweep(matrix.path)
        say(f"sweep report: {matrix.path / 'sweep.html'}")
    except Exception as err:
        say(f"sweep report failed: {err}")
