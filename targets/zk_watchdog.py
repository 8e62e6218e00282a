"""Kill a ZooKeeper server when the process that owns its cluster dies.

Why: our services exit by themselves when their `parent_pid` is gone (harness.service),
so a run killed with -9 leaves no orphans; a Java ZooKeeper cannot do that. This small
process does it for it: `python -m targets.zk_watchdog --parent P --child C
--child-start T` polls both; it SIGKILLs the child (only if its pid still has start time
T, so a reused pid is never hit) once the parent is gone, and exits as soon as the child
is gone (a stop, a kill -9 by a fault, a restart: the next start brings its own watchdog).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.entrypoints import python_m

POLL_S = 0.5


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot); None when the pid is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def watch(parent: int, child: int, child_start: int, poll_s: float = POLL_S) -> str:
    """Until the child is gone (bounded by its life): 'child gone' or 'killed'."""
    while True:
        if start_time(child) != child_start:
            return "child gone"
        if start_time(parent) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGCONT)   # a paused server dies as well
                os.kill(child, signal.SIGKILL)
            return "killed"
        time.sleep(poll_s)


def spawn(parent: int, child: int, child_start: int | None = None) -> subprocess.Popen[bytes] | None:
    """Start a watchdog that kills `child` once `parent` is gone; None when the child is gone already."""
    child_start = child_start if child_start is not None else start_time(child)
    if child_start is None:
        return None
    this = sys.modules[__name__]   # this module, named by its spec (it moves, the command follows)
    return subprocess.Popen(python_m(this, "--parent", str(parent), "--child", str(child),
                                     "--child-start", str(child_start)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--child", type=int, required=True)
    parser.add_argument("--child-start", type=int, required=True)
    args = parser.parse_args(argv)
    watch(args.parent, args.child, args.child_start)


if __name__ == "__main__":
    main()
