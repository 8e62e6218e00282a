"""The real Oxia v0.14.0 under concurrent writers, as the `pulsar` target runs it and as Oxia runs by default.

docs/findings/oxia-v0.14.0-wal-offset-race.md: with every core, two writes can reach the WAL
in the opposite order of their offsets and every later write fails within a second; with
GOMAXPROCS=1 (the target's `conf.OXIA_ENV`) it takes far longer (none in 20 s here; a v5
mixed run on real Pulsar still hit it after a minute). The finding's own command (`txnbench
finding oxia-v0.14.0-wal-offset-race`, a tool finding) is a strict expected failure too. Both run only when the real Oxia is under test
(`TXNBENCH_OXIA_UNDER_TEST` names `real`, as `make test-oxia-real` does): they build it with
Go on first use.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from targets.pulsar import tool_finding
from targets.pulsar.finding import COULD_NOT_RUN, NOT_SHOWN, summary
from tests.cluster.test_oxia_client import OURS, REAL, UNDER_TEST_ENV
from tests.prerequisites import under_test
from tools.repro.oxia_wal_offset_race import reproduce

pytestmark = pytest.mark.skipif(REAL not in under_test(UNDER_TEST_ENV, OURS, REAL),
                                reason="the real Oxia is not under test (TXNBENCH_OXIA_UNDER_TEST=ours,real)")

WRITERS = 8


def test_with_the_targets_environment_concurrent_writers_keep_the_wal_whole_for_a_while(tmp_path: Path) -> None:
    seen = reproduce(tmp_path, writers=WRITERS, seconds=20)
    assert not seen.broken, seen
    assert seen.puts > 200, f"too few writes to have raced at all: {seen}"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the race needs two goroutines running at once")
@pytest.mark.xfail(strict=True, reason="Oxia v0.14.0, fixed in v0.14.2 (oxia-db/oxia#738), which the module proxy "
                                       "refuses: docs/findings/oxia-v0.14.0-wal-offset-race.md")
def test_on_every_core_concurrent_writers_keep_the_wal_whole(tmp_path: Path) -> None:
    seen = reproduce(tmp_path, writers=WRITERS, seconds=30, env={})
    assert not seen.broken, seen


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the race needs two goroutines running at once")
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="Oxia v0.14.0: `txnbench finding oxia-v0.14.0-wal-offset-race` shows the bug (exit 1)")
def test_the_finding_command_does_not_show_the_wal_race(tmp_path: Path) -> None:
    outcome = tool_finding.run_tool_finding(tool_finding.TOOL_FINDINGS["oxia-v0.14.0-wal-offset-race"], tries=1,
                                            results=tmp_path, say=lambda text: None)
    assert outcome.exit_code != COULD_NOT_RUN, summary(outcome)
    assert outcome.exit_code == NOT_SHOWN, summary(outcome)
