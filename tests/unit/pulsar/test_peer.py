"""The peer's pure parts: scenario -> pulsar-perf flags, pulsar-perf's log and HdrHistogram log, the comparison."""

from __future__ import annotations

import dataclasses

import pytest
from hdrh.histogram import HdrHistogram

from analysis.peer import brokers
from analysis.peer.compare import build_peer, perf_side
from analysis.peer.pulsar_perf import (
    PerfResult,
    cpu_over,
    parse_log,
    read_hgrm,
    read_result,
    window_intervals,
)
from analysis.peer.render import to_html, to_markdown
from harness.config import TxnPipeline, parse_scenario
from harness.errors import ConfigError
from harness.txn_paths import TxnPath
from targets.pulsar.perf_args import plan_peer
from targets.pulsar.versions import PULSAR_4_LTS, PULSAR_5

ATOMIC = """
name: ap
path: v4
phases: {warmup_s: 5, steady_s: 30}
load: {users: 8}
workload: {kind: atomic-produce, topics: 4, participants: 2, messages_per_txn: 4, topics_per_txn: 2,
           abort_ratio: 0.1, verifiers: 1}
"""


def _config(path: TxnPath = TxnPath.V4):
    return dataclasses.replace(parse_scenario(ATOMIC), path=path)


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_v4_on_4_0_uses_the_legacy_transaction_command_without_client_api() -> None:
    plan = plan_peer(_config(), PULSAR_4_LTS, tag="t")
    argv = plan.perf.argv("pulsar://h:1", "http://h:2", "external")
    assert argv[0] == "transaction" and "--client-api" not in argv and "--scalable" not in argv
    assert _flag(argv, "-threads") == "8" and _flag(argv, "-nmp") == "2" and _flag(argv, "-nmc") == "0"
    assert _flag(argv, "-np") == "2" and _flag(argv, "-time") == str(30 + 30 + 15)
    assert _flag(argv, "--listener-name") == "external"
    assert [a for i, a in enumerate(argv) if i and argv[i - 1] == "--topics-p"] == [
        "persistent://public/default/peer-t-0", "persistent://public/default/peer-t-1"]
    assert "-abort" not in argv


def test_the_txnbench_side_is_bent_to_what_pulsar_perf_can_do_and_says_so() -> None:
    plan = plan_peer(_config(), PULSAR_4_LTS, tag="t")
    w = plan.config.workload
    assert (w.topics, w.topics_per_txn, w.messages_per_txn, w.abort_ratio, w.message_size, w.verifiers) == (
        2, 2, 4, 0.0, 1024, 0)
    assert (plan.config.phases.warmup_s, plan.config.phases.steady_s) == (30.0, 30.0)   # as pulsar-perf's
    text = " ".join(plan.notes)
    for word in ("abort_ratio", "message_size", "verifiers", "topics 4 -> 2", "warmup"):
        assert word in text


def test_v4_and_v5_on_5_0_pick_the_client_api_and_v5_creates_scalable_topics() -> None:
    v4 = plan_peer(_config(), PULSAR_5, tag="t").perf.argv("pulsar://h:1", "http://h:2", None)
    assert _flag(v4, "--client-api") == "V4"
    v5 = plan_peer(_config(TxnPath.V5), PULSAR_5, tag="t").perf.argv("pulsar://h:1", "http://h:2", None)
    assert _flag(v5, "--client-api") == "V5" and _flag(v5, "--scalable-segments") == "2" and "-np" not in v5
    assert _flag(v5, "--topics-p").startswith("topic://public/default/")


def test_the_txnbench_side_overlaps_its_transactions_as_pulsar_perf_threads_do() -> None:
    """v4 client: sends and commit not awaited; V5 client: sends awaited, commit not (PerformanceTransactionBase)."""
    v4 = plan_peer(_config(), PULSAR_4_LTS, tag="t").config.workload
    assert (v4.send_concurrency, v4.txn_pipeline) == (4, TxnPipeline.SENDS_ASYNC)
    v4_on_5 = plan_peer(_config(), PULSAR_5, tag="t").config.workload
    assert v4_on_5.txn_pipeline is TxnPipeline.SENDS_ASYNC
    v5 = plan_peer(_config(TxnPath.V5), PULSAR_5, tag="t")
    assert (v5.config.workload.send_concurrency, v5.config.workload.txn_pipeline) == (4, TxnPipeline.COMMIT_ASYNC)
    assert any("txn_pipeline serial -> commit-async" in note for note in v5.notes)


