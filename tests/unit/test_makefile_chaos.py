"""`make chaos`'s arguments, as make itself expands them (`make -n`), not as the Makefile reads.

Why: on the pulsar target `make chaos` stretches chaos.yaml's main phase (PULSAR_CHAOS_DURATION,
its heals take longer there); it also stretched every other scenario, so `make chaos TARGET=pulsar
SCENARIO=chaos-sessions` ran 800 s where that scenario's last metadata cut is planned to span the
load's end (its faults phase's own length).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def chaos_command(*variables: str) -> list[str]:
    """The `txnbench chaos` command `make chaos VARIABLES` would run (its words)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", "-s", "--no-print-directory", "-C", str(ROOT), "chaos", *variables],
                          capture_output=True, text=True, timeout=60, check=True)
    lines = [line for line in done.stdout.splitlines() if "txnbench chaos" in line]
    assert len(lines) == 1, done.stdout
    return lines[0].split()


def duration_of(words: list[str]) -> str | None:
    return words[words.index("--duration") + 1] if "--duration" in words else None


@pytest.mark.parametrize(("variables", "duration"), [
    (("TARGET=pulsar",), "800"),
    (("TARGET=pulsar", "SCENARIO=chaos"), "800"),
    (("TARGET=pulsar", "SCENARIO=chaos-sessions"), None),
    (("TARGET=pulsar", "SCENARIO=chaos-sessions", "DURATION=90"), "90"),
    (("TARGET=pulsar", "DURATION=100"), "100"),
    (("TARGET=pulsar", "PULSAR_CHAOS_DURATION=500"), "500"),
    ((), None),
    (("SCENARIO=chaos-sessions",), None),
])
def test_only_chaos_yaml_on_real_pulsar_is_stretched(variables: tuple[str, ...], duration: str | None) -> None:
    words = chaos_command(*variables)
    assert duration_of(words) == duration
    assert words.count("--duration") <= 1
