"""`txnbench selftest`: does the harness catch the bugs it is meant to catch?

Theory of operation. The catalogue (orchestrator/planted.py) lists small, realistic
bugs planted in the embedded cluster behind settings that are off by default. The
self-test runs, on a fresh cluster each time:

* one case per catalogued bug: its catching scenario, on the first path the bug lives
  on, with the bug's setting on. The bug is **caught** when the checker's verdict is
  invalid with at least one anomaly the scenario does not expect and its baseline did not
  show (`against_baseline`); a valid verdict (or only expected anomalies, or only classes
  the baseline showed too) is **missed**, or **unexercised** when some of the scenario's
  planned fault windows never ran (a loaded machine ran the timeline late: the run is no
  evidence that the scenario misses the bug), an unknown verdict is **unknown** (also not
  a catch), a run that could not finish is **failed**;
* one baseline per (scenario, path) those cases use, with no bug on, which must be
  **clean** (valid, or only expected anomalies). A baseline with an unexpected anomaly
  is a **false alarm**: a catch on that path would mean nothing.

It writes `results/<selftest_id>/` with one run folder per case under `runs/`
(`<bug or baseline>-<scenario>-<path>`), and `selftest.json` and `selftest.md`, rewritten
after every case so an interrupted self-test keeps what it learned. The exit status is 0
when every bug was caught and every baseline is clean, 1 otherwise, 2 when a run failed
to finish, 130 when interrupted.

The tuned scenarios say what the harness *can* catch when told where to look; users and
the nightly job run `chaos.yaml`, which is told nothing about the bugs. So the self-test
can also run every bug under one untuned scenario (`--with-chaos`, what `make selftest`
does: the **chaos** group, `CHAOS_SCENARIO`, with its own baselines), and reports that
figure beside the tuned one, with the issue's goal (`CHAOS_GOAL` of the catalogue). Only
the tuned group decides whether the self-test passes; the chaos figure is a measurement
(`--scenario NAME` alone runs only that group, and then it decides).

Judging is a pure function of each run's outcome (`judge_case`), tested without
clusters; the runner only sequences `orchestrator.run.Run`.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.verdicts import judge_run
from harness.config import RunConfig
from harness.errors import ConfigError
from harness.results import MatrixDir, new_matrix, write_json_atomic, write_text_atomic
from harness.txn_paths import TxnPath
from orchestrator.planted import BY_ID, CATALOGUE, PlantedBug

SELFTEST_SCHEMA = 1
TUNED = "tuned"           # each bug with the scenario written to catch it (PlantedBug.scenario)
CHAOS_SCENARIO = "chaos"  # the untuned scenario `make selftest` also runs every bug under
CHAOS_GOAL = 13           # what chaos.yaml alone should catch (issue #29, set when the catalogue held 15 bugs)


class CaseKind(enum.StrEnum):
    BUG = "bug"
    BASELINE = "baseline"


class CaseOutcome(enum.StrEnum):
    CAUGHT = "caught"             # a bug: the checker found anomalies nobody expected
    MISSED = "missed"             # a bug: the verdict was valid (or only expected anomalies)
    UNEXERCISED = "unexercised"   # a bug: missed, but planned fault windows never ran (no evidence)
    CLEAN = "clean"               # a baseline: valid, or only expected anomalies
    FALSE_ALARM = "false-alarm"   # a baseline: anomalies nobody expected, with no bug on
    UNKNOWN = "unknown"           # the checker could not reach a verdict
    FAILED = "failed"             # the run did not finish (its error says why)

    @property
    def good(self) -> bool:
        return self in (CaseOutcome.CAUGHT, CaseOutcome.CLEAN)


@dataclass(frozen=True)
class SelftestCase:
    kind: CaseKind
    scenario: str
    txn_path: TxnPath
    bug: str | None = None
    group: str = TUNED        # TUNED, or the name of the one scenario every bug of the group ran under

    @property
    def folder(self) -> str:
        """The run's folder under the matrix: `--scenario` may name a file (`../x/chaos-b.yaml`), whose
        slashes would make it a path of folders that do not exist; its file name stands for it."""
        return f"{self.bug or 'baseline'}-{scenario_label(self.scenario)}-{self.txn_path.value}"


def scenario_label(scenario: str) -> str:
    """A scenario named by name (`chaos`) or by file (`dir/chaos-b.yaml`): `chaos`, `chaos-b`."""
    name = Path(scenario).name
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    return name


@dataclass(frozen=True)
class CaseResult:
    case: SelftestCase
    outcome: CaseOutcome
    run_dir: str
    verdict: str
    anomalies: Mapping[str, int] = field(default_factory=dict)
    unexpected: tuple[str, ...] = ()
    seconds: float = 0.0
    error: str | None = None
    also_in_baseline: tuple[str, ...] = ()
    """Unexpected classes of a bug's run that its baseline (same scenario and path) showed too."""
    windows_unrun: int = 0
    windows_planned: int = 0
    """The run's planned fault windows, and how many of them never ran (manifest `faults_progress`)."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.case.kind.value, "bug": self.case.bug, "scenario": self.case.scenario,
                "group": self.case.group, "path": self.case.txn_path.value, "outcome": self.outcome.value, "run_dir": self.run_dir,
                "verdict": self.verdict, "anomalies": dict(self.anomalies), "unexpected": list(self.unexpected),
                "also_in_baseline": list(self.also_in_baseline), "seconds": round(self.seconds, 1), "error": self.error,
                "windows_unrun": self.windows_unrun, "windows_planned": self.windows_planned}


BaselineKey = tuple[str, TxnPath]
"""(scenario, path): a baseline speaks for the bug cases run under the same scenario on the same path."""


def against_baseline(result: CaseResult, baseline_classes: frozenset[str] | None) -> CaseResult:
    """A bug's catch counts only on anomaly classes its baseline did not show.

    Why: a class the code without the bug also produces under that scenario (a false alarm, or
    a liveness class a busy machine produces) says nothing about the bug; counting it made a
    run that showed only the baseline's `stalled-commit` a catch (docs/selftest.md, fifth
    round). Unknown baseline (None): the result stands.
    """
    if result.case.kind is not CaseKind.BUG or baseline_classes is None or result.outcome is not CaseOutcome.CAUGHT:
        return result
    shared = tuple(c for c in result.unexpected if c in baseline_classes)
    if len(shared) < len(result.unexpected):
        return dataclasses.replace(result, also_in_baseline=shared)
    return dataclasses.replace(result, outcome=CaseOutcome.UNEXERCISED if result.windows_unrun else CaseOutcome.MISSED,
                               also_in_baseline=shared)


def baselines_from(folder: Path) -> dict[BaselineKey, frozenset[str]]:
    try:
        return _baselines_from(folder)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ConfigError("txnbench selftest", "--baseline-from", f"cannot read the baselines in {folder}: {err}",
                          "name a complete results folder of `txnbench selftest` or `txnbench chaos`") from None


def _baselines_from(folder: Path) -> dict[BaselineKey, frozenset[str]]:
    """Baseline classes from an earlier run: a self-test's baselines (selftest.json) or a chaos
    or bench matrix's runs (matrix-status.json, each run's judgement), so `--no-baseline` can
    still judge against the code without a bug."""
    out: dict[BaselineKey, frozenset[str]] = {}
    selftest_file, status_file = folder / "selftest.json", folder / "matrix-status.json"
    if selftest_file.is_file():
        for case in json.loads(selftest_file.read_text()).get("cases") or []:
            if case.get("kind") == CaseKind.BASELINE.value:
                out[(str(case["scenario"]), TxnPath(case["path"]))] = frozenset(case.get("unexpected") or ())
        return out
    if status_file.is_file():
        scenario_name = str(json.loads((folder / "matrix.json").read_text()).get("scenario"))
        for run in json.loads(status_file.read_text()).get("runs") or []:
            judgement = run.get("judgement")
            if run.get("status") == "complete" and judgement is not None:
                out[(scenario_name, TxnPath(run["path"]))] = frozenset(judgement.get("unexpected") or ())
        return out
    raise ConfigError("txnbench selftest", "--baseline-from", f"{folder} holds neither selftest.json nor "
                      "matrix-status.json", "name a results folder of `txnbench selftest` or `txnbench chaos`")


def plan(bugs: Sequence[PlantedBug], *, baselines: bool = True, scenario: str | None = None) -> list[SelftestCase]:
    """Baselines first (one per scenario and path the bugs use), then one case per bug, catalogue order.
    With `scenario`, every bug runs under that one scenario instead of its own (group `scenario`)."""
    group = scenario or TUNED
    cases = [SelftestCase(CaseKind.BUG, scenario or bug.scenario, TxnPath(bug.paths[0]), bug.id, group)
             for bug in bugs]
    if not baselines:
        return cases
    seen: dict[tuple[str, TxnPath], None] = {}
    for case in cases:
        seen.setdefault((case.scenario, case.txn_path), None)
    return [SelftestCase(CaseKind.BASELINE, name, txn_path, group=group) for name, txn_path in seen] + cases


def plan_groups(bugs: Sequence[PlantedBug], *, baselines: bool = True, tuned: bool = True,
                scenario: str | None = None) -> list[SelftestCase]:
    """The tuned group (when `tuned`), then the group of `scenario` (when given)."""
    cases = plan(bugs, baselines=baselines) if tuned else []
    if scenario is not None:
        cases += plan(bugs, baselines=baselines, scenario=scenario)
    return cases


def judge_case(case: SelftestCase, *, status: str, verdict: str, unexpected: Iterable[str],
               windows_unrun: int = 0) -> CaseOutcome:
    """caught/missed (unexercised: missed while planned fault windows never ran) for a bug,
    clean/false-alarm for a baseline, from one run's outcome."""
    if status != "complete":
        return CaseOutcome.FAILED
    if verdict == "unknown" or verdict == "none":
        return CaseOutcome.UNKNOWN
    found = verdict == "invalid" and bool(list(unexpected))
    if case.kind is CaseKind.BUG:
        if found:
            return CaseOutcome.CAUGHT
        return CaseOutcome.UNEXERCISED if windows_unrun else CaseOutcome.MISSED
    return CaseOutcome.FALSE_ALARM if found else CaseOutcome.CLEAN


