"""The load process's status file (`locust/status.json`), rewritten atomically every second.

It says how hard the harness itself worked, so a report can tell a slow cluster from
a saturated load generator (analysis/perf/loadgen.py reads it). Keys:

| key | meaning |
|---|---|
| `schema` | 1 |
| `run_id`, `state` | the run; `starting`, `running`, `stopping`, `stopped` or `failed` |
| `time_ns`, `wall_ms` | when it was written (run clock, Unix ms) |
| `elapsed_s` | seconds since the load process started its users |
| `users`, `users_by_kind` | Locust users running (all kinds, feeders and verifiers included) |
| `users_respawned` | users the load processes started again because Locust had lost them without a replacement (workloads.user_guard; each one is also a warning in the load logs); 0 in a healthy run |
| `processes`, `host_cpus` | load-generating processes (Locust workers, or 1) and the host's CPUs |
| `committed_txn_per_s`, `msgs_per_s` | commits and sends that completed ok per second, over the last `window_s` |
| `committed_txns`, `messages`, `receives`, `errors` | totals so far; `errors` counts `fail`/`info` completions and task exceptions, but not `ack_conflicts` nor `race_losses` |
| `ack_conflicts` | acks the broker refused because another transaction had acked (or held) the message (TransactionConflict): Pulsar's ack-conflict rule doing its job, expected when transactions compete for messages (`conflict_ratio`); they are `fail`s in the history and in `ops.failed` |
| `ack_steals` | transactions that also acked a message a sibling consumer held (ack-only, and consume-transform-produce with `ctp_consumers_per_subscription` > 1): the ack races the load made on purpose |
| `timeout_commits` | commits invoked within 1 s of their transaction's timeout (harness.config.TIMEOUT_COMMIT_WINDOW_S, from the open's return): `count`; how they ended, `ok`, `fail`, `info`; `after` (invoked past the timeout) and `after_ok` (of those, committed); `planned` (held there on purpose, `timeout_commit_ratio`). Keys with no commit are absent |
| `foreign_aborts` | a second client's aborts of transactions being committed (`foreign_abort_ratio`, workloads.foreign): `count`, `ok`, `fail`, `info` |
| `end_txn_resends` | END_TXN requests the client sent again after the connection carrying one was lost (harness.client.coordinator, `AttemptRecord.resends_after_loss`) |
| `race_losses` | definite failures that were the expected loss of a race the load made (a commit at the timeout or a raced commit refused, a second client's abort refused); `fail`s in the history and in `ops.failed`, not `errors` |
| `ops` | `{"ok": {f: n}, "failed": {f: n}}` totals per operation |
| `cpu_percent` | CPU of all load processes over the last interval, in % of one core (can exceed 100 with workers) |
| `cpu_samples` | `[[time_ns, cpu_seconds], ...]`: cumulative CPU seconds of all load processes against the run clock |
| `host_busy_samples` | `[[time_ns, busy_seconds], ...]`: the whole machine's cumulative non-idle CPU seconds (all cores, harness.host_cpu), so a report can tell whether the cores were saturated |
| `own_cpus`, `own_cpus_busy_samples` | only when the load process is pinned to some of the machine's CPUs (`txnbench peer --load-cpus`): those CPUs, and `[[time_ns, busy_seconds], ...]` of them alone, so a report can tell the load generator's CPUs from the cluster's |
| `capacity` | the harness's measured rate against a null broker, when measured (workloads.capacity, measured by orchestrator.capacity), else absent |
| `fatal` | why the load stopped itself (e.g. the history could not be written), else null |
| `workers` | a master's workers, local and remote: `[{"writer", "host", "committed_txns", "messages", "committed_txn_per_s", "msgs_per_s"}]` (rates over the last `window_s`); absent without workers |

`msgs_per_s` counts every send that completed ok, transactional and the feeders' alike:
it is the work the load process did, the figure to hold against its capacity.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import host_cpu
from harness.history import RunClock
from harness.results import write_json_atomic
from workloads.context import Counters

STATUS_SCHEMA = 1
RATE_WINDOW_S = 5.0
MAX_CPU_SAMPLES = 4096


class CpuMeter:
    """Cumulative CPU seconds (user + system) of a set of processes, also after they exit."""

    def __init__(self, pids: Callable[[], list[int]], extra: Callable[[], float] | None = None) -> None:
        import psutil

        self._psutil = psutil
        self._pids = pids
        self._extra = extra    # CPU seconds measured elsewhere (remote workers report their own)
        self._procs: dict[int, Any] = {}
        self._last: dict[int, float] = {}

    def total_s(self) -> float:
        for pid in self._pids():
            if pid not in self._procs:
                try:
                    self._procs[pid] = self._psutil.Process(pid)
                except self._psutil.Error:
                    continue
        for pid, proc in list(self._procs.items()):
            try:
                times = proc.cpu_times()
            except self._psutil.Error:
                del self._procs[pid]  # gone: keep its last reading
                continue
            self._last[pid] = times.user + times.system
        return sum(self._last.values()) + (self._extra() if self._extra is not None else 0.0)


class StatusReporter:
    """Builds and writes the status file (see the module docstring)."""

    def __init__(self, path: Path, clock: RunClock, *, run_id: str, processes: int,
                 counters: Callable[[], Counters], users: Callable[[], tuple[int, Mapping[str, int]]],
                 cpu: CpuMeter | None, capacity: Mapping[str, Any] | None = None,
                 window_s: float = RATE_WINDOW_S,
                 per_worker: Callable[[], Mapping[str, Mapping[str, Any]]] | None = None) -> None:
        self.path = path
        self.clock = clock
        self.run_id = run_id
        self.processes = processes
        self._counters = counters
        self._users = users
        self._cpu = cpu
        self.capacity = dict(capacity) if capacity else None
        self.window_ns = int(window_s * 1e9)
        self.started_ns = clock.now_ns()
        self._history: deque[tuple[int, int, int]] = deque()
        self._cpu_samples: list[list[float]] = []
        self._host_samples: list[list[float]] = []
        self._own_cpus = host_cpu.pinned_cpus()
        self._own_samples: list[list[float]] = []
        self._last_cpu: tuple[int, float] | None = None
        self.fatal: str | None = None
        self._per_worker = per_worker
        self._worker_history: dict[str, deque[tuple[int, int, int]]] = {}

    def sample(self, state: str) -> dict[str, Any]:
        now = self.clock.now_ns()
        counters = self._counters()
        committed, messages = counters.committed, counters.messages
        self._history.append((now, committed, messages))
        while len(self._history) > 2 and now - self._history[0][0] > self.window_ns:
            self._history.popleft()
        first = self._history[0]
        span_s = (now - first[0]) / 1e9
        txn_rate = (committed - first[1]) / span_s if span_s > 0 else 0.0
        msg_rate = (messages - first[2]) / span_s if span_s > 0 else 0.0
        users, by_kind = self._users()
        status: dict[str, Any] = {
            "schema": STATUS_SCHEMA, "run_id": self.run_id, "state": state,
            "time_ns": now, "wall_ms": round(time.time() * 1000.0, 3),
            "elapsed_s": round((now - self.started_ns) / 1e9, 3),
            "users": users, "users_by_kind": dict(by_kind), "users_respawned": counters.respawned,
            "processes": self.processes, "host_cpus": os.cpu_count() or 1,
            "committed_txn_per_s": round(txn_rate, 3), "msgs_per_s": round(msg_rate, 3),
            "window_s": round(span_s, 3),
            "committed_txns": committed, "messages": messages, "receives": counters.receives,
            "errors": counters.errors, "ack_conflicts": counters.conflicts, **counters.races(),
            "ops": {"ok": dict(counters.ok), "failed": dict(counters.failed)},
            "cpu_percent": None, "cpu_samples": self._cpu_samples, "fatal": self.fatal,
            "host_busy_samples": self._host_samples,
        }
        self._host_samples.append([now, round(host_cpu.busy_seconds(), 3)])
        if len(self._host_samples) > MAX_CPU_SAMPLES:
            self._host_samples[1:] = self._host_samples[2::2]
        if self._own_cpus is not None:
            status["own_cpus"] = self._own_cpus
            status["own_cpus_busy_samples"] = self._own_samples
            self._own_samples.append([now, round(host_cpu.busy_seconds(self._own_cpus), 3)])
            if len(self._own_samples) > MAX_CPU_SAMPLES:
                self._own_samples[1:] = self._own_samples[2::2]
        if self._cpu is not None:
            cpu_s = self._cpu.total_s()
            if self._last_cpu is not None and now > self._last_cpu[0]:
                status["cpu_percent"] = round(100.0 * (cpu_s - self._last_cpu[1])
                                              / ((now - self._last_cpu[0]) / 1e9), 2)
            self._last_cpu = (now, cpu_s)
            self._cpu_samples.append([now, round(cpu_s, 4)])
            if len(self._cpu_samples) > MAX_CPU_SAMPLES:  # keep the first, thin the rest
                self._cpu_samples[1:] = self._cpu_samples[2::2]
        if self.capacity is not None:
            status["capacity"] = self.capacity
        if self._per_worker is not None:
            status["workers"] = self._worker_rates(now)
        return status

    def _worker_rates(self, now: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for writer, entry in sorted(self._per_worker().items() if self._per_worker else ()):
            counters = Counters.merge([dict(entry["counters"])])
            history = self._worker_history.setdefault(writer, deque())
            history.append((now, counters.committed, counters.messages))
            while len(history) > 2 and now - history[0][0] > self.window_ns:
                history.popleft()
            span_s = (now - history[0][0]) / 1e9
            out.append({"writer": writer, "host": entry.get("host", "local"),
                        "committed_txns": counters.committed, "messages": counters.messages,
                        "committed_txn_per_s": round((counters.committed - history[0][1]) / span_s, 3) if span_s > 0 else 0.0,
                        "msgs_per_s": round((counters.messages - history[0][2]) / span_s, 3) if span_s > 0 else 0.0})
        return out

    def write(self, state: str) -> dict[str, Any]:
        status = self.sample(state)
        write_json_atomic(self.path, status)
        return status
