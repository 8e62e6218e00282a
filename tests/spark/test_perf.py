"""perf.json against an independent computation: plain Python over the run folder's files.

The reference below reads history/*.jsonl and metrics/*.prom itself (json and
a regex, no analysis code), pairs operations the simple way (per writer and
process, an invoke and the next line), and computes throughput, nearest-rank
percentiles, end-to-end latency and I/O per committed transaction. The perf
numbers must equal it (percentiles within HdrHistogram's 0.1 %).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.perf import compute_perf, write_perf
from analysis.perf.hdr import quantize_us
from analysis.perf.history_stats import quantize_us_column
from harness.history.schema import Op, OpF, OpType
from tests.unit.report.simrun import SimSpec, simulate_run

OMITTED = "txnbench_metadata_fsyncs_total"
SPEC = SimSpec(producers=3, phases=(("setup", 0.1), ("warmup", 0.3), ("steady", 1.2), ("faults", 0.8),
                                    ("recovery", 0.2)), fault=True, omit_metrics=frozenset({OMITTED}))


# ---- the independent reference ----------------------------------------------------------------


def read_history(run_dir: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted((run_dir / "history").glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines


def pair(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_process: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        by_process[(line["writer"], line["process"])].append(line)
    ops = []
    for seq in by_process.values():
        seq.sort(key=lambda x: x["index"])
        i = 0
        while i < len(seq):
            line = seq[i]
            if line["type"] == "invoke":
                done = seq[i + 1] if i + 1 < len(seq) and seq[i + 1]["type"] != "invoke" \
                    and seq[i + 1]["f"] == line["f"] else None
                ops.append({**line, "invoke_ns": line["time_ns"], "complete_ns": done["time_ns"] if done else None,
                            "type": done["type"] if done else "info", "txn": (done or line)["txn"],
                            "intended_ns": (line.get("extra") or {}).get("intended_ns")})
                i += 2 if done else 1
            else:
                ops.append({**line, "invoke_ns": line["time_ns"], "complete_ns": line["time_ns"]})
                i += 1
    return ops


def phases(lines: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    marks = sorted((x["time_ns"], x["extra"]["name"]) for x in lines
                   if x["f"] == "phase" and x["extra"]["name"] != "drain-complete")
    last = max(x["time_ns"] for x in lines) + 1
    return {name: (t, marks[i + 1][0] if i + 1 < len(marks) else last) for i, (t, name) in enumerate(marks)}


def nearest_rank_ms(values_ns: list[int], p: float) -> float:
    ordered = sorted(values_ns)
    rank = max(1, int(p * len(ordered) / 100 + 0.5))
    return ordered[rank - 1] / 1e6


def prom_sum(run_dir: Path, phase: str, name: str, **labels: str) -> float | None:
    total, seen = 0.0, False
    for path in (run_dir / "metrics").glob(f"{phase}-*.prom"):
        for line in path.read_text().splitlines():
            m = re.match(r"^(\w+)(\{(.*)\})? (\S+)$", line)
            if not m or m.group(1) != name:
                continue
            seen = True
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(4))
    return total if seen else None


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate_run(tmp_path_factory.mktemp("perf") / "run-v4", SPEC)


@pytest.fixture(scope="module")
def perf(spark: SparkSession, run: Path) -> dict[str, Any]:
    return write_perf(run, spark=spark)


@pytest.fixture(scope="module")
def ref(run: Path) -> dict[str, Any]:
    lines = read_history(run)
    return {"lines": lines, "ops": pair(lines), "phases": phases(lines)}


def in_window(t: int | None, window: tuple[int, int]) -> bool:
    return t is not None and window[0] <= t < window[1]


# ---- tests ------------------------------------------------------------------------------------


def test_throughput_and_outcomes_per_window(perf: dict[str, Any], ref: dict[str, Any]) -> None:
    for name in ("steady", "faults", "warmup", "recovery"):
        window = ref["phases"][name]
        seconds = (window[1] - window[0]) / 1e9
        block = perf if name == "steady" else perf["phases"][name]
        assert block["window"]["start_ns"] == window[0] and block["window"]["end_ns"] == window[1]

        def count(f: str, *types: str, w: tuple[int, int] = window) -> int:
            return sum(1 for op in ref["ops"] if op["f"] == f and op["type"] in types
                       and in_window(op["complete_ns"] or op["invoke_ns"], w) and op["writer"] != "drain")

        commits = count("txn-commit", "ok")
        assert commits > 0
        assert block["committed_txn_per_s"] == round(commits / seconds, 3)
        assert block["msgs_per_s"] == round(count("send", "ok") / seconds, 3)
        assert block["acks_per_s"] == round(count("ack", "ok") / seconds, 3)
        assert block["transactions"] == {
            "committed": commits, "aborted": count("txn-abort", "ok"),
            "failed": count("txn-commit", "fail") + count("txn-abort", "fail"),
            "unknown": count("txn-commit", "info") + count("txn-abort", "info"),
            "open_failed": count("txn-open", "fail", "info")}
    assert perf["phases"]["faults"]["transactions"]["failed"] > 0     # the partition made commits fail
    assert perf["window"]["name"] == "steady"


def test_latency_percentiles_from_the_intended_start(perf: dict[str, Any], ref: dict[str, Any]) -> None:
    window = ref["phases"]["steady"]
    for f in ("txn-open", "send", "ack", "txn-commit", "txn-abort"):
        lat, corrected = [], 0
        for op in ref["ops"]:
            if op["f"] != f or op["type"] != "ok":
                continue
            start = op["invoke_ns"] if op["intended_ns"] is None else min(op["intended_ns"], op["invoke_ns"])
            if in_window(start, window):
                lat.append(op["complete_ns"] - start)
                corrected += op["intended_ns"] is not None and op["intended_ns"] < op["invoke_ns"]
        got = perf["latency_ms"][f]
        assert got["count"] == len(lat) > 0, f
        assert got["from_intended_start"] == corrected, f
        assert got["max"] == round(max(lat) / 1e6, 3) and got["min"] == round(min(lat) / 1e6, 3), f
        assert got["mean"] == round(sum(lat) / len(lat) / 1e6, 3), f
        for p, key in ((50.0, "p50"), (95.0, "p95"), (99.0, "p99"), (99.9, "p99.9")):
            exact = nearest_rank_ms(lat, p)
            assert abs(got[key] - exact) <= exact * 0.001 + 0.0011, (f, key, got[key], exact)
    # The rate-limited process stalled once: the operations queued behind it are charged for it.
    assert perf["latency_ms"]["txn-open"]["from_intended_start"] > 0
    assert perf["latency_ms"]["txn-open"]["max"] > 10 * perf["service_time_ms"]["txn-open"]["p50"]


def test_end_to_end_from_commit_invoke_to_first_delivery(perf: dict[str, Any], ref: dict[str, Any]) -> None:
    window = ref["phases"]["steady"]
    drain_start = ref["phases"]["drain"][0]
    commits = [op for op in ref["ops"] if op["f"] == "txn-commit" and op["type"] == "ok"]
    commit_at = {op["txn"]: op["complete_ns"] for op in commits}
    asked_at = {op["txn"]: op["invoke_ns"] for op in commits}
    first: dict[str, int] = {}
    lagged = 0
    for op in ref["ops"]:
        if op["f"] == "receive" and op["writer"] != "drain" and op["time_ns"] < drain_start:
            delivered = (op.get("extra") or {}).get("delivered_ns", op["time_ns"])
            lagged += delivered < op["time_ns"]
            first[op["value"]] = min(first.get(op["value"], delivered), delivered)
    assert lagged > 0, "the simulated consumer never lagged: the test would not tell delivery from receive"
    values = [(op["value"], op["txn"]) for op in ref["ops"]
              if op["f"] == "send" and op["type"] == "ok" and op["txn"] in commit_at
              and in_window(commit_at[op["txn"]], window)]
    lat = [max(0, first[v] - asked_at[t]) for v, t in values if v in first]
    early = sum(first[v] < commit_at[t] for v, t in values if v in first)
    e2e = perf["latency_ms"]["end-to-end"]
    assert perf["end_to_end"]["received_before_commit_completed"] == early
    assert perf["end_to_end"]["committed_values"] == len(values)
    assert perf["end_to_end"]["received"] == e2e["count"] == len(lat) > 0
    assert perf["end_to_end"]["unreceived"] == len(values) - len(lat)
    assert perf["committed_msgs_per_s"] == round(len(values) / ((window[1] - window[0]) / 1e9), 3)
    assert e2e["max"] == round(max(lat) / 1e6, 3)
    for p, key in ((50.0, "p50"), (99.0, "p99")):
        exact = nearest_rank_ms(lat, p)
        assert abs(e2e[key] - exact) <= exact * 0.001 + 0.0011


def test_io_per_txn_from_snapshot_deltas(perf: dict[str, Any], run: Path, ref: dict[str, Any]) -> None:
    window = ref["phases"]["steady"]
    commits = sum(1 for op in ref["ops"] if op["f"] == "txn-commit" and op["type"] == "ok"
                  and in_window(op["complete_ns"], window))
    assert perf["io"]["committed_txns"] == commits
    expected = {
        "data_entries": ("txnbench_ledger_entries_total", {"kind": "data"}),
        "coordinator_log_entries": ("txnbench_ledger_entries_total", {"kind": "txn-log"}),
        "pending_ack_entries": ("txnbench_ledger_entries_total", {"kind": "pending-ack"}),
        "ledger_bytes": ("bookie_WRITE_BYTES", {}),
        "ledger_fsyncs": ("bookie_journal_JOURNAL_SYNC_count", {}),
        "metadata_creates": ("txnbench_metadata_requests_total", {"kind": "create"}),
        "metadata_cas": ("txnbench_metadata_requests_total", {"kind": "cas"}),
        "metadata_cas_conflicts": ("txnbench_metadata_ops_total", {"cas": "true", "result": "conflict"}),
        "metadata_wal_bytes": ("txnbench_metadata_wal_bytes_total", {}),
        "coordinator_commits": ("pulsar_txn_committed_total", {}),
        "coordinator_log_records": ("pulsar_txn_append_log_total", {}),
    }
    for key, (name, labels) in expected.items():
        end, start = prom_sum(run, "steady", name, **labels), prom_sum(run, "warmup", name, **labels)
        assert end is not None and start is not None
        assert perf["io_per_txn"][key] == pytest.approx((end - start) / commits, rel=1e-12), key
    assert perf["io_per_txn"]["coordinator_commits"] == 1.0
    # Not exposed by any snapshot: absent, never zero.
    for key in ("metadata_fsyncs", "fsyncs", "txn_header_cas", "txn_op_record_writes"):
        assert perf["io_per_txn"][key] is None and key in perf["io"]["absent"]
    assert perf["io_per_txn"]["ledger_fsyncs"] is not None
    assert perf["io"]["snapshots"] == {"from": "metrics/warmup-*.prom", "to": "metrics/steady-*.prom"}


def test_cost_ledger_shape_counts_what_the_windows_transactions_did(perf: dict[str, Any],
                                                                     ref: dict[str, Any]) -> None:
    """The prediction's inputs, recomputed the plain way: transactions by their end, their sends and acks."""
    window = ref["phases"]["steady"]
    ends = {op["txn"]: ("committed" if op["f"] == "txn-commit" and op["type"] == "ok" else "aborted")
            for op in ref["ops"] if op["txn"] and in_window(op["complete_ns"], window) and (
                (op["f"] == "txn-commit" and op["type"] in ("ok", "fail"))
                or (op["f"] == "txn-abort" and op["type"] == "ok"))}
    want = dict.fromkeys(("committed", "aborted", "sends_committed", "sends_aborted", "acks_committed",
                          "acks_aborted", "write_participants_committed", "write_participants_aborted",
                          "ack_participants_committed", "ack_participants_aborted"), 0)
    for txn, outcome in ends.items():
        want[outcome] += 1
        sends = [op for op in ref["ops"] if op["f"] == "send" and op["type"] == "ok" and op["txn"] == txn]
        acks = [op for op in ref["ops"] if op["f"] == "ack" and op["type"] == "ok" and op["txn"] == txn]
        want[f"sends_{outcome}"] += len(sends)
        want[f"acks_{outcome}"] += len(acks)
        want[f"write_participants_{outcome}"] += len({op.get("segment") or op["topic"] for op in sends})
        want[f"ack_participants_{outcome}"] += len({(op.get("segment") or op["topic"], op.get("subscription"))
                                                    for op in acks})
    ledger = perf["cost_ledger"]
    shape = {k: v for k, v in ledger["shape"].items() if k != "plain_sends"}
    assert shape == want
    assert ledger["committed_txns"] == want["committed"]
    rows = ledger["rows"]
    assert rows["metadata_cas"]["measured"] is not None and rows["ledger_appends"]["predicted"] is not None
    assert perf["critical_path"]["absent"] is True   # the simulated brokers export no spans


