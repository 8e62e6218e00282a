"""A large check's driver commits its whole heap at the start (analysis.spark.whole_heap_options).

Grown from a small start, the 20M-event check paid a dozen full collections resizing the
heap; these pin that the option is built from Spark's form of the size and that only a
check of a history above LARGE_INPUT_MEMORY_BYTES asks for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis import check
from analysis.spark import LARGE_INPUT_MEMORY_BYTES, whole_heap_options


@pytest.mark.parametrize(("memory", "initial"), [
    ("6g", "-Xms6144m"), ("6G", "-Xms6144m"), ("6gb", "-Xms6144m"), ("6144m", "-Xms6144m"),
    ("6144", "-Xms6144m"), ("1t", "-Xms1048576m"), (" 4g ", "-Xms4096m"), ("2097152k", "-Xms2048m"),
])
def test_the_initial_heap_is_the_whole_heap_in_mib(memory: str, initial: str) -> None:
    options = whole_heap_options(memory)
    assert options[0] == initial
    assert any(option.startswith("-XX:MetaspaceSize=") for option in options)


@pytest.mark.parametrize("memory", ["", "lots", "6.5g", "-6g", "6x", "512k", "0m"])
def test_a_size_the_jvm_cannot_take_gives_no_option(memory: str) -> None:
    # The heap then grows as before: a wrong $TXNBENCH_SPARK_DRIVER_MEMORY is Spark's to report.
    assert whole_heap_options(memory) == ()


class _Started(Exception):
    """Raised by the stand-in for get_spark: the check got as far as starting Spark."""


@pytest.mark.parametrize(("size", "whole"), [
    (1024, False), (LARGE_INPUT_MEMORY_BYTES, False), (LARGE_INPUT_MEMORY_BYTES + 1, True)])
def test_only_a_large_history_starts_the_driver_with_its_whole_heap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, whole: bool) -> None:
    asked: dict[str, Any] = {}

    def started(master: str | None = None, **options: Any) -> None:
        asked.update(options)
        raise _Started

    (tmp_path / "history").mkdir()
    monkeypatch.setattr(check, "history_damage", lambda run: ("", []))
    monkeypatch.setattr(check, "history_bytes", lambda directory: size)
    monkeypatch.setattr(check, "get_spark", started)
    monkeypatch.setenv(check.CHECKER_ENV, "spark")
    with pytest.raises(_Started):
        check.check_run(tmp_path, progress=False)
    assert asked["whole_heap"] is whole
    assert asked["memory"] == check.driver_memory(size)
