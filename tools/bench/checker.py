"""`python -m tools.bench.checker --events N`: how fast `txnbench check` is at both ends.

Theory of operation. The checker has two regimes (docs/checks.md, "Checker
performance"): small histories, where the wall time is Spark's start and
planning, and large ones, where it is the data. The benchmark measures both the
way a user meets them, each `txnbench check` a fresh process (JVM start
included):

* small end: a synthetic history of `--small-events` events, checked
  `--repeat` times; the median wall time and events/s;
* large end: a synthetic history of `--events` events, checked once from JSONL
  (at 64 MiB or more this also converts it to the Parquet cache) and once more,
  which reads the cache.

Histories come from `tools.synth` (same generator and seed as the numbers in
docs/checks.md) and go into a temporary folder under `--dir` that is deleted
afterwards unless `--keep`. The verdict of each check is printed beside its
time, so a fast wrong answer is visible. `--json` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.synth import SynthConfig, generate

__all__ = ["Timing", "main", "time_check"]

CHECK_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Timing:
    """One `txnbench check` process: wall seconds, the verdict, events and where they were read from."""

    what: str
    events: int
    wall_s: float
    valid: bool | str | None
    source: str | None
    checker_s: float | None

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0


def time_check(run: Path, what: str, *, master: str | None = None) -> Timing:
    """Run `txnbench check RUN` in a new process and time it from start to exit."""
    cmd = [sys.executable, "-m", "orchestrator.cli", "check", str(run)]
    if master:
        cmd += ["--master", master]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False)
    wall = time.monotonic() - started
    results_path = run / "analysis" / "results.json"
    if done.returncode not in (0, 1, 2) or not results_path.is_file():
        raise RuntimeError(f"txnbench check {run} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    return Timing(what, int(results.get("history", {}).get("lines") or 0), wall, results.get("valid"),
                  results.get("history", {}).get("source"), results.get("checker", {}).get("elapsed_s"))


def _synth(out: Path, events: int, seed: int) -> int:
    summary = generate(SynthConfig(events=events, writers=2, seed=seed, run_id=out.name), out)
    return int(summary["events"])


def _line(t: Timing) -> str:
    return (f"{t.what:<28} {t.events:>11,} events  {t.wall_s:8.1f} s wall  {t.events_per_s:>11,.0f} events/s"
            f"  valid={t.valid}  source={t.source}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.checker",
                                     description="Time `txnbench check` on small and large synthetic histories.")
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the large history (0: skip)")
    parser.add_argument("--small-events", type=int, default=2_000, help="events of the small history (0: skip)")
    parser.add_argument("--repeat", type=int, default=3, help="checks of the small history (the median counts)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the histories are written (a large one needs ~350 bytes per event)")
    parser.add_argument("--master", help="Spark master for the checks (default: local[*])")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the histories")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.events < 0 or args.small_events < 0 or not 1 <= args.repeat <= 20:
        print("bench: --events and --small-events must be >= 0, --repeat 1..20", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="txnbench-bench-", dir=args.dir))
    report: dict[str, object] = {"cpus": os.cpu_count(), "load_average_start": list(os.getloadavg())}
    try:
        if args.small_events:
            small = work / "small"
            events = _synth(small, args.small_events, args.seed)
            runs = []
            for n in range(args.repeat):
                shutil.rmtree(small / "analysis", ignore_errors=True)
                runs.append(time_check(small, f"small, run {n + 1}", master=args.master))
                if not args.json:
                    print(_line(runs[-1]), flush=True)
            median = statistics.median(r.wall_s for r in runs)
            report["small"] = {"events": events, "runs": [asdict(r) for r in runs], "median_wall_s": median,
                               "events_per_s": events / median if median > 0 else None}
            if not args.json:
                print(f"small end: median {median:.1f} s wall for {events:,} events "
                      f"({events / median:,.0f} events/s), JVM start included", flush=True)
        if args.events:
            large = work / "large"
            started = time.monotonic()
            events = _synth(large, args.events, args.seed)
            size = sum(p.stat().st_size for p in (large / "history").glob("*.jsonl"))
            if not args.json:
                print(f"large history: {events:,} events, {size / 1e9:.2f} GB of JSONL "
                      f"(generated in {time.monotonic() - started:.0f} s)", flush=True)
            first = time_check(large, "large, from JSONL", master=args.master)
            if not args.json:
                print(_line(first), flush=True)
            second = time_check(large, "large, again", master=args.master)
            if not args.json:
                print(_line(second), flush=True)
            report["large"] = {"events": events, "jsonl_bytes": size, "first": asdict(first),
                               "second": asdict(second), "first_events_per_s": first.events_per_s,
                               "second_events_per_s": second.events_per_s}
        report["load_average_end"] = list(os.getloadavg())
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(f"load average (1, 5, 15 min): {report['load_average_start']} at the start, "
                  f"{report['load_average_end']} at the end, {report['cpus']} CPUs")
    finally:
        if args.keep:
            print(f"histories kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
