"""The release matrix: the same chaos, seed and schedule on every Pulsar release that runs here.

Why: Pulsar's own history is the test of the harness's power. Releases from 2.10 to 4.0 shipped
transaction bugs that later releases fixed; a harness worth its name tells an old release from
the one that fixed its bug, with the same scenario and no knowledge of the bug (issue #40). So
this runs one scenario (the shipped `chaos.yaml` by default, generated windows included) with one
seed on each release (oldest first) and each path it has: `v4` everywhere, `v4-batched` where
PIP-160 shipped (2.11 on), `v5` where PIP-473 did (5.0). The releases are the ones the table in
`targets/pulsar/versions.py` says run here (`txnbench releases`).

It writes `release-matrix.json` and `release-matrix.md` beside the runs (`runs/<release>-<path>/`):
per release and path the verdict, each anomaly class with its count and whether the scenario
expects it, and the command that reproduces the run; and the *release diff*: per path, the
classes a release shows that the next release in the matrix does not. A class that disappears
between two releases is the lead to a fixed upstream bug (docs/findings/historical/); a class
every release shows is a finding about all of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import RunConfig, Target
from harness.errors import ConfigError
from harness.results import RunStatus, new_matrix, write_json_atomic, write_text_atomic
from harness.txn_paths import TxnPath
from orchestrator.matrix import reproduce_command
from orchestrator.outcome import RunOptions, RunOutcome, print_outcome, say
from orchestrator.planted import refuse_planted_bugs
from orchestrator.run import Run
from targets.pulsar.versions import PulsarRelease, listed, runnable


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a release and one of its paths."""

    version: str
    txn_path: TxnPath

    @property
    def folder(self) -> str:
        return f"{self.version}-{self.txn_path.value}"


@dataclass
class CellResult:
    """What one run showed: its verdict and anomaly classes (count, expected or not)."""

    cell: Cell
    status: str
    verdict: str
    exit_code: int
    anomalies: dict[str, int] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)
    reproduce: str = ""
    folder: str = ""
    error: str | None = None
    recovery: dict[str, Any] | None = None   # --coverage: {"entered", "listed", "percent"} of the recovery methods
    observations: dict[str, int] = field(default_factory=dict)   # what the drain saw of the broker (`drain_observations`)
    windows: dict[str, Any] | None = None   # how much of the fault timeline ran (`fault_windows`)

    def to_json(self) -> dict[str, Any]:
        return {"release": self.cell.version, "path": self.cell.txn_path.value, "status": self.status,
                "verdict": self.verdict, "exit_code": self.exit_code, "anomalies": dict(self.anomalies),
                "unexpected": list(self.unexpected), "reproduce": self.reproduce, "folder": self.folder,
                "error": self.error, "recovery": self.recovery, "observations": dict(self.observations),
                "windows": self.windows}


