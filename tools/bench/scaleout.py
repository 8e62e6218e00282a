"""`python -m tools.bench.scaleout`: the checker on a Spark standalone cluster as the workers grow.

Theory of operation. Issue #45 asks that scale-out stay real: the same `txnbench check`
on a standalone cluster, timed per million events as workers are added, measured on what
the machine allows and projected from those numbers rather than assumed. So, in one
sitting:

* synthetic histories of each `--events` size are written once (`tools.bench.checker.synth`:
  the generator and seed of the other checker figures in docs/checks.md);
* a bare Spark session is started locally (`tools.bench.checker.time_bare_session`), the
  denominator of every ratio: on a shared machine wall seconds say as much about the load
  as about the checker, and the ratio to a session started in the same sitting compares;
* each history is checked locally (`txnbench check RUN`, `local[*]`), the baseline;
* for each `--workers` count a master and that many one-core workers are started on
  127.0.0.1 from the PySpark installation (`tools.spark_cluster`), a bare session is timed
  on it (its fixed cost: JVM, registration, executors), each history is checked with
  `txnbench check RUN --master spark://127.0.0.1:PORT`, and the cluster is stopped.

Every check is a fresh CLI process (JVM start included) and reads the history from JSONL
(its `analysis/` folder is removed first, so none reads a Parquet cache an earlier check
wrote; at 64 MiB or more the check writes that cache, on a cluster from the executors).
`--repeat` runs the whole sequence again. Each check is bounded by `--timeout`, each
cluster start by `tools.spark_cluster.READY_TIMEOUT_S`; every process is stopped by pid in
`finally` blocks, on Ctrl-C and SIGTERM too.

Memory: each worker offers `--worker-memory` (2g) and each executor asks for
`--executor-memory` (2g, through the cluster's `spark-defaults.conf`); the master and the
workers run with `--daemon-memory` (512m) heaps; the driver keeps the checker's own choice
(`analysis.spark.driver_memory`: 4 GiB below 2 GiB of history). With 2 workers that is at
most 1.5 + 4 + 4 = 9.5 GiB of heap caps; the peak resident memory actually used is
measured and printed.

The projection: per configuration the wall time is fitted as `fixed + per_event * events`
over the sizes (`fit_line`), and across the cluster's worker counts the per-event part as
`serial + parallel / workers` (`split_per_event`): what stays on the driver (or does not
spread) and what the executors' cores share. `project` puts them together for more workers.
It is arithmetic on the measured figures, printed as such; on a machine with fewer cores
than workers plus a driver the parallel part is underestimated, and the output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from tools.bench.checker import Timing, parse_sizes, synth, time_bare_session, time_check
from tools.spark_cluster import StandaloneCluster

__all__ = ["Row", "fit_line", "format_table", "main", "parse_args", "project", "split_per_event"]

# Worker counts the projection is printed for (beyond the measured ones).
PROJECTED_WORKERS = (4, 8, 16)


@dataclass(frozen=True)
class Row:
    """One timed process of the sitting. `workers` 0 is the local baseline (`local[*]`); `events` 0 a bare session.

    CPU seconds: `driver_cpu_s` of the driver JVM (locally also the tasks), `python_cpu_s` of
    the check's Python process (where a large history's JSONL is converted to Parquet by
    Arrow, analysis.columnar: on a cluster too), `executor_cpu_s` of the cluster's executors.
    """

    events: int
    workers: int
    wall_s: float
    bare_s: float
    verdict: bool | str | None
    round: int = 1
    driver_cpu_s: float | None = None
    python_cpu_s: float | None = None
    executor_cpu_s: float | None = None
    peak_rss_bytes: int | None = None

    @property
    def s_per_million(self) -> float | None:
        """Wall seconds per million events (None for a bare session)."""
        return self.wall_s / self.events * 1e6 if self.events > 0 else None

    @property
    def ratio(self) -> float | None:
        """The wall time over the local bare session's of the same sitting."""
        return self.wall_s / self.bare_s if self.bare_s > 0 else None

    @classmethod
    def of(cls, timing: Timing, workers: int, bare_s: float, round_: int) -> Row:
        return cls(timing.events, workers, round(timing.wall_s, 2), round(bare_s, 2), timing.valid, round_,
                   timing.jvm_cpu_s, timing.python_cpu_s, timing.cluster_cpu_s, timing.peak_rss_bytes)


