"""Timelines: a pure function of (faults config, seed, duration, path), tested without processes."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from faults.kinds import slow_participant
from faults.schedule import Timeline, describe, plan_timeline
from harness.config import FaultsConfig, RunConfig, parse_scenario
from harness.errors import ConfigError
from harness.txn_paths import TxnPath


def faults_of(yaml_faults: str, faults_s: float = 60) -> RunConfig:
    body = "\n".join("  " + line for line in yaml_faults.strip().splitlines())
    return parse_scenario(f"phases: {{faults_s: {faults_s}}}\nfaults:\n{body}\n", source="test.yaml")


def plan(cfg: RunConfig, path: TxnPath = TxnPath.V4, seed: int = 1, **kw: Any) -> Timeline:
    return plan_timeline(cfg.faults, seed=seed, duration_s=cfg.phases.faults_s, txn_path=path, **kw)


def test_at_s_windows_in_order_with_quiet_period() -> None:
    cfg = faults_of("""
quiet_s: 5
schedule:
  - {kind: kill, target: broker:0, at_s: 20, for_s: 5}
  - {kind: partition, target: client-broker:1, at_s: 2, for_s: 6}
  - {kind: pause, target: metadata, at_s: 10, for_s: 3}
""")
    timeline = plan(cfg)
    starts = [(w.start_s, w.heal_s, w.faults[0].kind.name) for w in timeline.windows]
    # partition 2-8, quiet until 13: the pause due at 10 waits until 13; then quiet until 21.
    assert starts == [(2, 8, "partition"), (13, 16, "pause"), (21, 26, "kill")]
    assert [f.fault_id for f in timeline.faults] == ["f1", "f2", "f3"]
    assert any("postponed to 13s" in n for n in timeline.notes)
    assert any("postponed to 21s" in n for n in timeline.notes)
    assert describe(timeline)[0].split() == ["2.0s", "-", "8.0s", "f1", "partition", "client-broker:1"]


def test_every_s_repeats_from_zero_and_skips_instead_of_piling_up() -> None:
    cfg = faults_of("""
quiet_s: 2
schedule:
  - {kind: partition, target: link:random, every_s: 10, for_s: 3}
""", faults_s=35)
    assert [w.start_s for w in plan(cfg).windows] == [0, 10, 20, 30]
    slow = faults_of("""
quiet_s: 2
schedule:
  - {kind: partition, every_s: 4, for_s: 5}
""", faults_s=30)
    timeline = plan(slow)
    starts = [w.start_s for w in timeline.windows]
    # busy 0-5, quiet until 7: the one due at 4 starts at 7 (the next is due at 8, after 7) ...
    assert starts[:2] == [0, 7]
    assert all(b - a >= 5 + 2 for a, b in itertools.pairwise(starts))
    assert any("skipped" in n for n in timeline.notes)


def test_until_s_ends_a_repeating_entry_and_at_s_refuses_it() -> None:
    cfg = faults_of("""
quiet_s: 0
schedule:
  - {kind: restart, target: broker:random, every_s: 10, until_s: 25, for_s: 0}
  - {kind: split, target: segment:random, at_s: 31, for_s: 0}
""", faults_s=60)
    # 0, 10, 20 from the repeating entry (30 is at or past until_s), then the split alone
    assert [(w.start_s, w.faults[0].kind.name) for w in plan(cfg, TxnPath.V5).windows] == [
        (0, "restart"), (10, "restart"), (20, "restart"), (31, "split")]
    with pytest.raises(ConfigError, match="until_s"):
        faults_of("""
schedule:
  - {kind: kill, at_s: 3, until_s: 20, for_s: 1}
""")


def test_windows_are_cut_at_the_end_and_none_start_after_it() -> None:
    cfg = faults_of("""
quiet_s: 0
schedule:
  - {kind: kill, target: broker:0, at_s: 25, for_s: 10}
  - {kind: kill, target: broker:1, at_s: 31, for_s: 10}
""", faults_s=30)
    timeline = plan(cfg)
    assert [(w.start_s, w.heal_s) for w in timeline.windows] == [(25, 30)]
    assert any("cut to 5s" in n for n in timeline.notes)
    assert any("left out" in n for n in timeline.notes)


def test_random_subsets_are_seeded_and_non_empty() -> None:
    cfg = faults_of("""
quiet_s: 1
random: {kinds: [partition, kill, pause, latency], every_s: 6, for_s: 2}
""", faults_s=120)
    first, again, other = plan(cfg, seed=3), plan(cfg, seed=3), plan(cfg, seed=4)
    assert first == again
    assert first != other
    sizes = {len(w.faults) for w in first.windows}
    assert min(sizes) >= 1 and max(sizes) > 1            # subsets, not single kinds
    assert first.kinds() == {"partition", "kill", "pause", "latency"}
    assert all(f.source == "faults.random" for f in first.faults)
    assert len(first.windows) == 20


def test_random_target_default_is_per_kind() -> None:
    cfg = faults_of("""
