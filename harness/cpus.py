"""CPU sets: give the load generator cores of its own, apart from the cluster it measures.

Why. On a small machine the load generator and the cluster share every core, so the
generator's CPU is taken from the system it measures, and a tool that costs more CPU per
transaction (txnbench's Python against pulsar-perf's Java) slows the cluster as well as
itself: the comparison then measures the machine, not the tools. Pinning the load
generators (pulsar-perf's JVM, txnbench's load process and its workers) to one set of
CPUs and everything else (the cluster's processes, the orchestrator) to the rest makes
both tools meet the same cluster on the same cores.

How. Linux keeps an affinity mask per thread and a new thread or process inherits its
creator's. The orchestrator pins all of its own threads to the cluster's CPUs before it
starts the cluster, so every server it starts inherits them; a load generator is started
with its mask set between fork and exec (`preexec_pinning`), before it has threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


class CpuSetError(ValueError):
    """A CPU list that cannot be used here; the message names the problem and the fix."""


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a list such as `1`, `0,2` or `2-3,6` (the kernel's cpuset syntax)."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise CpuSetError(f"{text!r}: an empty entry; write CPUs as 1, 0,2 or 2-3")
        low, sep, high = part.partition("-")
        if not (low.isdigit() and (not sep or high.isdigit())):
            raise CpuSetError(f"{text!r}: {part!r} is not a CPU number or range; write CPUs as 1, 0,2 or 2-3")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise CpuSetError(f"{text!r}: the range {part!r} runs backwards")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """`{0, 1, 2, 5}` -> `0-2,5`."""
    ordered = sorted(set(cpus))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)


def usable_cpus() -> frozenset[int]:
    """The CPUs this process may run on (a container or `taskset` may allow fewer than the machine has)."""
    return frozenset(os.sched_getaffinity(0))


@dataclass(frozen=True)
class CpuSplit:
    """Which CPUs the cluster (and the orchestrator) get, and which the load generators get."""

    cluster: frozenset[int]
    load: frozenset[int]

    def describe(self) -> str:
        return (f"load generators pinned to CPU {format_cpu_list(self.load)}, the cluster and the "
                f"orchestrator to CPU {format_cpu_list(self.cluster)}")

    def to_json(self) -> dict[str, str]:
        return {"cluster": format_cpu_list(self.cluster), "load": format_cpu_list(self.load)}


def split_off(load: frozenset[int], usable: frozenset[int]) -> CpuSplit:
    """Give `load` to the load generators and every other usable CPU to the cluster."""
    outside = load - usable
    if outside:
        raise CpuSetError(f"CPU {format_cpu_list(outside)} is not usable here (usable: {format_cpu_list(usable)}); "
                          "name CPUs from that list")
    if not load:
        raise CpuSetError("no CPU given for the load generators")
    cluster = usable - load
    if not cluster:
        raise CpuSetError(f"CPU {format_cpu_list(load)} is every usable CPU: the cluster would have none; "
                          "leave at least one CPU to it")
    return CpuSplit(cluster=cluster, load=load)


def pin_process(pid: int, cpus: frozenset[int]) -> int:
    """Pin every thread of process `pid` to `cpus` (threads it starts later inherit the mask);
    returns how many threads were pinned. Threads that end meanwhile are skipped."""
    pinned = 0
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, FileNotFoundError):
            continue
        pinned += 1
    return pinned


def preexec_pinning(cpus: frozenset[int] | None) -> Callable[[], None] | None:
    """A `Popen(preexec_fn=...)` that pins the child before it runs anything (None: no pinning)."""
    if cpus is None:
        return None
    mask = frozenset(cpus)

    def pin() -> None:
        os.sched_setaffinity(0, mask)
    return pin
