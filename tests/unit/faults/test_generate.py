"""Generated schedules: seeded, every kind, bounded, overlapping, the same for every path."""

from __future__ import annotations

import dataclasses

import pytest

from faults.generate import DEFAULT_KINDS, draw
from faults.schedule import plan_timeline
from harness.config import FaultsConfig, FaultSpec, GeneratedFaults
from harness.txn_paths import TxnPath
from orchestrator.matrix import reproduce_command


def test_a_seed_gives_one_schedule_and_another_seed_another() -> None:
    spec = GeneratedFaults()
    a = draw(spec, (), seed=7, duration_s=300)
    assert a == draw(spec, (), seed=7, duration_s=300)
    assert a != draw(spec, (), seed=8, duration_s=300)


def test_windows_stay_in_bounds_use_every_kind_and_overlap() -> None:
    spec = GeneratedFaults(gap_min_s=1, gap_max_s=3, for_min_s=0.5, for_max_s=4, together=3, triggered=0.5,
                           terminates=1)
    windows = draw(spec, (), seed=3, duration_s=600)
    kinds = {f.kind for w in windows for f in w.faults}
    assert kinds == set(DEFAULT_KINDS) and "slow-participant" not in {k.name for k in kinds}
    assert sum(f.kind.name == "terminate" for w in windows for f in w.faults) == 1
    assert sum(f.kind.name == "client-isolate" for w in windows for f in w.faults) == 1
    previous_end = 0.0
    for w in windows:
        assert 1 <= len(w.faults) <= 3 and len({f.kind.name for f in w.faults}) == len(w.faults)
        assert w.at_s - previous_end >= 1 - 1e-6 and w.at_s < 600
        previous_end = w.at_s + w.for_s
        for f in w.faults:
            assert f.for_s == 0 or 0.5 <= f.for_s <= 4 or (f.kind.name == "client-isolate" and f.for_s > 30)
            aimed = f.target.endswith(":trigger")
            assert f.target in f.kind.draw.targets + f.kind.draw.aimed
            assert not aimed or w.trigger is not None, "an aimed target only in a triggered window"
    assert any(len({f.for_s for f in w.faults}) > 1 for w in windows), "faults of a window end apart"
    assert any(w.trigger is not None for w in windows) and any(w.trigger is None for w in windows)


def test_the_timeline_is_the_seeds_on_every_path_less_what_a_path_lacks() -> None:
    cfg = FaultsConfig(quiet_s=0, generated=GeneratedFaults(kinds=("split", "kill", "latency")))
    v5 = plan_timeline(cfg, seed=11, duration_s=120, txn_path=TxnPath.V5, brokers=2)
    v4 = plan_timeline(cfg, seed=11, duration_s=120, txn_path=TxnPath.V4, brokers=2)
    assert {f.kind.name for f in v5.faults} == {"split", "kill", "latency"}
    assert "split" not in {f.kind.name for f in v4.faults}
    assert any("split fault(s) do not apply to v4" in n for n in v4.notes)
    no_split = [(f.kind.name, f.target, f.for_s) for f in v5.faults if f.kind.name != "split"]
    assert no_split == [(f.kind.name, f.target, f.for_s) for f in v4.faults]
    for window in v5.windows:
        assert window.for_s == pytest.approx(max(f.for_s or 0 for f in window.faults), abs=1e-6) \
            or window.heal_s == 120


def test_bounds_are_checked() -> None:
    from harness._validate import build
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match="gap_min_s"):
        build(GeneratedFaults, {"gap_min_s": 5, "gap_max_s": 1}, "test")
    assert dataclasses.replace(GeneratedFaults(), together=1).together == 1


def test_the_reproduce_command() -> None:
    assert reproduce_command("chaos-generated", "v5", 202611271, 120.0) == \
        "txnbench run chaos-generated --path v5 --seed 202611271 --duration 120"


def test_client_faults_are_drawn_by_default_and_an_isolation_outlasts_the_transaction_timeout() -> None:
    spec = GeneratedFaults(gap_min_s=1, gap_max_s=3, for_min_s=0.5, for_max_s=4, together=3, isolations=2)
    windows = draw(spec, (), seed=3, duration_s=900, txn_timeout_s=15)
    faults = [f for w in windows for f in w.faults]
    assert "client-kill" in {f.kind.name for f in faults}
    isolations = [f for f in faults if f.kind.name == "client-isolate"]
    assert 1 <= len(isolations) <= 2
    assert all(15 + 2 <= f.for_s <= 15 + 6 and f.target == "clients" for f in isolations)
    assert all(f.for_s <= 4 for f in faults if f.kind.name == "client-kill")


def test_a_load_without_workers_leaves_the_drawn_client_kills_out() -> None:
    cfg = FaultsConfig(quiet_s=0, generated=GeneratedFaults(kinds=("client-kill", "kill")))
    with_workers = plan_timeline(cfg, seed=5, duration_s=120, txn_path=TxnPath.V4, brokers=2, load_workers=2,
                                 txn_timeout_s=15)
    without = plan_timeline(cfg, seed=5, duration_s=120, txn_path=TxnPath.V4, brokers=2, load_workers=0,
                            txn_timeout_s=15)
    assert "client-kill" in {f.kind.name for f in with_workers.faults}
    assert "client-kill" not in {f.kind.name for f in without.faults}
    assert any("client-kill fault(s) need Locust workers" in n for n in without.notes)
    kills = [(f.kind.name, f.target) for f in with_workers.faults if f.kind.name == "kill"]
    assert kills == [(f.kind.name, f.target) for f in without.faults if f.kind.name == "kill"]


def test_generated_windows_start_between_from_s_and_until_s_after_a_written_schedule() -> None:
    """A written schedule first, generated faults after it: windows only in [from_s, until_s)."""
    from harness._validate import build
    from harness.errors import ConfigError

    windows = draw(GeneratedFaults(from_s=100, until_s=160), (), seed=7, duration_s=300)
    assert windows and all(100 < w.at_s < 160 for w in windows)
    assert draw(GeneratedFaults(from_s=100), (), seed=7, duration_s=300)[-1].at_s > 160
    cfg = FaultsConfig(quiet_s=0, schedule=(build(FaultSpec, {"kind": "kill", "target": "coordinator",
                                                              "at_s": 10, "for_s": 2}, "test"),),
                       generated=GeneratedFaults(kinds=("kill", "latency"), from_s=100, until_s=160))
    timeline = plan_timeline(cfg, seed=7, duration_s=300, txn_path=TxnPath.V4, brokers=2)
    starts = [w.start_s for w in timeline.windows]
    assert starts[0] == 10 and len(starts) > 2 and all(100 < t < 160 for t in starts[1:])
    with pytest.raises(ConfigError, match="from_s"):
        build(GeneratedFaults, {"from_s": 50, "until_s": 50}, "test")
