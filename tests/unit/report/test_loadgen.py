"""Load generator headroom from locust/status.json."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.perf.loadgen import cpu_over_window, load_generator

S = 1_000_000_000
WINDOW = {"start_ns": 10 * S, "end_ns": 20 * S}


def write_status(tmp_path: Path, status: dict) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "status.json").write_text(json.dumps(status))
    return tmp_path


def test_cpu_between_the_samples_that_bracket_the_window() -> None:
    samples = [[0, 0.0], [9 * S, 1.0], [12 * S, 2.0], [21 * S, 6.5], [30 * S, 7.0]]
    cpu = cpu_over_window(samples, 10 * S, 20 * S)
    assert cpu is not None and cpu["percent_of_core"] == round(100.0 * (6.5 - 1.0) / 12.0, 2)
    assert (cpu["from_s"], cpu["to_s"]) == (9.0, 21.0)
    assert cpu_over_window([[0, 1.0]], 0, S) is None
    assert cpu_over_window([["x", 1], [1, "y"]], 0, S) is None


def test_headroom_when_well_below_capacity(tmp_path: Path) -> None:
    locust = write_status(tmp_path, {"cpu_samples": [[0, 0.0], [30 * S, 6.0]], "processes": 2,
                                     "capacity": {"committed_txn_per_s": 1000.0, "against": "null-broker"}})
    out = load_generator(locust, WINDOW, 200.0, 800.0, None)
    assert out["capacity"]["utilization"] == 0.2
    assert out["cpu"]["percent_of_core"] == 20.0 and out["cpu"]["per_process_percent"] == 10.0
    assert out["saturated"] is False and out["verdict"] == "the load generator had headroom"


def test_saturation_by_capacity_or_cpu(tmp_path: Path) -> None:
    locust = write_status(tmp_path / "a", {"capacity": {"committed_txn_per_s": 250.0}})
    out = load_generator(locust, WINDOW, 200.0, None, 1)
    assert out["saturated"] is True and "transactions per second are 80% of the client's measured capacity" \
        in out["verdict"]
    locust = write_status(tmp_path / "m", {"capacity": {"committed_txn_per_s": 1000.0, "msgs_per_s": 1000.0}})
    out = load_generator(locust, WINDOW, 200.0, 900.0, 1)
    assert out["capacity"]["msgs_utilization"] == 0.9 and out["saturated"] is True
    assert "messages per second are 90%" in out["verdict"]
    assert out["cpu"]["absent"] is True
    locust = write_status(tmp_path / "b", {"cpu_percent": 95.0})
    out = load_generator(locust, WINDOW, 200.0, None, 1)
    assert out["saturated"] is True and "95% of a core" in out["verdict"]
    assert "not the window" in out["cpu"]["source"] and out["capacity"]["absent"] is True


def test_nothing_reported_is_unknown_not_fine(tmp_path: Path) -> None:
    out = load_generator(tmp_path / "missing", WINDOW, 200.0, None, 1)
    assert out["saturated"] is None and out["verdict"].startswith("unknown")
    assert "does not exist" in out["status"]["reason"] and out["capacity"]["absent"] is True
    assert out["csv"]["absent"] is True


def test_the_machine_busy_over_the_window_says_whether_its_cores_were_saturated(tmp_path: Path) -> None:
    locust = write_status(tmp_path, {"cpu_samples": [[0, 0.0], [30 * S, 6.0]], "host_cpus": 2,
                                     "host_busy_samples": [[9 * S, 100.0], [21 * S, 122.8]]})
    out = load_generator(locust, WINDOW, 200.0, None, 1)
    assert out["host"]["busy_cores"] == 1.9 and out["host"]["busy_fraction"] == 0.95
    assert "whole machine" in out["host"]["source"]
    assert "host" not in load_generator(write_status(tmp_path / "old", {"cpu_percent": 5.0}), WINDOW, 1.0, None, 1)


def test_a_pinned_load_process_reports_how_busy_its_own_cpus_were(tmp_path: Path) -> None:
    locust = write_status(tmp_path, {"cpu_samples": [[0, 0.0], [30 * S, 6.0]], "host_cpus": 2,
                                     "host_busy_samples": [[9 * S, 100.0], [21 * S, 122.8]],
                                     "own_cpus": [1], "own_cpus_busy_samples": [[9 * S, 40.0], [21 * S, 49.6]]})
    host = load_generator(locust, WINDOW, 200.0, None, 1)["host"]
    assert host["own_cpus"] == [1] and host["own_cpus_busy_cores"] == 0.8 and host["busy_cores"] == 1.9
