"""`python -m tools.bench.checker --events N`: how fast `txnbench check` is at both ends.

Theory of operation. The checker has two regimes (docs/checks.md, "Checker
performance"): small histories, where the wall time is Spark's start and
planning, and large ones, where it is the data. The benchmark measures both the
way a user meets them, each `txnbench check` a fresh process (its start, and Spark's JVM
where Spark checks, included), with the checker `txnbench check` chooses (DuckDB on this
machine; `TXNBENCH_CHECKER=spark` measures the Spark checker):

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
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.spark_cluster import descendants
from tools.synth import SynthConfig, generate

__all__ = ["THREAD_KINDS", "Timing", "main", "parse_sizes", "process_cpu_s", "synth", "thread_cpu_s", "thread_kind",
           "time_bare_session", "time_check"]

CHECK_TIMEOUT_S = 3600.0


# How often a running check's processes are sampled for their CPU time.
_SAMPLE_S = 0.1
# Every this many samples, the CPU of each thread of its JVMs as well (about a hundred files a read).
_THREAD_SAMPLE_EVERY = 5

# Where a JVM's CPU goes, by the names HotSpot and Spark give their threads (as /proc shows them:
# their first 15 bytes): at 20 million events the JIT compilers took a quarter of the driver's CPU
# whatever the code generation (docs/checks.md).
THREAD_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tasks", ("Executor task",)),
    ("jit", ("C1 CompilerThre", "C2 CompilerThre")),
    ("gc", ("GC Thread", "VM Thread", "G1 ", "GC task")),
)


@dataclass(frozen=True)
class Timing:
    """One `txnbench check` process: wall seconds, the verdict, events and where they were read from.

    `jvm_cpu_s` is the CPU time of the check's Java processes (the driver JVM and Spark's
    launcher), `python_cpu_s` that of the checking Python process, `cluster_cpu_s` that of
    a standalone cluster's executors while it ran; None where /proc is not available (or,
    for `cluster_cpu_s`, no cluster was watched). `peak_rss_bytes` is the peak of their
    summed resident memory, a watched cluster's daemons and executors included.
    `jvm_threads_cpu_s` splits the CPU of the JVMs below the check by `thread_kind`: Spark's
    tasks, the JIT compilers, garbage collection (its threads and the VM thread, which runs the
    collector's pauses), and the rest (the driver thread that plans the queries first).
    """

    what: str
    events: int
    wall_s: float
    valid: bool | str | None
    source: str | None
    checker_s: float | None
    jvm_cpu_s: float | None = None
    python_cpu_s: float | None = None
    cluster_cpu_s: float | None = None
    peak_rss_bytes: int | None = None
    jvm_threads_cpu_s: dict[str, float] | None = None

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0


def process_cpu_s(pid: int) -> float | None:
    """User plus system CPU seconds of a live process, from /proc (None when gone or not Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def thread_kind(name: str) -> str:
    """The kind of a JVM thread by its name (THREAD_KINDS): tasks, jit, gc, else other (the driver
    thread that plans the queries, py4j, listeners)."""
    for kind, prefixes in THREAD_KINDS:
        if name.startswith(prefixes):
            return kind
    return "other"


def thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """Thread id -> (name, user plus system CPU seconds) of each live thread of `pid`, from /proc
    (empty when gone or not Linux)."""
    found: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            found[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _is_jvm(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except OSError:
        return False


def _rss_bytes(pid: int) -> int:
    """Resident memory of a live process, from /proc (0 when gone or not Linux)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _check_command() -> list[str]:
    """`txnbench` as a user runs it: the console script beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("txnbench")
    if script.is_file():
        return [str(script)]
    import orchestrator.cli
    from harness.entrypoints import python_m

    return python_m(orchestrator.cli)


@dataclass(frozen=True)
class _Sampled:
    """A finished process: exit code, output, wall seconds and the CPU sampled while it ran."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    own_cpu_s: float | None
    below_cpu_s: float | None
    watched_cpu_s: float | None
    peak_rss_bytes: int
    jvm_threads_cpu_s: dict[str, float] | None = None


def _run_sampled(cmd: list[str], what: str, *, env: Mapping[str, str] | None = None,
                 timeout_s: float = CHECK_TIMEOUT_S, watch: Sequence[int] = ()) -> _Sampled:
    """Run `cmd`, sampling every 0.1 s the CPU of it, of its descendants and of those of `watch`.

    `watch` is for processes the command uses but did not start: a standalone cluster's
    workers, whose executors (their children, one per application) do a check's tasks. A
    process's last sample before it exits counts (its last 0.1 s may be missed). The peak
    of the summed resident memory of all of them (`watch` included) is kept too, and every
    `_THREAD_SAMPLE_EVERY` samples the CPU of each thread of the JVMs below the command, summed
    by `thread_kind` at the end (a thread's CPU in its last half second may be missed). Past
    `timeout_s`, or on Ctrl-C, the command and its descendants are killed by pid.
    """
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(env) if env is not None else None)
    own: float | None = None
    below: dict[int, float] = {}
    watched: dict[int, float] = {}
    peak_rss = 0
    threads: dict[tuple[int, int], tuple[str, float]] = {}
    samples = 0
    try:
        while proc.poll() is None:
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"{what} took longer than {timeout_s:.0f} s")
            own = process_cpu_s(proc.pid) or own
            rss = _rss_bytes(proc.pid) + sum(_rss_bytes(root) for root in watch)
            samples += 1
            for pid in descendants(proc.pid):
                cpu = process_cpu_s(pid)
                if cpu is not None:
                    below[pid] = cpu
                    rss += _rss_bytes(pid)
                    if samples % _THREAD_SAMPLE_EVERY == 1 and _is_jvm(pid):
                        threads.update({(pid, tid): seen for tid, seen in thread_cpu_s(pid).items()})
            for root in watch:
                for pid in descendants(root):
                    cpu = process_cpu_s(pid)
                    if cpu is not None:
                        watched[pid] = cpu
                        rss += _rss_bytes(pid)
            peak_rss = max(peak_rss, rss)
            time.sleep(_SAMPLE_S)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            for pid in list(descendants(proc.pid)):   # the driver JVM below the check's Python
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait(timeout=30)
    by_kind: dict[str, float] = {}
    for name, cpu in threads.values():
        kind = thread_kind(name)
        by_kind[kind] = by_kind.get(kind, 0.0) + cpu
    return _Sampled(proc.returncode, stdout, stderr, time.monotonic() - started, own,
                    round(sum(below.values()), 2) if below else None,
                    round(sum(watched.values()), 2) if watched else None, peak_rss,
                    {kind: round(cpu, 1) for kind, cpu in sorted(by_kind.items())} if by_kind else None)


def time_check(run: Path, what: str, *, master: str | None = None, env: Mapping[str, str] | None = None,
               timeout_s: float = CHECK_TIMEOUT_S, watch: Sequence[int] = ()) -> Timing:
    """Run `txnbench check RUN` in a new process and time it from start to exit.

    While it runs, the CPU time of its processes (and of those below `watch`, a cluster's
    workers: `Timing.cluster_cpu_s`) is sampled every 0.1 s (`_run_sampled`).
    """
    cmd = [*_check_command(), "check", str(run)]
    if master:
        cmd += ["--master", master]
    done = _run_sampled(cmd, f"txnbench check {run}", env=env, timeout_s=timeout_s, watch=watch)
    results_path = newest_results(run)
    if done.returncode not in (0, 1, 2) or results_path is None:
        raise RuntimeError(f"txnbench check {run} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    return Timing(what, int(results.get("history", {}).get("lines") or 0), done.wall_s, results.get("valid"),
                  results.get("history", {}).get("source"), results.get("checker", {}).get("elapsed_s"),
                  done.below_cpu_s, done.own_cpu_s, done.watched_cpu_s, done.peak_rss_bytes or None,
                  done.jvm_threads_cpu_s)


def time_bare_session(what: str = "bare Spark session", *, master: str | None = None,
                      env: Mapping[str, str] | None = None, timeout_s: float = 600.0,
                      watch: Sequence[int] = ()) -> Timing:
    """A fresh process that only starts a Spark session and counts a range (`tools.bench.bare_session`).

    Why: a check's wall time on a shared machine says as much about the load as about the
    checker, and Spark's own start (JVM, classes, executors on a cluster) is a fixed part of
    every check. A bare session started in the same sitting is the denominator that makes
    figures from different sittings and machines comparable (docs/checks.md, "Profile of
    the large end": `get_spark`, the default 4 GiB heap, the large-input settings, one count).
    """
    from harness.entrypoints import python_m
    from tools.bench import bare_session

    cmd = python_m(bare_session, *(["--master", master] if master else []))
    done = _run_sampled(cmd, what, env=env, timeout_s=timeout_s, watch=watch)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return Timing(what, 0, done.wall_s, None, None, None, done.below_cpu_s, done.own_cpu_s, done.watched_cpu_s,
                  done.peak_rss_bytes or None, done.jvm_threads_cpu_s)


def newest_results(run: Path) -> Path | None:
    """The results this check wrote: the first check of a run writes `analysis/results.json`, every
    later one `analysis/check-<time>/results.json` (the run's recorded result is kept), so reading
    the first file for a repeat reported the first check's figures again (checker time, source)."""
    found = [run / "analysis" / "results.json", *(run / "analysis").glob("check-*/results.json")]
    existing = [path for path in found if path.is_file()]
    return max(existing, key=lambda path: path.stat().st_mtime_ns) if existing else None


def synth(out: Path, events: int, seed: int) -> int:
    """Write the benchmark's synthetic history of about `events` events at `out` (two writers); return its events."""
    summary = generate(SynthConfig(events=events, writers=2, seed=seed, run_id=out.name), out)
    return int(summary["events"])


def _line(t: Timing) -> str:
    cpu = f"{t.jvm_cpu_s:7.1f} s JVM CPU" if t.jvm_cpu_s is not None else "    (no JVM)"
    threads = (" (" + ", ".join(f"{kind} {cpu_s:.1f}" for kind, cpu_s in t.jvm_threads_cpu_s.items()) + " s)"
               if t.jvm_threads_cpu_s else "")
    return (f"{t.what:<28} {t.events:>11,} events  {t.wall_s:8.1f} s wall {cpu}{threads}  "
            f"{t.events_per_s:>10,.0f} events/s  valid={t.valid}  source={t.source}")


def parse_sizes(text: str) -> list[int]:
    """`--small-events` (and the scale-out's `--events`): one size or a comma-separated list (0 or empty: none)."""
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
    parser.add_argument("--small-events", type=parse_sizes, default=[2_000],
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
            events = synth(small, size, args.seed)
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
                      f"({events / median:,.0f} events/s), process start included", flush=True)
        if smalls:
            report["small"] = smalls[0] if len(smalls) == 1 else smalls
        if args.events:
            large = work / "large"
            started = time.monotonic()
            events = synth(large, args.events, args.seed)
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
