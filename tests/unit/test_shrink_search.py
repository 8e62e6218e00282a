"""`txnbench shrink`, searching side, with a fake runner instead of real runs: delta debugging,
window shortening, the cut after the first anomaly, tries for races, the budget, and that an
interrupted shrink keeps the best schedule it found on disk."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import yaml

from harness.config import RunConfig
from orchestrator import scenario as scenario_module
from orchestrator.shrink.driver import Attempt, Shrinker, ShrinkOptions
from orchestrator.shrink.record import read_failing_run, run_topics
from orchestrator.shrink.report import write_reports
from orchestrator.shrink.schedule import ShrinkFault, shrink_faults
from orchestrator.shrink.search import cut_after, ddmin, shorten
from tests.unit.test_shrink_record import write_run

# ---- ddmin ------------------------------------------------------------------------------------------


def counting(predicate: Callable[[set[int]], bool]) -> tuple[Callable[[tuple[int, ...]], bool], list[tuple[int, ...]]]:
    calls: list[tuple[int, ...]] = []

    def fails(candidate: tuple[int, ...]) -> bool:
        calls.append(candidate)
        return predicate(set(candidate))
    return fails, calls


@pytest.mark.parametrize(("size", "culprits"), [(8, {5}), (8, {2, 6}), (9, {0, 8}), (16, {3, 4, 11}), (2, {1})])
def test_ddmin_finds_the_faults_that_matter(size: int, culprits: set[int]) -> None:
    fails, calls = counting(lambda kept: culprits <= kept)
    assert set(ddmin(tuple(range(size)), fails)) == culprits
    assert () not in calls                       # the empty schedule is never tried
    assert len(set(calls)) <= 3 * size           # distinct candidates (each runs once): far from 2^n


def test_ddmin_keeps_a_single_fault_and_keeps_everything_when_nothing_smaller_fails() -> None:
    fails, calls = counting(lambda kept: True)
    assert ddmin((7,), fails) == (7,) and calls == []
    fails, calls = counting(lambda kept: len(kept) == 4)
    assert ddmin((1, 2, 3, 4), fails) == (1, 2, 3, 4)
    assert calls and all(len(c) < 4 for c in calls)


# ---- windows ----------------------------------------------------------------------------------------


def fault(fault_id: str, for_s: float, *, start_s: float = 0.0, healable: bool = True,
          kind: str = "kill", target: str = "broker:0") -> ShrinkFault:
    return ShrinkFault(fault_id, kind, target, {}, start_s, for_s, healable, window=int(fault_id[1:]),
                       due_s=start_s, trigger=None)


def test_shorten_halves_each_window_while_it_still_fails() -> None:
    faults = (fault("f1", 8.0), fault("f2", 3.0), fault("f3", 0.0, kind="unload", healable=False))
    tried: list[dict[str, float]] = []

    def fails(candidate: tuple[ShrinkFault, ...]) -> bool:
        held = {f.fault_id: f.for_s for f in candidate}
        tried.append(held)
        return held["f1"] >= 2.0           # f1 must hold 2 s; f2 does not matter
    result = {f.fault_id: f.for_s for f in shorten(faults, fails)}
    assert result == {"f1": 2.0, "f2": 0.8, "f3": 0.0}
    assert tried[0] == {"f1": 4.0, "f2": 3.0, "f3": 0.0}     # the longest window first
    assert all(h["f3"] == 0.0 for h in tried)               # an instant fault has no window


def test_cut_after_keeps_what_came_before_the_limit() -> None:
    faults = (fault("f1", 1, start_s=2), fault("f2", 1, start_s=20), fault("f3", 1, start_s=35))
    assert [f.fault_id for f in cut_after(faults, 20.0)] == ["f1", "f2"]


# ---- the shrink with a fake runner ------------------------------------------------------------------


def present(config: RunConfig) -> dict[tuple[str, str], float]:
    """(kind, target) -> held seconds of every fault in a candidate's config."""
    out: dict[tuple[str, str], float] = {}
    for entry in config.faults.schedule:
        out[(entry.kind, entry.target)] = entry.for_s
        for extra in entry.overlap:
            out[(extra.kind, extra.target)] = extra.for_s
    return out