def _counts(results: Sequence[CaseResult]) -> dict[str, Any]:
    bugs = [r for r in results if r.case.kind is CaseKind.BUG]
    baselines = [r for r in results if r.case.kind is CaseKind.BASELINE]
    caught = [r.case.bug for r in bugs if r.outcome is CaseOutcome.CAUGHT]
    not_caught = [r.case.bug for r in bugs if r.outcome is not CaseOutcome.CAUGHT]
    dirty = [f"{r.case.scenario} on {r.case.txn_path.value}" for r in baselines if r.outcome is not CaseOutcome.CLEAN]
    unexercised = [r.case.bug for r in bugs if r.outcome is CaseOutcome.UNEXERCISED]
    return {"bugs": {"total": len(bugs), "caught": len(caught), "not_caught": not_caught, "unexercised": unexercised},
            "baselines": {"total": len(baselines), "clean": len(baselines) - len(dirty), "not_clean": dirty}}


def summarize(selftest_id: str, results: Sequence[CaseResult], planned: int, *, interrupted: bool = False,
              seconds: float = 0.0) -> dict[str, Any]:
    """selftest.json: every case, counts per group, and whether the self-test passed.

    The top-level `bugs` and `baselines` are the deciding group's: the tuned one when it
    ran, else the one scenario's. `groups` has the counts of each group; an untuned
    group beside the tuned one also carries its goal (`CHAOS_GOAL` for chaos) and never
    fails the self-test: it measures what the shipped chaos catches unaided."""
    names = list(dict.fromkeys(r.case.group for r in results))
    groups = {name: _counts([r for r in results if r.case.group == name]) for name in names}
    deciding = TUNED if TUNED in groups or not names else names[0]
    head = groups.get(deciding) or _counts([])
    for name, counts in groups.items():
        if name != TUNED:
            counts["scenario"] = name
            if name == CHAOS_SCENARIO:
                counts["goal"] = CHAOS_GOAL
    complete = len(results) == planned and not interrupted
    return {
        "schema": SELFTEST_SCHEMA,
        "selftest_id": selftest_id,
        "complete": complete,
        "interrupted": interrupted,
        "seconds": round(seconds, 1),
        "planned": planned,
        "bugs": head["bugs"],
        "baselines": head["baselines"],
        "deciding_group": deciding,
        "groups": groups,
        "passed": complete and not head["bugs"]["not_caught"] and not head["baselines"]["not_clean"]
        and bool([r for r in results if r.case.group == deciding]),
        "cases": [r.to_json() for r in results],
    }