def test_timeline_faults_load_generator_and_files(perf: dict[str, Any], ref: dict[str, Any], run: Path) -> None:
    commits = [op["complete_ns"] for op in ref["ops"] if op["f"] == "txn-commit" and op["type"] == "ok"]
    timeline = perf["timeline"]
    assert sum(timeline["series"]["committed"]) == len(commits)
    assert timeline["t"] == list(range(timeline["t"][0], timeline["t"][-1] + 1))
    assert timeline["latency_ms"]["txn-commit"]
    nemesis = [x for x in ref["lines"] if x["writer"] == "nemesis"]
    fault = perf["faults"][0]
    start = next(x["time_ns"] for x in nemesis if x["f"] == "fault" and x["type"] == "invoke")
    healed = next(x["time_ns"] for x in nemesis if x["f"] == "heal" and x["type"] == "ok")
    assert (fault["kind"], fault["start_s"], fault["end_s"]) == ("partition", start / 1e9, healed / 1e9)
    assert fault["commits_during"] == sum(1 for t in commits if start <= t < healed)
    after = min(t for t in commits if t >= healed)
    assert fault["first_commit_after_heal_s"] == round((after - healed) / 1e9, 6)
    opened = {op["txn"]: op["complete_ns"] for op in ref["ops"] if op["f"] == "txn-open" and op["type"] == "ok"}
    ending: dict[str, int] = {}
    for op in ref["ops"]:
        if op["f"] in ("txn-commit", "txn-abort"):
            ending[op["txn"]] = min(op["invoke_ns"], ending.get(op["txn"], op["invoke_ns"]))
    open_at_start = sum(1 for txn, t in opened.items() if t < start and ending.get(txn, start) >= start)
    assert open_at_start > 0 and fault["open_txns_at_start"] == open_at_start
    served_before: set[str] = set()
    next_end: dict[str, int] = {}
    for op in ref["ops"]:
        if op["f"] in ("txn-commit", "txn-abort") and op["type"] == "ok" and op["complete_ns"] is not None:
            tc, t = op["txn"].split(":")[0], op["complete_ns"]
            if start - 10_000_000_000 <= t < start:
                served_before.add(tc)
            elif t >= start:
                next_end[tc] = min(t, next_end.get(tc, t))
    stalled = sorted(served_before - set(next_end))      # never ended a transaction again
    history_end = max(x["time_ns"] for x in ref["lines"])
    assert fault["coordinators_serving_before"] == len(served_before) > len(stalled)
    assert fault["coordinators_stalled"] == stalled
    worst = history_end if stalled else max(next_end[tc] for tc in served_before)
    assert fault["coordinator_outage_s"] == round((worst - start) / 1e9, 6)
    lg = perf["load_generator"]
    assert lg["cpu"]["percent_of_core"] == pytest.approx(30.0, abs=0.01)
    assert lg["capacity"]["utilization"] == round(perf["committed_txn_per_s"] / 5000.0, 4)
    assert lg["saturated"] is False
    for f in ("txn-commit", "end-to-end"):
        text = (run / "analysis" / "hgrm" / f"{f}.hgrm").read_text()
        total = re.search(r"TotalCount\s*=\s*([\d.]+)", text)
        assert total is not None and float(total.group(1)) == perf["latency_ms"][f]["count"]
    assert json.loads((run / "analysis" / "perf.json").read_text())["committed_txn_per_s"] == \
        perf["committed_txn_per_s"]


