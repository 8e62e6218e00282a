"""Small, realistic run folders for report tests: a simulated run, written as a run writes it.

`simulate_run(run_dir, SimSpec(...))` writes what the orchestrator, the load
process, the nemesis and the drainer would: `history/<writer>.jsonl` (schema 1,
via harness.history.schema.Op), `manifest.json`, `metrics/<phase>-<service>.prom`
taken at the end of each phase, `locust/status.json` (CPU samples, capacity)
and a Locust `*_stats.csv`. Latencies are random but seeded; one rate-limited
process records `extra.intended_ns` and stalls once, so coordinated omission
matters. The history is consistent (what committed is read back, aborted
values are not, acks in aborted transactions are redelivered) so the checker
finds it valid.

The metrics are cumulative counters driven by the simulated operations
(`MetricModel`): each counter at time t is a fixed function of the commits,
aborts, sends and acks completed before t, so tests can recompute deltas from
the .prom files alone.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.history.schema import PHASE_DRAIN_COMPLETE, Op, OpF, OpType

MS = 1_000_000
S = 1_000_000_000
SERVICES = ("ledger", "metadata", "broker-0", "broker-1")


@dataclass(frozen=True)
class SimSpec:
    path: str = "v4"
    seed: int = 1
    producers: int = 3
    phases: tuple[tuple[str, float], ...] = (("setup", 0.2), ("warmup", 0.4), ("steady", 1.5),
                                             ("recovery", 0.3))
    fault: bool = False                     # a partition in a `faults` phase (add it to phases)
    latency_scale: float = 1.0              # multiplies every latency (a slower path)
    omit_metrics: frozenset[str] = frozenset()
    omit_snapshots: frozenset[str] = frozenset()   # "<phase>-<service>" files not written
    capacity_txn_per_s: float | None = 5000.0
    cpu_fraction: float | None = 0.3        # of one core, in the CPU samples
    scenario: str = "bench"
    matrix: str | None = None
    stall_ms: float = 60.0                  # the rate-limited process's one long commit


@dataclass
class _Writer:
    name: str
    events: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)  # (time, seq, fields)


class _Sim:
    def __init__(self, spec: SimSpec, run_id: str) -> None:
        self.spec = spec
        self.run_id = run_id
        self.rng = random.Random(spec.seed)
        self.writers: dict[str, _Writer] = {}
        self.seq = 0
        self.txn_counter = 0
        self.entries: dict[str, int] = {}
        self.ledgers = {"t1": 11, "t2": 12, "in": 13}
        # ground truth the metric model needs: completion times
        self.commit_ok: list[int] = []
        self.abort_ok: list[int] = []
        self.send_ok: list[int] = []
        self.ack_ok: list[int] = []
        self.visible: dict[str, list[tuple[int, str, str]]] = {"t1": [], "t2": [], "in": []}
        self.in_values: list[str] = []
        self.redeliver_in: list[str] = []    # acked in an aborted transaction
        self.acked: set[str] = set()

    # ---- writing ---------------------------------------------------------------------------

    def emit(self, writer: str, process: str, time_ns: int, type_: OpType, f: OpF, **fields: Any) -> None:
        self.seq += 1
        w = self.writers.setdefault(writer, _Writer(writer))
        w.events.append((time_ns, self.seq, {"process": process, "type": type_, "f": f, **fields}))

    def op(self, writer: str, process: str, t0: int, took: int, f: OpF, result: OpType = OpType.OK,
           intended: int | None = None, done: dict[str, Any] | None = None, **fields: Any) -> int:
        extra = {"intended_ns": intended} if intended is not None else None
        self.emit(writer, process, t0, OpType.INVOKE, f, extra=extra, **fields)
        end = t0 + max(1, took)
        merged = {**fields, **(done or {})}
        if result is not OpType.OK:
            merged["error"] = "SimError: planted"
        self.emit(writer, process, end, result, f, extra=extra, **merged)
        return end

    def msg_id(self, topic: str) -> str:
        entry = self.entries.get(topic, 0)
        self.entries[topic] = entry + 1
        return f"{self.ledgers[topic]}:{entry}:-1"

    def latency(self, lo_ms: float, hi_ms: float) -> int:
        return int(self.rng.uniform(lo_ms, hi_ms) * self.spec.latency_scale * MS) + self.rng.randrange(1000)

    def write(self, run_dir: Path) -> None:
        history = run_dir / "history"
        history.mkdir(parents=True, exist_ok=True)
        for w in self.writers.values():
            lines = []
            for index, (time_ns, _, fields) in enumerate(sorted(w.events, key=lambda e: (e[0], e[1]))):
                extra = fields.pop("extra", None)
                op = Op(run=self.run_id, writer=w.name, index=index, time_ns=time_ns,
                        wall_ms=1.7e12 + time_ns / 1e6, path=self.spec.path, extra=extra, **fields)
                lines.append(op.to_json())
            (history / f"{w.name}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _phase_starts(spec: SimSpec) -> list[tuple[str, int]]:
    t = 0
    out = []
    for name, seconds in spec.phases:
        out.append((name, t))
        t += int(seconds * S)
    out.append(("drain", t))
    return out


def simulate_run(run_dir: Path, spec: SimSpec = SimSpec()) -> Path:
    """Write a complete run folder at `run_dir` (created); returns it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    sim = _Sim(spec, run_dir.name)
    starts = _phase_starts(spec)
    phase_at = dict(starts)
    load_start = phase_at.get("warmup", starts[1][1])
    load_end = phase_at["drain"] - 50 * MS
    for name, t in starts:
        sim.emit("run", "run", t, OpType.OK, OpF.PHASE, extra={"name": name})

    # Setup: values on topic "in" for the ack transactions (non-transactional sends).
    t = 10 * MS
    for i in range(40):
        value = f"in-{i}"
        mid = sim.msg_id("in")
        t = sim.op("w0", "w0/setup", t, sim.latency(0.2, 0.5), OpF.SEND, topic="in", value=value, key="k",
                   done={"msg_id": mid}) + 100_000
        sim.visible["in"].append((t, value, mid))
        sim.in_values.append(value)

    fault_span: tuple[int, int] | None = None
    if spec.fault and "faults" in phase_at:
        f0 = phase_at["faults"] + 200 * MS
        fault_span = (f0, f0 + 500 * MS)
        # As faults.nemesis records them: one process per fault, Fault.extra() on every line.
        extra = {"kind": "partition", "targets": ["client-broker-0"], "params": {}, "fault_id": "f1",
                 "for_s": 0.5, "healable": True}
        sim.emit("nemesis", "nemesis/f1", f0, OpType.INVOKE, OpF.FAULT, extra=extra)
        sim.emit("nemesis", "nemesis/f1", f0 + 5 * MS, OpType.OK, OpF.FAULT, extra=extra)
        sim.emit("nemesis", "nemesis/f1", fault_span[1], OpType.INVOKE, OpF.HEAL, extra=extra)
        sim.emit("nemesis", "nemesis/f1", fault_span[1] + 2 * MS, OpType.OK, OpF.HEAL, extra=extra)

    receives: list[tuple[int, str, str, str]] = []   # (time, value, topic, msg_id)
    for p in range(spec.producers):
        _producer(sim, p, load_start + p * 137_000, load_end, fault_span, receives)
    _acker(sim, load_start + 50_000, load_end)
    # The consumer of t1: deliveries after the commit, in time order. Every third message
    # waits in the client's receiver queue before the application takes it (the receive's
    # time), so end-to-end latency (by delivered_ns) and the receive times differ.
    last = 0
    for n, (when, value, topic, mid) in enumerate(sorted(receives)):
        last = max(last + 1000, when + (7 * MS if n % 3 == 0 else 0))
        sim.emit("w0", "w0/c0", last, OpType.OK, OpF.RECEIVE, topic=topic, subscription="s", value=value,
                 msg_id=mid, extra={"redelivery": 0, "delivered_ns": when})

    # Drain: final reads of every topic, the "in" subscription consumed until empty.
    t = phase_at["drain"] + 10 * MS
    for topic in ("t1", "t2", "in"):
        for _, value, mid in sorted(sim.visible[topic]):
            t += 50_000
            sim.emit("drain", "drain", t, OpType.OK, OpF.READ, topic=topic, value=value, msg_id=mid)
    acked_committed = sim.acked - set(sim.redeliver_in)
    for value in sim.in_values:
        if value in acked_committed:
            continue
        t += 50_000
        mid = next(m for _, v, m in sim.visible["in"] if v == value)
        sim.emit("drain", "drain/consumer", t, OpType.OK, OpF.RECEIVE, topic="in", subscription="s", value=value,
                 msg_id=mid, extra={"redelivery": 1})
    t += MS
    sim.emit("run", "run", t, OpType.OK, OpF.PHASE,
             extra={"name": PHASE_DRAIN_COMPLETE, "topics": ["t1", "t2", "in"],
                    "subscriptions": [{"topic": "in", "subscription": "s"}]})
    collect = t + 20 * MS
    sim.emit("run", "run", collect, OpType.OK, OpF.PHASE, extra={"name": "collect"})
    sim.write(run_dir)

    ends = {name: (starts[i + 1][1] if i + 1 < len(starts) else collect) for i, (name, _) in enumerate(starts)}
    _write_metrics(run_dir, sim, ends, spec)
    _write_manifest(run_dir, spec, starts)
    _write_locust(run_dir, sim, spec, collect)
    return run_dir


