"""The runs a fidelity report reads: matrix or run folders, each run placed by its manifest.

Kept apart from `analysis.fidelity` (pure) because it touches files. A folder given is a
matrix (it has `runs/`), a run (it has `manifest.json`), or a folder of either (a fidelity
folder lists its matrices in `fidelity-inputs.json`). Only runs whose target is `embedded`
or `pulsar` and whose scenario is bench, failover or a chaos scenario are used; the
others are reported as skipped with the reason, never silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis.fidelity import SYSTEMS, RunRecord, scenario_group
from harness.errors import ConfigError
from harness.results import config_of, read_json

__all__ = ["collect_runs", "run_dirs_of"]


def _json(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_dirs_of(folder: Path) -> list[Path]:
    """The run folders in `folder`: itself (a run), its runs/<x>/ (a matrix), or its matrices' runs."""
    if (folder / "manifest.json").is_file():
        return [folder]
    if (folder / "runs").is_dir():
        return sorted(p for p in (folder / "runs").iterdir() if (p / "manifest.json").is_file())
    inputs = _json(folder / "fidelity-inputs.json").get("inputs")
    if isinstance(inputs, list):
        out: list[Path] = []
        for name in inputs:
            given = Path(str(name))
            out += run_dirs_of(given if given.is_dir() else folder.parent / given.name)
        return out
    raise ConfigError("--from", str(folder), "is neither a run folder (manifest.json) nor a matrix (runs/)",
                      "pass results/<matrix_id> folders written by txnbench bench/chaos or txnbench fidelity")


def collect_runs(folders: Iterable[Path]) -> tuple[list[RunRecord], list[dict[str, str]]]:
    """The analysed runs under `folders` (in the order given, so a later folder wins a tie) and the skipped."""
    runs: list[RunRecord] = []
    skipped: list[dict[str, str]] = []
    for folder in folders:
        for run_dir in run_dirs_of(Path(folder)):
            manifest = _json(run_dir / "manifest.json")
            system, group, txn_path = manifest.get("target"), scenario_group(manifest.get("scenario")), \
                manifest.get("path")
            config = config_of(manifest)
            pulsar_version = config.cluster.pulsar_version if config else None
            reason = None
            if system not in SYSTEMS:
                reason = f"target {system!r} is not embedded or pulsar"
            elif group is None:
                reason = f"scenario {manifest.get('scenario')!r} is not bench, failover or chaos"
            elif system == "pulsar" and run_dir.name != txn_path:
                reason = f"a baseline run on Pulsar {pulsar_version} (folder {run_dir.name}), not the release compared"
            elif not (run_dir / "analysis" / "perf.json").is_file():
                reason = "no analysis/perf.json (run `txnbench report` on it first)"
            if reason:
                skipped.append({"run": str(run_dir), "reason": reason})
                continue
            runs.append(RunRecord(system=str(system), scenario=str(group), path=str(txn_path), run_dir=str(run_dir),
                                  perf=_json(run_dir / "analysis" / "perf.json"),
                                  results=_json(run_dir / "analysis" / "results.json"), manifest=manifest))
    return runs, skipped
