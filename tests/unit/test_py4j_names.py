"""Which py4j lookups are remembered (analysis.py4j_names), on a stand-in for py4j's objects."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.py4j_names import _remembering


class Kept:
    pass


class Other:
    pass


ANSWERS: dict[str, Any] = {"Cls": Kept(), "FIELD": Other(), "count": 3}


class View:
    """Answers `__getattr__` from ANSWERS and records each question, as py4j asks the JVM."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        if name not in ANSWERS:
            raise LookupError(f"{name} does not exist in the JVM")
        return ANSWERS[name]


class RememberingView(View):
    pass


RememberingView.__getattr__ = _remembering(View.__getattr__, (Kept,))  # type: ignore[method-assign]


def test_a_name_that_resolves_to_a_kept_kind_is_asked_once_and_is_the_same_object() -> None:
    view = RememberingView()
    first = view.Cls
    assert view.Cls is first and view.Cls is first
    assert view.asked == ["Cls"]


def test_other_answers_are_asked_every_time() -> None:
    view = RememberingView()
    assert view.FIELD is view.FIELD and view.count == view.count == 3
    assert view.asked == ["FIELD", "FIELD", "count", "count"]


def test_a_name_that_does_not_resolve_raises_every_time_and_is_not_kept() -> None:
    view = RememberingView()
    for _ in range(2):
        with pytest.raises(LookupError, match="does not exist"):
            _ = view.Missing
    assert view.asked == ["Missing", "Missing"] and "Missing" not in vars(view)


def test_the_replacement_names_what_it_wraps() -> None:
    assert RememberingView.__getattr__.__wrapped__ is View.__getattr__  # type: ignore[attr-defined]