def exit_code(summary: Mapping[str, Any]) -> int:
    if summary.get("interrupted"):
        return 130
    if any(c["outcome"] == CaseOutcome.FAILED.value for c in summary["cases"]):
        return 2
    return 0 if summary.get("passed") else 1


def _anomaly_text(case: Mapping[str, Any]) -> str:
    anomalies = case.get("anomalies") or {}
    if not anomalies:
        return "none"
    unexpected = set(case.get("unexpected") or [])
    shared = set(case.get("also_in_baseline") or [])

    def note(k: str) -> str:
        return " (expected)" if k not in unexpected else " (also in the baseline)" if k in shared else ""

    return ", ".join(f"{k} {v}{note(k)}" for k, v in sorted(anomalies.items()))


def _unrun_text(case: Mapping[str, Any]) -> str:
    unrun = case.get("windows_unrun") or 0
    return f"; {unrun} of {case.get('windows_planned')} planned fault windows never ran" if unrun else ""


def render_markdown(summary: Mapping[str, Any]) -> str:
    """selftest.md: the table a reader wants, then what each bug is and where it comes from."""
    lines = [f"# txnbench self-test {summary['selftest_id']}", ""]
    bugs, base = summary["bugs"], summary["baselines"]
    status = "PASSED" if summary["passed"] else ("INCOMPLETE" if not summary["complete"] else "FAILED")
    lines.append(f"**{status}**: {bugs['caught']} of {bugs['total']} planted bugs caught; "
                 f"{base['clean']} of {base['total']} baselines clean; {summary['seconds']:.0f} s in all.")
    if bugs["not_caught"]:
        lines.append(f"Not caught: {', '.join(bugs['not_caught'])}.")
    if bugs.get("unexercised"):
        lines.append(f"Of those, unexercised (planned fault windows never ran, so the run says nothing about the "
                     f"scenario; rerun them on a quieter machine): {', '.join(bugs['unexercised'])}.")
    if base["not_clean"]:
        lines.append(f"Baselines not clean: {', '.join(base['not_clean'])}.")
    for line in _group_lines(summary):
        lines += ["", line]
    lines += ["", "| case | path | scenario | outcome | verdict | anomalies | s | run |",
              "|---|---|---|---|---|---|---:|---|"]
    for c in summary["cases"]:
        name = f"`{c['bug']}`" if c["bug"] else "baseline (no bug)"
        outcome = c["outcome"] + (f": {c['error']}" if c.get("error") else "")
        lines.append(f"| {name} | {c['path']} | {c['scenario']} | **{outcome}** | {c['verdict']} | "
                     f"{_anomaly_text(c)}{_unrun_text(c)} | {c['seconds']:.0f} | {c['run_dir']} |")
    listed = [BY_ID[c["bug"]] for c in summary["cases"] if c["bug"] in BY_ID]
    if listed:
        lines += ["", "## The planted bugs", ""]
        for bug in listed:
            lines.append(f"- `{bug.id}` ({', '.join(bug.paths)}; {bug.where}): {bug.title}. "
                         f"Cited: {'; '.join(bug.citations)}. Caught by `{bug.scenario}` "
                         f"({', '.join(bug.catches)} expected).")
    return "\n".join(lines) + "\n"