random: {kinds: [kill, partition], every_s: 5, for_s: 1}
""")
    targets = {(f.kind.name, f.target) for f in plan(cfg).faults}
    assert targets == {("kill", "process:random"), ("partition", "link:random")}


def test_kinds_that_do_not_apply_to_the_path_are_left_out() -> None:
    cfg = faults_of("""
schedule:
  - {kind: split, at_s: 1, for_s: 0}
  - {kind: terminate, at_s: 10, for_s: 0}
  - {kind: slow-participant, target: broker:0, at_s: 20, for_s: 10, params: {latency_ms: 5000}}
""")
    v4 = plan(cfg, TxnPath.V4)
    assert [f.kind.name for f in v4.faults] == ["terminate"]
    assert v4.faults[0].target == "topic:random"
    assert sum("does not apply to v4" in n for n in v4.notes) == 2
    v5 = plan(cfg, TxnPath.V5)
    assert [f.kind.name for f in v5.faults] == ["split", "terminate", "slow-participant"]
    assert v5.faults[1].target == "segment:random"


def test_instant_faults_still_hold_their_window() -> None:
    cfg = faults_of("""
quiet_s: 2
schedule:
  - {kind: terminate, target: topic:0, at_s: 1, for_s: 0}
  - {kind: partition, at_s: 1, for_s: 1}
""")
    windows = plan(cfg).windows
    assert [(w.start_s, w.heal_s) for w in windows] == [(1, 1), (3, 4)]
    assert not windows[0].faults[0].healable and windows[1].faults[0].healable


def test_params_are_validated_and_completed() -> None:
    cfg = faults_of("""
schedule:
  - {kind: latency, target: broker-ledger:0, at_s: 0, params: {latency_ms: 50}}
""")
    (fault,) = plan(cfg).faults
    assert dict(fault.params) == {"latency_ms": 50, "jitter_ms": 0, "direction": "both"}
    bad = faults_of("""
schedule:
  - {kind: latency, at_s: 0, params: {latency: 50}}
""")
    with pytest.raises(ConfigError, match=r"faults.schedule\[0\].params.latency: unknown parameter; "
                                          r"did you mean 'latency_ms'\?"):
        plan(bad)
    with pytest.raises(ConfigError, match="direction: 'sideways' is not one of"):
        plan(faults_of("schedule:\n  - {kind: partition, at_s: 0, params: {direction: sideways}}"))
    with pytest.raises(ConfigError, match="kill takes no params"):
        plan(faults_of("schedule:\n  - {kind: kill, at_s: 0, params: {signal: 9}}"))
    with pytest.raises(ConfigError, match="rate_kbps: -1 is below the minimum 0"):
        plan(faults_of("schedule:\n  - {kind: bandwidth, at_s: 0, params: {rate_kbps: -1}}"))


@pytest.mark.parametrize(("entry", "message"), [
    ("{kind: kill, target: client-broker:0, at_s: 0}",
     r"test.yaml: faults.schedule\[0\].target: kill cannot act on 'client-broker:0'; give one of: broker"),
    ("{kind: partition, target: brokers:1, at_s: 0}",
     r"faults.schedule\[0\].target: 'brokers:1' is not a target; use e.g. broker:random"),
    ("{kind: pause, target: broker:5, at_s: 0}",
     r"faults.schedule\[0\].target: 'broker:5': there is no broker 5; the cluster has brokers 0-2; pick one"),
    ("{kind: split, target: broker:0, at_s: 0}",
     r"split cannot act on 'broker:0'; give one of: topic:<k\|random\|trigger>, segment:<k\|random\|trigger>"),
    ("{kind: slow-participant, target: metadata, at_s: 0}",
     r"slow-participant cannot act on 'metadata'"),
])
def test_a_bad_target_is_one_line_naming_key_and_fix(entry: str, message: str) -> None:
    cfg = faults_of(f"schedule:\n  - {entry}")
    with pytest.raises(ConfigError, match=message) as info:
        plan(cfg, source="test.yaml", brokers=3, topics=4)
    assert "\n" not in str(info.value)


def test_bad_random_target_names_the_random_key() -> None:
    cfg = faults_of("random: {kinds: [kill, split], target: broker:0}")
    with pytest.raises(ConfigError, match=r"faults.random.target: split cannot act on 'broker:0'"):
        plan(cfg, TxnPath.V5)


def test_no_faults_no_windows() -> None:
    timeline = plan_timeline(FaultsConfig(), seed=1, duration_s=10, txn_path=TxnPath.V4)
    assert timeline.windows == () and timeline.faults == ()


def test_slow_participant_default_latency_comes_from_settings() -> None:
    assert slow_participant.latency_ms({slow_participant.GC_RETENTION_KEY: 5,
                                        slow_participant.GC_INTERVAL_KEY: 1}) == 8000
    assert slow_participant.latency_ms({}) == (900 + 300 + 2) * 1000


def test_an_entrys_own_quiet_period_makes_a_dense_series() -> None:
    """A kill every 3 s with no quiet period of its own, beside a spaced fault that keeps the
    section's quiet period after it."""
    cfg = faults_of("""
quiet_s: 5
schedule:
  - {kind: kill, target: coordinator, every_s: 3, for_s: 1, quiet_s: 0}
  - {kind: pause, target: metadata, at_s: 10, for_s: 1}
""", faults_s=20)
    timeline = plan(cfg)
    windows = [(w.start_s, w.heal_s, w.faults[0].kind.name, w.quiet_s) for w in timeline.windows]
    assert windows[:4] == [(0, 1, "kill", 0), (3, 4, "kill", 0), (6, 7, "kill", 0), (9, 10, "kill", 0)]
    assert (10, 11, "pause", 5) in windows
    # the kill due at 12 waits for the pause's quiet period (until 16); the one at 15 is skipped
    assert (16, 17, "kill", 0) in windows and not any(w[0] == 15 for w in windows)
    assert sum(1 for w in windows if w[2] == "kill") == 6


