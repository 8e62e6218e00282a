"""The make targets cache Python's bytecode even where the environment says not to.

Why it matters: with PYTHONDONTWRITEBYTECODE set (this machine's shell sets it), every process
`make test` starts compiled the project's sources again and every pytest worker rewrote every
test file's asserts; tests/cluster spent 8% more CPU (docs/results.md, `#2026-12-02-pycache`).
The rule is read from make itself (a probe rule added with `--eval`), not from the Makefile's text.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = "txnbench-bytecode-probe"


def recipe_environment(environment: dict[str, str]) -> dict[str, str]:
    """The PYTHON* variables a Makefile recipe sees when make runs in `environment`."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(ROOT), "--eval",
         f"{PROBE}: ; @env | grep '^PYTHON' || true", PROBE],
        env=environment, capture_output=True, text=True, timeout=60, check=True)
    pairs = (line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return dict(pairs)


def test_a_recipe_writes_bytecode_under_txnbench_even_where_the_environment_forbids_it() -> None:
    seen = recipe_environment({**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert seen.get("PYTHONDONTWRITEBYTECODE", "") == "", "an empty value lets Python write bytecode"
    # make's abspath keeps a symbolic link in the checkout's path; ROOT has it resolved
    assert Path(seen["PYTHONPYCACHEPREFIX"]).resolve() == ROOT / ".txnbench" / "pycache"


def test_where_the_environment_allows_bytecode_the_recipes_use_pythons_own_folders() -> None:
    quiet = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    seen = recipe_environment(quiet)
    assert "PYTHONPYCACHEPREFIX" not in seen and seen.get("PYTHONDONTWRITEBYTECODE", "") == ""


def test_the_cache_is_outside_the_source_tree_and_ignored_by_git() -> None:
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", ".txnbench/pycache/x.pyc"],
                             capture_output=True, timeout=30)
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0, ".txnbench/pycache must be ignored by git"