def _group_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per group that does not decide: what that one scenario caught, unaided."""
    out = []
    for name, counts in (summary.get("groups") or {}).items():
        if name == summary.get("deciding_group"):
            continue
        bugs, base = counts["bugs"], counts["baselines"]
        goal = f" (goal: {counts['goal']})" if counts.get("goal") is not None else ""
        missed = f"; not caught: {', '.join(bugs['not_caught'])}" if bugs["not_caught"] else ""
        out.append(f"**{name}.yaml alone** (no scenario tuned to a bug): {bugs['caught']} of {bugs['total']} "
                   f"planted bugs caught{goal}; {base['clean']} of {base['total']} baselines clean{missed}.")
    return out


def render_table(summary: Mapping[str, Any]) -> str:
    """The console table."""
    rows = [("case", "path", "scenario", "outcome", "anomalies")]
    for c in summary["cases"]:
        rows.append((c["bug"] or "baseline", c["path"], c["scenario"], c["outcome"], _anomaly_text(c)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    out = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    bugs, base = summary["bugs"], summary["baselines"]
    out.append(f"caught {bugs['caught']}/{bugs['total']} planted bugs; {base['clean']}/{base['total']} "
               f"baselines clean; {summary['seconds']:.0f} s")
    out += [line.replace("**", "") for line in _group_lines(summary)]
    return "\n".join(out)


def select_bugs(ids: Sequence[str] | None) -> list[PlantedBug]:
    if not ids:
        return list(CATALOGUE)
    unknown = [i for i in ids if i not in BY_ID]
    if unknown:
        raise ConfigError("txnbench selftest", "--bugs", f"{unknown[0]!r} is not a planted bug",
                          "`txnbench selftest --list` shows the catalogue")
    return [BY_ID[i] for i in ids]


def list_catalogue() -> str:
    lines = []
    for bug in CATALOGUE:
        lines.append(f"{bug.id}\n  paths {', '.join(bug.paths)}; {bug.component.value}; {bug.where}\n"
                     f"  {bug.title}\n  scenario {bug.scenario}; expected {', '.join(bug.catches)}\n"
                     f"  cited: {'; '.join(bug.citations)}")
    return "\n".join(lines)


RunCase = Callable[[SelftestCase, MatrixDir], CaseResult]


def run_case(case: SelftestCase, scenario: RunConfig, matrix: MatrixDir, *,
             duration: float | None = None) -> CaseResult:
    """One case of `scenario` (validated) on a fresh embedded cluster, through the ordinary orchestrator."""
    from orchestrator.outcome import RunOptions
    from orchestrator.run import Run

    config = scenario.for_path(case.txn_path)
    if case.bug is not None:
        cluster = dataclasses.replace(config.cluster, settings={**config.cluster.settings, case.bug: True})
        config = dataclasses.replace(config, cluster=cluster)
    if duration is not None:
        config = config.with_duration(duration)
    started = time.monotonic()
    # The verdict is all a case needs: the checker runs, perf.json and the report do not
    # (on a loaded 2-core machine they cost a minute a run; `txnbench report RUN_DIR` builds them).
    options = RunOptions(results_root=matrix.path.parent, matrix=matrix, folder=case.folder, command="selftest",
                         allow_planted_bugs=case.bug is not None, analyze=False)
    outcome = Run(config, options).execute()
    verdict, results, error = "none", None, outcome.error
    if outcome.status.value == "complete":
        verdict, results, error = _check(outcome.run_dir.path)
    anomalies = {str(k): int((v or {}).get("count") or 0) for k, v in ((results or {}).get("anomalies") or {}).items()}
    judgement = judge_run(outcome.run_dir.path, results) if results is not None else None
    unexpected = tuple(judgement.unexpected) if judgement is not None else tuple(anomalies)
    outcome.run_dir.update_manifest(verdict=verdict, judgement=judgement.to_json() if judgement else None)
    unrun, planned = _windows(outcome.run_dir.path)
    result = judge_case(case, status=outcome.status.value if error is None else "failed", verdict=verdict,
                        unexpected=unexpected, windows_unrun=unrun)
    return CaseResult(case, result, str(outcome.run_dir.path.relative_to(matrix.path)), verdict,
                      anomalies, unexpected, time.monotonic() - started, error,
                      windows_unrun=unrun, windows_planned=planned)


def _windows(run_dir: Path) -> tuple[int, int]:
    """(never ran, planned) fault windows of a run, from its manifest; (0, 0) when it has none."""
    try:
        progress = json.loads((run_dir / "manifest.json").read_text()).get("faults_progress") or {}
    except (OSError, ValueError):
        return 0, 0
    return len(progress.get("unreached") or []), int(progress.get("windows") or 0)


def _check(run_dir: Path) -> tuple[str, dict[str, Any] | None, str | None]:
    """The checker's verdict on one run: (valid | invalid | unknown, results.json, error)."""
    from analysis.check import check_run

    try:
        results = check_run(run_dir)
    except Exception as err:   # a check that cannot run is this case's failure, not the self-test's
        return "none", None, f"check failed: {type(err).__name__}: {err}"
    valid = results.get("valid")
    return ("valid" if valid is True else "invalid" if valid is False else "unknown"), results, None