def test_a_flapping_fault_is_a_burst_of_short_windows() -> None:
    cfg = faults_of("""
quiet_s: 4
schedule:
  - {kind: partition, target: client-broker:0, at_s: 2, for_s: 0.3, flap: {count: 5, off_s: 0.2}}
  - {kind: kill, target: ledger, at_s: 3, for_s: 1}
""", faults_s=20)
    timeline = plan(cfg)
    flaps = [(w.start_s, w.heal_s) for w in timeline.windows if w.faults[0].kind.name == "partition"]
    assert flaps == [(2, 2.3), (2.5, 2.8), (3, 3.3), (3.5, 3.8), (4, 4.3)]
    assert len({w.faults[0].fault_id for w in timeline.windows}) == len(timeline.windows)
    kill = next(w for w in timeline.windows if w.faults[0].kind.name == "kill")
    assert kill.start_s == pytest.approx(8.3)          # after the burst and the section's quiet period


def test_a_trigger_is_carried_on_its_windows_and_described() -> None:
    cfg = faults_of("""
schedule:
  - {kind: partition, target: broker-broker:0-1, at_s: 1, for_s: 1, trigger: {op: txn-commit}}
  - {kind: kill, target: broker:0, at_s: 10, for_s: 1, trigger: {op: txn-commit, type: ok, within_s: 5}}
""", faults_s=20)
    first, second = plan(cfg).windows
    assert first.trigger is not None and first.trigger.op.value == "txn-commit"
    assert first.trigger.type.value == "invoke" and first.trigger.within_s == 10
    assert second.trigger is not None and second.trigger.type.value == "ok" and second.trigger.within_s == 5
    assert "at the next txn-commit ok" in describe(plan(cfg))[1]


def test_a_bad_trigger_or_flap_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.trigger\.op"):
        faults_of("schedule:\n  - {kind: kill, at_s: 1, trigger: {op: commit}}")
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.flap\.count"):
        faults_of("schedule:\n  - {kind: kill, at_s: 1, flap: {count: 0}}")


def test_a_postponed_burst_moves_whole() -> None:
    cfg = faults_of("""
quiet_s: 1
schedule:
  - {kind: kill, target: ledger, at_s: 0, for_s: 2}
  - {kind: partition, target: client-broker:0, at_s: 0, for_s: 0.5, flap: {count: 4, off_s: 0.5}}
""", faults_s=30)
    flaps = [(w.start_s, w.heal_s) for w in plan(cfg).windows if w.faults[0].kind.name == "partition"]
    assert flaps == [(3, 3.5), (4, 4.5), (5, 5.5), (6, 6.5)]      # after the kill and its quiet period


