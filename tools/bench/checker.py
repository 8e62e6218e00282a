"""`python -m tools.bench.checker --events N`: how fast `txnbench check` is at both ends.

Theory of operation. The checker has two regimes (docs/checks.md, "Checker
performance"): small histories, where the wall time is Spark's start and
planning, and large ones, where it is the data. The benchmark measures both the
way a user meets them, each `txnbench check` a fresh process (JVM start
included):

* small end: a synthetic history of `--small-events` events (a comma-separated list
  measures several sizes, e.g. `2000,50000`: `make bench` writes 30-100k events per
  path), checked `--repeat` times; the median wall time and events/s;
* large end: a synthetic history of `--events` events, checked once from JSONL
  (at 64 MiB or more this also converts it to the Parquet cache) and once more,
  which reads the cache.

Histories come from `tools.synth` (same generator and seed as the numbers in
docs/checks.md) and go into a temporary folder under `--dir` that is deleted
afterwards unless `--keep`. The verdict of each check is printed beside its
time, so a fast wrong answer is visible, and so is the CPU time of the check's
driver JVM (read from /proc while it runs, on Linux): on a shared machine the wall
time says as much about the other users as about the checker, and CPU seconds
compare better. `--json` prints the figures as JSON.
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
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.synth import SynthConfig, generate

__all__ = ["Timing", "main", "time_check"]

CHECK_TIMEOUT_S = 3600.0


# How often a running check's processes are sampled for their CPU time.
_SAMPLE_S = 0.1


@dataclass(frozen=True)
class Timing:
    """One `txnbench check` process: wall seconds, the verdict, events and where they were read from.

    `jvm_cpu_s` is the CPU time of the check's Java processes (the driver JVM and Spark's
    launcher), `python_cpu_s` that of the checking Python process; both None where /proc
    is not available.
    """

    what: str
    events: int
    wall_s: float
    valid: bool | str | None
    source: str | None
    checker_s: float | None
    jvm_cpu_s: float | None = None
    python_cpu_s: float | None = None

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0


def _cpu_s(pid: int) -> float | None:
    """User plus system CPU seconds of a live process, from /proc (None when gone or not Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _descendants(pid: int) -> Iterator[int]:
    """Every process below `pid`, from /proc's children lists."""
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in Path(f"/proc/{parent}/task/{task}/children").read_text().split()]
            except (OSError, ValueError):
                continue
            yield from children
            stack.extend(children)


