"""Thread dumps of a finding's brokers, taken before the cluster goes down.

Why: some bugs leave no log line, only a thread that never returns (a replay loop sleeping 1 ms
at a time for ever on a shared executor). A reader of a finding's folder, or of its upstream
report, needs the stack that proves it, and its CPU time growing between two dumps proves the
thread is spinning rather than parked. So for a finding that names `thread_signs`, the brokers'
threads are dumped twice, `GAP_S` apart, with the JDK's `jstack` beside the java the brokers run
on; each dump is kept in the finding's folder and the threads whose stack holds a sign are quoted
with their CPU time in both dumps.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

GAP_S = 3.0
JSTACK_TIMEOUT_S = 30.0
#: a thread's header line in a jstack dump: `"name" #81 ... cpu=2709.44ms elapsed=...`
_HEADER = re.compile(r'^"(?P<name>[^"]+)".*?\bcpu=(?P<cpu>[0-9.]+)ms')


def jstack_beside(java: str) -> str | None:
    """The `jstack` of the JDK `java` belongs to (a matching version attaches), else one on PATH."""
    sibling = Path(java).resolve().parent / "jstack"
    return str(sibling) if sibling.is_file() else shutil.which("jstack")


def threads_holding(dump: str, signs: Sequence[str]) -> dict[str, float]:
    """Per thread whose stack holds one of `signs`: its CPU time in ms (from the header line)."""
    found: dict[str, float] = {}
    for block in dump.split("\n\n"):
        header = _HEADER.match(block.lstrip())
        if header and any(sign in block for sign in signs):
            found[header["name"]] = float(header["cpu"])
    return found


def describe(first: dict[str, float], second: dict[str, float], signs: Sequence[str]) -> list[str]:
    """One line per thread in both dumps: its name and CPU time then and `GAP_S` later."""
    lines = [f"{len(second)} thread(s) in {' / '.join(signs)}"] if second else []
    for name, cpu in second.items():
        before = first.get(name)
        grew = "" if before is None else f" (cpu {before:.0f} ms, {GAP_S:g} s earlier {cpu - before:+.0f} ms)"
        lines.append(f"{name}: cpu {cpu:.0f} ms{grew}")
    return lines


def dump_brokers(brokers: Sequence[tuple[str, int]], java: str, folder: Path, signs: Sequence[str],
                 sleep: float = GAP_S) -> dict[str, list[str]]:
    """Dumps every (name, pid) twice into `folder/threads-<name>-<k>.txt` (a failed dump keeps its
    error there); per broker with a match, the lines `describe` gives; without a jstack, why not."""
    if not signs:
        return {}
    jstack = jstack_beside(java)
    if jstack is None:
        return {"threads": [f"no thread dump: no jstack beside {java} nor on PATH (install the JDK, not only a JRE)"]}
    dumps: dict[str, list[str]] = {name: [] for name, _ in brokers}
    for k in (1, 2):
        for name, pid in brokers:
            try:
                text = subprocess.run([jstack, str(pid)], capture_output=True, text=True,
                                      timeout=JSTACK_TIMEOUT_S, check=True).stdout
            except (OSError, subprocess.SubprocessError) as err:
                text = f"jstack failed: {err}"
            (folder / f"threads-{name}-{k}.txt").write_text(text)
            dumps[name].append(text)
        if k == 1:
            time.sleep(sleep)
    quoted: dict[str, list[str]] = {}
    for name, (first, second) in ((n, d) for n, d in dumps.items() if len(d) == 2):
        lines = describe(threads_holding(first, signs), threads_holding(second, signs), signs)
        if lines:
            quoted[f"threads-{name}"] = lines
    return quoted