def execute(cases: Sequence[SelftestCase], matrix: MatrixDir, runner: RunCase,
            say: Callable[[str], None], known_baselines: Mapping[BaselineKey, frozenset[str]] | None = None,
            ) -> dict[str, Any]:
    """Run `cases` in order, rewriting selftest.json/.md after each; stops at Ctrl-C.

    Each bug case is judged against the baseline of its scenario and path: one run before it
    in this self-test (baselines come first), else one of `known_baselines`."""
    baseline_classes: dict[BaselineKey, frozenset[str]] = dict(known_baselines or {})
    results: list[CaseResult] = []
    started = time.monotonic()
    interrupted = False
    summary = summarize(matrix.matrix_id, results, len(cases))
    for index, case in enumerate(cases, start=1):
        label = case.bug or "baseline"
        say(f"== selftest {index}/{len(cases)}: {label} on {case.txn_path.value} ({case.scenario}) ==")
        try:
            result = runner(case, matrix)
        except KeyboardInterrupt:
            interrupted = True
            break
        key = (case.scenario, case.txn_path)
        if case.kind is CaseKind.BASELINE and result.outcome in (CaseOutcome.CLEAN, CaseOutcome.FALSE_ALARM):
            baseline_classes[key] = frozenset(result.unexpected)
        result = against_baseline(result, baseline_classes.get(key))
        results.append(result)
        say(f"selftest {index}/{len(cases)}: {label} on {case.txn_path.value}: {result.outcome.value} "
            f"({_anomaly_text(result.to_json())}{_unrun_text(result.to_json())}, {result.seconds:.0f} s)")
        summary = summarize(matrix.matrix_id, results, len(cases), seconds=time.monotonic() - started)
        _write(matrix.path, summary)
        if result.outcome is CaseOutcome.FAILED and result.error and "interrupted" in result.error:
            interrupted = True
            break
    summary = summarize(matrix.matrix_id, results, len(cases), interrupted=interrupted,
                        seconds=time.monotonic() - started)
    _write(matrix.path, summary)
    return summary


