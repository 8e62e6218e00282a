"""peer.json: pulsar-perf and txnbench on the same cluster and load, side by side.

Both sides are put in the same units: committed transactions per second over each tool's
measured window (the windows have the same length: the peer plan makes warm-up and steady
whole 10-second intervals on both), send/ack/commit latency percentiles in milliseconds
(pulsar-perf's from its HdrHistogram log, txnbench's from its history), the load
generator's CPU seconds per 1000 transactions (CPU seconds per second over the window
divided by transactions per second over it), and the broker-side counter deltas over
each whole run, also per committed transaction as the brokers count them. The ratios are
txnbench over pulsar-perf; the goal is txnbench reaching `GOAL` of pulsar-perf's rate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analysis.peer import brokers
from analysis.peer.pulsar_perf import PerfResult, cpu_over
from harness.results import config_of

PEER_SCHEMA = 1
GOAL = 0.8
#: pulsar-perf's two runs differing by more than this: their mean is no fair yardstick (the cluster
#: warmed up or slowed down in between), so txnbench is held against the faster of the two
DRIFT_LIMIT = 0.25
#: the share of the machine's cores busy over a window from which the machine counts as saturated
MACHINE_SATURATED = 0.9
PERF = "pulsar-perf"
PERF_AFTER = "pulsar-perf-after"
TXNBENCH = "txnbench"

CANNOT_TELL = (
    "whether transactions were atomic: pulsar-perf never reads back what it wrote, so a lost, partial, "
    "duplicated or aborted-but-visible transaction goes unnoticed (txnbench checks 14 anomaly classes "
    "against the final reads)",
    "what happened to any one transaction: it keeps counters and latency histograms, no per-operation "
    "history (txnbench records every invoke and completion with ids, topics and message ids)",
    "how the cluster behaves under faults: it injects none (txnbench's nemesis kills, pauses, partitions "
    "and seals while the load runs)",
    "commit latency: it fires commit() without waiting and opens the next transaction, so commits are "
    "neither timed nor bounded in flight (txnbench overlaps its transactions the same way but times every "
    "commit and records each operation on its own history lane, at most open_txns_per_user per user)",
    "a mix of commits and aborts: -abort aborts every transaction or none",
)


def _latency(block: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not block or not block.get("count"):
        return None
    return {k: block.get(k) for k in ("count", "p50", "p95", "p99", "p99.9", "max", "mean")}


def _per_txn(counts: Mapping[str, float], committed: float | None) -> dict[str, float]:
    if not committed:
        return {}
    return {name: round(value / committed, 3) for name, value in counts.items()}


def _broker_committed(counts: Mapping[str, float]) -> float | None:
    value = counts.get("pulsar_txn_committed_total")
    return value if value else None


def perf_side(result: PerfResult, run_json: Mapping[str, Any], before: Mapping[str, str],
              after: Mapping[str, str], abort: bool) -> dict[str, Any]:
    """pulsar-perf's column: its window's rate and latency, its JVM's CPU, the brokers' counts."""
    counts = brokers.deltas(before, after)
    cpu_per_1000 = cpu_pct = host_busy = own_busy = None
    if result.window_wall_s and result.txn_per_s:
        start, end = result.window_wall_s
        cpu = cpu_over(run_json.get("cpu_samples") or [], start, end)
        if cpu is not None and end > start:
            cpu_pct = round(100.0 * cpu / (end - start), 1)
            cpu_per_1000 = round(1000.0 * cpu / (end - start) / result.txn_per_s, 3)
        busy = cpu_over(run_json.get("host_busy_samples") or [], start, end)
        if busy is not None and end > start:
            host_busy = round(busy / (end - start), 2)
        own = cpu_over(run_json.get("own_cpus_busy_samples") or [], start, end)
        if own is not None and end > start:
            own_busy = round(own / (end - start), 2)
    samples = run_json.get("cpu_samples") or []
    latency = {op: _latency(result.latency_ms.get(op)) for op in ("send", "ack")}
    latency["txn-commit"] = None
    created, ended = counts.get("pulsar_txn_created_total"), [counts.get("pulsar_txn_committed_total"),
                                                                   counts.get("pulsar_txn_aborted_total")]
    left_open = (round(created - sum(e or 0.0 for e in ended)) if created is not None
                 and any(e is not None for e in ended) else None)
    return {
        "committed_txn_per_s": 0.0 if abort else result.txn_per_s,
        "ended_txn_per_s": result.txn_per_s,
        # pulsar-perf exits with transactions open; they time out during the txnbench run that follows
        "left_open_at_exit": left_open,
        "source": "pulsar-perf's 10 s interval lines over the measured window",
        "latency_ms": latency,
        "cpu_percent_of_core": cpu_pct,
        "cpu_s_per_1000_txn": cpu_per_1000,
        "cpu_s_total": samples[-1][1] if samples else None,
        "host_busy_cores": host_busy,
        "host_cpus": run_json.get("host_cpus"),
        **_cpu_sets(run_json.get("own_cpus"), own_busy, host_busy, run_json.get("host_cpus")),
        "broker_counts": counts,
        "broker_counts_per_committed_txn": _per_txn(counts, _broker_committed(counts)),
        "exit_code": run_json.get("exit_code"),
        "aggregated": result.aggregated,
        "notes": list(result.notes),
    }


def _cpu_sets(load_cpus: Any, load_busy: Any, host_busy: Any, host_cpus: Any) -> dict[str, Any]:
    """A pinned load generator (`--load-cpus`): how busy its CPUs and the cluster's (all the others)
    were over the window, in cores; nothing when it was not pinned."""
    if not load_cpus or not isinstance(load_busy, int | float):
        return {}
    out: dict[str, Any] = {"load_cpus": list(load_cpus), "load_cpus_busy_cores": load_busy}
    if isinstance(host_busy, int | float) and isinstance(host_cpus, int) and host_cpus > len(load_cpus):
        out["cluster_cpus_count"] = host_cpus - len(load_cpus)
        out["cluster_cpus_busy_cores"] = round(max(host_busy - load_busy, 0.0), 2)
    return out


def txnbench_side(run_dir: Path) -> dict[str, Any]:
    """txnbench's column, from the run's analysis/perf.json, results.json and metric snapshots."""
    perf = _read(run_dir / "analysis" / "perf.json")
    results = _read(run_dir / "analysis" / "results.json")
    counts = brokers.deltas(brokers.read_texts(run_dir / "metrics", "setup"),
                            brokers.read_texts(run_dir / "metrics", "recovery"))
    rate = perf.get("committed_txn_per_s")
    cpu = ((perf.get("load_generator") or {}).get("cpu")) or {}
    host = ((perf.get("load_generator") or {}).get("host")) or {}
    pct = None if cpu.get("absent") else cpu.get("percent_of_core")
    latency = perf.get("latency_ms") or {}
    anomalies = results.get("anomalies") or {}
    config = config_of(_read(run_dir / "manifest.json"))
    return {
        "concurrency": {k: getattr(config.workload, k) if config else None
                        for k in ("send_concurrency", "txn_pipeline", "open_txns_per_user")},
        "committed_txn_per_s": rate,
        "ended_txn_per_s": rate,
        "source": "txnbench's history over the steady phase",
        "latency_ms": {op: _latency(latency.get(op)) for op in ("txn-open", "send", "ack", "txn-commit")},
        "cpu_percent_of_core": pct,
        "cpu_s_per_1000_txn": round(10.0 * pct / rate, 3) if pct is not None and rate else None,
        "host_busy_cores": host.get("busy_cores"),
        "host_cpus": host.get("host_cpus"),
        **_cpu_sets(host.get("own_cpus"), host.get("own_cpus_busy_cores"), host.get("busy_cores"),
                    host.get("host_cpus")),
        "broker_counts": counts,
        "broker_counts_per_committed_txn": _per_txn(counts, _broker_committed(counts)),
        "transactions": perf.get("transactions") or {},
        "verdict": results.get("valid"),
        "anomalies": {k: v.get("count") for k, v in anomalies.items()},
        "run": str(run_dir),
    }


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return round(a / b, 3)
    return None


def _in_flight(rate: Any, per_txn: float, block: Mapping[str, Any] | None) -> float | None:
    """Little's law: operations in flight = completions per second x mean seconds each takes."""
    if not isinstance(rate, int | float) or not block or block.get("mean") is None:
        return None
    return round(rate * per_txn * block["mean"] / 1000.0, 1)


