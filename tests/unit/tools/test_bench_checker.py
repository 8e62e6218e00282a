"""The checker benchmark reads the results of the check it timed, not the run's first ones, and
says where its JVM's CPU went."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from tools.bench.checker import _run_sampled, newest_results, thread_cpu_s, thread_kind


def test_a_repeated_check_is_read_from_its_own_folder(tmp_path: Path) -> None:
    analysis = tmp_path / "analysis"
    assert newest_results(tmp_path) is None
    first = analysis / "results.json"
    first.parent.mkdir()
    first.write_text("{}")
    assert newest_results(tmp_path) == first
    again = analysis / "check-20261129-172000" / "results.json"
    again.parent.mkdir()
    again.write_text("{}")
    os.utime(first, ns=(1_000_000_000, 1_000_000_000))     # the first check, long before
    assert newest_results(tmp_path) == again


@pytest.mark.parametrize(("name", "kind"), [
    # As /proc shows them: the first 15 bytes of the name.
    ("Executor task l", "tasks"), ("C2 CompilerThre", "jit"), ("C1 CompilerThre", "jit"),
    ("GC Thread#1", "gc"), ("VM Thread", "gc"), ("Thread-3", "other"), ("main", "other"),
])
def test_a_jvm_thread_is_counted_by_its_name(name: str, kind: str) -> None:
    assert thread_kind(name) == kind


def test_the_threads_of_a_live_process_and_their_cpu(tmp_path: Path) -> None:
    stop = threading.Event()

    def spin() -> None:
        deadline = time.monotonic() + 5
        while not stop.is_set() and time.monotonic() < deadline:
            sum(range(10_000))

    before = thread_cpu_s(os.getpid())
    busy = threading.Thread(target=spin)
    busy.start()
    try:
        time.sleep(0.5)
        during = thread_cpu_s(os.getpid())
    finally:
        stop.set()
        busy.join()
    assert os.getpid() in during   # the main thread's id is the process's
    new = set(during) - set(before)
    assert new and max(during[tid][1] for tid in new) > 0.1
    assert thread_cpu_s(2**22 + 12345) == {}   # no such process


def test_a_sampled_command_splits_its_jvms_cpu_by_thread_kind(tmp_path: Path) -> None:
    # The check's JVM is below its Python process, as here: a source-file program that the JVM
    # compiles itself and then keeps busy for a second.
    java = shutil.which("java")
    assert java is not None, "PySpark needs Java on PATH"
    program = tmp_path / "Busy.java"
    program.write_text("public class Busy { public static void main(String[] a) { long end = System.nanoTime()"
                       " + 1_000_000_000L; long x = 0; while (System.nanoTime() < end) { x += x * 31 + 7; }"
                       " System.out.println(x != 1); } }")
    done = _run_sampled([sys.executable, "-c", f"import subprocess; subprocess.run([{java!r}, {str(program)!r}],"
                         " check=True)"], "busy JVM", timeout_s=120)
    assert done.returncode == 0, done.stderr
    assert done.jvm_threads_cpu_s is not None
    assert done.jvm_threads_cpu_s.get("jit", 0) > 0      # compiling the program and the loop
    assert sum(done.jvm_threads_cpu_s.values()) > 0.5    # the busy second, in its main thread
    assert sum(done.jvm_threads_cpu_s.values()) <= (done.below_cpu_s or 0) + 0.5
