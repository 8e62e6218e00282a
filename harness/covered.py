"""Run one service module under coverage.py: `python -m harness.covered --data-dir D --source PKG -- MODULE ARGS...`.

Why a launcher of its own rather than `coverage run -p`: chaos kills services with
SIGKILL, and coverage.py writes its data only when the process exits, so everything a
killed broker ran, its recovery included, would be lost. Here the data is saved every
`SAVE_EVERY_S` from a daemon thread (coverage.py's sqlite data file is written in place,
so each save adds to the last), and once more at a normal exit; a kill loses at most the
last interval. Each process writes its own file (parallel mode: `.coverage.<host>.<pid>.<random>`
in the data dir), so restarts and concurrent services never overwrite one another;
`orchestrator/coverage.py` combines them.

Branch coverage is on. Only the packages named by `--source` are traced, to keep the
slowdown small.
"""

from __future__ import annotations

import argparse
import atexit
import runpy
import sys
import threading
from pathlib import Path

SAVE_EVERY_S = 1.0


def _saver(cov: object, stop: threading.Event, lock: threading.Lock) -> None:
    """Save every SAVE_EVERY_S until stopped; a failed save is retried at the next tick."""
    while not stop.wait(SAVE_EVERY_S):
        with lock:
            try:
                cov.save()   # type: ignore[attr-defined]
            except Exception as err:   # a save must never take the service down
                print(f"harness.covered: saving coverage failed: {err}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.covered")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--source", action="append", default=[], metavar="PKG")
    parser.add_argument("module")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]

    import coverage

    args.data_dir.mkdir(parents=True, exist_ok=True)
    cov = coverage.Coverage(data_file=str(args.data_dir / ".coverage"), data_suffix=True, branch=True,
                            source_pkgs=args.source or None, concurrency=["thread"])
    lock = threading.Lock()
    stop = threading.Event()

    def finish() -> None:
        stop.set()
        with lock:
            try:
                cov.stop()
                cov.save()
            except Exception as err:
                print(f"harness.covered: final coverage save failed: {err}", file=sys.stderr, flush=True)

    cov.start()
    atexit.register(finish)
    threading.Thread(target=_saver, args=(cov, stop, lock), name="coverage-saver", daemon=True).start()
    sys.argv = [args.module, *args.args]
    runpy.run_module(args.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
