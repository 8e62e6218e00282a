"""The results folder: one directory per run or matrix, never reused.

Layout of a run (`results/<run_id>/`, run_id = `<UTC yyyymmdd-hhmmss>-<scenario>-<path>`):

    manifest.json          scenario, resolved config, seed, versions, target, times, status;
                           `history_files`: what history/ held as the run ended
                           (harness.history.integrity; the checker compares the files with it)
    history/*.jsonl        one file per writer (the history contract, harness.history)
    metrics/<phase>-<service>.prom
    locust/                Locust CSV stats
    logs/<service>.log
    analysis/results.json  verdict; analysis/perf.json  performance
    analysis/check-<UTC yyyymmdd-hhmmss>/results.json  a later `txnbench check` (results.json is kept)
    report.html, report.md, plots/*.png

A matrix (`results/<matrix_id>/`) holds `runs/<path>/` (each a run folder) and
`compare.json`, `compare.md`, `compare.html`. A concurrency sweep holds
`runs/<path>-u<users>/`, one comparison per user count under `levels/u<users>/`
and `sweep.json`, `sweep.md`, `sweep.html`.

JSON is written atomically (temporary file, fsync, rename) so a crash never
leaves half a manifest. A run folder is created exclusively: if the name is
taken (two runs in one second), a numeric suffix is added, so nothing is ever
overwritten. The manifest's `status` moves from `running` to `complete`,
`interrupted` or `failed`; an interrupted run keeps everything it wrote.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from typing import Any

import harness
from harness.config import RunConfig
from harness.errors import ConfigError

RESULTS_ROOT = Path("results")
MANIFEST_SCHEMA = 1


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


def write_text_atomic(path: Path, text: str) -> None:
    """Write text so readers see the old file or the new one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """`write_text_atomic` of `data` as indented JSON."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def utc_stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")


def create_unique_dir(parent: Path, name: str) -> Path:
    """Create `parent/name` exclusively, adding -2, -3 ... when the name is taken."""
    parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        candidate = parent / (name if attempt == 1 else f"{name}-{attempt}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a fresh folder for {name} under {parent}")


def collect_versions() -> dict[str, str]:
    """Versions that decide what a result means: ours, the interpreter, key libraries."""
    versions = {"txnbench": harness.__version__, "python": platform.python_version()}
    for dist in ("locust", "pyspark", "pulsar-client", "protobuf", "matplotlib"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                timeout=5, cwd=Path(harness.__file__).resolve().parent.parent)
        if commit.returncode == 0:
            versions["git_commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return versions


@dataclass(frozen=True)
class RunDir:
    """The folders of one run. Creating the object does not touch the disk.

    A run's id is `<UTC yyyymmdd-hhmmss>-<scenario>-<path>`. A single run's folder is
    named by it; a matrix run's folder is `runs/<path>/`, so its id comes from the
    manifest (`id` when the caller already knows it).
    """

    path: Path
    id: str | None = None

    @property
    def run_id(self) -> str:
        if self.id:
            return self.id
        try:
            value = read_json(self.manifest_path).get("run_id")
        except (OSError, ValueError, AttributeError):
            value = None
        return value if isinstance(value, str) and value else self.path.name

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def history_dir(self) -> Path:
        return self.path / "history"

    @property
    def metrics_dir(self) -> Path:
        return self.path / "metrics"

    @property
    def locust_dir(self) -> Path:
        return self.path / "locust"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    @property
    def analysis_dir(self) -> Path:
        return self.path / "analysis"

    @property
    def plots_dir(self) -> Path:
        return self.path / "plots"

    @property
    def results_json(self) -> Path:
        return self.analysis_dir / "results.json"

    @property
    def instances_dir(self) -> Path:
        """Every instance of an anomaly class with more than results.json's examples."""
        return self.analysis_dir / "instances"

    @property
    def perf_json(self) -> Path:
        return self.analysis_dir / "perf.json"

    def make_folders(self) -> None:
        for sub in (self.history_dir, self.metrics_dir, self.locust_dir, self.logs_dir,
                    self.analysis_dir, self.plots_dir):
            sub.mkdir(parents=True, exist_ok=True)

    def read_manifest(self) -> dict[str, Any]:
        return read_json(self.manifest_path)

    def update_manifest(self, **changes: Any) -> dict[str, Any]:
        manifest = self.read_manifest() if self.manifest_path.exists() else {}
        manifest.update(changes)
        write_json_atomic(self.manifest_path, manifest)
        return manifest

    def set_status(self, status: RunStatus, error: str | None = None) -> None:
        changes: dict[str, Any] = {"status": status.value}
        if status is not RunStatus.RUNNING:
            changes["ended"] = datetime.now(UTC).isoformat()
        if error:
            changes["error"] = error
        self.update_manifest(**changes)


