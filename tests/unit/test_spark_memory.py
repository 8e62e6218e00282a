"""The driver heap grows with the history, within the machine (analysis.spark.driver_memory)."""

from __future__ import annotations

import pytest

from analysis.spark import DRIVER_MEMORY_ENV, driver_memory

GIB = 1024 ** 3


@pytest.fixture(autouse=True)
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_MEMORY_ENV, raising=False)


def test_a_history_up_to_two_gib_gets_four() -> None:
    assert driver_memory(0, physical_bytes=24 * GIB) == "4g"
    assert driver_memory(2 * GIB, physical_bytes=24 * GIB) == "4g"


def test_a_larger_history_gets_six_where_the_machine_has_twice_that() -> None:
    # 19.8M events (6.7 GB) thrashed in full collections at 4 GiB; checked at 6 GiB within 8 GiB of memory.
    assert driver_memory(7 * GIB, physical_bytes=24 * GIB) == "6g"


def test_never_more_than_half_the_machine_nor_less_than_four() -> None:
    assert driver_memory(7 * GIB, physical_bytes=10 * GIB) == "5g"
    assert driver_memory(7 * GIB, physical_bytes=4 * GIB) == "4g"


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "3g")
    assert driver_memory(7 * GIB) == "3g"
