"""The fidelity report's table and gaps (analysis/fidelity.py) and `txnbench fidelity --from` on fixtures.

No cluster: perf.json documents are built inline with the fields perf.json really has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.fidelity import (
    GAP_LIMIT,
    RunRecord,
    aims_at_coordinator,
    build_fidelity,
    design_range,
    figures_of_run,
    relative_gap,
    render_html,
    render_markdown,
    scenario_group,
)
from analysis.fidelity_runs import collect_runs
from faults.selectors import Pick, ServiceSelector, parse_selector
from orchestrator.cli import main


def _metric(value: float | None, reason: str = "no service exposes it") -> dict[str, Any]:
    return {"absent": True, "reason": reason} if value is None else {"absent": False, "delta": value}


def bench_perf(*, rate: float, ledger: float, fsyncs: float, writes: float | None = None,
               broker_writes: float | None = None, meta_fsyncs: float | None = None,
               depth: tuple[float, float] | None = None) -> dict[str, Any]:
    io = {"ledger_entries": ledger, "ledger_fsyncs": fsyncs, "metadata_writes": writes,
          "broker_metadata_writes": broker_writes, "metadata_fsyncs": meta_fsyncs}
    critical: dict[str, Any] = ({"absent": True, "reason": "no broker exported txnbench_request_span_*"}
                                if depth is None else
                                {"operations": {"txn-commit": {"writes": depth[0], "round_trips": depth[1]}}})
    return {"committed_txn_per_s": rate,
            "latency_ms": {"txn-commit": {"p50": 10.0, "p99": 50.0}, "end-to-end": {"p99": 80.0}},
            "io_per_txn": io, "io": {"metrics": {k: _metric(v) for k, v in io.items()}},
            "critical_path": critical}


def failover_perf(outage: float, recovery: float | None) -> dict[str, Any]:
    return {"faults": [{"kind": "kill", "effects": ["stops"], "coordinator_outage_s": outage, "injected": True,
                        "selector": "coordinator"}],
            "coordinator_recovery_s": ({"absent": True, "reason": "no snapshot exposes "
                                                                  "pulsar_txn_coordinator_recovery_seconds"}
                                       if recovery is None else {"faults": recovery}),
            "phases": {"faults": {"committed_txn_per_s": 5.0}}}


def record(system: str, scenario: str, path: str, perf: dict[str, Any], valid: Any = True) -> RunRecord:
    return RunRecord(system, scenario, path, f"results/m/runs/{path}", perf,
                     {"valid": valid, "anomalies": {} if valid is not False else {"lost-write": {"count": 3}}}, {})


def test_relative_gap_is_flagged_over_20_percent_and_over_the_floor() -> None:
    assert relative_gap(17.3, 23.9, 0.05)["flagged"] is True
    assert relative_gap(17.3, 23.9)["gap"] == pytest.approx((17.3 - 23.9) / 23.9, abs=1e-4)
    assert relative_gap(10.0, 10.0 * (1 + GAP_LIMIT) - 0.01)["flagged"] is False
    # 0.02 against 0.008 writes per transaction is +150% but under the floor: noise, not a finding
    assert relative_gap(0.02, 0.008, 0.05)["flagged"] is False


def test_relative_gap_is_not_computed_when_a_side_is_not_measured() -> None:
    gap = relative_gap(3.0, None)
    assert gap["gap"] is None and gap["flagged"] is False and "not measured" in gap["reason"]


def test_a_real_zero_flags_only_a_difference_over_the_floor() -> None:
    assert relative_gap(1.0, 0.0, 0.05)["flagged"] is True
    assert relative_gap(0.01, 0.0, 0.05)["flagged"] is False


def test_pulsar_figures_name_pulsar_metrics_and_say_not_measured_where_pulsar_has_none() -> None:
    perf = bench_perf(rate=20, ledger=5.4, fsyncs=4.3, broker_writes=23.9)
    figures = figures_of_run(perf, "pulsar", "bench")
    assert figures["metadata_writes_per_txn"]["value"] == 23.9
    assert "pulsar_metadata_store_ops_latency_ms_count" in figures["metadata_writes_per_txn"]["source"]
    assert "bookkeeper_server_ADD_ENTRY_count" in figures["ledger_entries_per_txn"]["source"]
    assert "bookie_journal_JOURNAL_SYNC_count" in figures["ledger_fsyncs_per_txn"]["source"]
    for key in ("metadata_fsyncs_per_txn", "commit_depth_writes", "commit_depth_round_trips"):
        assert figures[key]["value"] is None and figures[key]["measured"] is False, key
        assert figures[key]["reason"], key


def test_embedded_figures_come_from_our_stores_and_the_spans() -> None:
    perf = bench_perf(rate=60, ledger=6.0, fsyncs=2.0, writes=17.3, meta_fsyncs=3.0, depth=(3.0, 4.0))
    figures = figures_of_run(perf, "embedded", "bench")
    assert figures["metadata_writes_per_txn"]["value"] == 17.3
    assert "txnbench_metadata_ops_total" in figures["metadata_writes_per_txn"]["source"]
    assert figures["metadata_fsyncs_per_txn"]["value"] == 3.0
    assert figures["commit_depth_writes"]["value"] == 3.0


def test_failover_figures_take_the_kill_outage_and_the_recovery_gauge_only_where_exported() -> None:
    emb = figures_of_run(failover_perf(4.2, 0.3), "embedded", "failover")
    real = figures_of_run(failover_perf(9.0, None), "pulsar", "failover")
    assert emb["failover_outage_s"]["value"] == 4.2 and real["failover_outage_s"]["value"] == 9.0
    assert emb["replay_s"]["value"] == 0.3
    assert real["replay_s"]["value"] is None and "pulsar_txn_coordinator_recovery_seconds" in real["replay_s"]["reason"]


def _stopping(selector: str | None, outage: float, kind: str = "kill") -> dict[str, Any]:
    fault = {"kind": kind, "effects": ["stops"], "coordinator_outage_s": outage, "injected": True}
    return fault if selector is None else {**fault, "selector": selector}


def test_the_failover_outage_is_the_coordinator_kills_not_a_store_stopped_beside_them() -> None:
    perf = failover_perf(4.2, 0.3)
    perf["faults"] += [_stopping("metadata", 30.0, "pause"), _stopping("broker:1", 12.0),
                       _stopping("coordinator:1", 5.5), {**_stopping("ledger", 40.0, "exit"), "selector": None}]
    figure = figures_of_run(perf, "embedded", "failover")["failover_outage_s"]
    assert figure["value"] == 5.5 and figure["measured"] is True          # the slower of the two kills
    assert "names no fault's target" not in figure["source"]


def test_without_a_fault_aimed_at_a_coordinator_the_failover_outage_is_not_measured() -> None:
    perf = failover_perf(4.2, 0.3)
    perf["faults"] = [_stopping("metadata", 30.0, "pause"), _stopping("broker:0", 7.0)]
    figure = figures_of_run(perf, "pulsar", "failover")["failover_outage_s"]
    assert figure["value"] is None and "aimed at a coordinator" in figure["reason"]


def test_a_perf_json_from_before_selectors_counts_every_stopping_fault_and_says_so() -> None:
    perf = failover_perf(4.2, 0.3)
    perf["faults"] = [_stopping(None, 4.2), _stopping(None, 9.0, "pause")]
    figure = figures_of_run(perf, "embedded", "failover")["failover_outage_s"]
    assert figure["value"] == 9.0 and "names no fault's target" in figure["source"]


@pytest.mark.parametrize("text", ["coordinator", "coordinator:0", "coordinator:12", "coordinator:random",
                                  "coordinator:trigger", "broker:coordinator", "broker:0", "broker:random",
                                  "broker:trigger", "metadata", "ledger", "process:random", "random",
                                  "client-broker:coordinator", "broker-metadata:coordinator", "topic:random"])
def test_aims_at_coordinator_agrees_with_the_selector_grammar(text: str) -> None:
    parsed = parse_selector(text)
    picks_coordinator = isinstance(parsed, ServiceSelector) and parsed.broker.pick in (Pick.COORDINATOR, Pick.TRIGGER)
    assert aims_at_coordinator(text) is picks_coordinator


def _doc() -> dict[str, Any]:
    runs = [
        record("embedded", "bench", "v4", bench_perf(rate=60, ledger=16.0, fsyncs=3.0, writes=0.02, depth=(4, 5))),
        record("embedded", "bench", "v5", bench_perf(rate=30, ledger=4.0, fsyncs=3.0, writes=17.3, depth=(2, 3))),
        record("pulsar", "bench", "v4", bench_perf(rate=20, ledger=15.9, fsyncs=5.5, broker_writes=0.008)),
        record("pulsar", "bench", "v5", bench_perf(rate=6, ledger=5.4, fsyncs=4.3, broker_writes=23.9), valid=False),
        record("embedded", "failover", "v4", failover_perf(6.0, 1.0)),
        record("pulsar", "failover", "v4", failover_perf(6.5, None)),
    ]
    return build_fidelity(runs, inputs=["results/m"], command="txnbench fidelity --from results/m")


def test_build_fidelity_puts_both_systems_side_by_side_per_path_with_gaps() -> None:
    doc = _doc()
    assert doc["paths"] == ["v4", "v5"]
    v5 = doc["table"]["v5"]["figures"]
    assert v5["metadata_writes_per_txn"]["embedded"]["value"] == 17.3
    assert v5["metadata_writes_per_txn"]["pulsar"]["value"] == 23.9
    assert v5["metadata_writes_per_txn"]["gap"]["flagged"] is True
    assert v5["ledger_entries_per_txn"]["gap"]["flagged"] is True          # 4.0 against 5.4: -26%
    assert doc["table"]["v4"]["figures"]["ledger_entries_per_txn"]["gap"]["flagged"] is False
    flagged = {(g["path"], g["figure"]) for g in doc["flagged_gaps"]}
    assert ("v5", "metadata_writes_per_txn") in flagged
    assert ("v4", "metadata_writes_per_txn") not in flagged                # under the floor
    assert doc["table"]["v5"]["verdicts"]["bench"] == {"embedded": "valid", "pulsar": "invalid: lost-write 3"}
    assert doc["table"]["v5"]["verdicts"]["failover"]["pulsar"] == "not run"


def test_throughput_ratios_are_compared_between_the_systems() -> None:
    (ratio,) = _doc()["throughput_ratios"]
    assert ratio["paths"] == "v5 / v4"
    assert ratio["embedded"] == 0.5 and ratio["pulsar"] == 0.3
    assert ratio["flagged"] is True


def test_every_conclusion_names_the_system_it_rests_on() -> None:
    conclusions = _doc()["conclusions"]
    by_topic = {c["topic"]: c for c in conclusions}
    assert all(c["rests_on"] in ("pulsar", "embedded", "both") for c in conclusions)
    assert by_topic["throughput v5 / v4"]["rests_on"] == "pulsar"
    assert "in size, not in direction" in by_topic["throughput v5 / v4"]["text"]   # 0.5 and 0.3: both below 1
    # real Pulsar exports no spans: depth is a statement about the model
    assert by_topic["v5 commit_depth_writes"]["rests_on"] == "embedded"
    assert "not measured" in by_topic["v5 commit_depth_writes"]["text"]
    # a flagged gap: real Pulsar is right
    assert by_topic["v5 metadata_writes_per_txn"]["rests_on"] == "pulsar"
    assert by_topic["v4 ledger_entries_per_txn"]["rests_on"] == "both"


def test_a_flagged_gap_says_whether_real_pulsar_is_within_the_design_for_its_own_store() -> None:
    real = bench_perf(rate=6, ledger=5.4, fsyncs=4.3, broker_writes=23.86)
    real.update({"path": "v5", "metadata_store": {"kind": "zookeeper"},
                 "cost_ledger": {"shape": REAL_V5_SHAPE, "committed_txns": 187}})
    model = bench_perf(rate=30, ledger=4.0, fsyncs=3.0, writes=17.3, depth=(2, 3))
    doc = build_fidelity([record("embedded", "bench", "v5", model), record("pulsar", "bench", "v5", real)])
    (text,) = [c["text"] for c in doc["conclusions"] if c["topic"] == "v5 metadata_writes_per_txn"]
    assert "real Pulsar is within 20% of the design's prediction for its own transactions on zookeeper" in text


def test_markdown_and_html_show_not_measured_and_the_real_metric_names() -> None:
    doc = _doc()
    md = render_markdown(doc)
    assert "## v5" in md and "not measured" in md
    assert "pulsar_metadata_store_ops_latency_ms_count" in md
    assert "⚑" in md and "rests on" in md
    page = render_html(doc)
    assert page.startswith("<!doctype html>") and "pulsar_metadata_store_ops_latency_ms_count" in page


def test_scenario_groups() -> None:
    assert scenario_group("bench") == "bench"
    assert scenario_group("chaos-recovery") == "chaos"
    assert scenario_group("atomic-produce") is None


def _write_matrix(root: Path, name: str, target: str, scenario: str,
                  runs: dict[str, dict[str, Any]]) -> Path:
    matrix = root / name
    for folder, perf in runs.items():
        run = matrix / "runs" / folder
        (run / "analysis").mkdir(parents=True)
        path = folder.split("-pulsar-")[0]
        (run / "manifest.json").write_text(json.dumps({"target": target, "scenario": scenario, "path": path,
                                                       "config": {"cluster": {}}}))
        (run / "analysis" / "perf.json").write_text(json.dumps(perf))
        (run / "analysis" / "results.json").write_text(json.dumps({"valid": True, "anomalies": {}}))
    (matrix / "matrix.json").write_text(json.dumps({"kind": "bench", "scenario": scenario}))
    return matrix


def test_collect_runs_skips_the_lts_baseline_and_other_scenarios(tmp_path: Path) -> None:
    bench = bench_perf(rate=20, ledger=15.9, fsyncs=5.5, broker_writes=0.008)
    real = _write_matrix(tmp_path, "r", "pulsar", "bench", {"v4": bench, "v4-pulsar-4.0.8": bench})
    other = _write_matrix(tmp_path, "o", "embedded", "atomic-produce", {"v4": bench})
    runs, skipped = collect_runs([real, other])
    assert [(r.system, r.scenario, r.path) for r in runs] == [("pulsar", "bench", "v4")]
    assert len(skipped) == 2 and any("baseline" in s["reason"] for s in skipped)


def test_txnbench_fidelity_from_fixtures_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    emb = _write_matrix(tmp_path, "e", "embedded", "bench",
                        {"v4": bench_perf(rate=60, ledger=16, fsyncs=3, writes=0.02, depth=(4, 5)),
                         "v5": bench_perf(rate=30, ledger=4, fsyncs=3, writes=17.3, depth=(2, 3))})
    real = _write_matrix(tmp_path, "p", "pulsar", "bench",
                         {"v4": bench_perf(rate=20, ledger=15.9, fsyncs=5.5, broker_writes=0.008),
                          "v5": bench_perf(rate=6, ledger=5.4, fsyncs=4.3, broker_writes=23.9)})
    out_root = tmp_path / "out"
    code = main(["fidelity", "--from", str(emb), str(real), "--results", str(out_root)])
    assert code == 0
    (folder,) = list(out_root.iterdir())
    doc = json.loads((folder / "fidelity.json").read_text())
    assert doc["table"]["v5"]["figures"]["metadata_writes_per_txn"]["gap"]["flagged"] is True
    assert (folder / "fidelity.md").read_text().startswith("# Fidelity")
    assert doc["command"] == f"txnbench fidelity --from {emb} {real} --results {out_root}"
    assert (folder / "fidelity.html").is_file()
    # the report folder itself can be given to --from again (it lists its inputs)
    assert main(["fidelity", "--from", str(folder), "--results", str(out_root)]) == 0
    assert "gap over 20%: v5 metadata writes / txn" in capsys.readouterr().err


def test_txnbench_fidelity_from_nothing_useful_is_an_error(tmp_path: Path) -> None:
    other = _write_matrix(tmp_path, "o", "embedded", "atomic-produce",
                          {"v4": bench_perf(rate=1, ledger=1, fsyncs=1)})
    assert main(["fidelity", "--from", str(other), "--results", str(tmp_path / "out")]) == 2


REAL_V5_SHAPE = {"committed": 187, "aborted": 27, "sends_committed": 478, "sends_aborted": 48, "acks_committed": 185,
                 "acks_aborted": 27, "write_participants_committed": 340, "write_participants_aborted": 35,
                 "ack_participants_committed": 118, "ack_participants_aborted": 18, "plain_sends": 185}


def test_the_design_range_of_a_real_zookeeper_run_holds_what_real_pulsar_wrote() -> None:
    # results/20261127-080910-bench-bench/runs/v5 (real Pulsar 5.0.1 on ZooKeeper): 23.86 writes per committed
    # transaction, where the native-sequence-key prediction said 15.39 (+ up to 2.99 watermark CAS)
    perf = {"path": "v5", "metadata_store": {"kind": "zookeeper"},
            "cost_ledger": {"shape": REAL_V5_SHAPE, "committed_txns": 187}}
    on_zk = design_range(perf, {}, "metadata_writes")
    assert on_zk is not None and on_zk["low"] <= 23.86 <= on_zk["high"]
    native = design_range({**perf, "metadata_store": {"kind": "oxia-like"}}, {}, "metadata_writes")
    assert native is not None and native["high"] < 23.86 * (1 - GAP_LIMIT)
    ledger = design_range(perf, {}, "ledger_entries")
    assert ledger is not None
    assert ledger == {"low": ledger["high"], "high": round((526 + 185) / 187, 3), "store": "zookeeper"}


def test_each_scenario_is_configured_for_the_system_with_the_durations_and_settings_given() -> None:
    import argparse

    from orchestrator.fidelity import _config

    args = argparse.Namespace(paths=["v5"], set=["metadataStoreUrl=zk"], duration=7.0, faults_duration=31.0)
    bench = _config("bench", "embedded", args)
    assert bench.target.value == "embedded" and [p.value for p in bench.paths] == ["v5"]
    assert bench.phases.steady_s == 7.0 and bench.cluster.settings["metadataStoreUrl"] == "zk"
    failover = _config("failover", "pulsar", args)
    assert failover.target.value == "pulsar" and failover.phases.faults_s == 31.0
    assert failover.cluster.settings["metadataStoreSessionTimeoutMillis"] == 4000   # the scenario's own settings stay
