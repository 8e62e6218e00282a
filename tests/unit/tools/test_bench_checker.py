"""The checker benchmark reads the results of the check it timed, not the run's first ones."""

from __future__ import annotations

import os
from pathlib import Path

from tools.bench.checker import newest_results


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
