"""The machine's busy CPU seconds, whole and per set of CPUs (harness/host_cpu.py)."""

from __future__ import annotations

import os

from harness import host_cpu


def test_the_busy_time_of_every_cpu_adds_up_to_the_machines() -> None:
    cpus = range(os.cpu_count() or 1)
    whole, parts = host_cpu.busy_seconds(), host_cpu.busy_seconds(cpus)
    assert whole > 0 and abs(parts - whole) <= 0.05 * whole + 1.0   # two reads a moment apart
    assert 0 < host_cpu.busy_seconds([0]) <= parts
    assert host_cpu.busy_seconds([10_000]) == 0   # a CPU the machine does not have counts nothing


def test_an_unpinned_process_reports_no_own_cpus() -> None:
    own = os.sched_getaffinity(0)
    expected = None if len(own) >= (os.cpu_count() or len(own)) else sorted(own)
    assert host_cpu.pinned_cpus() == expected