def _producer(sim: _Sim, p: int, t: int, end: int, fault: tuple[int, int] | None,
              receives: list[tuple[int, str, str, str]]) -> None:
    """Transactions of two sends (t1, t2); every 5th aborted; p == 0 is rate-limited."""
    writer = "w1" if p == 2 else "w0"
    process = f"{writer}/u{p}"
    rate_limited = p == 0
    period = 12 * MS
    intended = t
    n = 0
    stalled = False
    while True:
        start = max(t, intended) if rate_limited else t
        if start >= end:
            return
        it = intended if rate_limited else None
        n += 1
        sim.txn_counter += 1
        txn = f"{p + 1}:{sim.txn_counter}"
        t = sim.op(writer, process, start, sim.latency(0.3, 1.5), OpF.TXN_OPEN, intended=it, done={"txn": txn})
        values = []
        for topic in ("t1", "t2"):
            value = f"v{p}-{n}-{topic}"
            mid = sim.msg_id(topic)
            t = sim.op(writer, process, t + 20_000, sim.latency(0.5, 3.0), OpF.SEND, txn=txn, topic=topic,
                       key=f"k{n % 4}", value=value, done={"msg_id": mid})
            sim.send_ok.append(t)
            values.append((topic, value, mid))
        in_fault = fault is not None and fault[0] <= t < fault[1]
        if n % 5 == 0:
            t = sim.op(writer, process, t + 20_000, sim.latency(0.5, 2.0), OpF.TXN_ABORT, txn=txn)
            sim.abort_ok.append(t)
        elif in_fault and p == 1:
            # The partition: this client's commit fails definitively (aborted, nothing visible).
            t = sim.op(writer, process, t + 20_000, sim.latency(2.0, 5.0), OpF.TXN_COMMIT, OpType.FAIL, txn=txn)
        else:
            took = sim.latency(1.0, 8.0)
            if rate_limited and not stalled and n == 41:
                took = int(sim.spec.stall_ms * MS)   # one slow commit: later ops start behind schedule
                stalled = True
            t = sim.op(writer, process, t + 20_000, took, OpF.TXN_COMMIT, txn=txn)
            sim.commit_ok.append(t)
            for topic, value, mid in values:
                sim.visible[topic].append((t, value, mid))
                if topic == "t1":
                    receives.append((t + sim.latency(0.5, 4.0), value, topic, mid))
        intended += period
        t += 30_000


