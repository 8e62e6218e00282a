"""The status file, the load spec and the capacity lookup."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.config import load_scenario
from harness.history import OpF
from tests.unit.workloads.conftest import ManualClock, scenario
from workloads import status as status_module
from workloads.capacity import find_capacity, save_capacity, shape_of
from workloads.context import Counters
from workloads.loadspec import LoadSpec, LoadSpecError
from workloads.status import CpuMeter, StatusReporter
from workloads.topology import plan


class FakeCpu:
    def __init__(self) -> None:
        self.seconds = 0.0

    def total_s(self) -> float:
        return self.seconds


def reporter(tmp_path: Path, clock: ManualClock, counters: Counters, cpu: FakeCpu | None = None,
             capacity: dict | None = None) -> StatusReporter:
    return StatusReporter(tmp_path / "locust" / "status.json", clock, run_id="r1", processes=1,  # type: ignore[arg-type]
                          counters=lambda: counters, users=lambda: (3, {"AtomicProduceUser": 3}),
                          cpu=cpu, capacity=capacity)  # type: ignore[arg-type]


def bump(counters: Counters, commits: int, sends: int) -> None:
    for _ in range(commits):
        counters.count(OpF.TXN_COMMIT, ok=True)
    for _ in range(sends):
        counters.count(OpF.SEND, ok=True)


def test_rates_over_the_window_totals_and_cpu(tmp_path: Path) -> None:
    clock, counters, cpu = ManualClock(), Counters(), FakeCpu()
    rep = reporter(tmp_path, clock, counters, cpu)
    first = rep.write("running")
    assert first["committed_txn_per_s"] == 0 and first["cpu_percent"] is None
    for _ in range(10):                              # 10 s at 100 commits/s, 400 sends/s, half a core
        clock.advance(1.0)
        cpu.seconds += 0.5
        bump(counters, 100, 400)
        status = rep.write("running")
    assert status["committed_txn_per_s"] == pytest.approx(100.0)
    assert status["msgs_per_s"] == pytest.approx(400.0)
    assert status["window_s"] <= 5.0 + 1e-9
    assert status["cpu_percent"] == pytest.approx(50.0)
    assert status["committed_txns"] == 1000 and status["messages"] == 4000
    assert status["users"] == 3 and status["users_by_kind"] == {"AtomicProduceUser": 3}
    assert status["processes"] == 1 and status["host_cpus"] == (os.cpu_count() or 1)
    assert status["cpu_samples"][-1] == [clock.now, 5.0]
    # the whole machine's busy CPU seconds, one sample a write, on the run clock
    host = status["host_busy_samples"]
    assert len(host) == 11 and host[-1][0] == clock.now and host[-1][1] >= host[0][1] > 0
    assert "capacity" not in status
    on_disk = json.loads(rep.path.read_text())
    assert on_disk["committed_txns"] == 1000 and on_disk["state"] == "running"


def test_errors_count_failed_completions_and_exceptions(tmp_path: Path) -> None:
    clock, counters = ManualClock(), Counters()
    counters.count(OpF.SEND, ok=False)
    counters.count(OpF.ACK, ok=False)
    counters.exceptions += 1
    status = reporter(tmp_path, clock, counters).write("running")
    assert status["errors"] == 3 and status["ack_conflicts"] == 0
    assert status["ops"] == {"ok": {}, "failed": {"send": 1, "ack": 1}}


def test_ack_conflicts_are_counted_apart_from_errors(tmp_path: Path) -> None:
    clock, counters = ManualClock(), Counters()
    counters.count(OpF.ACK, ok=False, conflict=True)     # another transaction had acked the message
    counters.count(OpF.ACK, ok=False, conflict=True)
    counters.count(OpF.ACK, ok=False)                    # an ack that failed otherwise
    status = reporter(tmp_path, clock, counters).write("running")
    assert status["errors"] == 1 and status["ack_conflicts"] == 2
    assert status["ops"]["failed"] == {"ack": 3}          # the history's fails, all of them
    merged = Counters.merge([counters.snapshot(), counters.snapshot()])   # a master adds its workers'
    assert merged.conflicts == 4 and merged.errors == 2


def test_only_an_ack_refused_for_a_conflict_is_one() -> None:
    from harness.client.errors import NotAllowedError, Op, TransactionConflictError, is_ack_conflict
    from harness.wire.enums import ServerError

    assert is_ack_conflict(TransactionConflictError(Op.ACK, ServerError.TransactionConflict, "acked by txn 1:2"))
    assert not is_ack_conflict(TransactionConflictError(Op.SEND, ServerError.TransactionConflict, "x"))
    assert not is_ack_conflict(NotAllowedError(Op.ACK, ServerError.NotAllowedError, "x"))
    assert not is_ack_conflict(None)


def test_cpu_samples_are_thinned_not_dropped_at_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status_module, "MAX_CPU_SAMPLES", 8)
    clock, cpu = ManualClock(), FakeCpu()
    rep = reporter(tmp_path, clock, Counters(), cpu)
    for _ in range(30):
        clock.advance(1.0)
        cpu.seconds += 1.0
        status = rep.sample("running")
    samples = status["cpu_samples"]
    assert len(samples) <= 9
    assert samples[0][1] == 1.0                      # the first sample is kept
    assert [s[0] for s in samples] == sorted(s[0] for s in samples)


def test_capacity_is_copied_into_the_status(tmp_path: Path) -> None:
    capacity = {"committed_txn_per_s": 500.0, "msgs_per_s": 2000.0, "against": "null broker"}
    status = reporter(tmp_path, ManualClock(), Counters(), capacity=capacity).write("running")
    assert status["capacity"] == capacity


def test_cpu_meter_measures_this_process() -> None:
    meter = CpuMeter(lambda: [os.getpid()])
    before = meter.total_s()
    # burn 50 ms of CPU, not a fixed amount of work: /proc counts CPU in 10 ms ticks, and a fast machine
    # finished 300,000 squares within one of them (47.95 s before and after, 2026-11-28)
    started = time.process_time()
    for _ in range(10_000):   # bounded: at most 10,000 rounds of about 0.5 ms
        if time.process_time() - started >= 0.05:
            break
        sum(i * i for i in range(10_000))
    assert meter.total_s() > before


def test_counters_merge_worker_snapshots() -> None:
    a, b = Counters(), Counters()
    bump(a, 2, 5)
    bump(b, 3, 1)
    b.receives = 7
    total = Counters.merge([a.snapshot(), b.snapshot()])
    assert (total.committed, total.messages, total.receives) == (5, 6, 7)


def test_load_spec_round_trip_and_clear_errors(tmp_path: Path) -> None:
    config = load_scenario("mixed")
    topology = plan(config, "r1")
    data = {"run_id": "r1", "run_dir": str(tmp_path), "path": "v4", "service_url": "pulsar://127.0.0.1:1",
            "admin_url": "http://127.0.0.1:2", "config": config.to_dict(), "topology": topology.to_dict(),
            "max_duration_s": 99.0, "parent_pid": 1, "status_file": str(tmp_path / "s.json")}
    (tmp_path / "spec.json").write_text(json.dumps(data))
    spec = LoadSpec.load(tmp_path / "spec.json")
    assert spec.config == config and spec.topology == topology and spec.max_duration_s == 99.0
    assert LoadSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(LoadSpecError, match="missing topology"):
        LoadSpec.from_dict({k: v for k, v in data.items() if k != "topology"})
    with pytest.raises(LoadSpecError, match=r"config: workload\.topics"):
        LoadSpec.from_dict({**data, "config": {**config.to_dict(), "workload": {"topics": 0}}})
    with pytest.raises(LoadSpecError, match="not JSON"):
        (tmp_path / "bad.json").write_text("{")
        LoadSpec.load(tmp_path / "bad.json")


def test_capacity_lookup_matches_the_shape(tmp_path: Path) -> None:
    file = tmp_path / "capacity.json"
    config = scenario("load: {users: 8}\nworkload: {kind: atomic-produce}")
    assert find_capacity(config, file) is None
    save_capacity(config, {"committed_txn_per_s": 500.0, "msgs_per_s": 2000.0, "duration_s": 10}, file)
    found = find_capacity(config, file)
    assert found is not None and found["committed_txn_per_s"] == 500.0 and found["users"] == 8
    assert "null broker" in found["against"]
    other = scenario("load: {users: 16}\nworkload: {kind: atomic-produce}")
    assert find_capacity(other, file) is None
    assert shape_of(config)["client_path"] == "v4"
    save_capacity(config, {"committed_txn_per_s": 600.0}, file)            # replaces, not duplicates
    assert len(json.loads(file.read_text())["entries"]) == 1


def test_only_the_load_process_modules_import_locust() -> None:
    """Locust monkey-patches with gevent on import: the orchestrator and tests must not get it."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import workloads.topology, orchestrator.load.setup, orchestrator.load.drain, workloads.status, workloads.capacity\n"
            "import workloads.atomic, workloads.ctp, workloads.ackonly, workloads.verifier, workloads.feeder\n"
            "print('locust' in sys.modules, 'gevent' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_a_pinned_load_process_also_samples_the_busy_time_of_its_own_cpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import host_cpu

    clock, counters = ManualClock(), Counters()
    monkeypatch.setattr(host_cpu, "pinned_cpus", lambda: None)
    assert "own_cpus" not in reporter(tmp_path / "a", clock, counters).write("running")
    monkeypatch.setattr(host_cpu, "pinned_cpus", lambda: [0])
    rep = reporter(tmp_path / "b", clock, counters)
    for _ in range(3):
        clock.advance(1.0)
        status = rep.write("running")
    assert status["own_cpus"] == [0]
    samples = status["own_cpus_busy_samples"]
    assert len(samples) == 3 and samples[-1][0] == clock.now and samples[-1][1] >= samples[0][1] > 0