def new_run(scenario: str, txn_path: str, *, config: dict[str, Any], seed: int, target: str,
            root: Path = RESULTS_ROOT, parent: Path | None = None, matrix_id: str | None = None,
            now: datetime | None = None, folder: str | None = None) -> RunDir:
    """Create a fresh run folder and its manifest with status `running`.

    A matrix passes `parent=<matrix>/runs` and the run folder is named by its path
    (or by `folder`: a sweep names it `<path>-u<users>`).
    """
    run_id = f"{utc_stamp(now)}-{scenario}-{txn_path}"
    if parent is not None:
        run = RunDir(create_unique_dir(parent, folder or txn_path), id=run_id)
    else:
        created = create_unique_dir(root, run_id)
        run = RunDir(created, id=created.name)   # a suffix keeps two runs in one second apart
    run.make_folders()
    write_json_atomic(run.manifest_path, {
        "schema": MANIFEST_SCHEMA,
        "run_id": run.run_id,
        "scenario": scenario,
        "path": txn_path,
        "target": target,
        "seed": seed,
        "matrix": matrix_id,
        "status": RunStatus.RUNNING.value,
        "started": (now or datetime.now(UTC)).isoformat(),
        "start_wall_ms": time.time() * 1000.0,
        "start_monotonic_ns": time.monotonic_ns(),
        "host": platform.node(),
        "versions": collect_versions(),
        "config": config,
    })
    return run


@dataclass(frozen=True)
class MatrixDir:
    """A bench or chaos matrix: one run folder per path under runs/."""

    path: Path

    @property
    def matrix_id(self) -> str:
        return self.path.name

    @property
    def runs_dir(self) -> Path:
        return self.path / "runs"

    def run_dirs(self) -> list[RunDir]:
        if not self.runs_dir.is_dir():
            return []
        return [RunDir(p) for p in sorted(self.runs_dir.iterdir()) if (p / "manifest.json").is_file()]


def new_matrix(kind: str, scenario: str, *, root: Path = RESULTS_ROOT, now: datetime | None = None,
               info: dict[str, Any] | None = None) -> MatrixDir:
    matrix = MatrixDir(create_unique_dir(root, f"{utc_stamp(now)}-{kind}-{scenario}"))
    matrix.runs_dir.mkdir()
    write_json_atomic(matrix.path / "matrix.json", {
        "schema": MANIFEST_SCHEMA, "matrix_id": matrix.matrix_id, "kind": kind, "scenario": scenario,
        "started": (now or datetime.now(UTC)).isoformat(), **(info or {}),
    })
    return matrix


def recorded_config(manifest: Any, source: str = "manifest.json") -> RunConfig | None:
    """The run's resolved config as its manifest recorded it (`config`: `RunConfig.to_dict()`),
    rebuilt by `RunConfig.from_plain`. Why: the checker and the reports read the keys they need
    through the typed config, with its defaults, not each by nested strings with defaults of its
    own. None when the manifest records none (absent or empty); a ConfigError naming `source` and
    the key when it does not build (an older txnbench's folder, a hand-edited manifest)."""
    plain = manifest.get("config") if isinstance(manifest, Mapping) else None
    return RunConfig.from_plain(plain, source) if isinstance(plain, Mapping) and plain else None


def config_of(manifest: Any) -> RunConfig | None:
    """`recorded_config`, or None when it does not build: a report leaves out what it cannot know."""
    try:
        return recorded_config(manifest)
    except ConfigError:
        return None


PLANTED_BUG_PREFIX = "txnbenchBug"
"""embedded.planted_bugs.PREFIX, repeated so the analysis names planted bugs without importing the cluster."""


def planted_bugs_of(manifest: Any) -> list[str]:
    """The planted bugs (deliberate faults) a run had on: the manifest's list, else its config's settings."""
    if not isinstance(manifest, dict):
        return []
    listed = manifest.get("planted_bugs")
    if isinstance(listed, list):
        return [str(b) for b in listed]
    # the plain settings, not config_of: a folder from before the list was recorded may hold a config
    # this txnbench no longer builds, and a planted bug must never go unnamed
    settings = ((manifest.get("config") or {}).get("cluster") or {}).get("settings") or {}
    return sorted(str(k) for k, v in settings.items() if str(k).startswith(PLANTED_BUG_PREFIX)
                  and v not in (False, "false", "False", 0, None))
