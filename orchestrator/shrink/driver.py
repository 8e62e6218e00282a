"""The shrink's loop: each candidate schedule run (once, or `tries` times), judged, the best kept.

Why it is bounded and writes after every candidate: each candidate is a whole run (minutes on the
embedded cluster, longer on real Pulsar), so a shrink is stopped by `max_runs`, by `budget_s` (a
run under way finishes: the bound is checked before each run starts) or by Ctrl-C, and whatever
stopped it, the best schedule found so far and every candidate's record are already on disk:
shrink.json, shrink.md and the shrunk scenario are rewritten after each candidate and once more at
the end, the last time with a second Ctrl-C deferred.

A candidate *fails* (the shrink keeps it) when one of its runs shows every anomaly class the shrink
keeps as unexpected (`Attempt.fails`, judged by analysis.verdicts like any run); a race that shows
only sometimes gets `tries` runs, and one failing run is enough. A candidate whose scenario does
not validate (a window shortened below what its kind needs, e.g. a client-isolate must outlast the
transaction timeout) does not run and does not fail. Candidates already tried are not run again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import RunConfig
from harness.errors import ConfigError
from harness.interrupts import sigint_deferred
from harness.results import write_text_atomic
from orchestrator import scenario as scenario_module
from orchestrator.shrink.record import FailingRun
from orchestrator.shrink.schedule import (
    ShrinkFault,
    faults_phase_s,
    scenario_data,
    scenario_text,
    total_for_s,
)
from orchestrator.shrink.search import cut_after, ddmin, shorten

SCENARIO_FILE = "shrunk.yaml"


@dataclass(frozen=True)
class ShrinkOptions:
    max_runs: int = 30                 # runs in all, tries included
    budget_s: float | None = None      # seconds; no run starts after it is spent
    tries: int = 1                     # runs per candidate; one failing run keeps it
    margin_s: float = 10.0             # after the first anomaly (the cut), after the last fault (the phase)


@dataclass(frozen=True)
class Attempt:
    """One run of a candidate, as judged."""

    folder: str | None
    status: str                        # complete, failed, interrupted
    verdict: str                       # valid, invalid, unknown, none
    unexpected: tuple[str, ...]
    fails: bool                        # it showed every class the shrink keeps, unexpected
    seconds: float
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"run": self.folder, "status": self.status, "verdict": self.verdict,
                "unexpected": list(self.unexpected), "fails": self.fails, "seconds": round(self.seconds, 1),
                "note": self.note}


#: Runs one candidate: its validated config and the name of its run folder.
Runner = Callable[[RunConfig, str], Attempt]


@dataclass
class Candidate:
    number: int
    step: str                          # cut, ddmin, shorten
    faults: tuple[ShrinkFault, ...]
    faults_s: float
    scenario: Path
    attempts: list[Attempt] = field(default_factory=list)
    fails: bool | None = None          # None: stopped before it was judged
    invalid: str = ""                  # why its scenario did not validate (it was not run)

    @property
    def name(self) -> str:
        return f"c{self.number:02d}"

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.name, "step": self.step, "faults": [f.fault_id for f in self.faults],
                "for_s": {f.fault_id: f.for_s for f in self.faults}, "faults_s": self.faults_s,
                "scenario": str(self.scenario), "fails": self.fails, "invalid": self.invalid,
                "attempts": [a.to_json() for a in self.attempts]}


class _Stop(Exception):
    """The budget is spent or the user interrupted: stop searching, keep what was found."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Shrinker:
    """Shrinks `faults` (the run's, pinned) with real runs; `best` is the smallest that failed."""

    def __init__(self, run: FailingRun, faults: tuple[ShrinkFault, ...], out_dir: Path, runner: Runner,
                 options: ShrinkOptions, *, say: Callable[[str], None] = print,
                 write: Callable[[Shrinker], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.run = run
        self.original = faults
        self.best = faults
        self.best_from: Candidate | None = None   # the candidate whose run showed it; None: the run's own
        self.out_dir = out_dir
        self.runner = runner
        self.options = options
        self.say = say
        self._write = write
        self.clock = clock
        self.started = clock()
        self.runs = 0
        self.candidates: list[Candidate] = []
        self.notes: list[str] = []
        self.stopped = ""
        self._tried: dict[tuple[tuple[str, float], ...], bool] = {}

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.started

    @property
    def interrupted(self) -> bool:
        return self.stopped.startswith("interrupted")

    @property
    def scenario_path(self) -> Path:
        return self.out_dir / SCENARIO_FILE

    def shrink(self) -> Shrinker:
        """Search until done, out of budget or interrupted; the outputs are written whatever happens."""
        try:
            self._search()
            self.stopped = "done: no smaller or shorter candidate fails"
        except _Stop as stop:
            self.stopped = stop.reason
        except KeyboardInterrupt:
            self.stopped = "interrupted (Ctrl-C)"
        finally:
            with sigint_deferred():
                self.save()
        return self

    def save(self) -> None:
        """The best schedule as a scenario file, and (through `write`) shrink.json and shrink.md."""
        write_text_atomic(self.scenario_path, self.best_scenario_text())
        if self._write is not None:
            self._write(self)

    def best_scenario_text(self) -> str:
        data = scenario_data(self.run, self.best, self.options.margin_s)
        shown = (f"shown by candidate {self.best_from.name} ({self.best_from.attempts[-1].folder})"
                 if self.best_from is not None else
                 "the run's own faults (no smaller candidate has failed yet; the run is the evidence)")
        header = [f"Shrunk by `txnbench shrink` from {self.run.path} (run {self.run.run_id}):",
                  f"{len(self.best)} of the run's {len(self.original)} faults, {shown};",
                  f"unexpected anomalies kept: {', '.join(self.run.classes)}. Targets are the ones the run hit",
                  "(where they can be named); times are seconds into the faults phase, as the run injected them.",
                  f"Reproduce: {self.reproduce_command()}"]
        return scenario_text(data, header)

    def reproduce_command(self) -> str:
        planted = " --allow-planted-bugs" if self.run.planted_bugs else ""
        return f"txnbench run {self.scenario_path}{planted}"

    # ---- the search ---------------------------------------------------------------------------------

    def _search(self) -> None:
        first = self.run.first_anomaly_s
        if first is not None and first < 0:
            self.notes.append(f"the first unexpected anomaly had its evidence {-first:g} s before the faults phase "
                              "began: the faults may not be its cause (a bug that shows without faults)")
        if first is not None:
            cut = cut_after(self.best, first + self.options.margin_s)
            if not cut:
                self.notes.append(f"the first unexpected anomaly ({first:g} s into the faults phase) came before "
                                  "the first fault: nothing was cut, and the faults may not be its cause")
            elif len(cut) < len(self.best):
                self._fails(cut, "cut")
        ddmin(self.best, lambda faults: self._fails(faults, "ddmin"))
        shorten(self.best, lambda faults: self._fails(faults, "shorten"))

    def _fails(self, faults: tuple[ShrinkFault, ...], step: str) -> bool:
        key = tuple(sorted((f.fault_id, f.for_s) for f in faults))
        if key in self._tried:
            return self._tried[key]
        self._check_budget()
        number = len(self.candidates) + 1
        candidate = Candidate(number, step, tuple(faults), faults_phase_s(faults, self.options.margin_s),
                              self.out_dir / "candidates" / f"c{number:02d}.yaml")
        self.candidates.append(candidate)
        data = scenario_data(self.run, faults, self.options.margin_s)
        write_text_atomic(candidate.scenario, scenario_text(data, [f"txnbench shrink candidate {candidate.name} "
                                                                   f"({step}) of run {self.run.run_id}"]))
        try:
            config = scenario_module.load(str(candidate.scenario))
        except ConfigError as err:
            candidate.invalid, candidate.fails = str(err), False
            self._tried[key] = False
            self.say(f"shrink {candidate.name} ({step}): not run, its scenario is refused: {err}")
            self.save()
            return False
        self.say(f"shrink {candidate.name} ({step}): {len(faults)} of {len(self.original)} faults "
                 f"({', '.join(f.describe() for f in faults)}); faults phase {candidate.faults_s:g}s")
        for _ in range(self.options.tries):
            self._check_budget()
            try:
                attempt = self.runner(config, candidate.name)
            except KeyboardInterrupt:
                raise _Stop("interrupted (Ctrl-C)") from None
            self.runs += 1
            candidate.attempts.append(attempt)
            if attempt.status == "interrupted":
                raise _Stop("interrupted (Ctrl-C)")
            if attempt.fails:
                break
        candidate.fails = any(a.fails for a in candidate.attempts)
        self._tried[key] = candidate.fails
        kept = candidate.fails and _better(faults, self.best)
        if kept:
            self.best, self.best_from = tuple(faults), candidate
        self._say_result(candidate, kept)
        self.save()
        return candidate.fails

    def _check_budget(self) -> None:
        if self.runs >= self.options.max_runs:
            raise _Stop(f"max-runs reached ({self.options.max_runs} runs)")
        budget = self.options.budget_s
        if budget is not None and self.elapsed_s >= budget:
            raise _Stop(f"budget spent ({self.elapsed_s:.0f} of {budget:g} s)")

    def _say_result(self, candidate: Candidate, kept: bool) -> None:
        last = candidate.attempts[-1]
        shown = ", ".join(last.unexpected) or "none unexpected"
        what = f"fails ({shown})" if candidate.fails else f"passes ({last.verdict}; {shown})"
        tries = f" after {len(candidate.attempts)} tries" if len(candidate.attempts) > 1 else ""
        self.say(f"shrink [{self.runs}/{self.options.max_runs}] {candidate.name} {candidate.step}: "
                 f"{len(candidate.faults)} of {len(self.original)} faults, {total_for_s(candidate.faults):g}s held: "
                 f"{what}{tries} in "
                 f"{sum(a.seconds for a in candidate.attempts):.0f}s"
                 + (f" -> best so far ({len(self.best)} of {len(self.original)} faults)" if kept else "")
                 + (f"; {last.note}" if last.note else ""))


def _better(faults: tuple[ShrinkFault, ...], than: tuple[ShrinkFault, ...]) -> bool:
    """Fewer faults, or as many held for less time."""
    return (len(faults), total_for_s(faults)) < (len(than), total_for_s(than))