def _write(folder: Path, summary: Mapping[str, Any]) -> None:
    write_json_atomic(folder / "selftest.json", summary)
    write_text_atomic(folder / "selftest.md", render_markdown(summary))


def main_selftest(args: argparse.Namespace) -> int:
    import sys

    if args.list:
        print(list_catalogue())
        return 0
    bugs = select_bugs(args.bugs)
    if args.paths:
        wanted = set(args.paths)
        bugs = [b for b in bugs if b.paths[0] in wanted]
    only = getattr(args, "scenario", None)
    with_chaos = getattr(args, "with_chaos", False)
    cases = plan_groups(bugs, baselines=not args.no_baseline, tuned=only is None,
                        scenario=only if only is not None else (CHAOS_SCENARIO if with_chaos else None))
    if not cases:
        raise ConfigError("txnbench selftest", "--paths", "no catalogued bug lives on those paths",
                          "`txnbench selftest --list` shows each bug's path")
    from orchestrator import scenario

    # each scenario validated once, up front: a bad one fails now, not 20 minutes in
    scenarios = {name: scenario.load(name) for name in sorted({c.scenario for c in cases})}
    matrix = new_matrix("selftest", "catalogue", root=args.results,
                        info={"cases": [{"kind": c.kind.value, "scenario": c.scenario, "path": c.txn_path.value,
                                         "bug": c.bug, "group": c.group} for c in cases],
                              "duration": args.duration})

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    say(f"selftest {matrix.matrix_id}: {len([c for c in cases if c.bug])} planted bugs, "
        f"{len([c for c in cases if not c.bug])} baselines -> {matrix.path}")
    known = baselines_from(args.baseline_from) if getattr(args, "baseline_from", None) else None
    summary = execute(cases, matrix, lambda case, m: run_case(case, scenarios[case.scenario], m,
                                                              duration=args.duration), say, known)
    print(render_table(summary))
    print(matrix.path)
    return exit_code(summary)
