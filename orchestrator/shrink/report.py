"""What a shrink writes beside its candidates' runs: shrink.json (every candidate: its faults, its
runs and their verdicts) and shrink.md (the result, how to reproduce it, the candidates, the notes).

Both are rewritten after every candidate (orchestrator.shrink.driver), so an interrupted shrink's
folder reads like a finished one, with `stopped` saying why it ended.
"""

from __future__ import annotations

from typing import Any

from harness.results import write_json_atomic, write_text_atomic
from orchestrator.shrink.driver import Shrinker
from orchestrator.shrink.schedule import faults_phase_s, total_for_s

SCHEMA = 1


def write_reports(shrinker: Shrinker) -> None:
    """shrink.json and shrink.md into the shrink's folder."""
    write_json_atomic(shrinker.out_dir / "shrink.json", shrink_json(shrinker))
    write_text_atomic(shrinker.out_dir / "shrink.md", shrink_md(shrinker))


def shrink_json(shrinker: Shrinker) -> dict[str, Any]:
    run, options = shrinker.run, shrinker.options
    best = shrinker.best
    return {
        "schema": SCHEMA,
        "run": str(run.path), "run_id": run.run_id, "target": run.config.target.value,
        "path": run.config.path.value, "seed": run.config.seed,
        "pulsar_version": run.config.cluster.pulsar_version, "planted_bugs": list(run.planted_bugs),
        "unexpected": list(run.unexpected), "kept_classes": list(run.classes),
        "first_anomaly_s": run.first_anomaly_s, "run_faults_phase_s": run.faults_phase_s,
        "options": {"max_runs": options.max_runs, "budget_s": options.budget_s, "tries": options.tries,
                    "margin_s": options.margin_s},
        "original": [f.to_json() for f in shrinker.original],
        "candidates": [c.to_json() for c in shrinker.candidates],
        "best": {"faults": [f.to_json() for f in best], "faults_s": faults_phase_s(best, options.margin_s),
                 "held_s": total_for_s(best),
                 "shown_by": shrinker.best_from.name if shrinker.best_from is not None else None},
        "scenario": str(shrinker.scenario_path), "reproduce": shrinker.reproduce_command(),
        "stopped": shrinker.stopped or "running", "runs": shrinker.runs, "elapsed_s": round(shrinker.elapsed_s, 1),
        "notes": [*run.notes, *shrinker.notes],
    }


def shrink_md(shrinker: Shrinker) -> str:
    run, best = shrinker.run, shrinker.best
    release = f", Pulsar {run.config.cluster.pulsar_version}" if run.config.cluster.pulsar_version else ""
    shown = (f"shown by candidate {shrinker.best_from.name} (`{shrinker.best_from.attempts[-1].folder}`)"
             if shrinker.best_from is not None else
             "no smaller candidate failed: the run's own faults, pinned (the run itself is the evidence)")
    lines = [
        f"# txnbench shrink: {run.run_id}",
        "",
        f"Run `{run.path}` ({run.config.target.value} target{release}, path {run.config.path.value}, seed "
        f"{run.config.seed}): unexpected {', '.join(run.unexpected)}; kept towards {', '.join(run.classes)}"
        + (f"; first unexpected instance {run.first_anomaly_s:g} s into the faults phase"
           if run.first_anomaly_s is not None else "") + ".",
        "",
        f"**{len(best)} of {len(shrinker.original)} faults**, held {total_for_s(best):g} s in all (the run's: "
        f"{total_for_s(shrinker.original):g} s), faults phase {faults_phase_s(best, shrinker.options.margin_s):g} s "
        f"(the run's: {run.faults_phase_s:g} s); {shown}.",
        "",
        f"Stopped: {shrinker.stopped or 'running'}; {shrinker.runs} of at most {shrinker.options.max_runs} runs "
        f"({shrinker.options.tries} per candidate at most), {shrinker.elapsed_s:.0f} s.",
        "",
        f"Reproduce: `{shrinker.reproduce_command()}`",
        "",
        "## The shrunk schedule",
        "",
        "| fault | kind | target | as the run planned it | at (s) | held (s) | trigger |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for fault in best:
        trigger = f"{fault.trigger.op.value} {fault.trigger.type.value}" if fault.trigger is not None else ""
        target = fault.target + ("" if fault.pinned else " (not pinned)")
        lines.append(f"| {fault.fault_id} | {fault.kind} | `{target}` | `{fault.selector}` | {fault.start_s:g} "
                     f"| {fault.for_s:g} | {trigger} |")
    lines += ["", "## Candidates", "",
              "| candidate | step | faults | held (s) | faults phase (s) | outcome | runs |",
              "|---|---|---|---:|---:|---|---|"]
    for c in shrinker.candidates:
        if c.invalid:
            outcome = f"not run: {c.invalid}"
        elif c.fails is None:
            outcome = "stopped before judged"
        else:
            last = c.attempts[-1]
            outcome = ("**fails**" if c.fails else "passes") + f" ({last.verdict}; unexpected: " \
                f"{', '.join(last.unexpected) or 'none'})" + (f"; {last.note}" if last.note else "")
        runs = ", ".join(f"`{a.folder}` {a.seconds:.0f}s" for a in c.attempts if a.folder)
        lines.append(f"| {c.name} | {c.step} | {' '.join(f.fault_id for f in c.faults)} | {total_for_s(c.faults):g} "
                     f"| {c.faults_s:g} | {outcome} | {runs} |")
    notes = [*run.notes, *shrinker.notes,
             *(f"{f.fault_id}: `{f.selector}` -> `{f.target}`: {f.note}" for f in shrinker.original if f.note)]
    if notes:
        lines += ["", "## Notes", "", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"