# ---- small hand-written histories ------------------------------------------------------------


def write_lines(run_dir: Path, lines: list[Op]) -> Path:
    (run_dir / "history").mkdir(parents=True)
    by_writer: dict[str, list[str]] = defaultdict(list)
    for op in lines:
        by_writer[op.writer].append(op.to_json())
    for writer, text in by_writer.items():
        (run_dir / "history" / f"{writer}.jsonl").write_text("".join(t + "\n" for t in text))
    return run_dir


class Writer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: list[Op] = []

    def add(self, t_ms: float, type_: OpType, f: OpF, process: str = "p", **fields: Any) -> None:
        self.lines.append(Op(run="r", writer=self.name, process=process, index=len(self.lines),
                             time_ns=int(t_ms * 1e6), wall_ms=0.0, type=type_, f=f, path="v5", **fields))


def test_coordinated_omission_is_corrected(spark: SparkSession, tmp_path: Path) -> None:
    run = Writer("run")
    for t, name in ((0, "setup"), (100, "warmup"), (1000, "steady"), (2000, "recovery")):
        run.add(t, OpType.OK, OpF.PHASE, process="run", extra={"name": name})
    w = Writer("w0")
    # Scheduled every 10 ms. The first open takes 95 ms; the next two were due at 1010 and 1020
    # but could only start at 1096 and 1098: their latency counts from when they were due.
    w.add(1000, OpType.INVOKE, OpF.TXN_OPEN, extra={"intended_ns": 1000 * 10**6})
    w.add(1095, OpType.OK, OpF.TXN_OPEN, txn="1:1", extra={"intended_ns": 1000 * 10**6})
    w.add(1096, OpType.INVOKE, OpF.TXN_OPEN, extra={"intended_ns": 1010 * 10**6})
    w.add(1097, OpType.OK, OpF.TXN_OPEN, txn="1:2", extra={"intended_ns": 1010 * 10**6})
    w.add(1098, OpType.INVOKE, OpF.TXN_OPEN, extra={"intended_ns": 1020 * 10**6})
    w.add(1099, OpType.OK, OpF.TXN_OPEN, txn="1:3", extra={"intended_ns": 1020 * 10**6})
    # Started ahead of schedule: timed from the actual invoke, never less.
    w.add(1200, OpType.INVOKE, OpF.TXN_OPEN, extra={"intended_ns": 1250 * 10**6})
    w.add(1202, OpType.OK, OpF.TXN_OPEN, txn="1:4", extra={"intended_ns": 1250 * 10**6})
    w.add(1300, OpType.INVOKE, OpF.TXN_COMMIT, txn="1:4")
    w.add(1304, OpType.OK, OpF.TXN_COMMIT, txn="1:4")
    perf = compute_perf(write_lines(tmp_path / "co", run.lines + w.lines), spark=spark)
    opens = perf["latency_ms"]["txn-open"]
    assert opens["count"] == 4 and opens["from_intended_start"] == 2
    assert opens["max"] == 95.0 and opens["min"] == 2.0
    assert opens["mean"] == round((95 + 87 + 79 + 2) / 4, 3)
    service = perf["service_time_ms"]["txn-open"]
    assert service["count"] == 4 and service["max"] == 95.0 and service["p50"] == 1.0
    assert perf["latency_ms"]["txn-commit"]["max"] == 4.0 and perf["committed_txn_per_s"] == 1.0
    # No metrics snapshots at all: every I/O number is absent.
    assert all(v is None for v in perf["io_per_txn"].values())