def bottleneck(plan: Mapping[str, Any], perf: Mapping[str, Any], txnbench: Mapping[str, Any]) -> dict[str, Any]:
    """Why txnbench is slower (or not) at the same concurrency, from the measurements of both sides.

    A closed loop of N clients completes N / (time per transaction) transactions a second. A
    serial txnbench user (`txn_pipeline: serial`) runs open, its sends and its commit one after
    another, so its time per transaction is about the sum of their mean latencies. A pulsar-perf
    thread blocks only on opening a transaction (the v4 client: sends and commit not awaited; V5:
    sends awaited, commit not), and so does a pipelined txnbench user (`sends-async`, `commit-async`):
    its cycle is the open (plus, commit-async, the slowest send). Little's law (rate x mean latency)
    gives how many sends and transactions each side had in flight. The load generator's CPU says
    whether the Python process, not the waits, was the limit.
    """
    threads = plan.get("threads") or 0
    messages = plan.get("messages_per_txn") or 0
    out: dict[str, Any] = {"clients": threads}
    for name, side in ((PERF, perf), (TXNBENCH, txnbench)):
        rate = side.get("committed_txn_per_s")
        out[f"{name}_ms_per_txn_per_client"] = round(1000.0 * threads / rate, 1) if rate else None
        out[f"{name}_sends_in_flight"] = _in_flight(rate, messages, (side.get("latency_ms") or {}).get("send"))
    lat = txnbench.get("latency_ms") or {}
    concurrency = txnbench.get("concurrency") or {}
    pipeline = concurrency.get("txn_pipeline") or "serial"
    out["txnbench_txn_pipeline"] = pipeline
    out["txnbench_send_concurrency"] = concurrency.get("send_concurrency") or 1
    rate = txnbench.get("committed_txn_per_s")
    found = {op: (lat.get(op) or {}).get("mean") for op in ("txn-open", "send", "txn-commit")}
    means: dict[str, float] = {op: float(v) for op, v in found.items() if v is not None}
    if rate and len(means) == len(found):
        serial_sends = messages if out["txnbench_send_concurrency"] <= 1 else 1
        life_ms = means["txn-open"] + serial_sends * means["send"] + means["txn-commit"]
        out["txnbench_txns_in_flight"] = round(rate * life_ms / 1000.0, 1)
        if pipeline == "serial":
            parts = {"txn-open": 1, "send": serial_sends, "txn-commit": 1}
            out["txnbench_serial_ops"] = parts
            out["txnbench_serial_ms"] = round(sum(n * means[op] for op, n in parts.items()), 1)
        else:
            cycle = {"txn-open": 1} if pipeline == "sends-async" else {"txn-open": 1, "send": 1}
            out["txnbench_cycle_ops"] = cycle
            out["txnbench_cycle_ms"] = round(sum(n * means[op] for op, n in cycle.items()), 1)
    cpu = txnbench.get("cpu_percent_of_core")
    out["txnbench_cpu_bound"] = None if cpu is None else cpu >= 80.0
    busy, cores = txnbench.get("host_busy_cores"), txnbench.get("host_cpus")
    if isinstance(busy, int | float) and isinstance(cores, int | float) and cores:
        # the machine's cores all busy: the load generator's CPU is taken from the cluster it measures
        out["machine_saturated"] = busy >= MACHINE_SATURATED * cores
        out["txnbench_host_busy_cores"], out["host_cpus"] = busy, cores
        out["pulsar-perf_host_busy_cores"] = perf.get("host_busy_cores")
    if txnbench.get("load_cpus") and txnbench.get("cluster_cpus_count"):
        # pinned: the load generators' CPUs and the cluster's are apart; which set was full says which side limits
        n_load, n_cluster = len(txnbench["load_cpus"]), txnbench["cluster_cpus_count"]
        out["pinned"] = {"load_cpus": n_load, "cluster_cpus": n_cluster}
        for name, side in ((PERF, perf), (TXNBENCH, txnbench)):
            load, cluster = side.get("load_cpus_busy_cores"), side.get("cluster_cpus_busy_cores")
            out["pinned"][f"{name}_load_cpus_busy"] = load
            out["pinned"][f"{name}_cluster_cpus_busy"] = cluster
            out["pinned"][f"{name}_cluster_saturated"] = (cluster >= MACHINE_SATURATED * n_cluster
                                                          if isinstance(cluster, int | float) else None)
            out["pinned"][f"{name}_load_saturated"] = (load >= MACHINE_SATURATED * n_load
                                                       if isinstance(load, int | float) else None)
    # One gevent load process runs on one core at most: its CPU per transaction caps its rate.
    cpu_ms = txnbench.get("cpu_s_per_1000_txn")
    perf_rate = perf.get("committed_txn_per_s")
    if isinstance(cpu_ms, int | float) and cpu_ms > 0:
        out["txnbench_ceiling_txn_per_s_per_core"] = round(1000.0 / cpu_ms, 1)
        if isinstance(perf_rate, int | float) and perf_rate:
            out["txnbench_cores_to_match_pulsar_perf"] = round(perf_rate * cpu_ms / 1000.0, 2)
            out["txnbench_cpu_caps_below_goal"] = 1000.0 / cpu_ms < GOAL * perf_rate
    return out


