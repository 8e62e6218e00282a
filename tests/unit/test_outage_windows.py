"""Which faults' windows stalled-commit does not count (analysis.check.commit_blocked_windows), without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.check import commit_blocked_windows
from analysis.checks.liveness import merged_windows
from faults.kinds import BY_NAME
from harness.results import RunDir


def _fault(process: str, f: str, type_: str, t_s: float, kind: str, selector: str,
           recorded_effects: bool = True) -> dict[str, Any]:
    extra = {"kind": kind, "selector": selector, "targets": [], "effects": _effects(kind)}
    if not recorded_effects:    # a history from before faults carried their effects: the kind alone
        del extra["effects"]
    return {"writer": "nemesis", "index": 0, "process": process, "f": f, "type": type_, "time_ns": int(t_s * 1e9),
            "extra": extra}


def _effects(kind: str) -> list[str]:
    """As the nemesis records them: the effects the kind declares (faults/kinds/); the supervisor's
    `exit` records its own."""
    return sorted(e.value for e in BY_NAME[kind].effects) if kind in BY_NAME else []


def _run(tmp_path: Path, path: str, recorded_effects: bool = True) -> RunDir:
    run = RunDir(tmp_path / path)
    run.history_dir.mkdir(parents=True)
    run.manifest_path.write_text(json.dumps({"path": path}))
    lines = []
    for n, (kind, selector) in enumerate([("client-isolate", "clients"), ("partition", "ledger"),
                                          ("kill", "metadata"), ("partition", "broker-ledger:random"),
                                          ("latency", "ledger"), ("crash", "ledger"),
                                          ("corrupt", "metadata"), ("corrupt", "ledger")]):
        process = f"nemesis/f{n}"
        lines += [_fault(process, "fault", "invoke", 10.0 * n, kind, selector, recorded_effects),
                  _fault(process, "heal", "ok", 10.0 * n + 5, kind, selector, recorded_effects)]
    (run.history_dir / "nemesis.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    return run


@pytest.mark.parametrize(("path", "starts_s"), [
    ("v4", [0, 10, 50, 70]),      # clients cut off; the ledger store out of reach, crashed or damaged
    ("v4-batched", [0, 10, 50, 70]),
    ("v5", [0, 20, 60]),          # clients cut off; the metadata store killed or damaged
])
@pytest.mark.parametrize("recorded_effects", [True, False], ids=["effects", "kind-only"])
def test_only_faults_that_stop_every_commit_of_the_path_are_left_out(tmp_path: Path, path: str,
                                                                    starts_s: list[int],
                                                                    recorded_effects: bool) -> None:
    """A history recorded before faults carried their effects is read by their kinds: a re-check
    of an old run finds the windows it was judged by, and invents no stall."""
    windows = commit_blocked_windows(_run(tmp_path, path, recorded_effects))
    assert [start for start, _ in windows] == [int(s * 1e9) for s in starts_s]
    assert all(end == start + int(5e9) for start, end in windows)


def test_overlapping_windows_count_once() -> None:
    assert merged_windows(((0, 10), (5, 20), (30, None), (40, 50))) == [(0, 20), (30, None)]
    assert merged_windows(((5, 8), (0, 10))) == [(0, 10)]
    assert merged_windows(()) == []


def test_a_stores_own_exit_the_supervisor_recorded_counts_as_its_kill(tmp_path: Path) -> None:
    """faults/supervisor.py records every exit under one process, `nemesis/supervisor`, with the
    service as selector and target: each exit is a window of its own, from the exit's record to
    the restart (its heal); a broker's exit as well as the commit store's."""
    run = RunDir(tmp_path / "v4")
    run.history_dir.mkdir(parents=True)
    run.manifest_path.write_text(json.dumps({"path": "v4"}))
    lines = []
    for n, (service, start_s) in enumerate([("ledger", 10.0), ("broker-0", 20.0), ("ledger", 30.0)], start=1):
        extra = {"kind": "exit", "targets": [service], "selector": service, "fault_id": f"exit-{service}-{n}",
                 "source": "supervisor", "effects": ["stops"]}
        lines += [{**_fault("nemesis/supervisor", f, type_, t, "exit", service), "extra": extra}
                  for f, type_, t in (("fault", "invoke", start_s), ("fault", "ok", start_s),
                                      ("heal", "invoke", start_s), ("heal", "ok", start_s + 4))]
    (run.history_dir / "nemesis.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    assert commit_blocked_windows(run) == ((int(10e9), int(14e9)), (int(20e9), int(24e9)), (int(30e9), int(34e9)))


def _broker_fault(n: int, kind: str, targets: list[str], start_s: float, end_s: float) -> list[dict[str, Any]]:
    extra = {"kind": kind, "targets": targets, "selector": "broker:random", "fault_id": f"f{n}", "effects": _effects(kind)}
    return [{**_fault(f"nemesis/f{n}", f, type_, t, kind, "broker:random"), "extra": extra}
            for f, type_, t in (("fault", "invoke", start_s), ("fault", "ok", start_s),
                                ("heal", "invoke", start_s), ("heal", "ok", end_s))]


@pytest.mark.parametrize("path", ["v4", "v5"])
def test_a_broker_stopped_or_cut_off_is_time_a_commit_may_wait_on(tmp_path: Path, path: str) -> None:
    """4.0.8 chaos (results/20261129-050123-chaos-chaos): a commit to the coordinator on broker-0
    timed out at 30 s across its 12 s pause and its 27 s kill and restart, and committed later.
    The history does not say which broker holds a transaction's coordinator or partitions, so a
    stop of any broker, or a cut of any one broker's link, is time a commit may wait on; latency,
    a terminate or an unload stops no broker."""
    run = RunDir(tmp_path / path)
    run.history_dir.mkdir(parents=True)
    run.manifest_path.write_text(json.dumps({"path": path}))
    faults = [("pause", ["broker-0"]), ("kill", ["broker-1"]), ("restart", ["broker-0"]), ("crash", ["broker-1"]),
              ("partition", ["client-broker-1"]), ("partition", ["broker-1-metadata", "brokers-broker-1"]),
              ("partition", ["broker-0-ledger"]), ("partition", ["brokers-broker-0", "brokers-broker-1"]),
              ("latency", ["client-broker-0"]), ("terminate", ["persistent://public/txnbench/x-ap-1"]),
              ("unload", ["persistent://public/txnbench/x-ap-2"]), ("kill", ["load:random"]),
              ("partition", ["client-broker-0-extra"])]
    lines = [op for n, (kind, targets) in enumerate(faults)
             for op in _broker_fault(n, kind, targets, 10.0 * n, 10.0 * n + 4)]
    (run.history_dir / "nemesis.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    assert [start // int(1e9) for start, _ in commit_blocked_windows(run)] == [0, 10, 20, 30, 40, 50, 60, 70]