def test_v4_batches_as_pulsar_perf_producers_do_and_v5_does_not() -> None:
    """pulsar-perf's producers keep the Java client's default batching (its builder sets only
    sendTimeout); unbatched, txnbench wrote 12.7 bookie entries per transaction against 9.0 (#27)."""
    v4 = plan_peer(_config(), PULSAR_4_LTS, tag="t")
    assert v4.config.workload.batching and any("batching off -> on" in note for note in v4.notes)
    assert v4.config.workload.keys == 0 and any("keys 16 -> 0" in note for note in v4.notes)
    v5 = plan_peer(dataclasses.replace(_config(TxnPath.V5), workload=dataclasses.replace(
        _config().workload, batching=True)), PULSAR_5, tag="t")
    assert not v5.config.workload.batching and any("batching -> off" in note for note in v5.notes)


def test_uneven_messages_are_rounded_up_and_aborts_map_to_all_or_none() -> None:
    config = _config()
    config = dataclasses.replace(config, workload=dataclasses.replace(
        config.workload, messages_per_txn=5, abort_ratio=0.9))
    plan = plan_peer(config, PULSAR_4_LTS, tag="t")
    assert plan.perf.messages_per_topic == 3 and plan.config.workload.messages_per_txn == 6
    assert plan.perf.abort and "-abort" in plan.perf.argv("u", "a", None) and plan.config.workload.abort_ratio == 1.0


def test_workloads_without_a_pulsar_perf_counterpart_are_refused() -> None:
    config = _config()
    for kind in ("ack-only", "mixed"):
        other = dataclasses.replace(config, workload=dataclasses.replace(config.workload, kind=type(
            config.workload.kind)(kind)))
        with pytest.raises(ConfigError, match="pulsar-perf has no counterpart"):
            plan_peer(other, PULSAR_5, tag="t")
    with pytest.raises(ConfigError):
        plan_peer(_config(TxnPath.V5), PULSAR_4_LTS, tag="t")
    with pytest.raises(ConfigError):
        plan_peer(_config(TxnPath.V4_BATCHED), PULSAR_5, tag="t")


LOG = """\
1764230000000 INFO  PerformanceTransaction - Starting Pulsar perf transaction with config
1764230010000 INFO  PerformanceTransaction - Throughput transaction:     500 --- 50.000/s --- SendLatency: mean: \
12.0 ms - med: 11.0 - 95pct: 20.0 - 99pct: 30.0 - 99.9pct: 40.0 - 99.99pct: 41.0 - Max: 42.0 --- AckLatency: \
mean: NaN ms - med: 0.000 - 95pct: 0.000 - 99pct: 0.000 - 99.9pct: 0.000 - 99.99pct: 0.000 - Max: 0.000
1764230020000 INFO  PerformanceTransaction - Throughput transaction:    1200 --- 70.000/s --- SendLatency: x
1764230030000 INFO  PerformanceTransaction - Throughput transaction:    2000 --- 80.000/s --- SendLatency: x
1764230031000 INFO  PerformanceTransaction - Aggregated throughput stats --- 2050 transaction executed --- \
66.000 transaction/s --- 2060 transaction open successfully --- 0 transaction open failed --- 2050 transaction \
end successfully --- 0 transaction end failed --- 0 message ack failed --- 0 message send failed --- 0 message \
ack success --- 8200 message send success
"""


def _hgrm(values_per_interval: list[list[int]]) -> str:
    lines = ["#[Histogram log format version 1.3]", '"StartTimestamp","Interval_Length","Interval_Max",'
             '"Interval_Compressed_Histogram"']
    for i, values in enumerate(values_per_interval):
        h = HdrHistogram(1, 3_600_000_000, 3)
        for v in values:
            h.record_value(v)
        lines.append(f"{1764230000 + 5 * i}.000,10.000,{max(values, default=0) / 1000:.3f},"
                     f"{h.encode().decode()}")
    return "\n".join(lines) + "\n"