def _acker(sim: _Sim, t: int, end: int) -> None:
    """Ack-only transactions on topic "in": receive, ack in a transaction, commit (every 4th aborts)."""
    for i, value in enumerate(sim.in_values):
        if t >= end - 20 * MS:
            return
        mid = next(m for _, v, m in sim.visible["in"] if v == value)
        sim.txn_counter += 1
        txn = f"9:{sim.txn_counter}"
        t = sim.op("w0", "w0/a0", t, sim.latency(0.3, 1.0), OpF.TXN_OPEN, done={"txn": txn})
        t += 30_000
        sim.emit("w0", "w0/a0", t, OpType.OK, OpF.RECEIVE, topic="in", subscription="s", value=value, msg_id=mid,
                 extra={"redelivery": 0})
        t = sim.op("w0", "w0/a0", t + 30_000, sim.latency(0.3, 1.2), OpF.ACK, txn=txn, topic="in",
                   subscription="s", value=value, msg_id=mid)
        sim.ack_ok.append(t)
        sim.acked.add(value)
        if i % 4 == 3:
            t = sim.op("w0", "w0/a0", t + 20_000, sim.latency(0.5, 2.0), OpF.TXN_ABORT, txn=txn)
            sim.abort_ok.append(t)
            sim.redeliver_in.append(value)
        else:
            t = sim.op("w0", "w0/a0", t + 20_000, sim.latency(1.0, 6.0), OpF.TXN_COMMIT, txn=txn)
            sim.commit_ok.append(t)
        t += 25 * MS


