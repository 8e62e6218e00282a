"""The machine's busy CPU time, for telling a saturated machine from a slow system.

Why: on a small machine the load generator and the cluster share the cores. When the cores
are all busy, every CPU-millisecond the load generator spends is taken from the brokers,
so its CPU per transaction lowers the rate through the system under test's waits, even while
the load process itself uses well under one core (`txnbench peer`, 2026-11-27: 2 cores, the
load process at 63% of one, its waits 40% longer than pulsar-perf's). With the load
generator pinned to CPUs of its own (`txnbench peer --load-cpus`, harness/cpus.py) the
question splits in two: were the load generator's CPUs saturated, or the cluster's? So the
busy time of a set of CPUs can be read too.

Time of niced processes (nice > 0) is not counted busy while this process runs at normal
priority: such background work (another benchmark at `nice 19`) fills only CPU time the
measured processes leave idle and yields the rest, so counting it made every core read
"saturated" beside it (2026-11-28, a chaos run at nice 19 beside `txnbench peer`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

import psutil


def _busy(times: Any) -> float:
    busy = float(sum(times) - times.idle - getattr(times, "iowait", 0.0))
    if os.getpriority(os.PRIO_PROCESS, 0) <= 0:   # we are not background ourselves: niced time is
        busy -= float(getattr(times, "nice", 0.0) + getattr(times, "guest_nice", 0.0))
    return busy


def busy_seconds(cpus: Collection[int] | None = None) -> float:
    """Cumulative CPU seconds that were neither idle nor waiting for I/O nor spent by niced
    background processes (see above), since boot: of all cores, or of the CPUs `cpus` only."""
    if cpus is None:
        return _busy(psutil.cpu_times())
    per_cpu = psutil.cpu_times(percpu=True)
    return sum(_busy(per_cpu[i]) for i in cpus if 0 <= i < len(per_cpu))


def pinned_cpus() -> list[int] | None:
    """This process's CPUs when it may run on fewer than the machine has (it was pinned), else None."""
    own = os.sched_getaffinity(0)
    return sorted(own) if len(own) < (os.cpu_count() or len(own)) else None