def test_pulsar_perf_log_interval_lines_and_aggregated_counters_are_read() -> None:
    intervals, aggregated = parse_log(LOG)
    assert [(i.total, i.rate) for i in intervals] == [(500, 50.0), (1200, 70.0), (2000, 80.0)]
    assert intervals[0].wall_ms == 1764230010000
    assert aggregated["end_ok"] == 2050 and aggregated["send_ok"] == 8200


def test_the_window_is_the_whole_intervals_after_warmup_and_latency_comes_from_their_histograms() -> None:
    assert window_intervals(3, 10, 20) == (2, 3)
    assert window_intervals(1, 10, 20) is None
    # interval 1 (warm-up) has a slow send that must not count; intervals 2 and 3 are measured
    hgrm = _hgrm([[900_000], [], [2000, 4000], [], [6000], []])
    assert len(read_hgrm(hgrm)) == 6
    result = read_result(LOG, hgrm, warmup_s=10, steady_s=20)
    assert result.window == (2, 3) and result.txn_per_s == 75.0 and result.transactions == 1500.0
    assert result.window_wall_s == (1764230010.0, 1764230030.0)
    send = result.latency_ms["send"]
    assert send["count"] == 3 and send["max"] == pytest.approx(6.0, rel=1e-3) and send["p50"] == pytest.approx(4.0, rel=1e-3)
    assert result.latency_ms["ack"] == {"count": 0}


def test_cpu_between_two_wall_times_from_cumulative_samples() -> None:
    samples = [[100.0, 1.0], [110.0, 3.0], [120.0, 8.0], [130.0, 9.0]]
    assert cpu_over(samples, 110.5, 130.0) == 6.0
    assert cpu_over(samples, 200.0, 210.0) is None


def test_broker_counter_deltas_sum_over_services_and_labels() -> None:
    before = {"broker-0": 'pulsar_txn_committed_total{coordinator_id="0"} 5\npulsar_jvm_x 3\n',
              "broker-1": 'pulsar_txn_committed_total{coordinator_id="1"} 1\n'}
    after = {"broker-0": 'pulsar_txn_committed_total{coordinator_id="0"} 55\npulsar_in_messages_total{topic="a"} 9\n',
             "broker-1": 'pulsar_txn_committed_total{coordinator_id="1"} 51\n'}
    assert brokers.deltas(before, after) == {"pulsar_in_messages_total": 9.0, "pulsar_txn_committed_total": 100.0}


def test_the_comparison_has_both_sides_the_ratio_and_what_pulsar_perf_cannot_tell() -> None:
    result = read_result(LOG, _hgrm([[1000], [], [2000], [], [3000], []]), 10, 20)
    run_json = {"cpu_samples": [[1764230005.0, 2.0], [1764230010.0, 3.0], [1764230030.0, 13.0]], "exit_code": 0}
    perf = perf_side(result, run_json, {}, {"broker-0": "pulsar_txn_committed_total 150\n"}, abort=False)
    assert perf["committed_txn_per_s"] == 75.0 and perf["cpu_percent_of_core"] == 50.0
    assert perf["cpu_s_per_1000_txn"] == pytest.approx(1000 * 0.5 / 75, abs=1e-3)
    assert perf["latency_ms"]["txn-commit"] is None
    assert perf["left_open_at_exit"] is None           # no created count: not guessed
    counted = perf_side(result, run_json, {}, {"broker-0": "pulsar_txn_created_total 160\n"
                                                "pulsar_txn_committed_total 150\npulsar_txn_aborted_total 2\n"},
                        abort=False)
    assert counted["left_open_at_exit"] == 8
    txnbench = {"committed_txn_per_s": 60.0, "cpu_s_per_1000_txn": 20.0, "cpu_percent_of_core": 120.0,
                "latency_ms": {"send": {"count": 1, "p50": 1.0, "p99": 2.0, "max": 3.0}, "ack": None,
                               "txn-commit": None},
                "broker_counts": {}, "verdict": True, "anomalies": {}}
    doc = build_peer(peer_id="p", cluster={"target": "pulsar", "release": "4.0.8", "brokers": 2},
                     plan={"txn_path": "v4", "threads": 8}, notes=["n"], perf=perf, txnbench=txnbench,
                     commands={"peer": "txnbench peer ap"})
    assert doc["ratios"]["committed_txn_per_s"] == 0.8 and doc["goal"]["met"] is True
    md = to_markdown(doc)
    assert "| committed txn/s (measured window) | 75 | 60 |" in md and "atomic" in md and "not measured" in md
    assert "| atomicity verdict | not checked | valid |" in md
    assert "<table>" in to_html(doc)
    for valid, said in ((False, "invalid"), ("unknown", "unknown"), (None, "unknown")):
        judged = build_peer(peer_id="p", cluster={"target": "pulsar", "release": "4.0.8", "brokers": 2},
                            plan={"txn_path": "v4", "threads": 8}, notes=[], perf=perf,
                            txnbench={**txnbench, "verdict": valid}, commands={})
        assert f"| atomicity verdict | not checked | {said} |" in to_markdown(judged)


