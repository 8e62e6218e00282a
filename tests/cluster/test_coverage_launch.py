"""harness.covered keeps the coverage of a service that is killed with SIGKILL, as chaos kills them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.coverage import Span, _Measured, data_files


def test_a_killed_process_keeps_what_it_ran(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "svc.py").write_text(
        "import sys, time\n"
        "def reached():\n"
        "    return 1\n"
        "def never():\n"
        "    return 2\n"
        "reached()\n"
        "open(sys.argv[2], 'w').write('up')\n"
        "for _ in range(600):\n"
        "    time.sleep(0.1)\n")
    ready = tmp_path / "ready"
    data = tmp_path / "cov"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{Path.cwd()}"}
    proc = subprocess.Popen([sys.executable, "-m", "harness.covered", "--data-dir", str(data), "--source", "pkg",
                             "pkg.svc", "--", "--config", str(ready)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), "the module did not run"
        time.sleep(2.5)                      # past at least one periodic save
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    files = data_files(data)
    assert len(files) == 1
    measured = _Measured(files, tmp_path, tmp_path)
    assert measured.tally(Span("pkg/svc.py", "reached", 2, 3)).lines_hit == 2
    never = measured.tally(Span("pkg/svc.py", "never", 4, 5))
    assert (never.lines_hit, never.missing) == (1, [5])      # its def ran at import, its body never