def parse_workers(text: str) -> list[int]:
    """`--workers`: a comma-separated list of worker counts, each at least 1."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of worker counts") from None
    if not counts or any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError(f"{text}: worker counts must be >= 1")
    return counts


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring); exits 2 on a bad argument, as argparse does."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench.scaleout",
        description="Time `txnbench check` locally and on a Spark standalone cluster of 1..N one-core "
                    "workers on 127.0.0.1, per million events, with a projection for more workers.")
    parser.add_argument("--events", type=parse_sizes, default=[500_000, 2_000_000],
                        help="history sizes, comma-separated (default 500000,2000000)")
    parser.add_argument("--workers", type=parse_workers, default=[1, 2],
                        help="worker counts of the clusters, comma-separated (default 1,2)")
    parser.add_argument("--repeat", type=int, default=1, help="times the whole sequence runs (1..10)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where histories and cluster folders go (~350 bytes per event, twice with the cache)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one check may take")
    parser.add_argument("--worker-memory", default="2g", help="memory each worker offers (default 2g)")
    parser.add_argument("--executor-memory", default="2g", help="spark.executor.memory (default 2g)")
    parser.add_argument("--daemon-memory", default="512m", help="heap of the master and of each worker daemon")
    parser.add_argument("--no-local", action="store_true", help="skip the local baseline checks")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the histories and cluster logs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not args.events:
        parser.error("--events: give at least one size")
    if not 1 <= args.repeat <= 10 or args.timeout <= 0:
        parser.error("--repeat must be 1..10 and --timeout positive")
    return args


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares `y = intercept + slope * x` over `points`; None without two distinct x."""
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in points)
             / sum((x - mean_x) ** 2 for x, _ in points))
    return mean_y - slope * mean_x, slope


def split_per_event(per_event_by_workers: dict[int, float]) -> tuple[float, float] | None:
    """Fit `per_event(w) = serial + parallel / w` over the worker counts; None with fewer than two.

    `serial` is the part of the per-event time no executor core takes off (the driver's work
    per event, and whatever does not spread over the workers), `parallel` the part the cores
    share. Both come out of the measurements and may be negative when the numbers are noisy
    (or when more workers were slower, as on a machine with fewer cores than processes).
    """
    fitted = fit_line([(1 / w, b) for w, b in per_event_by_workers.items()])
    return None if fitted is None else (fitted[0], fitted[1])


def project(fixed_s: float, serial: float, parallel: float, events: int, workers: int) -> float:
    """Projected wall seconds of a check of `events` on `workers` one-core workers: fixed + events * (serial + parallel / workers)."""
    return fixed_s + events * (serial + parallel / workers)


def _median_walls(rows: Sequence[Row]) -> dict[tuple[int, int], float]:
    """(workers, events) -> median wall seconds over the rounds (bare sessions left out)."""
    grouped: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        if row.events > 0:
            grouped.setdefault((row.workers, row.events), []).append(row.wall_s)
    return {key: statistics.median(walls) for key, walls in grouped.items()}


def analyse(rows: Sequence[Row], events: Sequence[int] = (1_000_000, 20_000_000),
            workers: Sequence[int] = PROJECTED_WORKERS) -> dict[str, Any]:
    """The fits and the projection from the measured rows (pure arithmetic; see the module docstring).

    Sizes are the events each history really had (the generator's count is approximate), so
    fits use them, not the asked sizes; the projection is for `events` on `workers`.
    """
    medians = _median_walls(rows)
    fits: dict[int, dict[str, float]] = {}
    for config in sorted({w for w, _ in medians}):
        fitted = fit_line([(n, wall) for (w, n), wall in medians.items() if w == config])
        if fitted is not None:
            fits[config] = {"fixed_s": fitted[0], "per_million_s": fitted[1] * 1e6}
    out: dict[str, Any] = {"fits": {("local" if w == 0 else f"{w} workers"): f for w, f in fits.items()}}
    cluster = {w: f["per_million_s"] / 1e6 for w, f in fits.items() if w > 0}
    split = split_per_event(cluster)
    if split is not None:
        serial, parallel = split
        fixed = max(fits[w]["fixed_s"] for w in cluster)
        out["split"] = {"serial_per_million_s": serial * 1e6, "parallel_per_million_s": parallel * 1e6,
                        "fixed_s": fixed}
        out["projection"] = [{"events": n, "workers": w, "wall_s": project(fixed, serial, parallel, n, w),
                              "s_per_million": project(fixed, serial, parallel, n, w) / n * 1e6}
                             for n in events for w in workers]
    return out


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_table(rows: Sequence[Row]) -> str:
    """The measured rows as a Markdown table (events, workers, wall, s per million, ratio, verdict, CPU, memory)."""
    lines = ["| events | workers | round | wall s | s per million events | ratio to bare session | verdict "
             "| driver JVM CPU s | check's Python CPU s | executor CPU s | peak RSS GiB |",
             "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(
            f"| {f'{row.events:,}' if row.events else 'bare session'} "
            f"| {'local' if row.workers == 0 else row.workers} | {row.round} | {row.wall_s:.1f} "
            f"| {_cell(row.s_per_million, '.1f')} | {_cell(row.ratio, '.2f')} "
            f"| {'-' if row.events == 0 else row.verdict} | {_cell(row.driver_cpu_s, '.1f')} "
            f"| {_cell(row.python_cpu_s, '.1f')} | {_cell(row.executor_cpu_s, '.1f')} "
            f"| {_cell(row.peak_rss_bytes / 1024 ** 3 if row.peak_rss_bytes else None, '.2f')} |")
    return "\n".join(lines)