def test_pulsar_perf_after_txnbench_brackets_it_and_the_ratio_is_taken_against_their_mean() -> None:
    """The same pulsar-perf command ran at 929.8 and 1,248.5 txn/s on one machine (2026-11-27):
    txnbench's ratio against one run mixed its speed with the cluster's drift."""
    perf, after = {"committed_txn_per_s": 100.0, "latency_ms": {}}, {"committed_txn_per_s": 84.0, "latency_ms": {}}
    txnbench = {"committed_txn_per_s": 73.6, "latency_ms": {}, "broker_counts": {}, "verdict": True, "anomalies": {}}
    perf["broker_counts"] = after["broker_counts"] = {}
    kwargs = {"peer_id": "p", "cluster": {"target": "pulsar", "release": "4.0.8", "brokers": 2},
              "plan": {"txn_path": "v4", "threads": 8}, "notes": [], "perf": perf, "txnbench": txnbench,
              "commands": {}}
    doc = build_peer(**kwargs, perf_after=after)   # type: ignore[arg-type]
    assert doc["bracket"] == {"pulsar_perf_before_txn_per_s": 100.0, "pulsar_perf_after_txn_per_s": 84.0,
                              "pulsar_perf_mean_txn_per_s": 92.0, "pulsar_perf_drift": -0.16,
                              "txnbench_vs_before": 0.736, "txnbench_vs_after": 0.876, "txnbench_vs_mean": 0.8}
    assert doc["ratios"]["committed_txn_per_s"] == 0.8 and doc["goal"]["met"] is True
    assert doc["sides"]["pulsar-perf-after"]["committed_txn_per_s"] == 84.0
    md = to_markdown(doc)
    assert "after it 84 txn/s (the cluster drifted -16%)" in md
    assert "(against the mean of pulsar-perf before and after) | 1 | 0.8 |" in md
    assert "then pulsar-perf again" in md and "drifted -16%" in to_html(doc)
    alone = build_peer(**kwargs)   # type: ignore[arg-type]
    assert alone["bracket"] is None and alone["ratios"]["committed_txn_per_s"] == 0.736
    assert "drifted" not in to_markdown(alone)


def test_a_cluster_that_drifted_past_the_limit_holds_txnbench_against_the_faster_pulsar_perf_run() -> None:
    """A cold cluster on one core: pulsar-perf ran 268.1 txn/s before txnbench and 1,085.7 after
    (results/20261128-011025-peer-atomic-produce-v4-4.0.8). Their mean (677) made txnbench's 679.2 look
    like a match; against the warm run it reached 0.626."""
    perf = {"committed_txn_per_s": 268.1, "latency_ms": {}, "broker_counts": {}}
    after = {"committed_txn_per_s": 1085.7, "latency_ms": {}, "broker_counts": {}}
    txnbench = {"committed_txn_per_s": 679.2, "latency_ms": {}, "broker_counts": {}, "verdict": True, "anomalies": {}}
    doc = build_peer(peer_id="p", cluster={"target": "pulsar", "release": "4.0.8", "brokers": 2},
                     plan={"txn_path": "v4", "threads": 8}, notes=[], perf=perf, txnbench=txnbench, commands={},
                     perf_after=after)
    assert doc["bracket"]["txnbench_vs_mean"] == 1.003
    assert doc["ratios"]["committed_txn_per_s"] == 0.626 and doc["goal"]["met"] is False
    assert "the faster pulsar-perf run (the two differ by +305%" in doc["ratios"]["against"]
    assert "The ratio above and the goal are against the faster pulsar-perf run" in to_markdown(doc)