class MetricModel:
    """Counter values as functions of what completed before a time (the truth tests recompute)."""

    def __init__(self, sim: _Sim) -> None:
        self.sim = sim

    @staticmethod
    def _before(times: Iterable[int], t: int) -> int:
        return sum(1 for x in times if x < t)

    def values(self, t: int) -> dict[str, list[tuple[str, dict[str, str], float]]]:
        c = self._before(self.sim.commit_ok, t)
        a = self._before(self.sim.abort_ok, t)
        s = self._before(self.sim.send_ok, t)
        k = self._before(self.sim.ack_ok, t)
        data = s + 2 * (c + a)                      # messages plus one marker per topic per end
        txn_log = 3 * (c + a)
        pending = 2 * k
        cursor = k // 3
        ledger: list[tuple[str, dict[str, str], float]] = [
            ("txnbench_ledger_entries_total", {"kind": "data"}, data),
            ("txnbench_ledger_entries_total", {"kind": "txn-log"}, txn_log),
            ("txnbench_ledger_entries_total", {"kind": "pending-ack"}, pending),
            ("txnbench_ledger_entries_total", {"kind": "cursor"}, cursor),
            ("txnbench_ledger_entries_total", {"kind": "tb-snapshot"}, 0),
            ("txnbench_ledger_entries_total", {"kind": "other"}, 3),
            ("txnbench_ledger_bytes_total", {"kind": "data"}, 300 * data),
            ("txnbench_ledger_bytes_total", {"kind": "txn-log"}, 90 * txn_log),
            ("txnbench_ledger_bytes_total", {"kind": "pending-ack"}, 70 * pending),
            ("bookkeeper_server_ADD_ENTRY_count", {}, data + txn_log + pending + cursor + 3),
            ("bookie_WRITE_BYTES", {}, 300 * data + 90 * txn_log + 70 * pending + 40 * cursor),
            ("bookie_journal_JOURNAL_SYNC_count", {}, (c + a) + s // 2 + 5),
        ]
        metadata: list[tuple[str, dict[str, str], float]] = [
            ("txnbench_metadata_ops_total", {"op": "get", "cas": "false", "result": "ok"}, 20 + c),
            ("txnbench_metadata_ops_total", {"op": "range_scan", "cas": "false", "result": "ok"}, 4 + a),
            ("txnbench_metadata_ops_total", {"op": "put", "cas": "true", "result": "ok"}, 10 + 2 * c),
            ("txnbench_metadata_ops_total", {"op": "put", "cas": "false", "result": "ok"}, 6 + k),
            ("txnbench_metadata_requests_total", {"kind": "create", "family": "txn-header", "result": "ok"}, 5 + c),
            ("txnbench_metadata_requests_total", {"kind": "cas", "family": "txn-header", "result": "ok"}, 5 + c),
            ("txnbench_metadata_requests_total", {"kind": "put", "family": "other", "result": "ok"}, 6 + k),
            ("txnbench_metadata_fsyncs_total", {}, 8 + c + k),
            ("txnbench_metadata_wal_bytes_total", {}, 1000 + 120 * (c + k)),
        ]
        if c >= 5:  # a series that appears mid-run: the first CAS conflict
            metadata.append(("txnbench_metadata_ops_total", {"op": "put", "cas": "true", "result": "conflict"},
                             1 + c // 10))
        brokers: dict[str, list[tuple[str, dict[str, str], float]]] = {
            "broker-0": [("pulsar_txn_committed_total", {"coordinator_id": "0"}, c - c // 2),
                         ("pulsar_txn_append_log_total", {"coordinator_id": "0"}, 2 * (c - c // 2)),
                         ("pulsar_txn_coordinator_recovery_seconds", {"coordinator_id": "0"}, 0.25)],
            "broker-1": [("pulsar_txn_committed_total", {"coordinator_id": "1"}, c // 2),
                         ("pulsar_txn_append_log_total", {"coordinator_id": "1"}, 2 * (c // 2))],
        }
        return {"ledger": ledger, "metadata": metadata, **brokers}


def _render(samples: list[tuple[str, dict[str, str], float]], omit: frozenset[str]) -> str:
    lines = []
    seen: set[str] = set()
    for name, labels, value in samples:
        if name in omit:
            continue
        if name not in seen:
            kind = "gauge" if name.endswith("_seconds") else "counter"
            lines += [f"# HELP {name} simulated", f"# TYPE {name} {kind}"]
            seen.add(name)
        label = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
        text = str(int(value)) if float(value).is_integer() else repr(float(value))
        lines.append(f"{name}{label} {text}")
    return "\n".join(lines) + "\n"


def _write_metrics(run_dir: Path, sim: _Sim, ends: dict[str, int], spec: SimSpec) -> None:
    metrics = run_dir / "metrics"
    metrics.mkdir(parents=True, exist_ok=True)
    model = MetricModel(sim)
    for phase, end in ends.items():
        for service, samples in model.values(end).items():
            name = f"{phase}-{service}"
            if name in spec.omit_snapshots:
                continue
            (metrics / f"{name}.prom").write_text(_render(samples, spec.omit_metrics), encoding="utf-8")


def _write_manifest(run_dir: Path, spec: SimSpec, starts: list[tuple[str, int]]) -> None:
    durations = dict(spec.phases)
    manifest = {
        "schema": 1, "run_id": run_dir.name, "scenario": spec.scenario, "path": spec.path, "target": "embedded",
        "seed": spec.seed, "matrix": spec.matrix, "status": "complete",
        "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:00:05+00:00",
        "versions": {"txnbench": "0.1.0", "python": "3.11"},
        "config": {
            "name": spec.scenario, "path": spec.path, "seed": spec.seed,
            "phases": {"warmup_s": durations.get("warmup", 0.0), "steady_s": durations.get("steady", 0.0),
                       "faults_s": durations.get("faults", 0.0), "recovery_s": durations.get("recovery", 0.0)},
            "load": {"users": spec.producers + 1, "workers": 0, "rate_per_user": None},
            "workload": {"kind": "mixed", "messages_per_txn": 2, "topics_per_txn": 2, "acks_per_txn": 1,
                         "message_size": 256, "abort_ratio": 0.2, "topics": 3, "batching": False},
            "cluster": {"brokers": 2},
            "checks": {"stall_after_s": 10.0},
        },
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _write_locust(run_dir: Path, sim: _Sim, spec: SimSpec, end: int) -> None:
    locust = run_dir / "locust"
    locust.mkdir(parents=True, exist_ok=True)
    status: dict[str, Any] = {"time_ns": end, "committed_txn_per_s": 123.0, "msgs_per_s": 246.0, "errors": 1,
                              "users": spec.producers + 1, "processes": 1, "host_cpus": 2}
    if spec.cpu_fraction is not None:
        status["cpu_samples"] = [[t, round(spec.cpu_fraction * t / S, 6)] for t in range(0, end, 250 * MS)]
    if spec.capacity_txn_per_s is not None:
        status["capacity"] = {"committed_txn_per_s": spec.capacity_txn_per_s,
                              "msgs_per_s": 2 * spec.capacity_txn_per_s, "against": "null-broker",
                              "users": spec.producers + 1, "duration_s": 10.0}
    (locust / "status.json").write_text(json.dumps(status), encoding="utf-8")
    (locust / "txnbench_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Requests/s,Failures/s\n"
        "txn,commit,100,1,4,4.5,50.0,0.5\n"
        ",Aggregated,300,2,3,3.2,150.0,1.0\n", encoding="utf-8")
