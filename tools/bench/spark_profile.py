"""`python -m tools.bench.spark_profile EVENT_LOG`: where a check's Spark task time went, phase by phase.

Why: a large check's wall time says little on a shared two-core machine; the task CPU each
of its phases (loading, pairing, each check) spent does. `txnbench check` names every Spark
job after the progress line it follows (its job description), so a check run with Spark's
event log on:

    PYSPARK_SUBMIT_ARGS="--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file:///DIR \\
        --conf spark.eventLog.compress=false pyspark-shell" txnbench check RUN_DIR

gives, per phase, its jobs, stages and tasks, their executor CPU and run time, garbage
collection, input, and shuffle written and read. EVENT_LOG is the application's folder
under DIR (`eventlog_v2_*`), one event file, or DIR itself when it holds one application.
Compressed logs (`*.zstd`) are read through the `zstd` program when it is installed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PhaseCost", "main", "profile", "read_events"]

UNNAMED = "(no job description)"


@dataclass
class PhaseCost:
    """What the jobs of one phase cost, summed over their tasks (seconds and megabytes)."""

    phase: str
    jobs: int = 0
    stages: int = 0
    tasks: int = 0
    cpu_s: float = 0.0
    run_s: float = 0.0
    gc_s: float = 0.0
    input_mb: float = 0.0
    shuffle_write_mb: float = 0.0
    shuffle_read_mb: float = 0.0
    _stage_ids: set[int] = field(default_factory=set, repr=False)


class EventLogError(Exception):
    """The event log cannot be read; the message names the fix."""


def _event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise EventLogError(f"{path}: no such file or folder; pass the folder Spark's event log went to")
    apps = sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith("eventlog_v2_"))
    if len(apps) > 1:
        raise EventLogError(f"{path} holds {len(apps)} applications; pass one of them: "
                            + ", ".join(p.name for p in apps))
    folder = apps[0] if apps else path
    files = sorted((p for p in folder.iterdir() if p.name.startswith(("events_", "app-", "local-"))),
                   key=lambda p: (len(p.name), p.name))
    if not files:
        raise EventLogError(f"{folder}: no Spark event files in it")
    return files


def _lines(path: Path) -> Iterator[str]:
    if path.suffix in (".zstd", ".zst"):
        program = shutil.which("zstd")
        if program is None:
            raise EventLogError(f"{path} is compressed and the zstd program is not installed: install it "
                                "(apt-get install zstd) or run the check with --conf spark.eventLog.compress=false")
        text = subprocess.run([program, "-dcq", str(path)], check=True, capture_output=True, text=True).stdout
        yield from text.splitlines()
        return
    if path.suffix in (".lz4", ".snappy", ".lzf"):
        raise EventLogError(f"{path}: {path.suffix[1:]}-compressed; run the check with "
                            "--conf spark.eventLog.compress=false")
    with path.open(encoding="utf-8") as f:
        yield from f


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON events of an event log (see the module's docstring for `path`)."""
    for file in _event_files(path):
        for line in _lines(file):
            if line.strip():
                yield json.loads(line)


def profile(events: Iterable[dict[str, Any]]) -> list[PhaseCost]:
    """The cost of each phase (job description), in the order the phases first ran."""
    phases: dict[str, PhaseCost] = {}
    stage_phase: dict[int, PhaseCost] = {}
    for event in events:
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            name = (event.get("Properties") or {}).get("spark.job.description") or UNNAMED
            cost = phases.setdefault(name, PhaseCost(name))
            cost.jobs += 1
            for stage in event.get("Stage IDs") or []:
                stage_phase[int(stage)] = cost
        elif kind == "SparkListenerTaskEnd":
            owner = stage_phase.get(int(event.get("Stage ID", -1)))
            if owner is None:
                continue
            cost = owner
            metrics = event.get("Task Metrics") or {}
            shuffle_read = metrics.get("Shuffle Read Metrics") or {}
            cost._stage_ids.add(int(event["Stage ID"]))
            cost.stages = len(cost._stage_ids)
            cost.tasks += 1
            cost.cpu_s += metrics.get("Executor CPU Time", 0) / 1e9
            cost.run_s += metrics.get("Executor Run Time", 0) / 1e3
            cost.gc_s += metrics.get("JVM GC Time", 0) / 1e3
            cost.input_mb += (metrics.get("Input Metrics") or {}).get("Bytes Read", 0) / 1e6
            cost.shuffle_write_mb += (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0) / 1e6
            cost.shuffle_read_mb += (shuffle_read.get("Local Bytes Read", 0) + shuffle_read.get("Remote Bytes Read", 0)) / 1e6
    return list(phases.values())


def render(costs: list[PhaseCost]) -> str:
    header = (f"{'phase':<48} {'jobs':>5} {'stages':>6} {'tasks':>6} {'CPU s':>8} {'run s':>8} {'GC s':>6} "
              f"{'in MB':>8} {'shuf w MB':>9} {'shuf r MB':>9}")
    rows = [header]
    total = PhaseCost("total")
    for c in costs:
        rows.append(f"{c.phase[:48]:<48} {c.jobs:>5} {c.stages:>6} {c.tasks:>6} {c.cpu_s:>8.1f} {c.run_s:>8.1f} "
                    f"{c.gc_s:>6.1f} {c.input_mb:>8.0f} {c.shuffle_write_mb:>9.0f} {c.shuffle_read_mb:>9.0f}")
        for name in ("jobs", "stages", "tasks", "cpu_s", "run_s", "gc_s", "input_mb", "shuffle_write_mb",
                     "shuffle_read_mb"):
            setattr(total, name, getattr(total, name) + getattr(c, name))
    rows.append(f"{'total':<48} {total.jobs:>5} {total.stages:>6} {total.tasks:>6} {total.cpu_s:>8.1f} "
                f"{total.run_s:>8.1f} {total.gc_s:>6.1f} {total.input_mb:>8.0f} {total.shuffle_write_mb:>9.0f} "
                f"{total.shuffle_read_mb:>9.0f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.spark_profile",
                                     description="Task CPU, time and shuffle of each phase of a check, from "
                                                 "Spark's event log.")
    parser.add_argument("event_log", type=Path, help="the application's event log folder (or file)")
    parser.add_argument("--json", action="store_true", help="print the phases as JSON")
    args = parser.parse_args(argv)
    try:
        costs = profile(read_events(args.event_log))
    except (EventLogError, json.JSONDecodeError, subprocess.CalledProcessError) as err:
        print(f"spark_profile: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([{k: v for k, v in vars(c).items() if not k.startswith("_")} for c in costs], indent=1))
    else:
        print(render(costs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
