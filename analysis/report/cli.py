"""`txnbench report RUN_DIR... [--out DIR]`: rebuild reports, and a comparison of several runs.

One run folder: recompute its perf.json and rewrite report.html, report.md and
plots/ (running the checker first when it has no verdict yet). A matrix folder
(`results/<matrix>/`, holding `runs/<path>/`): rebuild every run, then the
comparison into the matrix folder (or `--out`); a sweep's matrix gets its
per-level comparisons and sweep report instead. Several folders: rebuild each
(matrices are expanded into their runs), then compare them all into `--out`,
which may be left out only when every run lives in the same matrix. Anything
that is neither a run nor a matrix stops the command before any work, with a
one-line error naming the folder and what was expected.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from harness.errors import TxnbenchError
from harness.results import MatrixDir

__all__ = ["FolderKind", "ReportInputError", "Target", "classify", "main_report"]


class ReportInputError(TxnbenchError):
    """A folder given to `txnbench report` is not a run or a matrix, or the output is ambiguous."""

    exit_code = 2


class FolderKind(StrEnum):
    RUN = "run"
    MATRIX = "matrix"


@dataclass(frozen=True)
class Target:
    path: Path
    kind: FolderKind


def _is_run(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "history").is_dir()


def classify(path: Path) -> Target:
    """What `path` is; ReportInputError (one line, with the fix) when it is neither."""
    if not path.exists():
        raise ReportInputError(f"{path}: no such folder; pass a run folder (results/<run_id>) or a matrix "
                               "folder (results/<matrix_id>)")
    if not path.is_dir():
        raise ReportInputError(f"{path}: is a file, not a folder; pass a run folder (results/<run_id>) or a "
                               "matrix folder (results/<matrix_id>)")
    if _is_run(path):
        return Target(path, FolderKind.RUN)
    if (path / "runs").is_dir():
        if MatrixDir(path).run_dirs():
            return Target(path, FolderKind.MATRIX)
        raise ReportInputError(f"{path}: a matrix folder with no runs (nothing under runs/ has a manifest.json); "
                               "the matrix was interrupted before its first run: run it again")
    raise ReportInputError(f"{path}: not a run folder (no manifest.json or history/) nor a matrix folder "
                           "(no runs/); pass results/<run_id> or results/<matrix_id>")


def _common_matrix(runs: list[Path]) -> Path | None:
    parents = {p.resolve().parent for p in runs}
    if len(parents) != 1:
        return None
    parent = parents.pop()
    return parent.parent if parent.name == "runs" else None


def _matrix_kind(matrix: Path) -> str | None:
    from harness.results import read_json

    try:
        kind = read_json(matrix / "matrix.json").get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def main_report(args: argparse.Namespace) -> int:
    """Entry point of `txnbench report`; 0 when every report was built, 2 otherwise."""
    from analysis.pipeline import compare_runs, rebuild_run

    run_dirs: list[Path] = [Path(p) for p in args.run_dirs]
    out: Path | None = getattr(args, "out", None)
    master: str | None = getattr(args, "master", None)
    targets = [classify(p) for p in run_dirs]

    runs: list[Path] = []
    matrix: Path | None = None
    for target in targets:
        if target.kind is FolderKind.RUN:
            runs.append(target.path)
        else:
            runs += [r.path for r in MatrixDir(target.path).run_dirs()]
            matrix = target.path if len(targets) == 1 else None
    compare_into: Path | None = None
    if len(runs) > 1 or matrix is not None:
        compare_into = out or matrix or _common_matrix(runs)
        if compare_into is None:
            raise ReportInputError("several runs from different places: pass --out DIR for the comparison "
                                   "(e.g. --out results/compare-" + "-".join(p.name for p in runs[:3]) + ")")
    elif out is not None:
        print(f"txnbench: --out is for comparisons; the report of one run goes into {runs[0]}", file=sys.stderr)

    failures = 0
    built: list[Path] = []
    for run in runs:
        try:
            summary = rebuild_run(run, master=master)
        except TxnbenchError as err:
            failures += 1
            print(f"txnbench: {run}: {err}", file=sys.stderr)
            continue
        except Exception as err:  # a bug must not hide the other runs' reports
            failures += 1
            print(f"txnbench: {run}: report failed: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        built.append(run)
        print(summary["report"])
    if matrix is not None and out is None and _matrix_kind(matrix) == "sweep":
        from analysis.pipeline import analyze_sweep

        sweep = analyze_sweep(matrix, master=master, compute_missing=False)
        print(sweep["report"])
        return 2 if failures else 0
    if compare_into is not None:
        if not built:
            print("txnbench: no run could be reported, so there is nothing to compare", file=sys.stderr)
            return 2
        info_kind = None
        matrix_id = None
        if matrix is not None:
            from harness.results import read_json

            meta = matrix / "matrix.json"
            if meta.is_file():
                data = read_json(meta)
                info_kind, matrix_id = data.get("kind"), data.get("matrix_id")
        compare = compare_runs(built, compare_into, master=master, kind=info_kind,
                               matrix_id=matrix_id or (matrix.name if matrix else None), compute_missing=False)
        print(compare["report"])
    return 2 if failures else 0