def _check_command() -> list[str]:
    """`txnbench` as a user runs it: the console script beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("txnbench")
    if script.is_file():
        return [str(script)]
    import orchestrator.cli
    from harness.entrypoints import python_m

    return python_m(orchestrator.cli)


def time_check(run: Path, what: str, *, master: str | None = None) -> Timing:
    """Run `txnbench check RUN` in a new process and time it from start to exit.

    While it runs, the CPU time of its processes is sampled every 0.1 s; a process's last
    sample before it exits counts (the JVM's last 0.1 s may be missed).
    """
    cmd = [*_check_command(), "check", str(run)]
    if master:
        cmd += ["--master", master]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    own: float | None = None
    below: dict[int, float] = {}
    try:
        while proc.poll() is None:
            if time.monotonic() - started > CHECK_TIMEOUT_S:
                proc.kill()
                raise RuntimeError(f"txnbench check {run} took longer than {CHECK_TIMEOUT_S:.0f} s")
            own = _cpu_s(proc.pid) or own
            for pid in _descendants(proc.pid):
                cpu = _cpu_s(pid)
                if cpu is not None:
                    below[pid] = cpu
            time.sleep(_SAMPLE_S)
        _, stderr = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wall = time.monotonic() - started
    results_path = newest_results(run)
    if proc.returncode not in (0, 1, 2) or results_path is None:
        raise RuntimeError(f"txnbench check {run} failed (exit {proc.returncode}): {stderr.strip()[-500:]}")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    return Timing(what, int(results.get("history", {}).get("lines") or 0), wall, results.get("valid"),
                  results.get("history", {}).get("source"), results.get("checker", {}).get("elapsed_s"),
                  round(sum(below.values()), 2) if below else None, own)


def newest_results(run: Path) -> Path | None:
    """The results this check wrote: the first check of a run writes `analysis/results.json`, every
    later one `analysis/check-<time>/results.json` (the run's recorded result is kept), so reading
    the first file for a repeat reported the first check's figures again (checker time, source)."""
    found = [run / "analysis" / "results.json", *(run / "analysis").glob("check-*/results.json")]
    existing = [path for path in found if path.is_file()]
    return max(existing, key=lambda path: path.stat().st_mtime_ns) if existing else None


def _synth(out: Path, events: int, seed: int) -> int:
    summary = generate(SynthConfig(events=events, writers=2, seed=seed, run_id=out.name), out)
    return int(summary["events"])


def _line(t: Timing) -> str:
    cpu = f"{t.jvm_cpu_s:7.1f} s JVM CPU" if t.jvm_cpu_s is not None else "  (no /proc)"
    return (f"{t.what:<28} {t.events:>11,} events  {t.wall_s:8.1f} s wall {cpu}  "
            f"{t.events_per_s:>10,.0f} events/s  valid={t.valid}  source={t.source}")


def _sizes(text: str) -> list[int]:
    """`--small-events`: one size or a comma-separated list (0 or empty: none)."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or a comma-separated list of numbers") from None
    if any(size < 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"{text}: sizes must be >= 0")
    return [size for size in sizes if size > 0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.checker",
                                     description="Time `txnbench check` on small and large synthetic histories.")
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the large history (0: skip)")
    parser.add_argument("--small-events", type=_sizes, default=[2_000],
                        help="events of the small history, or a comma-separated list of sizes (0: skip)")
    parser.add_argument("--repeat", type=int, default=3, help="checks of the small history (the median counts)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the histories are written (a large one needs ~350 bytes per event)")
    parser.add_argument("--master", help="Spark master for the checks (default: local[*])")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the histories")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.events < 0 or not 1 <= args.repeat <= 20:
        print("bench: --events and --small-events must be >= 0, --repeat 1..20", file=sys.stderr)
        return 2
    if args.dir is not None:
        Path(args.dir).mkdir(parents=True, exist_ok=True)  # a named folder need not exist yet
    work = Path(tempfile.mkdtemp(prefix="txnbench-bench-", dir=args.dir))
    report: dict[str, object] = {"cpus": os.cpu_count(), "load_average_start": list(os.getloadavg())}
    try:
        smalls: list[dict[str, object]] = []
        for size in args.small_events:
            small = work / f"small-{size}"
            events = _synth(small, size, args.seed)
            runs = []
            for n in range(args.repeat):
                shutil.rmtree(small / "analysis", ignore_errors=True)
                runs.append(time_check(small, f"small ({size:,}), run {n + 1}", master=args.master))
                if not args.json:
                    print(_line(runs[-1]), flush=True)
            median = statistics.median(r.wall_s for r in runs)
            cpus = [r.jvm_cpu_s for r in runs if r.jvm_cpu_s is not None]
            median_cpu = statistics.median(cpus) if cpus else None
            smalls.append({"events": events, "runs": [asdict(r) for r in runs], "median_wall_s": median,
                           "median_jvm_cpu_s": median_cpu, "events_per_s": events / median if median > 0 else None})
            if not args.json:
                cpu = f", {median_cpu:.1f} s of driver JVM CPU" if median_cpu is not None else ""
                print(f"small end: median {median:.1f} s wall{cpu} for {events:,} events "
                      f"({events / median:,.0f} events/s), JVM start included", flush=True)
        if smalls:
            report["small"] = smalls[0] if len(smalls) == 1 else smalls
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
