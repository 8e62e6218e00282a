"""Where `make test`'s CPU goes, test by test: a pytest plugin and its summary.

Why: `make test` is CPU-bound on two cores (docs/results.md, `#2026-12-01-suite-cpu`), so what
decides its time is how much CPU each test costs, not how long it waits; pytest's durations are
wall times that three workers sharing two cores inflate. `make test-cpu` runs the suite with this
plugin; each test's CPU is its worker's, its reaped children's and its live descendants' (a Spark
driver JVM, an embedded cluster's servers) between the test's start and end. Processes a test
starts apart from its worker (a new session that another process reaps) are not in it.

Plugin: `pytest -p tools.bench.suite_cpu` appends one JSON line per test to
`$TXNBENCH_SUITE_CPU_DIR/<worker>.jsonl` (default `results/suite-cpu/`): `id`, `cpu`, `wall`,
`start`. Summary: `python -m tools.bench.suite_cpu [DIR]` prints the CPU by folder, by file, the
dearest tests, and each worker's Spark tests (how much its session's warm-up cost: the first
WARM_UP_TESTS of them against the median of the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

DIR_ENV = "TXNBENCH_SUITE_CPU_DIR"
DEFAULT_DIR = Path("results") / "suite-cpu"
#: a worker's first Spark tests that pay its session's start and the JIT's warm-up
WARM_UP_TESTS = 10
SHOWN = 20


def cpu_seconds() -> float:
    """CPU of this process, its reaped children and its live descendants, in seconds."""
    own = os.times()
    total = own.user + own.system + own.children_user + own.children_system
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        total += times.user + times.system
    return total


def _out_dir() -> Path:
    return Path(os.environ.get(DIR_ENV) or DEFAULT_DIR)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu_before, started = cpu_seconds(), time.time()
    yield
    line = {"id": item.nodeid, "cpu": round(cpu_seconds() - cpu_before, 3),
            "wall": round(time.time() - started, 3), "start": started}
    out = _out_dir()
    out.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with (out / f"{worker}.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def read_rows(folder: Path) -> tuple[list[dict[str, Any]], int]:
    """Every recorded test, each with the `worker` whose file it came from, and how many lines
    could not be read (a run stopped while a worker wrote its line leaves half of one)."""
    rows, unreadable = [], 0
    for path in sorted(folder.glob("*.jsonl")):
        for text in path.read_text(encoding="utf-8").splitlines():
            if not text.strip():
                continue
            try:
                rows.append({**json.loads(text), "worker": path.stem})
            except json.JSONDecodeError:
                unreadable += 1
    return rows, unreadable


def folder_of(test_id: str) -> str:
    """`tests/<folder>` of a test id (tests/unit's subfolders count as tests/unit)."""
    parts = test_id.split("::", 1)[0].split("/")
    return "/".join(parts[:2])


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """CPU by folder and by file, the dearest tests, and each worker's Spark warm-up."""
    by_folder: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    tests_in: Counter[str] = Counter()
    for row in rows:
        by_folder[folder_of(row["id"])] += row["cpu"]
        by_file[row["id"].split("::", 1)[0]] += row["cpu"]
        tests_in[row["id"].split("::", 1)[0]] += 1
    workers = {}
    for worker in sorted({row["worker"] for row in rows}):
        spark = sorted((r for r in rows if r["worker"] == worker and r["id"].startswith("tests/spark/")),
                       key=lambda r: r["start"])
        if spark:
            first, rest = spark[:WARM_UP_TESTS], spark[WARM_UP_TESTS:]
            workers[worker] = {"spark_tests": len(spark), "spark_cpu": round(sum(r["cpu"] for r in spark), 1),
                               "first_cpu": round(sum(r["cpu"] for r in first), 1),
                               "rest_median_cpu": round(statistics.median(r["cpu"] for r in rest), 2) if rest else None}
    dearest = sorted(rows, key=lambda r: -r["cpu"])[:SHOWN]
    return {"tests": len(rows), "cpu": round(sum(r["cpu"] for r in rows), 1),
            "by_folder": {k: round(v, 1) for k, v in by_folder.most_common()},
            "by_file": [{"file": k, "tests": tests_in[k], "cpu": round(v, 1)} for k, v in by_file.most_common(SHOWN)],
            "dearest": [{"id": r["id"], "cpu": r["cpu"], "wall": r["wall"]} for r in dearest],
            "spark_sessions": workers}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.suite_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=None,
                        help=f"where the plugin wrote (default ${DIR_ENV} or {DEFAULT_DIR})")
    args = parser.parse_args(argv)
    folder = args.folder or _out_dir()
    rows, unreadable = read_rows(folder) if folder.is_dir() else ([], 0)
    if unreadable:
        print(f"suite_cpu: {unreadable} unreadable line(s) in {folder} left out (a run stopped mid-write)",
              file=sys.stderr)
    if not rows:
        print(f"suite_cpu: no test records in {folder}: run `make test-cpu` first", file=sys.stderr)
        return 2
    print(json.dumps(summarize(rows), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
