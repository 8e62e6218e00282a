"""Compile some of the finding programs' sources (targets/pulsar/repro) with a probe class and run it.

Why: the programs' logic that decides a try (how an option is read, what an answer about a
transaction means) is tested without a cluster by a small Java main that prints what it decides;
each such test compiled and ran it the same way, so the steps live here once. Skips without a JDK.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from targets.pulsar.finding import REPRO_SOURCES
from targets.pulsar.txn_check import _javac, find_jdk
from tests.prerequisites import or_skip


def run_probe(folder: Path, probe_class: str, probe_source: str, repro_files: list[str],
              args: list[str] | None = None) -> list[str]:
    """The probe's output lines: `probe_source` (class `probe_class`) compiled in `folder` beside the
    named files of targets/pulsar/repro, then run with `args`."""
    with or_skip():
        java, _major = find_jdk(17)
        javac = _javac(java)
    probe_file = folder / f"{probe_class}.java"
    probe_file.write_text(probe_source)
    sources = [str(REPRO_SOURCES / name) for name in repro_files]
    subprocess.run([str(javac), "-nowarn", "-d", str(folder), *sources, str(probe_file)],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([str(java), "-cp", str(folder), probe_class, *(args or [])], check=True,
                          capture_output=True, text=True, timeout=60)
    return done.stdout.splitlines()
