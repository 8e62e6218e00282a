"""Tests that need programs `make setup` does not install skip, with one line, when one is missing.

Which ones (README, "Prerequisites"): real Apache Pulsar (`tests/pulsar/`) needs `mvn` to
resolve the jars on first use, Java 21+ for Pulsar 5.0's servers and `go` to build Toxiproxy
on first use; the Java transaction check on the embedded cluster
(`tests/cluster/test_java_txn_check.py`) needs `mvn` for the client's jars and a JDK 17+
(`javac`). What counts as missing is decided by the code that needs it, which raises
`harness.errors.MissingTool` naming the tool and the fix; a jar cache or a binary already
built needs no tool, and any other failure (Maven Central unreachable, a build that fails)
still fails the test.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from harness.errors import MissingTool


def under_test(env: str, ours: str, real: str) -> list[str]:
    """Which implementations a suite runs against: `$env`, a comma-separated list of `ours` and `real`."""
    chosen = [x.strip() for x in os.environ.get(env, ours).split(",") if x.strip()]
    unknown = set(chosen) - {ours, real}
    if unknown:
        raise pytest.UsageError(f"{env}: {', '.join(sorted(unknown))}; use {ours}, {real} or both")
    return chosen


@contextlib.contextmanager
def or_skip() -> Iterator[None]:
    """Skip the test, in one line naming the tool and the fix, when the block finds a tool missing."""
    try:
        yield
    except MissingTool as err:
        pytest.skip(f"needs {err.tool}, which is missing here: {' '.join(str(err).split())}")


def real_pulsar_ready(version: str | None = None) -> None:
    """What `txnbench cluster up --target pulsar` needs, checked (and, on first use, fetched) before a
    test starts it in another process: the release's jars (Maven), its Java, and the real Toxiproxy
    (Go) unless TXNBENCH_PULSAR_PROXY=ours. Raises MissingTool (use inside `or_skip()`)."""
    from targets import gobuild
    from targets.pulsar.cluster import REAL_TOXIPROXY, default_proxy
    from targets.pulsar.jars import ensure_jars
    from targets.pulsar.java import find_java
    from targets.pulsar.versions import release

    chosen = release(version)
    find_java(chosen.min_java)
    ensure_jars(chosen)
    if default_proxy() == REAL_TOXIPROXY:
        gobuild.ensure_binary(gobuild.TOXIPROXY)