def version_key(version: str) -> tuple[int, ...]:
    """Release order: 2.10.5 < 2.11.0 < 3.0.0 ... (numeric, not lexical)."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def plan(releases: Sequence[PulsarRelease], paths: Sequence[TxnPath]) -> list[Cell]:
    """Every release (oldest first) on every asked path it has."""
    cells: list[Cell] = []
    for release in sorted(releases, key=lambda r: version_key(r.version)):
        cells += [Cell(release.version, p) for p in paths if release.supports(p)]
    return cells


def choose_releases(asked: Sequence[str] | None) -> list[PulsarRelease]:
    """The releases asked for (each must be one that runs here), or every one that does."""
    if not asked:
        return runnable()
    chosen: list[PulsarRelease] = []
    for version in asked:
        release = listed(version)
        if not release.checked.runs:
            raise ConfigError("--releases", version, f"Pulsar {version} does not run here "
                              f"({release.checked.why_not or 'not resolved'})",
                              "choose among " + ", ".join(r.version for r in runnable()))
        chosen.append(release)
    return chosen


def release_diff(results: Sequence[CellResult]) -> list[dict[str, Any]]:
    """Per path, each pair of consecutive releases that both ran it to a verdict, the classes
    the older one shows that the newer does not (and the other way round)."""
    by_path: dict[TxnPath, list[CellResult]] = {}
    for result in results:
        if result.verdict in ("valid", "invalid"):
            by_path.setdefault(result.cell.txn_path, []).append(result)
    diffs: list[dict[str, Any]] = []
    for txn_path, runs in by_path.items():
        runs = sorted(runs, key=lambda r: version_key(r.cell.version))
        for older, newer in itertools.pairwise(runs):
            before, after = _classes(older), _classes(newer)
            gone = {c: n for c, n in before.items() if c not in after}
            new = {c: n for c, n in after.items() if c not in before}
            if gone or new:
                diff: dict[str, Any] = {"path": txn_path.value, "older": older.cell.version,
                                        "newer": newer.cell.version, "gone": gone, "new": new}
                if _played(older) != _played(newer):   # not the same chaos: a class may be the timeline's
                    diff["windows"] = {"older": _played(older), "newer": _played(newer)}
                diffs.append(diff)
    return diffs


def _played(result: CellResult) -> str | None:
    """`started/planned` fault windows of a run, or None when unknown (no faults, an older record)."""
    return f"{result.windows['started']}/{result.windows['planned']}" if result.windows else None


def _classes(result: CellResult) -> dict[str, int]:
    """A run's anomaly classes and its drain's observations (`drain: <kind>`), for the diff."""
    return {**result.anomalies, **{f"drain: {k}": n for k, n in result.observations.items()}}


def result_of(cell: Cell, outcome: RunOutcome, reproduce: str) -> CellResult:
    """A run's outcome in the matrix's terms; its anomaly counts from its `analysis/results.json`."""
    anomalies: dict[str, int] = {}
    results_file = outcome.run_dir.path / "analysis" / "results.json"
    if results_file.is_file():
        try:
            found = json.loads(results_file.read_text()).get("anomalies") or {}
            anomalies = {str(k): int((v or {}).get("count", 0)) for k, v in found.items()}
        except (ValueError, OSError, AttributeError):
            anomalies = {}
    unexpected = list(outcome.judgement.unexpected) if outcome.judgement is not None else sorted(anomalies)
    return CellResult(cell, outcome.status.value, outcome.verdict.value, outcome.exit_code, anomalies,
                      [str(c) for c in unexpected], reproduce, str(outcome.run_dir.path), outcome.error,
                      recovery_reached(outcome.run_dir.path), drain_observations(outcome.run_dir.path),
                      fault_windows(outcome.run_dir.path))


#: what a run's `drain-complete` event records about the broker, by the name the release diff uses
OBSERVED = {"undeliverable_ends": "stale-end", "live_undeliverable_ends": "stale-end",
            "lost_entries": "lost-entries", "held_horizons": "held-horizon", "last_id_refused": "last-id-refused",
            "last_id_unanswered": "last-id-unanswered", "last_id_failed": "last-id-failed"}


def drain_observations(run_folder: Path) -> dict[str, int]:
    """Facts about the broker the drain recorded, counted per kind: `stale-end`, a partition whose
    last message id lies past every entry a reader is given (orchestrator/load/undeliverable.py); `lost-entries`,
    acknowledged entries the owner can no longer return; `held-horizon`, a read horizon held by a
    transaction; `last-id-refused` / `last-id-unanswered`, a terminated topic whose broker closed the
    connection on every GET_LAST_MESSAGE_ID, or never answered it (orchestrator/load/drain.py, 1d). Not anomalies (the checker decides those); a release that shows one and the next
    does not is a lead all the same."""
    from harness.history.events import file_events
    from harness.history.schema import PHASE_DRAIN_COMPLETE, OpF

    counts: dict[str, int] = {}
    try:
        for op in file_events(run_folder / "history" / "run.jsonl", (OpF.PHASE,)):
            if op.phase != PHASE_DRAIN_COMPLETE:
                continue
            for key, name in OBSERVED.items():
                found = op.extra.get(key)
                if isinstance(found, list) and found:
                    counts[name] = counts.get(name, 0) + len(found)
    except Exception:   # no history, or a damaged one: nothing observed
        return {}
    return counts


def recovery_reached(run_folder: Path) -> dict[str, Any] | None:
    """With --coverage: how many of the release's listed recovery methods the run entered
    (`coverage/coverage.json`, orchestrator/pulsar_coverage.py); None when not measured."""
    coverage_file = run_folder / "coverage" / "coverage.json"
    try:
        recovery = json.loads(coverage_file.read_text()).get("recovery")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(recovery, dict) or not {"entered", "listed", "percent"} <= set(recovery):
        return None
    return {"entered": int(recovery["entered"]), "listed": int(recovery["listed"]),
            "percent": float(recovery["percent"])}


def fault_windows(run_folder: Path) -> dict[str, Any] | None:
    """How much of the fault timeline the run played (its manifest's `faults_progress`): the windows
    planned and begun, and how long the faults phase ran over its plan. Why in the matrix: the
    release diff compares releases by one shipped timeline; a cell that ran fewer windows (its
    heals slower, its phase cut) was not put through the same chaos, and the table must say so."""
    try:
        manifest = json.loads((run_folder / "manifest.json").read_text())
        progress = manifest.get("faults_progress")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(progress, dict) or not progress.get("windows"):
        return None
    overrun = progress.get("overrun_s")
    return {"started": int(progress.get("started") or 0), "planned": int(progress["windows"]),
            "overrun_s": float(overrun) if isinstance(overrun, int | float) else None}


def _windows_cell(windows: Mapping[str, Any] | None) -> str:
    if not windows:
        return "none"
    text = f"{windows['started']}/{windows['planned']}"
    if windows["started"] < windows["planned"]:
        text = f"**{text}**"      # not the same chaos as a cell that ran them all
    if windows.get("overrun_s"):
        text += f" (+{windows['overrun_s']:g} s)"
    return text


def _recovery_cell(recovery: Mapping[str, Any] | None) -> str:
    if not recovery:
        return "not measured"
    return f"{recovery['entered']}/{recovery['listed']} ({recovery['percent']}%)"


def render_markdown(config_name: str, seed: int, results: Sequence[CellResult],
                    diffs: Sequence[Mapping[str, Any]]) -> str:
    """release-matrix.md: the table of runs, then the release diff."""
    lines = [f"# Release matrix: `{config_name}`, seed {seed}", "",
             "| release | path | verdict | anomalies (unexpected in bold) | fault windows run | drain observed "
             "| recovery methods entered | reproduce |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        shown = ", ".join((f"**{c} {n}**" if c in r.unexpected else f"{c} {n}") for c, n in sorted(r.anomalies.items()))
        lines.append(f"| {r.cell.version} | {r.cell.txn_path.value} | {r.verdict}"
                     f"{' (' + r.error + ')' if r.error else ''} | {shown or 'none'} | {_windows_cell(r.windows)} "
                     f"| {', '.join(f'{k} {n}' for k, n in sorted(r.observations.items())) or 'nothing'} "
                     f"| {_recovery_cell(r.recovery)} "
                     f"| `{r.reproduce}` |")
    lines += ["", "## Release diff", "",
              "Per path, what a release shows that the next release in the matrix does not (gone), and what "
              "appears (new). A class gone between two releases is the lead to an upstream fix "
              "(docs/findings/historical/); one run per cell, so a class seen once may be chance: reproduce it "
              "before tying it to a fix.", ""]
    if not diffs:
        lines.append("No class differs between consecutive releases.")
    for d in diffs:
        gone = ", ".join(f"{c} {n}" for c, n in sorted(d["gone"].items())) or "nothing"
        new = ", ".join(f"{c} {n}" for c, n in sorted(d["new"].items())) or "nothing"
        windows = d.get("windows")
        caution = (f" (not the same chaos: fault windows run {windows['older'] or 'unknown'} and "
                   f"{windows['newer'] or 'unknown'})") if windows else ""
        lines.append(f"- `{d['path']}` {d['older']} -> {d['newer']}: gone {gone}; new {new}{caution}")
    return "\n".join(lines) + "\n"


def cell_result(plain: Mapping[str, Any]) -> CellResult:
    """A `release-matrix.json` run entry back as a CellResult."""
    return CellResult(Cell(str(plain["release"]), TxnPath(str(plain["path"]))), str(plain.get("status", "")),
                      str(plain.get("verdict", "")), int(plain.get("exit_code", 2)),
                      {str(k): int(v) for k, v in (plain.get("anomalies") or {}).items()},
                      [str(c) for c in plain.get("unexpected") or []], str(plain.get("reproduce", "")),
                      str(plain.get("folder", "")), plain.get("error"), plain.get("recovery"),
                      {str(k): int(v) for k, v in (plain.get("observations") or {}).items()},
                      plain.get("windows"))


def combine(folders: Sequence[Path], out: Path) -> int:
    """`txnbench release-matrix --from DIR ...`: one report (and release diff) over matrices run apart,
    e.g. one CI job per release; exit 0 when every run reached a verdict, 2 otherwise.

    A release and path found in several folders is taken from the last folder named (a cell run
    again, e.g. after a harness fix, replaces the earlier run); the report lists what it replaced."""
    chosen: dict[Cell, CellResult] = {}
    replaced: list[CellResult] = []
    scenario, seed = "", 0
    for folder in folders:
        found = folder / "release-matrix.json"
        if not found.is_file():
            raise ConfigError("--from", str(folder), "has no release-matrix.json", "name release-matrix folders")
        plain = json.loads(found.read_text())
        scenario, seed = str(plain.get("scenario", scenario)), int(plain.get("seed", seed))
        for run in plain.get("runs") or []:
            result = cell_result(run)
            if "observations" not in run and result.folder:   # a matrix written before runs recorded them
                result.observations = drain_observations(Path(result.folder))
            if "windows" not in run and result.folder:        # likewise for the fault windows
                result.windows = fault_windows(Path(result.folder))
            if result.cell in chosen:
                replaced.append(chosen[result.cell])
            chosen[result.cell] = result
    results = sorted(chosen.values(), key=lambda r: (version_key(r.cell.version), r.cell.txn_path.value))
    out.mkdir(parents=True, exist_ok=True)
    diffs = release_diff(results)
    write_json_atomic(out / "release-matrix.json", {"scenario": scenario, "seed": seed, "from": [str(f) for f in folders],
                                                    "runs": [r.to_json() for r in results], "release_diff": diffs,
                                                    "replaced": [r.to_json() for r in replaced]})
    text = render_markdown(scenario, seed, results, diffs)
    if replaced:
        text += "\n## Runs replaced by a later run of the same release and path\n\n" + "".join(
            f"- {r.cell.version} {r.cell.txn_path.value}: {r.verdict}"
            f"{' (' + r.error + ')' if r.error else ''}, `{r.folder}`\n" for r in replaced)
    write_text_atomic(out / "release-matrix.md", text)
    print(out)
    return 0 if all(r.verdict in ("valid", "invalid") for r in results) else 2


def main_release_matrix(config: RunConfig, args: argparse.Namespace) -> int:
    """`txnbench release-matrix`: `config` validated, its paths the ones asked for."""
    if config.target is not Target.PULSAR:
        raise ConfigError("--target", config.target.value, "the release matrix runs real Pulsar releases",
                          "drop --target (it is pulsar)")
    refuse_planted_bugs(config.cluster.settings, "release-matrix")
    releases = choose_releases(getattr(args, "releases", None))
    cells = plan(releases, config.paths)
    if not cells:
        raise ConfigError("--paths", ",".join(p.value for p in config.paths),
                          "no chosen release has any of these paths", "add v4, which every release has")
    matrix = new_matrix("release-matrix", config.name, root=args.results,
                        info={"releases": [r.version for r in releases], "paths": [p.value for p in config.paths],
                              "seed": config.seed, "config": config.to_dict()})
    say(f"release matrix {matrix.matrix_id}: {config.name}, seed {config.seed}, {len(cells)} runs over "
        f"{', '.join(r.version for r in sorted(releases, key=lambda r: version_key(r.version)))}")
    results: list[CellResult] = []
    interrupted = False
    for index, cell in enumerate(cells, start=1):
        say(f"== release matrix {index}/{len(cells)}: Pulsar {cell.version}, {cell.txn_path.value} ==")
        run_config = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster,
                                                                             pulsar_version=cell.version))
        outcome = Run(run_config.for_path(cell.txn_path),
                      RunOptions(results_root=args.results, matrix=matrix, folder=cell.folder,
                                 command="release-matrix",
                                 coverage=bool(getattr(args, "coverage", False)))).execute()
        print_outcome(outcome)
        reproduce = (reproduce_command(getattr(args, "scenario", None) or config.name, cell.txn_path.value,
                                       config.seed, config.phases.faults_s)
                     + f" --target pulsar --pulsar-version {cell.version}")
        results.append(result_of(cell, outcome, reproduce))
        _write(matrix.path, config, results)
        if outcome.status is RunStatus.INTERRUPTED:
            interrupted = True
            break
    _write(matrix.path, config, results)
    for line in render_markdown(config.name, config.seed, results, release_diff(results)).splitlines():
        if line.startswith(("| ", "- `")):
            say(line)
    print(matrix.path)
    if interrupted:
        return 130
    codes = [r.exit_code for r in results]
    return 1 if 1 in codes else (2 if 2 in codes else 0)


def _write(folder: Path, config: RunConfig, results: Sequence[CellResult]) -> None:
    """Rewritten after every run, so an interrupted matrix keeps what it learned."""
    diffs = release_diff(results)
    write_json_atomic(folder / "release-matrix.json", {
        "scenario": config.name, "seed": config.seed, "runs": [r.to_json() for r in results], "release_diff": diffs})
    write_text_atomic(folder / "release-matrix.md", render_markdown(config.name, config.seed, results, diffs))