def test_a_saturated_machine_is_named_as_the_mechanism_of_the_waits() -> None:
    """2 cores, brokers and load together: the load process's CPU is taken from the cluster."""
    from analysis.peer.compare import bottleneck

    perf = {"committed_txn_per_s": 1000.0, "latency_ms": {}, "host_busy_cores": 1.7}
    txnbench = {"committed_txn_per_s": 600.0, "latency_ms": {}, "cpu_percent_of_core": 60.0,
                "cpu_s_per_1000_txn": 1.0, "host_busy_cores": 1.92, "host_cpus": 2}
    b = bottleneck({"threads": 8, "messages_per_txn": 4}, perf, txnbench)
    assert b["machine_saturated"] is True and b["txnbench_host_busy_cores"] == 1.92
    doc = {"bottleneck": b}
    from analysis.peer.render import bottleneck_text
    text = bottleneck_text(doc)
    assert "saturated while txnbench ran (1.92 of 2 cores busy; pulsar-perf's window: 1.7)" in text
    assert "not its own CPU" not in text
    calm = bottleneck({"threads": 8, "messages_per_txn": 4}, perf, {**txnbench, "host_busy_cores": 1.2})
    assert calm["machine_saturated"] is False and "not its own CPU" in bottleneck_text({"bottleneck": calm})


def test_the_bottleneck_sets_txnbench_serial_operations_against_its_time_per_transaction() -> None:
    from analysis.peer.compare import bottleneck

    lat = {"txn-open": {"mean": 10.0}, "send": {"mean": 20.0}, "txn-commit": {"mean": 30.0}}
    out = bottleneck({"threads": 8, "messages_per_txn": 4}, {"committed_txn_per_s": 160.0},
                     {"committed_txn_per_s": 64.0, "latency_ms": lat, "cpu_percent_of_core": 15.0})
    assert out["pulsar-perf_ms_per_txn_per_client"] == 50.0 and out["txnbench_ms_per_txn_per_client"] == 125.0
    assert out["txnbench_serial_ms"] == 120.0 and out["txnbench_cpu_bound"] is False


def test_the_bottleneck_of_a_pipelined_txnbench_is_its_open_cycle_and_both_sides_in_flight() -> None:
    from analysis.peer.compare import bottleneck
    from analysis.peer.render import bottleneck_text

    lat = {"txn-open": {"mean": 10.0}, "send": {"mean": 20.0}, "txn-commit": {"mean": 30.0}}
    txnbench = {"committed_txn_per_s": 150.0, "latency_ms": lat, "cpu_percent_of_core": 40.0,
                "concurrency": {"send_concurrency": 4, "txn_pipeline": "sends-async", "open_txns_per_user": 16}}
    perf = {"committed_txn_per_s": 160.0, "latency_ms": {"send": {"mean": 25.0}}}
    out = bottleneck({"threads": 8, "messages_per_txn": 4}, perf, txnbench)
    assert out["txnbench_cycle_ops"] == {"txn-open": 1} and out["txnbench_cycle_ms"] == 10.0
    assert "txnbench_serial_ms" not in out
    # Little's law: 160 txn/s x 4 sends x 25 ms = 16 sends; 150 x 4 x 20 ms = 12; 150 x (10 + 20 + 30) ms = 9
    assert out["pulsar-perf_sends_in_flight"] == 16.0 and out["txnbench_sends_in_flight"] == 12.0
    assert out["txnbench_txns_in_flight"] == 9.0
    commit_async = dict(txnbench, concurrency={"send_concurrency": 4, "txn_pipeline": "commit-async"})
    assert bottleneck({"threads": 8, "messages_per_txn": 4}, perf, commit_async)["txnbench_cycle_ms"] == 30.0
    text = bottleneck_text({"bottleneck": out})
    assert "txn_pipeline sends-async" in text and "pulsar-perf 16" in text and "under 80% of a core" in text