def test_without_phase_events_the_window_is_the_whole_load(spark: SparkSession, tmp_path: Path) -> None:
    w = Writer("w0")
    for i in range(5):
        t = 100 + 50 * i
        w.add(t, OpType.INVOKE, OpF.TXN_COMMIT, txn=f"1:{i}")
        w.add(t + 2, OpType.OK if i < 4 else OpType.FAIL, OpF.TXN_COMMIT, txn=f"1:{i}")
    perf = compute_perf(write_lines(tmp_path / "all", w.lines), spark=spark)
    assert perf["window"]["name"] == "all" and perf["window"]["start_ns"] == 100 * 10**6
    assert perf["transactions"]["committed"] == 4 and perf["transactions"]["failed"] == 1
    assert perf["committed_txn_per_s"] == round(4 / ((302 - 100) / 1000 + 1e-9), 3)
    assert perf["phases"] == {} and "no steady phase" in perf["notes"][0]
    assert sum(perf["timeline"]["series"]["committed"]) == 4


def test_quantize_column_matches_python(spark: SparkSession) -> None:
    values = [0, 999, 1000, 2_047_999, 2_048_000, 4_095_999, 123_456_789, 10**12, 10**15]
    rows = spark.createDataFrame([(v,) for v in values], "ns long").select(
        "ns", quantize_us_column(F.col("ns")).alias("q")).collect()
    assert {r["ns"]: r["q"] for r in rows} == {v: quantize_us(v // 1000) for v in values}
