"""The load generator's headroom: was the harness, not the cluster, the bottleneck?

Theory of operation. A benchmark number means something only if the client
could have gone faster. The load process (workloads) reports, in
`locust/status.json`, its own CPU use over time and the client's measured
capacity against a null broker (a broker that answers every command at once);
docs/report.md ("Inputs") fixes the key names. Here the measured window's
throughput (from the history), transactions and messages per second, is set
against that capacity, and the load processes' CPU over the same window against one core per process (a Locust
process runs on gevent, so one core is its ceiling). Either at 80 % or more
says the load generator may have limited the result. A missing input is
reported as absent, and with no input at all the answer is "unknown", never
"fine".
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["SATURATION", "STATUS_FILE", "cpu_over_window", "load_generator", "read_locust_csv", "read_status"]

STATUS_FILE = "status.json"
SATURATION = 0.8


def read_status(locust_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(status.json content, None) or (None, why it is absent)."""
    path = locust_dir / STATUS_FILE
    if not path.is_file():
        return None, f"{path} does not exist"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return None, f"{path} is not readable JSON ({err})"
    if not isinstance(data, dict):
        return None, f"{path} is not a JSON object"
    return data, None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def cpu_over_window(samples: Sequence[Any], start_ns: int, end_ns: int) -> dict[str, Any] | None:
    """CPU use (% of one core) between the samples that bracket [start_ns, end_ns].

    `samples` are [time_ns, cumulative cpu seconds] pairs (run clock). The
    bracketing samples are the last one at or before the start (else the first
    after it) and the first one at or after the end (else the last before it).
    """
    points: list[tuple[int, float]] = []
    for item in samples or ():
        if isinstance(item, list | tuple) and len(item) == 2:
            t, cpu = _number(item[0]), _number(item[1])
            if t is not None and cpu is not None:
                points.append((int(t), cpu))
    points.sort()
    if len(points) < 2:
        return None
    before = [p for p in points if p[0] <= start_ns]
    s0 = before[-1] if before else points[0]
    after = [p for p in points if p[0] >= end_ns]
    s1 = after[0] if after else points[-1]
    if s1[0] <= s0[0]:
        return None
    percent = 100.0 * (s1[1] - s0[1]) / ((s1[0] - s0[0]) / 1e9)
    return {"percent_of_core": round(percent, 2), "from_s": round(s0[0] / 1e9, 3), "to_s": round(s1[0] / 1e9, 3),
            "cpu_s": round(s1[1] - s0[1], 4)}


def _csv_number(row: Mapping[str, str | None], key: str) -> float | None:
    try:
        return float(row.get(key) or "")
    except ValueError:
        return None


def read_locust_csv(locust_dir: Path) -> dict[str, Any] | None:
    """The `Aggregated` row of Locust's `*_stats.csv`, when the load process wrote one."""
    for path in sorted(locust_dir.glob("*_stats.csv")):
        try:
            with path.open(encoding="utf-8", newline="") as f:
                for row in csv.DictReader(f):
                    if (row.get("Name") or "").strip() == "Aggregated":
                        return {"file": f"locust/{path.name}", "requests": _csv_number(row, "Request Count"),
                                "failures": _csv_number(row, "Failure Count"),
                                "requests_per_s": _csv_number(row, "Requests/s"),
                                "scope": "whole load run (Locust's own count, all request types)"}
        except OSError:
            continue
    return None