def test_the_bottleneck_names_cpu_per_transaction_when_one_core_cannot_reach_the_goal() -> None:
    from analysis.peer.compare import bottleneck
    from analysis.peer.render import bottleneck_text

    lat = {"txn-open": {"mean": 18.0}, "send": {"mean": 31.0}, "txn-commit": {"mean": 25.0}}
    txnbench = {"committed_txn_per_s": 141.5, "latency_ms": lat, "cpu_percent_of_core": 32.7, "cpu_s_per_1000_txn": 2.5,
                "concurrency": {"send_concurrency": 4, "txn_pipeline": "sends-async"}}
    out = bottleneck({"threads": 8, "messages_per_txn": 4}, {"committed_txn_per_s": 885.0}, txnbench)
    # 2.5 ms of CPU per transaction: 400 txn/s on a whole core, under 80% of 885; 2.21 cores to match
    assert out["txnbench_ceiling_txn_per_s_per_core"] == 400.0 and out["txnbench_cpu_caps_below_goal"] is True
    assert out["txnbench_cores_to_match_pulsar_perf"] == 2.21
    assert "cannot exceed 400 txn/s" in bottleneck_text({"bottleneck": out})
    fast = bottleneck({"threads": 8, "messages_per_txn": 4}, {"committed_txn_per_s": 100.0}, txnbench)
    assert fast["txnbench_cpu_caps_below_goal"] is False


def test_pinned_load_generators_split_the_busy_cores_into_theirs_and_the_clusters() -> None:
    """--load-cpus: the report says which CPU set was full, the load generator's or the cluster's,
    instead of blaming the load generator's CPU for a saturated machine."""
    from analysis.peer.compare import _cpu_sets, bottleneck
    from analysis.peer.render import bottleneck_text, rows

    assert _cpu_sets(None, 0.5, 1.9, 2) == {}
    assert _cpu_sets([1], 0.62, 1.97, 2) == {"load_cpus": [1], "load_cpus_busy_cores": 0.62,
                                             "cluster_cpus_count": 1, "cluster_cpus_busy_cores": 1.35}
    perf = {"committed_txn_per_s": 700.0, "latency_ms": {}, "host_busy_cores": 1.2, "host_cpus": 2,
            **_cpu_sets([1], 0.2, 1.2, 2)}
    txnbench = {"committed_txn_per_s": 650.0, "latency_ms": {}, "cpu_percent_of_core": 66.0,
                "cpu_s_per_1000_txn": 1.02, "host_busy_cores": 1.66, "host_cpus": 2, **_cpu_sets([1], 0.7, 1.66, 2)}
    b = bottleneck({"threads": 8, "messages_per_txn": 4}, perf, txnbench)
    assert b["pinned"]["txnbench_cluster_saturated"] is True and b["pinned"]["txnbench_load_saturated"] is False
    assert b["pinned"]["pulsar-perf_cluster_cpus_busy"] == 1.0
    text = bottleneck_text({"bottleneck": b})
    assert "the cluster's CPUs were 0.96 of 1 busy and the load generator's 0.7 of 1" in text
    assert "the cluster, not the load generator, set txnbench's rate" in text
    assert "load generator's CPU was taken from the cluster" not in text   # the shared-cores story is not told
    busy = bottleneck({"threads": 8, "messages_per_txn": 4}, perf, {**txnbench, **_cpu_sets([1], 0.82, 1.73, 2)})
    assert "both set txnbench's rate" in bottleneck_text({"bottleneck": busy})
    doc = {"sides": {"pulsar-perf": {**perf, "aggregated": {}, "broker_counts": {}},
                     "txnbench": {**txnbench, "broker_counts": {}, "transactions": {}}},
           "ratios": {}, "bracket": None}
    table = {r[0]: r[1:] for r in rows(doc)}
    assert table["load generator's CPUs (1) busy, cores (--load-cpus)"] == ("0.2 of 1", "0.7 of 1")
    assert table["the cluster's CPUs (all the others) busy, cores"] == ("1 of 1", "0.96 of 1")


def test_pulsar_perf_side_reads_its_pinned_cpus_busy_samples() -> None:
    result = PerfResult(txn_per_s=500.0, window_wall_s=(0.0, 10.0))
    run_json = {"cpu_samples": [[0.0, 0.0], [10.0, 2.0]], "host_busy_samples": [[0.0, 0.0], [10.0, 18.0]],
                "own_cpus": [1], "own_cpus_busy_samples": [[0.0, 0.0], [10.0, 3.0]], "host_cpus": 2}
    side = perf_side(result, run_json, {}, {}, abort=False)
    assert side["load_cpus"] == [1] and side["load_cpus_busy_cores"] == 0.3
    assert side["cluster_cpus_busy_cores"] == 1.5 and side["cluster_cpus_count"] == 1
