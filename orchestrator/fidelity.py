"""`txnbench fidelity`: the same scenarios on the embedded model and on real Pulsar, one report.

Runs, for each system (`embedded`, `pulsar`) and each scenario (bench, failover, one chaos
scenario), the matrix over the paths, then writes `results/<id>-fidelity-report/fidelity.{json,
md,html}` with `analysis.fidelity`. `--from DIR ...` reuses matrices (or runs) already made,
so the report can be rebuilt without hours of runs; with `--from` only the systems named by
`--systems` are run again.

Real Pulsar runs one cluster at a time on a shared machine: with `--pulsar-lock FILE` (or
`TXNBENCH_PULSAR_LOCK`) each pulsar matrix is run while holding an exclusive flock on FILE,
released between matrices, so another user's cluster can run in between and no hold lasts
longer than one matrix.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from harness.config import RunConfig, Target, parse_setting_pairs
from harness.errors import ConfigError
from harness.results import create_unique_dir, utc_stamp, write_json_atomic, write_text_atomic
from harness.txn_paths import TxnPath
from orchestrator.outcome import say

__all__ = ["LOCK_ENV", "SCENARIOS", "SYSTEMS", "main_fidelity"]

SYSTEMS = ("embedded", "pulsar")
SCENARIOS = ("bench", "failover", "chaos")
LOCK_ENV = "TXNBENCH_PULSAR_LOCK"
DEFAULT_FAULTS_S = 30.0


@contextlib.contextmanager
def _held(lock_file: str | None) -> Iterator[None]:
    """An exclusive flock on `lock_file` for the block (nothing when None)."""
    if not lock_file:
        yield
        return
    with open(lock_file, "a+") as handle:
        say(f"waiting for {lock_file} (one real Pulsar cluster at a time)")
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _config(scenario: str, system: str, args: argparse.Namespace) -> RunConfig:
    from orchestrator import scenario as scenario_module

    def adjust(config: RunConfig) -> RunConfig:
        changes: dict[str, object] = {"target": Target(system)}
        if args.paths:
            changes["paths"] = tuple(TxnPath(p) for p in args.paths)
        if args.set:
            changes["cluster"] = dataclasses.replace(
                config.cluster, settings={**config.cluster.settings, **parse_setting_pairs(args.set)})
        config = dataclasses.replace(config, **changes)  # type: ignore[arg-type]
        if config.faults.enabled:
            return config.with_duration(args.faults_duration)
        return config.with_duration(args.duration) if args.duration else config

    return scenario_module.load(scenario, adjust)


def _run_system(system: str, args: argparse.Namespace, lock_file: str | None) -> tuple[list[Path], bool]:
    """Every scenario's matrix on `system`; the matrix folders and whether one was interrupted."""
    from orchestrator.matrix import run_matrix

    made: list[Path] = []
    names = {"bench": "bench", "failover": "failover", "chaos": args.chaos_scenario}
    for group in args.scenarios:
        config = _config(names[group], system, args)
        kind = "chaos" if config.faults.enabled else "bench"
        say(f"=== fidelity: {group} ({config.name}) on {system} ===")
        matrix_args = argparse.Namespace(results=args.results, no_capacity=True, coverage=False,
                                         scenario=config.name)
        with _held(lock_file if system == "pulsar" else None):
            matrix, code = run_matrix(config, matrix_args, kind, lts_baseline=False)
        made.append(matrix.path)
        if code == 130:
            return made, True
    return made, False


def _command(argv: Sequence[str] | None) -> str:
    return "txnbench " + shlex.join(list(argv if argv is not None else sys.argv[1:]))


def main_fidelity(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Run (or reuse) the matrices, then write the fidelity report; 0 when written, 2 with no runs."""
    from analysis.fidelity import build_fidelity, render_html, render_markdown
    from analysis.fidelity_runs import collect_runs

    lock_file = args.pulsar_lock or os.environ.get(LOCK_ENV) or None
    sources = [Path(p) for p in (args.from_dirs or [])]
    systems = args.systems if args.systems is not None else ([] if sources else list(SYSTEMS))
    for folder in sources:
        if not folder.is_dir():
            raise ConfigError("--from", str(folder), "is not a folder", "pass results/<matrix_id> folders")
    made: list[Path] = []
    interrupted = False
    for system in systems:
        matrices, interrupted = _run_system(system, args, lock_file)
        made += matrices
        if interrupted:
            break
    runs, skipped = collect_runs([*sources, *made])
    for entry in skipped:
        say(f"skipped {entry['run']}: {entry['reason']}")
    if not runs:
        raise ConfigError("fidelity", "", "no analysed bench, failover or chaos run on embedded or pulsar was found",
                          "run without --from, or pass the matrices txnbench bench/chaos wrote")
    out = create_unique_dir(args.results, f"{utc_stamp()}-fidelity-report")
    inputs = [str(p) for p in [*sources, *made]]
    doc = build_fidelity(runs, inputs=inputs, command=_command(argv), generated=datetime.now(UTC).isoformat())
    doc["skipped"] = skipped
    doc["interrupted"] = interrupted
    write_json_atomic(out / "fidelity-inputs.json", {"inputs": inputs})
    write_json_atomic(out / "fidelity.json", doc)
    write_text_atomic(out / "fidelity.md", render_markdown(doc))
    write_text_atomic(out / "fidelity.html", render_html(doc))
    for gap in doc["flagged_gaps"]:
        say(f"gap over 20%: {gap['path']} {gap['title']}: model {gap['embedded']} real {gap['pulsar']}")
    say(f"fidelity report: {out / 'fidelity.md'}")
    print(out)
    return 130 if interrupted else 0