class FakeRunner:
    """Fails when `culprit` (kind, target) is in the schedule held at least `hold_s`; `flaky` makes the
    first try of each candidate pass (a race); `interrupt_at` raises Ctrl-C at that run."""

    def __init__(self, culprit: tuple[str, str], hold_s: float = 0.0, *, flaky: bool = False,
                 interrupt_at: int | None = None, status_interrupted_at: int | None = None) -> None:
        self.culprit, self.hold_s, self.flaky = culprit, hold_s, flaky
        self.interrupt_at, self.status_interrupted_at = interrupt_at, status_interrupted_at
        self.calls: list[tuple[str, dict[tuple[str, str], float], float]] = []

    def __call__(self, config: RunConfig, folder: str) -> Attempt:
        self.calls.append((folder, present(config), config.phases.faults_s))
        number = len(self.calls)
        if number == self.interrupt_at:
            raise KeyboardInterrupt
        if number == self.status_interrupted_at:
            return Attempt(f"runs/{folder}", "interrupted", "none", (), False, 1.0)
        first_try = sum(1 for c in self.calls if c[0] == folder) == 1
        held = present(config).get(self.culprit)
        fails = held is not None and held >= self.hold_s and not (self.flaky and first_try)
        return Attempt(f"runs/{folder}", "complete", "invalid" if fails else "valid",
                       ("lost-write", "partial-txn") if fails else (), fails, 10.0)


def shrinker(tmp_path: Path, runner: FakeRunner, **options: float | int | None) -> Shrinker:
    run = read_failing_run(write_run(tmp_path / "run"))
    out = tmp_path / "shrink"
    out.mkdir()
    return Shrinker(run, shrink_faults(run, run_topics(run)), out, runner, ShrinkOptions(**options),  # type: ignore[arg-type]
                    say=lambda _: None, write=write_reports)


def kept(s: Shrinker) -> list[str]:
    return [f.fault_id for f in s.best]


def test_the_shrink_cuts_then_drops_then_shortens(tmp_path: Path) -> None:
    # f2 (the coordinator kill, pinned to broker:0) causes it when held 2 s or more
    runner = FakeRunner(("kill", "broker:0"), hold_s=2.0)
    s = shrinker(tmp_path, runner, margin_s=10.0).shrink()
    assert s.stopped.startswith("done") and kept(s) == ["f2"]
    assert [f.for_s for f in s.best] == [2.0]
    steps = [c.step for c in s.candidates]
    assert steps[0] == "cut" and s.candidates[0].faults == tuple(f for f in s.original if f.start_s <= 22.5)
    assert "ddmin" in steps and steps[-1] == "shorten"
    # no candidate ran twice, and each run's faults phase ended the margin after its last window
    folders = [c[0] for c in runner.calls]
    assert len(folders) == len(set(folders)) == s.runs
    assert all(phase <= 60.0 for _, _, phase in runner.calls)
    # what is on disk: the scenario `txnbench run` takes, shrink.json, shrink.md
    config = scenario_module.load(str(s.scenario_path))
    assert present(config) == {("kill", "broker:0"): 2.0}
    data = json.loads((s.out_dir / "shrink.json").read_text())
    assert s.best_from is not None and data["best"]["shown_by"] == s.best_from.name
    assert [c["candidate"] for c in data["candidates"]] == [c.name for c in s.candidates]
    assert data["candidates"][0]["attempts"][0]["run"] == "runs/c01"
    assert data["reproduce"] == f"txnbench run {s.scenario_path}"
    md = (s.out_dir / "shrink.md").read_text()
    assert "**1 of 5 faults**" in md and "| f2 | kill | `broker:0` | `coordinator` |" in md
    assert all((s.out_dir / "candidates" / f"{c.name}.yaml").is_file() for c in s.candidates)