def bracket(perf: Mapping[str, Any], perf_after: Mapping[str, Any] | None,
            txnbench: Mapping[str, Any]) -> dict[str, Any] | None:
    """pulsar-perf before and after txnbench: the cluster's drift, and txnbench against each and their mean.

    The same pulsar-perf command swung by a third between runs on one machine, so a ratio
    against the run before alone mixes txnbench's speed with the cluster's drift; against
    the mean of the two runs that bracket it, drift that is steady cancels.
    """
    before, after = perf.get("committed_txn_per_s"), (perf_after or {}).get("committed_txn_per_s")
    if not isinstance(before, int | float) or not isinstance(after, int | float) or not before:
        return None
    mean = (before + after) / 2.0
    rate = txnbench.get("committed_txn_per_s")
    return {"pulsar_perf_before_txn_per_s": before, "pulsar_perf_after_txn_per_s": after,
            "pulsar_perf_mean_txn_per_s": round(mean, 1), "pulsar_perf_drift": round(after / before - 1.0, 3),
            "txnbench_vs_before": _ratio(rate, before), "txnbench_vs_after": _ratio(rate, after),
            "txnbench_vs_mean": _ratio(rate, mean)}


def build_peer(*, peer_id: str, cluster: Mapping[str, Any], plan: Mapping[str, Any], notes: list[str],
               perf: Mapping[str, Any], txnbench: Mapping[str, Any], commands: Mapping[str, str],
               perf_after: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The peer.json document; with `perf_after` (pulsar-perf again after txnbench) the rate ratio and
    the goal are taken against the mean of the two pulsar-perf runs."""
    brackets = bracket(perf, perf_after, txnbench)
    against = "the mean of pulsar-perf before and after" if brackets else "pulsar-perf"
    if brackets is None:
        rate_ratio = _ratio(txnbench.get("committed_txn_per_s"), perf.get("committed_txn_per_s"))
    elif abs(brackets["pulsar_perf_drift"]) > DRIFT_LIMIT:
        rate_ratio = _ratio(txnbench.get("committed_txn_per_s"), max(brackets["pulsar_perf_before_txn_per_s"],
                                                                      brackets["pulsar_perf_after_txn_per_s"]))
        against = (f"the faster pulsar-perf run (the two differ by {brackets['pulsar_perf_drift']:+.0%}, past "
                   f"{DRIFT_LIMIT:.0%}: their mean is no fair yardstick)")
    else:
        rate_ratio = brackets["txnbench_vs_mean"]
    cpu_ratio = _ratio(txnbench.get("cpu_s_per_1000_txn"), perf.get("cpu_s_per_1000_txn"))
    goal_met = None if rate_ratio is None else rate_ratio >= GOAL
    sides = {PERF: dict(perf), TXNBENCH: dict(txnbench)}
    if perf_after is not None:
        sides[PERF_AFTER] = dict(perf_after)
    return {
        "schema": PEER_SCHEMA, "id": peer_id, "cluster": dict(cluster), "plan": dict(plan),
        "matching_notes": list(notes), "commands": dict(commands),
        "sides": sides,
        "ratios": {"committed_txn_per_s": rate_ratio, "cpu_s_per_1000_txn": cpu_ratio,
                   "against": against},
        "bracket": brackets,
        "bottleneck": bottleneck(plan, perf, txnbench),
        "goal": {"txnbench_at_least": GOAL, "met": goal_met},
        "pulsar_perf_cannot_tell": list(CANNOT_TELL),
    }
