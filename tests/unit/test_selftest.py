"""`txnbench selftest`'s plan, judgement, summary, reports and exit status (no clusters)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from embedded import planted_bugs
from harness.errors import ConfigError
from harness.results import MatrixDir, new_matrix
from harness.txn_paths import TxnPath
from orchestrator.cli import build_parser, main
from orchestrator.planted import BY_ID, CATALOGUE
from orchestrator.selftest import (
    CaseKind,
    CaseOutcome,
    CaseResult,
    SelftestCase,
    _windows,
    against_baseline,
    baselines_from,
    execute,
    exit_code,
    judge_case,
    plan,
    render_markdown,
    render_table,
    select_bugs,
    summarize,
)

V4_BUG = BY_ID[planted_bugs.V4_REPLAY_KEEPS_LAST_PARTITIONS]
V4B_BUG = BY_ID[planted_bugs.V4_BATCHED_REPLAY_FIRST_RECORD]
V5_BUG = BY_ID[planted_bugs.V5_RECOVERY_FORGETS_ABORTED]
ALSO_V4 = BY_ID[planted_bugs.V4_PENDING_ACK_FORGETS_EARLY]   # the same scenario as V4_BUG


def test_plan_runs_one_baseline_per_scenario_and_path_then_each_bug_on_its_path() -> None:
    cases = plan([V4_BUG, ALSO_V4, V4B_BUG, V5_BUG])
    baselines = [c for c in cases if c.kind is CaseKind.BASELINE]
    bugs = [c for c in cases if c.kind is CaseKind.BUG]
    assert cases[:len(baselines)] == baselines, "baselines first"
    assert {(c.scenario, c.txn_path) for c in baselines} == {
        ("selftest-v4-recovery", TxnPath.V4), ("selftest-v4-recovery", TxnPath.V4_BATCHED),
        ("selftest-v5-recovery", TxnPath.V5)}
    assert [(c.bug, c.txn_path) for c in bugs] == [(V4_BUG.id, TxnPath.V4), (ALSO_V4.id, TxnPath.V4),
                                              (V4B_BUG.id, TxnPath.V4_BATCHED), (V5_BUG.id, TxnPath.V5)]
    assert all(c.bug is None for c in baselines)
    assert plan([V4_BUG], baselines=False) == [SelftestCase(CaseKind.BUG, V4_BUG.scenario, TxnPath.V4, V4_BUG.id)]
    assert len({c.folder for c in cases}) == len(cases)


def test_whole_catalogue_plan_covers_every_bug_once() -> None:
    cases = plan(list(CATALOGUE))
    assert sorted(c.bug for c in cases if c.bug) == sorted(BY_ID)


BUG = SelftestCase(CaseKind.BUG, "s", TxnPath.V4, V4_BUG.id)
BASE = SelftestCase(CaseKind.BASELINE, "s", TxnPath.V4)


@pytest.mark.parametrize("case, status, verdict, unexpected, outcome", [
    (BUG, "complete", "invalid", ["partial-txn"], CaseOutcome.CAUGHT),
    (BUG, "complete", "invalid", [], CaseOutcome.MISSED),          # only anomalies the scenario expects
    (BUG, "complete", "valid", [], CaseOutcome.MISSED),
    (BUG, "complete", "unknown", [], CaseOutcome.UNKNOWN),
    (BUG, "failed", "none", [], CaseOutcome.FAILED),
    (BASE, "complete", "valid", [], CaseOutcome.CLEAN),
    (BASE, "complete", "invalid", [], CaseOutcome.CLEAN),
    (BASE, "complete", "invalid", ["lost-ack"], CaseOutcome.FALSE_ALARM),
    (BASE, "complete", "unknown", [], CaseOutcome.UNKNOWN),
    (BASE, "interrupted", "none", [], CaseOutcome.FAILED),
])
def test_judge_case(case: SelftestCase, status: str, verdict: str, unexpected: list[str],
                    outcome: CaseOutcome) -> None:
    assert judge_case(case, status=status, verdict=verdict, unexpected=unexpected) is outcome


def _result(case: SelftestCase, outcome: CaseOutcome, anomalies: dict[str, int] | None = None) -> CaseResult:
    anomalies = anomalies or {}
    return CaseResult(case, outcome, f"runs/{case.folder}", "invalid" if anomalies else "valid", anomalies,
                      tuple(anomalies), 61.0)


def test_summary_passes_only_when_every_bug_is_caught_and_every_baseline_clean() -> None:
    good = [_result(BASE, CaseOutcome.CLEAN), _result(BUG, CaseOutcome.CAUGHT, {"partial-txn": 3})]
    summary = summarize("st", good, planned=2, seconds=122)
    assert summary["passed"] and summary["complete"] and exit_code(summary) == 0
    assert summary["bugs"] == {"total": 1, "caught": 1, "not_caught": [], "unexercised": []}
    assert summary["baselines"] == {"total": 1, "clean": 1, "not_clean": []}

    missed = summarize("st", [good[0], _result(BUG, CaseOutcome.MISSED)], planned=2)
    assert not missed["passed"] and missed["bugs"]["not_caught"] == [V4_BUG.id] and exit_code(missed) == 1

    alarm = summarize("st", [_result(BASE, CaseOutcome.FALSE_ALARM, {"lost-ack": 1}), good[1]], planned=2)
    assert not alarm["passed"] and alarm["baselines"]["not_clean"] == ["s on v4"] and exit_code(alarm) == 1

    failed = summarize("st", [good[0], _result(BUG, CaseOutcome.FAILED)], planned=2)
    assert exit_code(failed) == 2

    partial = summarize("st", good[:1], planned=2)
    assert not partial["passed"] and not partial["complete"]
    assert exit_code(summarize("st", good, planned=2, interrupted=True)) == 130
    assert not summarize("st", [], planned=0)["passed"], "an empty self-test proves nothing"


def test_reports_name_each_case_its_outcome_and_citations() -> None:
    summary = summarize("st", [_result(BASE, CaseOutcome.CLEAN),
                               _result(BUG, CaseOutcome.CAUGHT, {"partial-txn": 3, "stalled-commit": 1})],
                        planned=2, seconds=122)
    md = render_markdown(summary)
    assert md.startswith("# txnbench self-test st")
    assert "**PASSED**: 1 of 1 planted bugs caught; 1 of 1 baselines clean; 122 s" in md
    assert f"| `{V4_BUG.id}` | v4 | s | **caught** | invalid | partial-txn 3, stalled-commit 1 |" in md
    assert "| baseline (no bug) | v4 | s | **clean** | valid | none |" in md
    assert V4_BUG.citations[0] in md
    table = render_table(summary)
    assert "caught 1/1 planted bugs; 1/1 baselines clean" in table and V4_BUG.id in table


def test_execute_writes_the_summary_after_every_case(tmp_path: Path) -> None:
    matrix: MatrixDir = new_matrix("selftest", "catalogue", root=tmp_path)
    cases = plan([V4_BUG])
    seen: list[str] = []

    def runner(case: SelftestCase, m: MatrixDir) -> CaseResult:
        if seen:   # the first case's summary is on disk before the second runs
            on_disk = json.loads((m.path / "selftest.json").read_text())
            assert [c["outcome"] for c in on_disk["cases"]] == ["clean"] and not on_disk["complete"]
        seen.append(case.folder)
        outcome = CaseOutcome.CLEAN if case.bug is None else CaseOutcome.CAUGHT
        return _result(case, outcome, None if case.bug is None else {"partial-txn": 2})

    summary = execute(cases, matrix, runner, lambda _: None)
    assert seen == [c.folder for c in cases]
    assert summary["passed"] and json.loads((matrix.path / "selftest.json").read_text())["passed"]
    assert "PASSED" in (matrix.path / "selftest.md").read_text()


def test_execute_stops_at_ctrl_c_and_keeps_what_it_learned(tmp_path: Path) -> None:
    matrix = new_matrix("selftest", "catalogue", root=tmp_path)
    cases = plan([V4_BUG])

    def runner(case: SelftestCase, m: MatrixDir) -> CaseResult:
        if case.bug is not None:
            raise KeyboardInterrupt
        return _result(case, CaseOutcome.CLEAN)

    summary = execute(cases, matrix, runner, lambda _: None)
    assert summary["interrupted"] and exit_code(summary) == 130 and len(summary["cases"]) == 1


def test_a_catch_counts_only_on_classes_its_baseline_did_not_show(tmp_path: Path) -> None:
    # the fifth round's LedgerAckBeforeJournal: stalled-commit alone, which the baseline showed too
    matrix = new_matrix("selftest", "catalogue", root=tmp_path)
    cases = plan([V4_BUG, ALSO_V4])

    def runner(case: SelftestCase, m: MatrixDir) -> CaseResult:
        if case.bug is None:
            return _result(case, CaseOutcome.FALSE_ALARM, {"stalled-commit": 3})
        if case.bug == V4_BUG.id:
            return _result(case, CaseOutcome.CAUGHT, {"stalled-commit": 7})
        return _result(case, CaseOutcome.CAUGHT, {"stalled-commit": 2, "lost-ack": 1})

    summary = execute(cases, matrix, runner, lambda _: None)
    by_bug = {c["bug"]: c for c in summary["cases"]}
    assert by_bug[V4_BUG.id]["outcome"] == "missed"
    assert by_bug[V4_BUG.id]["also_in_baseline"] == ["stalled-commit"]
    assert by_bug[ALSO_V4.id]["outcome"] == "caught", "lost-ack is beyond the baseline"
    assert "stalled-commit 2 (also in the baseline)" in render_markdown(summary)
    # without a baseline the result stands; a baseline of another path does not speak for it
    alone = _result(SelftestCase(CaseKind.BUG, "s", TxnPath.V4, V4_BUG.id), CaseOutcome.CAUGHT, {"lost-ack": 1})
    assert against_baseline(alone, None) is alone
    assert against_baseline(alone, frozenset({"lost-ack"})).outcome is CaseOutcome.MISSED


def test_baselines_come_from_an_earlier_chaos_matrix_or_selftest(tmp_path: Path) -> None:
    chaos = tmp_path / "chaos"
    chaos.mkdir()
    (chaos / "matrix.json").write_text(json.dumps({"scenario": "chaos"}))
    (chaos / "matrix-status.json").write_text(json.dumps({"runs": [
        {"path": "v4", "status": "complete", "judgement": {"unexpected": ["stalled-commit"]}},
        {"path": "v5", "status": "complete", "judgement": {"unexpected": []}},
        {"path": "v4-batched", "status": "failed", "judgement": None}]}))
    assert baselines_from(chaos) == {("chaos", TxnPath.V4): frozenset({"stalled-commit"}),
                                     ("chaos", TxnPath.V5): frozenset()}
    st = tmp_path / "st"
    st.mkdir()
    (st / "selftest.json").write_text(json.dumps({"cases": [
        {"kind": "baseline", "scenario": "s", "path": "v4", "unexpected": ["lost-ack"]},
        {"kind": "bug", "scenario": "s", "path": "v4", "unexpected": ["lost-write"]}]}))
    assert baselines_from(st) == {("s", TxnPath.V4): frozenset({"lost-ack"})}
    with pytest.raises(ConfigError, match="neither"):
        baselines_from(tmp_path)
    (st / "selftest.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read the baselines"):
        baselines_from(st)


def test_bug_selection_and_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert select_bugs(None) == list(CATALOGUE)
    assert select_bugs([V5_BUG.id]) == [V5_BUG]
    with pytest.raises(ConfigError, match="not a planted bug"):
        select_bugs(["txnbenchBugNope"])
    args = build_parser().parse_args(["selftest", "--bugs", V4_BUG.id, "--no-baseline", "--duration", "20"])
    assert args.bugs == [V4_BUG.id] and args.no_baseline and args.duration == 20.0
    assert main(["selftest", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(bug.id in out for bug in CATALOGUE)


def test_the_chaos_group_runs_every_bug_under_chaos_and_is_reported_beside_the_tuned_one() -> None:
    from orchestrator.selftest import CHAOS_GOAL, CHAOS_SCENARIO, TUNED, plan_groups

    cases = plan_groups([V4_BUG, V5_BUG], scenario=CHAOS_SCENARIO)
    tuned = [c for c in cases if c.group == TUNED]
    chaos = [c for c in cases if c.group == CHAOS_SCENARIO]
    assert len(tuned) == 4 and {c.scenario for c in chaos} == {CHAOS_SCENARIO}
    assert [(c.kind, c.txn_path, c.bug) for c in chaos] == [
        (CaseKind.BASELINE, TxnPath.V4, None), (CaseKind.BASELINE, TxnPath.V5, None),
        (CaseKind.BUG, TxnPath.V4, V4_BUG.id), (CaseKind.BUG, TxnPath.V5, V5_BUG.id)]
    assert len({c.folder for c in cases}) == len(cases)
    assert plan_groups([V4_BUG], tuned=False, scenario="chaos") == plan([V4_BUG], scenario="chaos")

    chaos_bug = SelftestCase(CaseKind.BUG, "chaos", TxnPath.V4, V4_BUG.id, "chaos")
    chaos_base = SelftestCase(CaseKind.BASELINE, "chaos", TxnPath.V4, group="chaos")
    results = [_result(BASE, CaseOutcome.CLEAN), _result(BUG, CaseOutcome.CAUGHT, {"partial-txn": 3}),
               _result(chaos_base, CaseOutcome.CLEAN), _result(chaos_bug, CaseOutcome.MISSED)]
    summary = summarize("st", results, planned=4)
    assert summary["passed"], "the chaos figure is a measurement: only the tuned group decides"
    assert summary["bugs"]["caught"] == 1 and summary["deciding_group"] == TUNED
    assert summary["groups"]["chaos"]["bugs"] == {"total": 1, "caught": 0, "not_caught": [V4_BUG.id],
                                                  "unexercised": []}
    assert summary["groups"]["chaos"]["goal"] == CHAOS_GOAL
    line = (f"**chaos.yaml alone** (no scenario tuned to a bug): 0 of 1 planted bugs caught (goal: {CHAOS_GOAL}); "
            f"1 of 1 baselines clean; not caught: {V4_BUG.id}.")
    assert line in render_markdown(summary)
    assert line.replace("**", "") in render_table(summary)
    alone = summarize("st", results[2:], planned=2)
    assert alone["deciding_group"] == "chaos" and not alone["passed"]


def test_a_miss_while_planned_fault_windows_never_ran_is_unexercised_not_missed(tmp_path: Path) -> None:
    """A loaded machine ran chaos.yaml's timeline 296 s late: 23 of 70 windows (the end block that
    catches the sealed-segment bug) never ran, and the run read valid (2026-11-28,
    results/20261128-004708-selftest-catalogue). That is no evidence the scenario misses the bug."""
    assert judge_case(BUG, status="complete", verdict="valid", unexpected=[], windows_unrun=23) \
        is CaseOutcome.UNEXERCISED
    assert judge_case(BUG, status="complete", verdict="invalid", unexpected=["lost-write"], windows_unrun=23) \
        is CaseOutcome.CAUGHT   # a catch is a catch, however much of the plan ran
    assert judge_case(BASE, status="complete", verdict="valid", unexpected=[], windows_unrun=23) is CaseOutcome.CLEAN
    shared = CaseResult(BUG, CaseOutcome.CAUGHT, "r", "invalid", {"stalled-commit": 1}, ("stalled-commit",),
                        windows_unrun=5, windows_planned=70)
    assert against_baseline(shared, frozenset({"stalled-commit"})).outcome is CaseOutcome.UNEXERCISED
    missed = dataclasses.replace(shared, outcome=CaseOutcome.UNEXERCISED, anomalies={}, unexpected=())
    summary = summarize("st", [missed], planned=1)
    assert summary["bugs"]["not_caught"] == [BUG.bug] and summary["bugs"]["unexercised"] == [BUG.bug]
    assert not summary["passed"]
    md = render_markdown(summary)
    assert "unexercised (planned fault windows never ran" in md and "5 of 70 planned fault windows never ran" in md
    (tmp_path / "manifest.json").write_text(json.dumps({"faults_progress": {"windows": 70, "unreached": [
        {"at_s": 124}, {"at_s": 130}]}}))
    assert _windows(tmp_path) == (2, 70) and _windows(tmp_path / "missing") == (0, 0)


def test_a_scenario_named_by_its_file_gives_each_case_a_folder_of_its_own(tmp_path: Path) -> None:
    """`txnbench selftest --scenario dir/chaos-b.yaml` crashed creating
    `runs/<bug>-dir/chaos-b.yaml-v4`: the slashes made it folders that did not exist."""
    scenario = str(tmp_path / "chaos-b.yaml")
    case = SelftestCase(CaseKind.BUG, scenario, TxnPath.V4, V4_BUG.id, scenario)
    assert case.folder == f"{V4_BUG.id}-chaos-b-v4"
    assert SelftestCase(CaseKind.BASELINE, "chaos", TxnPath.V5).folder == "baseline-chaos-v5"
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / case.folder).mkdir()   # one folder, not a path
