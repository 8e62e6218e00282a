"""The machine's busy CPU seconds, whole and per set of CPUs (harness/host_cpu.py)."""

from __future__ import annotations

import os

import pytest

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


def test_niced_background_time_is_not_busy_while_we_run_at_normal_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    times = psutil._psplatform.scputimes(*([0.0] * len(psutil.cpu_times())))
    times = times._replace(user=10.0, nice=30.0, system=5.0, idle=50.0, iowait=5.0)
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=False: [times] if percpu else times)
    monkeypatch.setattr(os, "getpriority", lambda which, who: 0)
    assert host_cpu.busy_seconds() == 15.0 and host_cpu.busy_seconds([0]) == 15.0
    monkeypatch.setattr(os, "getpriority", lambda which, who: 19)   # run niced ourselves: all of it counts
    assert host_cpu.busy_seconds() == 45.0