def test_a_target_aimed_at_the_trigger_needs_a_trigger() -> None:
    cfg = faults_of("""
schedule:
  - {kind: terminate, target: "topic:trigger", at_s: 1, for_s: 0, trigger: {op: txn-commit}}
  - {kind: kill, target: "coordinator:trigger", at_s: 5, for_s: 1, trigger: {op: txn-commit}}
""", faults_s=20)
    assert [w.faults[0].target for w in plan(cfg).windows] == ["topic:trigger", "coordinator:trigger"]
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.target.*no trigger"):
        plan(faults_of("schedule:\n  - {kind: unload, target: 'segment:trigger', at_s: 1, for_s: 0}"))
    with pytest.raises(ConfigError, match=r"faults\.random\.target"):
        plan(faults_of("random: {kinds: [kill], target: 'coordinator:trigger'}"))


def test_overlapping_faults_share_one_window_each_with_its_own_offset_and_duration() -> None:
    cfg = faults_of("""
quiet_s: 2
schedule:
  - {kind: partition, target: ledger, at_s: 5, for_s: 8,
     overlap: [{kind: restart, target: coordinator, after_s: 1, for_s: 0},
               {kind: kill, target: "broker:random", after_s: 6, for_s: 4},
               {kind: split, target: "segment:random", after_s: 2}]}
  - {kind: kill, target: metadata, at_s: 6, for_s: 1}
""", faults_s=60)
    stacked, later = plan(cfg).windows
    assert [(f.kind.name, f.after_s, f.for_s) for f in stacked.faults] == [
        ("partition", 0, 8), ("restart", 1, 0), ("kill", 6, 4)]   # no split on v4
    assert (stacked.start_s, stacked.heal_s) == (5, 15)          # until the last heal: 6 + 4 s
    assert later.start_s == 17                                    # after the whole window and its quiet
    assert "f3 kill broker:random (+6s) (4s)" in describe(plan(cfg))[0]
    assert any("overlap[2]: split does not apply to v4" in n for n in plan(cfg).notes)
    v5 = plan(cfg, TxnPath.V5).windows[0]
    assert [(f.kind.name, f.for_s) for f in v5.faults][-1] == ("split", 0)   # instant: nothing to heal


def test_a_bad_overlapping_fault_is_one_config_error_naming_its_key() -> None:
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.overlap\[0\]\.target.*no trigger"):
        plan(faults_of("schedule:\n  - {kind: kill, target: ledger, at_s: 1, "
                       "overlap: [{kind: unload, target: 'topic:trigger'}]}"))
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.overlap\[0\]\.after_s"):
        faults_of("schedule:\n  - {kind: kill, at_s: 1, overlap: [{kind: kill, after_s: -1}]}")
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.overlap.*flapping"):
        faults_of("schedule:\n  - {kind: kill, at_s: 1, flap: {count: 2}, overlap: [{kind: pause}]}")
    with pytest.raises(ConfigError, match=r"faults\.schedule\[0\]\.overlap\[0\]\.kind"):
        plan(faults_of("schedule:\n  - {kind: kill, at_s: 1, overlap: [{kind: explode}]}"))


def test_faults_a_target_cannot_run_are_left_out_and_the_rest_keep_their_times_and_ids() -> None:
    """chaos.yaml's crashes and corruptions on the pulsar target: a gap where the embedded target
    tears a store's files, with a note, not a window recorded as not injected; the other faults
    line up with the embedded target's plan."""
    from dataclasses import replace

    from faults.schedule import plan_run
    from harness.config import Target

    cfg = faults_of("""
quiet_s: 1
schedule:
  - {kind: kill, target: broker:0, at_s: 2, for_s: 2}
  - {kind: crash, target: metadata, at_s: 6, for_s: 1, flap: {count: 2, off_s: 1}}
  - {kind: partition, target: client-broker:0, at_s: 12, for_s: 2,
     overlap: [{kind: corrupt, target: ledger, after_s: 1, for_s: 1}]}
""")
    embedded, pulsar = (plan_run(replace(cfg, target=target)) for target in (Target.EMBEDDED, Target.PULSAR))
    assert [(f.fault_id, f.kind.name) for f in embedded.faults] == [
        ("f1", "kill"), ("f2", "crash"), ("f3", "crash"), ("f4", "partition"), ("f5", "corrupt")]
    assert [(f.fault_id, f.kind.name) for f in pulsar.faults] == [("f1", "kill"), ("f4", "partition")]
    assert [w.start_s for w in pulsar.windows] == [embedded.windows[0].start_s, embedded.windows[3].start_s]
    assert [n for n in pulsar.notes if "pulsar target" in n] == [
        "faults.schedule[1]: 2 crash cannot run on the pulsar target (only the embedded cluster's stores "
        "record what they fsynced, in files txnbench can tear or damage); left out",
        "faults.schedule[2].overlap[0]: 1 corrupt cannot run on the pulsar target (only the embedded "
        "cluster's stores record what they fsynced, in files txnbench can tear or damage); left out"]
