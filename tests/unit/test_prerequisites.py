"""A missing mvn, go or Java makes the tests that need it skip in one clear line; other failures still fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import EnvironmentProblem
from targets import gobuild
from targets.pulsar import jars, txn_check
from targets.pulsar.java import find_java
from targets.pulsar.versions import PULSAR_5
from tests.prerequisites import or_skip


def skipped(monkeypatch: pytest.MonkeyPatch, call: object) -> str:
    with pytest.raises(pytest.skip.Exception) as caught, or_skip():
        call()   # type: ignore[operator]
    reason = str(caught.value.msg)
    assert "\n" not in reason
    return reason


def test_no_mvn_and_no_cached_jars_skips_naming_maven(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(jars.shutil, "which", lambda name: None)
    reason = skipped(monkeypatch, lambda: jars.ensure_jars(PULSAR_5, root=tmp_path, say=lambda _: None))
    assert reason.startswith("needs mvn, which is missing here:") and "apt-get install maven" in reason


def test_the_java_check_without_mvn_skips_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(jars.shutil, "which", lambda name: None)
    reason = skipped(monkeypatch, lambda: txn_check.ensure_program(PULSAR_5, say=lambda _: None, root=tmp_path))
    assert reason.startswith("needs mvn") and "Java transaction check" in reason


def test_no_go_and_no_built_binary_skips_naming_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gobuild.shutil, "which", lambda name: None)
    reason = skipped(monkeypatch, lambda: gobuild.ensure_binary(gobuild.TOXIPROXY, lambda _: None, root=tmp_path))
    assert reason.startswith("needs go, which is missing here:") and "go.dev/dl" in reason


def test_no_java_new_enough_skips_naming_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = skipped(monkeypatch, lambda: find_java(21, candidates=[]))
    assert reason.startswith("needs Java 21+, which is missing here:") and "TXNBENCH_JAVA_HOME" in reason


def test_any_other_environment_problem_still_fails() -> None:
    with pytest.raises(EnvironmentProblem, match="Maven Central"), or_skip():
        raise EnvironmentProblem("resolving Apache Pulsar 5.0.1's jars failed (mvn exit 1): Maven Central unreachable")
