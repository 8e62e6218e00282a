"""The peer's pulsar-perf sequence on one cluster (orchestrator/peer.py `PerfRuns`), with a fake pulsar-perf."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from harness.config import parse_scenario
from harness.errors import EnvironmentProblem
from orchestrator.peer import PERF_AFTER_DIR, PERF_DIR, PERF_WARMUP_DIR, PerfRuns
from targets.pulsar.perf import LOG_NAME, PerfRun
from targets.pulsar.perf_args import PerfPlan, plan_peer
from targets.pulsar.versions import PULSAR_4_LTS

SCENARIO = """
name: ap
path: v4
phases: {warmup_s: 5, steady_s: 30}
load: {users: 8}
workload: {kind: atomic-produce, topics: 2, participants: 2, messages_per_txn: 4, topics_per_txn: 2}
"""


class FakePerf:
    """Records what each run was asked for; fails the runs whose folder is in `fail`; writes `log` as
    each run's pulsar-perf log."""

    def __init__(self, fail: tuple[str, ...] = (), log: str = "") -> None:
        self.calls: list[tuple[PerfPlan, Path]] = []
        self.fail = fail
        self.log = log

    def __call__(self, plan: PerfPlan, *, out_dir: Path, **_: Any) -> PerfRun:
        self.calls.append((plan, out_dir))
        if out_dir.name in self.fail:
            raise EnvironmentProblem(f"pulsar-perf exited 1; see {out_dir}/{LOG_NAME}")
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / LOG_NAME).write_text(self.log)
        return PerfRun(argv=["java"], out_dir=out_dir, log_path=out_dir / LOG_NAME, exit_code=0)


def _runs(tmp_path: Path, fake: FakePerf, said: list[str]) -> PerfRuns:
    plan = plan_peer(parse_scenario(SCENARIO), PULSAR_4_LTS, tag="t").perf
    return PerfRuns(plan, tmp_path, said.append, fake)


def test_warm_up_measured_and_after_each_run_on_topics_of_their_own(tmp_path: Path) -> None:
    fake, said = FakePerf(), list[str]()
    runs = _runs(tmp_path, fake, said)
    runs.warm_up(120)
    runs.measured()
    assert runs.after() is not None
    (warm, warm_dir), (measured, measured_dir), (after, after_dir) = fake.calls
    assert (warm_dir.name, measured_dir.name, after_dir.name) == (PERF_WARMUP_DIR, PERF_DIR, PERF_AFTER_DIR)
    assert measured == runs.plan
    assert (warm.warmup_s, warm.steady_s) == (0, 120)   # all of it unmeasured load
    topics = [set(p.producer_topics) for p in (warm, measured, after)]
    assert all(not (a & b) for i, a in enumerate(topics) for b in topics[i + 1:])
    assert len({warm.subscription, measured.subscription, after.subscription}) == 3
    assert dataclasses.replace(after, producer_topics=measured.producer_topics,
                               subscription=measured.subscription) == measured   # the same load otherwise
    for folder in (PERF_DIR, PERF_AFTER_DIR):
        assert json.loads((tmp_path / folder / "run.json").read_text())["exit_code"] == 0
    assert not (tmp_path / PERF_WARMUP_DIR / "run.json").exists()   # nothing of the warm-up is reported
    assert any("warming the cluster up" in line for line in said)


def test_no_warm_up_at_zero_seconds(tmp_path: Path) -> None:
    fake = FakePerf()
    _runs(tmp_path, fake, []).warm_up(0)
    assert fake.calls == []


def test_a_failed_run_after_txnbench_leaves_the_report_unbracketed_not_lost(tmp_path: Path) -> None:
    fake, said = FakePerf(fail=(PERF_AFTER_DIR,)), list[str]()
    runs = _runs(tmp_path, fake, said)
    runs.measured()
    assert runs.after() is None
    assert (tmp_path / PERF_DIR / "run.json").is_file() and not (tmp_path / PERF_AFTER_DIR / "run.json").exists()
    assert any("has no bracket" in line and "exited 1" in line for line in said)


def _log(rates: list[float]) -> str:
    """pulsar-perf's interval lines, 10 s apart, with these per-second rates."""
    lines, total = [], 0
    for i, rate in enumerate(rates):
        total += int(rate * 10)
        lines.append(f"{1795854308365 + 10_000 * i} INFO  PerformanceTransaction - Throughput transaction: "
                     f"{total:7d} --- {rate:7.3f}/s --- SendLatency: mean: 1.0 ms - med: 1.0")
    return "\n".join(lines) + "\n"


def test_a_warm_up_that_stalls_the_cluster_stops_the_peer_before_anything_is_measured(tmp_path: Path) -> None:
    # Pulsar 5.0.1's v5 under pulsar-perf's V5 load (2026-11-28): 7.9, 13.6, 12.1, 8.2, 5.6, then 0 for good
    fake = FakePerf(log=_log([7.9, 13.6, 12.1, 8.2, 5.6, 0, 0, 0, 0]))
    with pytest.raises(EnvironmentProblem, match=r"stalled under pulsar-perf's warm-up: its last 3 intervals ran 0, 0, 0"):
        _runs(tmp_path, fake, []).warm_up(120)
    assert len(fake.calls) == 1


@pytest.mark.parametrize("rates", [[0.0, 0.0], [5.0, 0.0, 0.0, 3.0], [1200.0, 1300.0, 1250.0], []])
def test_a_warm_up_that_still_moves_or_is_too_short_to_tell_goes_on(tmp_path: Path, rates: list[float]) -> None:
    fake = FakePerf(log=_log(rates))
    _runs(tmp_path, fake, []).warm_up(120)
    assert len(fake.calls) == 1


def test_a_stalled_warm_up_that_pulsar_perf_hung_on_is_named_a_stall_not_only_a_kill(tmp_path: Path) -> None:
    class HangingPerf(FakePerf):
        def __call__(self, plan: PerfPlan, *, out_dir: Path, **kw: Any) -> PerfRun:
            super().__call__(plan, out_dir=out_dir, **kw)
            raise EnvironmentProblem("pulsar-perf ran past 225 s and was killed")

    fake = HangingPerf(log=_log([12.0, 3.0, 0, 0, 0]))
    with pytest.raises(EnvironmentProblem, match="stalled under pulsar-perf's warm-up") as caught:
        _runs(tmp_path, fake, []).warm_up(120)
    assert "was killed" in str(caught.value.__cause__)
    moving = HangingPerf(log=_log([12.0, 13.0, 11.0]))
    with pytest.raises(EnvironmentProblem, match="was killed"):
        _runs(tmp_path / "m", moving, []).warm_up(120)
