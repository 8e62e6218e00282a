"""Remote load workers without processes: the handshake's refusals, the clock estimate, the
history chunks and the master's gathered copies, the per-worker status and the lost-worker
explanation the checker gives."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from analysis.check import lost_workers
from harness import __version__
from harness.config import LoadConfig, load_scenario
from harness.errors import ConfigError
from harness.history import OpF
from harness.results import RunDir
from tests.unit.workloads.conftest import ManualClock
from workloads import remote
from workloads.context import Counters
from workloads.status import StatusReporter
from workloads.topology import fixed_users, helper_users_per_process

WORKLOAD = load_scenario("atomic-produce").to_dict()["workload"]


def hello(**changes: object) -> remote.Hello:
    base = remote.Hello(version=__version__, digest="d" * 64, host="loadhost-1", pid=42, processes=2)
    return remote.Hello.from_dict({**base.to_dict(), **changes})


def refusal(h: remote.Hello) -> str | None:
    return remote.mismatch(h, version=__version__, digest="d" * 64, scenario="atomic-produce", workload=WORKLOAD)


def test_a_matching_host_is_welcome_and_the_hello_round_trips() -> None:
    assert refusal(hello()) is None
    assert refusal(hello(scenario="atomic-produce", workload=WORKLOAD)) is None
    assert remote.Hello.from_dict(hello().to_dict()) == hello()


@pytest.mark.parametrize(("changes", "says"), [
    ({"version": "0.0.9"}, "runs txnbench 0.0.9, the master"),
    ({"digest": "e" * 64}, "different txnbench code than the master"),
    ({"protocol": 99}, "protocol 99"),
    ({"scenario": "chaos"}, "started for scenario 'chaos', the master runs 'atomic-produce'"),
    ({"workload": {**WORKLOAD, "messages_per_txn": 99}}, "messages_per_txn differ"),
    ({"processes": 0}, "--processes must be at least 1"),
])
def test_a_mismatched_host_is_refused_naming_the_host_and_the_difference(changes: dict, says: str) -> None:
    reason = refusal(hello(**changes))
    assert reason is not None and says in reason and "loadhost-1 (pid 42)" in reason


def test_the_code_digest_changes_with_any_load_source_file(tmp_path: Path) -> None:
    for package in ("harness", "workloads"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "a.py").write_text("x = 1\n")
    first = remote.code_digest(tmp_path)
    assert remote.code_digest(tmp_path) == first
    (tmp_path / "workloads" / "a.py").write_text("x = 2\n")
    assert remote.code_digest(tmp_path) != first


def test_the_clock_estimate_takes_the_shortest_round_trip() -> None:
    # host clock = master clock + 5 s; the master read its clock 100 us into a 1 ms trip, and mid-way in a 200 us one
    samples = [remote.ClockSample(sent_ns=10_000_000_000, master_ns=5_000_100_000, received_ns=10_001_000_000),
               remote.ClockSample(sent_ns=11_000_000_000, master_ns=6_000_100_000, received_ns=11_000_200_000)]
    est = remote.estimate_offset(samples)
    assert est.rtt_ns == 200_000 and est.uncertainty_ns == 100_000 and est.samples == 2
    assert est.base_ns == 5_000_000_000          # exact: that reading was mid-trip
    worst = remote.estimate_offset(samples[:1])    # off by 400 us, within its +-500 us
    assert abs(worst.base_ns - 5_000_000_000) <= worst.uncertainty_ns
    with pytest.raises(ValueError):
        remote.estimate_offset([])


def test_chunks_carry_complete_lines_until_the_final_one(tmp_path: Path) -> None:
    file = tmp_path / "r0.jsonl"
    file.write_bytes(b'{"a":1}\n{"b":2}\n{"c":')
    chunks = remote.read_chunks(file, 0, final=False)
    assert b"".join(c.data for c in chunks) == b'{"a":1}\n{"b":2}\n'
    rest = remote.read_chunks(file, 16, final=True)      # a dead writer's torn line goes too
    assert [c.data for c in rest] == [b'{"c":'] and rest[0].offset == 16
    small = remote.read_chunks(file, 0, final=False, limit=10)
    assert [c.data for c in small] == [b'{"a":1}\n', b'{"b":2}\n']
    assert all(c.sha256 == remote.sha256_hex(c.data) for c in small)
    assert remote.read_chunks(tmp_path / "missing.jsonl", 0, final=True) == []
    assert remote.Chunk.from_dict(small[1].to_dict()) == small[1]


def test_the_gatherer_appends_in_order_only_and_verifies_the_whole_file(tmp_path: Path) -> None:
    gatherer = remote.HistoryGatherer(tmp_path)
    gatherer.expect("r0", "loadhost-1")
    one, two = remote.Chunk.of("r0", 0, b"l1\n"), remote.Chunk.of("r0", 3, b"l2\n")
    assert gatherer.accept(two) == (0, "gap: chunk at 3, copy ends at 0")
    assert gatherer.accept(one) == (3, None)
    assert gatherer.accept(one) == (3, None)                   # a repeat is not appended twice
    corrupt = remote.Chunk("r0", 3, b"l2\n", "0" * 64)
    size, problem = gatherer.accept(corrupt)
    assert size == 3 and problem is not None and "SHA-256" in problem
    assert gatherer.accept(two) == (6, None)
    assert gatherer.accept(remote.Chunk.of("r9", 0, b"x\n"))[1] == "writer 'r9' was not assigned by this master"
    assert gatherer.pending() == ["r0"]
    assert gatherer.finish("r0", 9, remote.sha256_hex(b"l1\nl2\nl3\n")) == "r0: the copy has 6 bytes, the host's file 9"
    assert gatherer.finish("r0", 6, remote.sha256_hex(b"l1\nl2\n")) is None
    assert (tmp_path / "r0.jsonl").read_bytes() == b"l1\nl2\n" and gatherer.pending() == []


def test_a_lost_writer_is_recorded_and_a_vanished_host_stops_the_wait(tmp_path: Path) -> None:
    gatherer = remote.HistoryGatherer(tmp_path)
    for writer in ("r0", "r1"):
        gatherer.expect(writer, "loadhost-1")
    gatherer.lose("r0", "its process exited with code -9 mid-run")
    assert gatherer.pending() == ["r0", "r1"]                 # its host still ships the rest
    gatherer.accept(remote.Chunk.of("r0", 0, b"l1\n"))
    assert gatherer.finish("r0", 3, remote.sha256_hex(b"l1\n")) is None
    gatherer.lose("r1", "its host went silent mid-run", host_gone=True)
    assert gatherer.pending() == []
    lost = {w.writer: w.to_dict() for w in gatherer.writers.values()}
    assert lost["r0"]["complete"] and lost["r0"]["lost"] == "its process exited with code -9 mid-run"
    assert not lost["r1"]["complete"] and lost["r1"]["lost"] == "its host went silent mid-run"


def test_the_checker_explains_lost_workers_and_doubts_only_an_incomplete_history(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert lost_workers(run) == ([], [])
    run.manifest_path.write_text(json.dumps({"load_workers": {"lost": [
        {"writer": "r0", "host": "h1", "reason": "its process exited with code -9 mid-run", "bytes": 900,
         "complete": True},
        {"writer": "r1", "host": "h2", "reason": "its host went silent mid-run", "bytes": 300, "complete": False},
    ]}}))
    notes, doubts = lost_workers(run)
    assert len(notes) == 2 and "r0 on host h1 was lost mid-run" in notes[0] and "to its last line" in notes[0]
    assert doubts == [notes[1]] and "only the first 300 bytes" in doubts[0]


def test_remote_workers_count_as_load_processes() -> None:
    config = load_scenario("consume-transform-produce")
    load = config.load
    assert load.processes == 1
    both = dataclasses.replace(config, load=dataclasses.replace(load, workers=1, remote_workers=3))
    assert both.load.processes == 4
    per_process = sum(helper_users_per_process(config))
    assert per_process > 0                                   # consume-transform-produce needs feeders
    assert fixed_users(config) == per_process
    assert fixed_users(both) == 4 * per_process              # feeders/verifiers per process, remote ones too


def test_master_bind_must_be_an_address() -> None:
    from harness._validate import build

    assert build(LoadConfig, {"remote_workers": 2, "master_bind": "10.0.0.5"}, "x.yaml").master_bind == "10.0.0.5"
    with pytest.raises(ConfigError, match="master_bind"):
        build(LoadConfig, {"master_bind": "loadmaster.example"}, "x.yaml")


def test_the_status_shows_each_workers_rate(tmp_path: Path) -> None:
    clock = ManualClock()
    per: dict[str, Counters] = {"r0": Counters(), "w0": Counters()}
    rep = StatusReporter(tmp_path / "status.json", clock, run_id="r", processes=2,  # type: ignore[arg-type]
                         counters=lambda: Counters.merge([c.snapshot() for c in per.values()]),
                         users=lambda: (4, {}), cpu=None,
                         per_worker=lambda: {w: {"counters": c.snapshot(), "host": "h" if w == "r0" else "local"}
                                             for w, c in per.items()})
    rep.write("running")
    for _ in range(4):
        clock.advance(1.0)
        for _ in range(30):
            per["r0"].count(OpF.TXN_COMMIT, ok=True)
        for _ in range(10):
            per["w0"].count(OpF.TXN_COMMIT, ok=True)
        status = rep.write("running")
    rates = {w["writer"]: (w["host"], w["committed_txn_per_s"]) for w in status["workers"]}
    assert rates == {"r0": ("h", pytest.approx(30.0)), "w0": ("local", pytest.approx(10.0))}
    assert status["committed_txn_per_s"] == pytest.approx(40.0)


def test_capacity_with_remote_workers_is_this_hosts_figure_times_the_processes() -> None:
    from workloads.capacity import with_remote_workers

    config = load_scenario("atomic-produce")
    measured = {"committed_txn_per_s": 1600.0, "msgs_per_s": 6400.0, "against": "null broker"}
    assert with_remote_workers(measured, config) == measured and with_remote_workers(None, config) is None
    remote = dataclasses.replace(config, load=dataclasses.replace(config.load, remote_workers=3))
    scaled = with_remote_workers(measured, remote)
    assert scaled is not None and scaled["committed_txn_per_s"] == 4800.0 and scaled["msgs_per_s"] == 19200.0
    assert scaled["processes"] == 3 and "3 remote, not measured from this host" in scaled["against"]


def test_the_clock_slack_is_the_widest_hosts_bound_plus_its_drift(tmp_path: Path) -> None:
    from analysis.check import clock_slack_ns

    run = RunDir(tmp_path)
    assert clock_slack_ns(run) == 0
    run.manifest_path.write_text(json.dumps({"load_workers": {"hosts": [
        {"clock_start": {"base_ns": 1_000, "uncertainty_ns": 100_000},
         "clock_end": {"base_ns": 51_000, "uncertainty_ns": 120_000}},          # drifted 50 us
        {"clock_start": {"base_ns": 7, "uncertainty_ns": 200_000}, "clock_end": None},
    ]}}))
    assert clock_slack_ns(run) == 270_000