def load_generator(locust_dir: Path, window: Mapping[str, Any] | None, achieved_txn_per_s: float | None,
                   achieved_msgs_per_s: float | None, processes: int | None) -> dict[str, Any]:
    """Headroom of the load generator over the measured window (see the module docstring)."""
    status, why = read_status(locust_dir)
    out: dict[str, Any] = {
        "achieved": {"committed_txn_per_s": achieved_txn_per_s, "msgs_per_s": achieved_msgs_per_s,
                     "source": "history, measured window"},
    }
    if status is None:
        out["status"] = {"absent": True, "reason": why}
    else:
        out["status"] = {k: status.get(k) for k in ("committed_txn_per_s", "msgs_per_s", "errors", "ack_conflicts",
                                                     "ack_steals", "end_txn_resends", "race_losses",
                                                     "users", "processes", "host_cpus") if k in status}
    procs = processes
    if status is not None and _number(status.get("processes")):
        procs = int(status["processes"])
    procs = max(1, procs or 1)

    cpu: dict[str, Any] | None = None
    if status is not None and window is not None and status.get("cpu_samples"):
        cpu = cpu_over_window(status["cpu_samples"], int(window["start_ns"]), int(window["end_ns"]))
        if cpu is not None:
            cpu["source"] = "locust/status.json cpu_samples over the measured window"
    if cpu is None and status is not None and _number(status.get("cpu_percent")) is not None:
        cpu = {"percent_of_core": float(status["cpu_percent"]),
               "source": "locust/status.json cpu_percent (last report, not the window)"}
    if cpu is None:
        out["cpu"] = {"absent": True,
                      "reason": why or "status.json has neither cpu_samples nor cpu_percent"}
    else:
        cpu["processes"] = procs
        cpu["per_process_percent"] = round(cpu["percent_of_core"] / procs, 2)
        if status is not None and _number(status.get("host_cpus")):
            cpu["host_cpus"] = int(status["host_cpus"])
        out["cpu"] = cpu

    host = None
    if status is not None and window is not None and status.get("host_busy_samples"):
        host = cpu_over_window(status["host_busy_samples"], int(window["start_ns"]), int(window["end_ns"]))
    if host is not None:
        cores = status.get("host_cpus") if status is not None and _number(status.get("host_cpus")) else None
        busy = round(host["percent_of_core"] / 100.0, 2)
        out["host"] = {"busy_cores": busy, "host_cpus": cores,
                       "busy_fraction": round(busy / cores, 3) if cores else None,
                       "source": "locust/status.json host_busy_samples over the measured window (the whole machine)"}
        own = (cpu_over_window(status["own_cpus_busy_samples"], int(window["start_ns"]), int(window["end_ns"]))
               if status is not None and window is not None and status.get("own_cpus_busy_samples") else None)
        if own is not None and status is not None:
            out["host"]["own_cpus"] = list(status.get("own_cpus") or [])
            out["host"]["own_cpus_busy_cores"] = round(own["percent_of_core"] / 100.0, 2)
    capacity = status.get("capacity") if status is not None else None
    if isinstance(capacity, Mapping) and _number(capacity.get("committed_txn_per_s")):
        cap: dict[str, Any] = {k: capacity.get(k) for k in ("committed_txn_per_s", "msgs_per_s", "against",
                                                            "users", "duration_s") if k in capacity}
        cap_txn = float(capacity["committed_txn_per_s"])
        cap["utilization"] = (round(achieved_txn_per_s / cap_txn, 4)
                              if achieved_txn_per_s is not None and cap_txn > 0 else None)
        cap_msgs = _number(capacity.get("msgs_per_s"))
        cap["msgs_utilization"] = (round(achieved_msgs_per_s / cap_msgs, 4)
                                   if achieved_msgs_per_s is not None and cap_msgs else None)
        out["capacity"] = cap
    else:
        out["capacity"] = {"absent": True,
                           "reason": why or "status.json has no capacity.committed_txn_per_s "
                                            "(the client's rate against a null broker)"}

    out["csv"] = read_locust_csv(locust_dir) or {"absent": True, "reason": f"no {locust_dir}/*_stats.csv"}

    reasons: list[str] = []
    judged = False
    for key, what in (("utilization", "transactions"), ("msgs_utilization", "messages")):
        utilization = out["capacity"].get(key)
        if utilization is not None:
            judged = True
            if utilization >= SATURATION:
                reasons.append(f"{what} per second are {utilization:.0%} of the client's measured capacity")
    if not out["cpu"].get("absent"):
        judged = True
        share = out["cpu"]["per_process_percent"] / 100.0
        if share >= SATURATION:
            reasons.append(f"the load processes used {share:.0%} of a core each")
    if not judged:
        out["saturated"] = None
        out["verdict"] = "unknown: no capacity or CPU figures from the load generator"
    elif reasons:
        out["saturated"] = True
        out["verdict"] = "the load generator may have been the bottleneck: " + "; ".join(reasons)
    else:
        out["saturated"] = False
        out["verdict"] = "the load generator had headroom"
    return out