def test_a_cut_that_stops_failing_is_not_kept(tmp_path: Path) -> None:
    # the culprit (f7, at 40 s) came after the first anomaly + margin: the cut passes and ddmin starts from all
    runner = FakeRunner(("partition", "broker-broker:0-1"))
    s = shrinker(tmp_path, runner, margin_s=10.0).shrink()
    assert s.candidates[0].step == "cut" and s.candidates[0].fails is False
    assert kept(s) == ["f7"]


def test_a_race_gets_its_tries(tmp_path: Path) -> None:
    runner = FakeRunner(("kill", "broker:0"), flaky=True)
    one = shrinker(tmp_path / "one", runner, tries=1, margin_s=10.0).shrink()
    assert len(one.best) == 5 and one.best_from is None     # no candidate's single run failed
    runner = FakeRunner(("kill", "broker:0"), flaky=True)
    two = shrinker(tmp_path / "two", runner, tries=2, margin_s=10.0).shrink()
    assert kept(two) == ["f2"]
    assert two.best_from is not None and [a.fails for a in two.best_from.attempts] == [False, True]


def test_the_budget_stops_it_with_the_best_so_far(tmp_path: Path) -> None:
    runner = FakeRunner(("kill", "broker:0"), hold_s=2.0)
    s = shrinker(tmp_path, runner, max_runs=2, margin_s=10.0).shrink()
    assert s.stopped == "max-runs reached (2 runs)" and s.runs == 2 and len(runner.calls) == 2
    assert kept(s) == ids(s.candidates[1].faults) == ["f1", "f2"]         # the last that failed
    assert present(scenario_module.load(str(s.scenario_path))) == present(
        scenario_module.load(str(s.candidates[1].scenario)))
    now = [0.0]
    slow = FakeRunner(("kill", "broker:0"))

    def hundred_seconds(config: RunConfig, folder: str) -> Attempt:
        now[0] += 100.0
        return slow(config, folder)
    timed = Shrinker(s.run, s.original, tmp_path / "timed", hundred_seconds, ShrinkOptions(budget_s=150),
                     say=lambda _: None, clock=lambda: now[0]).shrink()
    assert timed.stopped == "budget spent (200 of 150 s)" and timed.runs == 2
    assert timed.scenario_path.is_file()


@pytest.mark.parametrize("how", ["ctrl-c", "run interrupted"])
def test_an_interrupted_shrink_keeps_what_it_found(tmp_path: Path, how: str) -> None:
    runner = FakeRunner(("kill", "broker:0"), interrupt_at=3 if how == "ctrl-c" else None,
                        status_interrupted_at=3 if how == "run interrupted" else None)
    s = shrinker(tmp_path, runner, margin_s=10.0).shrink()
    assert s.interrupted and s.runs == (2 if how == "ctrl-c" else 3)
    best = ids(s.candidates[1].faults)
    assert kept(s) == best == ["f1", "f2"] and s.candidates[2].fails is None
    data = json.loads((s.out_dir / "shrink.json").read_text())
    assert data["stopped"] == "interrupted (Ctrl-C)"
    assert data["best"]["faults"] and [f["fault"] for f in data["best"]["faults"]] == best
    assert "Stopped: interrupted (Ctrl-C)" in (s.out_dir / "shrink.md").read_text()
    text = s.scenario_path.read_text()
    assert "Reproduce: txnbench run" in text and yaml.safe_load(text)["faults"]["schedule"]


def test_a_candidate_whose_scenario_is_refused_is_not_run(tmp_path: Path) -> None:
    runner = FakeRunner(("kill", "broker:0"))
    s = shrinker(tmp_path, runner, margin_s=10.0)
    bad = (ShrinkFault("f9", "kill", "broker:7", {}, 1.0, 1.0, True, 0, 1.0, None),)   # no broker 7
    assert s._fails(bad, "ddmin") is False and runner.calls == []
    assert "no broker 7" in s.candidates[0].invalid


def ids(faults: Iterable[ShrinkFault]) -> list[str]:
    return [f.fault_id for f in faults]