def format_analysis(found: dict[str, Any]) -> str:
    """The fits and the projection as text, each figure with the arithmetic it came from."""
    lines = []
    for config, fit in found["fits"].items():
        lines.append(f"fit, {config}: wall = {fit['fixed_s']:.1f} s + {fit['per_million_s']:.1f} s per million events")
    split = found.get("split")
    if split is not None:
        lines.append(f"per-event part over workers w: {split['serial_per_million_s']:.1f} + "
                     f"{split['parallel_per_million_s']:.1f} / w s per million events; fixed part taken as "
                     f"{split['fixed_s']:.1f} s (the largest measured)")
        for p in found["projection"]:
            lines.append(f"projected: {p['events']:,} events on {p['workers']} workers: {p['wall_s']:.0f} s "
                         f"({p['s_per_million']:.1f} s per million)")
        if (os.cpu_count() or 1) < max(int(k.split()[0]) for k in found["fits"] if k != "local") + 1:
            lines.append(f"note: this machine has {os.cpu_count()} cores for the workers and the driver: they "
                         f"competed for CPU, so the parallel part is underestimated")
    return "\n".join(lines)


_MAIN_PID = os.getpid()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C, so that the `finally` blocks stop the clusters and checks by pid.

    Only in this process: the generator's worker processes inherit the handler, and their
    pool ends them with SIGTERM, which must stay a quiet exit there."""
    if os.getpid() != _MAIN_PID:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise KeyboardInterrupt


def _check(run: Path, workers: int, bare_s: float, round_: int, timeout_s: float,
           cluster: StandaloneCluster | None, quiet: bool) -> Row:
    shutil.rmtree(run / "analysis", ignore_errors=True)   # every check reads JSONL, none an earlier cache
    where = "local" if cluster is None else f"{workers} workers"
    timing = (time_check(run, f"{run.name}, {where}", timeout_s=timeout_s) if cluster is None else
              time_check(run, f"{run.name}, {where}", master=cluster.url, env=cluster.env(),
                         timeout_s=timeout_s, watch=cluster.pids))
    row = Row.of(timing, workers, bare_s, round_)
    if not quiet:
        print(f"  {timing.events:>11,} events  {where:<10} {row.wall_s:8.1f} s  "
              f"{_cell(row.s_per_million, '.1f')} s/M events  valid={row.verdict}", flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="txnbench-scaleout-", dir=args.dir))
    quiet = args.json
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_average_start": list(os.getloadavg()),
                              "worker_memory": args.worker_memory, "executor_memory": args.executor_memory,
                              "daemon_memory": args.daemon_memory}
    rows: list[Row] = []
    try:
        histories: list[Path] = []
        for size in args.events:
            started = time.monotonic()
            run = work / f"history-{size}"
            events = synth(run, size, args.seed)
            histories.append(run)
            if not quiet:
                jsonl = sum(p.stat().st_size for p in (run / "history").glob("*.jsonl"))
                print(f"history: {events:,} events, {jsonl / 1e6:,.0f} MB of JSONL "
                      f"(generated in {time.monotonic() - started:.0f} s)", flush=True)
        for round_ in range(1, args.repeat + 1):
            bare = time_bare_session("bare Spark session, local")
            bare_s = bare.wall_s
            rows.append(Row.of(bare, 0, bare_s, round_))
            if not quiet:
                print(f"round {round_}: bare local Spark session {bare_s:.1f} s", flush=True)
            if not args.no_local:
                rows.extend(_check(run, 0, bare_s, round_, args.timeout, None, quiet) for run in histories)
            for workers in args.workers:
                cluster = StandaloneCluster(work / f"cluster-{workers}-round-{round_}", workers,
                                            worker_memory=args.worker_memory, executor_memory=args.executor_memory,
                                            daemon_memory=args.daemon_memory)
                try:
                    cluster.start()
                    on_cluster = time_bare_session(f"bare Spark session, {workers} workers", master=cluster.url,
                                                   env=cluster.env(), watch=cluster.pids)
                    rows.append(Row.of(on_cluster, workers, bare_s, round_))
                    if not quiet:
                        print(f"  bare session on {workers} workers {on_cluster.wall_s:.1f} s", flush=True)
                    rows.extend(_check(run, workers, bare_s, round_, args.timeout, cluster, quiet)
                                for run in histories)
                finally:
                    cluster.stop()
        report["load_average_end"] = list(os.getloadavg())
        found = analyse(rows)
        report["rows"] = [{**asdict(r), "s_per_million": r.s_per_million, "ratio": r.ratio} for r in rows]
        report["analysis"] = found
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(format_table(rows))
            print(format_analysis(found))
            print(f"load average (1, 5, 15 min): {report['load_average_start']} at the start, "
                  f"{report['load_average_end']} at the end, {report['cpus']} CPUs; workers {args.worker_memory}, "
                  f"executors {args.executor_memory}, daemons {args.daemon_memory}")
    except KeyboardInterrupt:
        print("scaleout: interrupted; every process it started is stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if args.keep:
            print(f"histories and cluster logs kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
