"""The machine's busy CPU time, for telling a saturated machine from a slow system.

Why: on a small machine the load generator and the cluster share the cores. When the cores
are all busy, every CPU-millisecond the load generator spends is taken from the brokers,
so its CPU per transaction lowers the rate through the system under test's waits, even while
the load process itself uses well under one core (`txnbench peer`, 2026-11-27: 2 cores, the
load process at 63% of one, its waits 40% longer than pulsar-perf's).
"""

from __future__ import annotations

import psutil


def busy_seconds() -> float:
    """Cumulative CPU seconds of all cores that were neither idle nor waiting for I/O, since boot."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)
