"""One run's report: report.html (self-contained), report.md and plots/*.png.

Everything shown comes from the run's perf.json (analysis.perf) and
analysis/results.json (the checker's verdict); the "Inputs" section names the
files behind every number so a reader can trace it back to the history and
the metrics snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.report.charts import Chart
from analysis.report.cost import cost_ledger_section, critical_path_section, meaning_paragraph
from analysis.report.model import (
    ABSENT,
    NA,
    Cell,
    Section,
    Table,
    fmt_count,
    fmt_json,
    fmt_ms,
    fmt_num,
    fmt_s,
)
from analysis.report.races import races_table
from analysis.report.run_plots import LATENCY_ORDER, run_charts
from analysis.report.writer import Page, ReportKind
from analysis.verdicts import Judgement, judge_run
from harness.metadata_stores import store_of_manifest
from harness.results import RunDir, planted_bugs_of

__all__ = ["RUN_REPORT", "RunInputs", "fault_end_cell", "latency_table", "run_page", "run_sections",
           "verdict_section"]

MAX_EXAMPLES = 3


@dataclass(frozen=True)
class RunInputs:
    """What one run's report is built from: its folder, perf.json, results.json and manifest."""

    run: RunDir
    perf: Mapping[str, Any]
    results: Mapping[str, Any] | None
    manifest: Mapping[str, Any]


def _verdict_class(valid: Any) -> str:
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


def verdict_section(results: Mapping[str, Any] | None, *, anchor: str = "verdict",
                    judgement: Judgement | None = None) -> Section:
    """The verdict panel: valid / invalid / unknown, each anomaly class with examples.

    `judgement` marks anomalies the scenario provokes on purpose (with the reason) and
    says why a class it expected stayed unexpected; the verdict stays what the checker said.
    """
    expected = judgement.expected if judgement is not None else {}
    notes = judgement.notes if judgement is not None else {}
    if results is None:
        return Section("Verdict", anchor, paragraphs=(
            "No verdict: analysis/results.json is missing. Run `txnbench check RUN_DIR` (or `txnbench report`, "
            "which runs the checker when the verdict is missing).",), css="verdict-unknown")
    valid = results.get("valid")
    anomalies: Mapping[str, Any] = results.get("anomalies") or {}
    paragraphs: list[str] = []
    if valid is True:
        paragraphs.append("The checker found no atomicity anomaly in this run's history (analysis/results.json).")
    elif valid is False:
        paragraphs.append(f"The checker found {len(anomalies)} anomaly class(es); examples name the operations "
                          "involved (writer and index in the history).")
        seen = {a: why for a, why in expected.items() if a in anomalies}
        if seen:
            which = "all of them" if len(seen) == len(anomalies) else ", ".join(sorted(seen))
            paragraphs.append(f"The scenario expects {which} on this path (checks.expected): "
                              + "; ".join(sorted(set(seen.values()))) + ".")
        for name, note in sorted(notes.items()):
            paragraphs.append(f"{name} is expected on this path only for transactions a terminate could have affected (its topic, from its injection on), but {note}; "
                              "it counts as unexpected.")
        for name, held in sorted((judgement.held if judgement is not None else {}).items()):
            paragraphs.append(f"{name}: {held['describe']}. A transaction nobody will end holds such a horizon "
                              "for good; the instances stay anomalies (analysis/held_account.py).")
    else:
        paragraphs.append("The history cannot support a verdict; reasons below.")
    rows = []
    example_rows = []
    for name, entry in sorted(anomalies.items()):
        examples = list((entry or {}).get("examples") or [])
        rows.append((name, fmt_count((entry or {}).get("count")), fmt_count(len(examples)),
                     "expected" if name in expected else "unexpected"))
        for i, example in enumerate(examples[:MAX_EXAMPLES], start=1):
            example_rows.append((name, str(i), Cell(fmt_json(example, limit=700), "code")))
    tables = []
    if rows:
        tables.append(Table.of(("anomaly", "count", "examples in results.json", "scenario"), rows,
                               caption="Anomalies"))
        tables.append(Table.of(("anomaly", "#", "example (the operations involved, from results.json)"),
                               example_rows, caption=f"Examples (at most {MAX_EXAMPLES} per anomaly)"))
    checks = results.get("checks") or {}
    if checks:
        check_rows = []
        for name, entry in sorted(checks.items()):
            status = entry.get("status", "")
            found = entry.get("count")
            css = "bad" if found else ("warn" if status != "ran" or entry.get("unjudged") else "good")
            check_rows.append((name, Cell(status, css), fmt_count(found) if found is not None else NA,
                               entry.get("reason") or entry.get("note") or ""))
        tables.append(Table.of(("check", "status", "found", "note"), check_rows, caption="Checks run"))
    txns = results.get("transactions") or {}
    if txns:
        tables.append(Table.of(("outcome (whole run, decided by the checker)", "transactions"),
                               [(k, fmt_count(v)) for k, v in txns.items()]))
    items = tuple(str(r) for r in (results.get("unknown_reasons") or []))
    return Section("Verdict", anchor, paragraphs=tuple(paragraphs), tables=tuple(tables), items=items,
                   css=f"verdict-{_verdict_class(valid)}")


def latency_table(latency: Mapping[str, Any], caption: str, *, corrected: bool = True) -> Table:
    headers = ["operation", "count", "p50", "p95", "p99", "p99.9", "max", "mean"]
    if corrected:
        headers.append("timed from intended start")
    rows = []
    for op in LATENCY_ORDER:
        entry = latency.get(op)
        if entry is None:
            continue
        if not entry.get("count"):
            row = [op, "0", *([Cell(NA, "absent")] * 6)]
        else:
            row = [op, fmt_count(entry["count"]), *(fmt_ms(entry.get(k)) for k in
                                                     ("p50", "p95", "p99", "p99.9", "max", "mean"))]
        if corrected:
            row.append(fmt_count(entry["from_intended_start"]) if "from_intended_start" in entry else "—")
        rows.append(row)
    return Table.of(headers, rows, caption=caption)


def _io_table(io: Mapping[str, Any]) -> Table:
    rows: list[tuple[Any, ...]] = []
    for key, m in (io.get("metrics") or {}).items():
        if m.get("absent"):
            rows.append((key, Cell(ABSENT, "absent"), Cell(ABSENT, "absent"), m.get("unit", ""),
                         Cell(m.get("source", ""), "code"), m.get("reason", "")))
        else:
            note = "counter reset in the window: a lower bound" if m.get("counter_reset") else m.get("note", "")
            rows.append((key, fmt_num(m.get("per_txn")), fmt_num(m.get("delta")), m.get("unit", ""),
                         Cell(m.get("source", ""), "code"), note))
    return Table.of(("metric", "per committed txn", "total in window", "unit", "source", "note"), rows,
                    caption=f"Snapshot deltas {io.get('snapshots', {}).get('from')} → "
                            f"{io.get('snapshots', {}).get('to')}, divided by "
                            f"{fmt_count(io.get('committed_txns'))} committed transactions")


def _headline_table(perf: Mapping[str, Any]) -> Table:
    txns = perf.get("transactions") or {}
    e2e = perf.get("end_to_end") or {}
    rows = [
        ("committed transactions / s", fmt_num(perf.get("committed_txn_per_s")),
         "commits completed ok in the window ÷ window length"),
        ("messages / s", fmt_num(perf.get("msgs_per_s")), "sends completed ok in the window ÷ window length"),
        ("committed messages / s", fmt_num(perf.get("committed_msgs_per_s")),
         "messages of transactions committed in the window ÷ window length"),
        ("acks / s", fmt_num(perf.get("acks_per_s")), "acks completed ok in the window ÷ window length"),
        ("committed", fmt_count(txns.get("committed")), "txn-commit ok"),
        ("aborted", fmt_count(txns.get("aborted")), "txn-abort ok (the workload's own aborts)"),
        ("failed", fmt_count(txns.get("failed")), "txn-commit or txn-abort fail (definitely not committed)"),
        ("unknown", fmt_count(txns.get("unknown")), "txn-commit or txn-abort info (outcome unknown to the client)"),
        ("open failed", fmt_count(txns.get("open_failed")), "txn-open fail or info"),
        ("values received by consumers", fmt_count(e2e.get("received")),
         f"of {fmt_count(e2e.get('committed_values'))} committed values, those with a receive before the drain "
         "(the end-to-end latency sample)"),
    ]
    return Table.of(("number", "value", "definition"), rows)


def _phases_table(perf: Mapping[str, Any]) -> Table | None:
    phases = perf.get("phases") or {}
    if not phases:
        return None
    rows = []
    for name, block in phases.items():
        txns = block.get("transactions") or {}
        commit = (block.get("latency_ms") or {}).get("txn-commit") or {}
        rows.append((name, fmt_num(block["window"]["duration_s"]), fmt_num(block.get("committed_txn_per_s")),
                     fmt_num(block.get("msgs_per_s")), fmt_ms(commit.get("p99")) if commit.get("count") else NA,
                     fmt_count(txns.get("failed")), fmt_count(txns.get("unknown")),
                     f"{block.get('seconds_without_commit', 0)} of {block.get('seconds', 0)}"))
    return Table.of(("phase", "seconds", "committed txn/s", "msgs/s", "commit p99 (ms)", "failed", "unknown",
                     "whole seconds without a commit"), rows, caption="Per phase (same definitions, each phase "
                    "its own window)")


def fault_end_cell(fault: Mapping[str, Any]) -> Any:
    """The end column of a fault: when it was healed, or why there is no heal."""
    if fault.get("healable") is False:
        return Cell(f"{fmt_s(fault.get('end_s'))} (instant)")
    if not fault.get("injected", True):
        return Cell(f"{fmt_s(fault.get('end_s'))} (injection failed)", "warn")
    if fault.get("healed"):
        return fmt_s(fault.get("end_s"))
    return Cell("never healed", "bad")


def _faults_table(perf: Mapping[str, Any]) -> Table | None:
    faults = perf.get("faults") or []
    if not faults:
        return None
    rows = []
    for f in faults:
        rows.append((f.get("kind"), Cell(f.get("targets") or "", "code"), fmt_s(f.get("start_s")),
                     fault_end_cell(f),
                     fmt_count(f.get("commits_during")), fmt_num(f.get("commits_per_s_during")),
                     fmt_s(f.get("longest_commit_gap_s")), fmt_s(f.get("first_commit_after_heal_s"))))
    return Table.of(("fault", "targets", "start (s)", "healed (s)", "commits during", "commits/s during",
                     "longest gap without a commit (s)", "first commit after heal (s)"), rows,
                    caption="Fault windows (from the history's fault and heal operations)")


def _loadgen_section(perf: Mapping[str, Any]) -> Section:
    lg = perf.get("load_generator") or {}
    cap = lg.get("capacity") or {}
    cpu = lg.get("cpu") or {}
    csv = lg.get("csv") or {}
    status = lg.get("status") or {}
    absent = Cell(ABSENT, "absent")
    rows = [
        ("achieved committed txn/s (history)", fmt_num((lg.get("achieved") or {}).get("committed_txn_per_s")), ""),
        ("client capacity, committed txn/s", absent if cap.get("absent") else fmt_num(cap.get("committed_txn_per_s")),
         cap.get("reason") or f"measured against {cap.get('against') or 'a null broker'}"),
        ("utilization of capacity (txn/s)", absent if cap.get("absent") or cap.get("utilization") is None
         else f"{100 * float(cap['utilization']):.1f}%", ""),
        ("utilization of capacity (msgs/s)", absent if cap.get("absent") or cap.get("msgs_utilization") is None
         else f"{100 * float(cap['msgs_utilization']):.1f}%", ""),
        ("load CPU, % of one core", absent if cpu.get("absent") else fmt_num(cpu.get("percent_of_core")),
         cpu.get("reason") or cpu.get("source", "")),
        ("load CPU per process, % of one core", absent if cpu.get("absent") else fmt_num(cpu.get("per_process_percent")),
         "" if cpu.get("absent") else f"{cpu.get('processes')} load process(es)"),
        ("machine busy, cores (load, cluster and anything else)",
         fmt_num((lg.get("host") or {}).get("busy_cores")) if lg.get("host") else absent,
         f"of {lg['host'].get('host_cpus')}; {lg['host'].get('source')}" if lg.get("host")
         else "status.json has no host_busy_samples"),
        ("Locust requests/s (whole run)", absent if csv.get("absent") else fmt_num(csv.get("requests_per_s")),
         csv.get("reason") or csv.get("file", "")),
        ("load errors (whole run)", absent if status.get("absent") or status.get("errors") is None
         else fmt_count(status.get("errors")), "failed operations and task exceptions, ack conflicts apart"),
        ("ack conflicts (whole run)", absent if status.get("absent") or status.get("ack_conflicts") is None
         else fmt_count(status.get("ack_conflicts")),
         "acks refused because another transaction had acked the message (expected)"),
    ]
    css = "bad" if lg.get("saturated") else ("good" if lg.get("saturated") is False else "warn")
    return Section("Load generator headroom", "loadgen",
                   tables=(Table.of(("number", "value", "source"), rows),
                           Table.of(("verdict",), [(Cell(lg.get("verdict", NA), css),)]),
                           races_table([("", perf.get("races"))])))


def _inputs_section(perf: Mapping[str, Any], run: RunDir) -> Section:
    inputs = perf.get("inputs") or {}
    history = inputs.get("history") or {}
    window = perf.get("window") or {}
    items = [
        f"history: {len(history.get('files') or [])} file(s) in history/, {fmt_count(history.get('lines'))} lines, "
        f"{fmt_count(history.get('bytes'))} bytes, read from {history.get('source', NA)}"
        + (f"; torn last line ignored in {', '.join(history['torn_tails'])}" if history.get("torn_tails") else ""),
        f"measured window: {window.get('name', NA)}, run time {fmt_num(window.get('start_s'))} s to "
        f"{fmt_num(window.get('end_s'))} s ({window.get('source', '')})",
        f"metrics snapshots: {len(inputs.get('metrics_snapshots') or [])} file(s) in metrics/; I/O uses "
        f"{(perf.get('io') or {}).get('snapshots', {}).get('from')} and {(perf.get('io') or {}).get('snapshots', {}).get('to')}",
        f"load generator: {', '.join(inputs.get('locust') or []) or 'nothing in locust/'}",
        f"latency distributions (HdrHistogram .hgrm): {', '.join(perf.get('hgrm_files') or []) or 'none'}",
        "numbers: analysis/perf.json; verdict: analysis/results.json; definitions: docs/report.md",
    ]
    items += [f"note: {n}" for n in perf.get("notes") or []]
    return Section("Inputs and method", "inputs", paragraphs=(
        "Rates count operations whose completion falls in the window; latencies count operations whose "
        "(intended) start falls in it. Latency runs from the intended start when the load recorded one "
        "(extra.intended_ns), so a stalled operation also delays what queued behind it (no coordinated "
        "omission). Percentiles have HdrHistogram precision (3 significant digits); max, min and mean are "
        "exact.",), items=tuple(items))


def summary_section(perf: Mapping[str, Any], results: Mapping[str, Any] | None) -> Section:
    """The few numbers a reader wants first, each defined further down the page."""
    latency = perf.get("latency_ms") or {}
    io = perf.get("io_per_txn") or {}
    valid = (results or {}).get("valid") if results is not None else None
    verdict = ("valid" if valid is True else "INVALID" if valid is False else "unknown") if results else "no verdict"
    css = {"valid": "good", "INVALID": "bad"}.get(verdict, "warn")

    def lat(op: str, key: str) -> Any:
        entry = latency.get(op) or {}
        return fmt_ms(entry.get(key)) if entry.get("count") else Cell(NA, "absent")

    def per_txn(key: str) -> Any:
        return fmt_num(io.get(key)) if io.get(key) is not None else Cell(ABSENT, "absent")

    rows = [
        ("verdict", Cell(verdict, css)),
        ("committed transactions / s", fmt_num(perf.get("committed_txn_per_s"))),
        ("messages / s", fmt_num(perf.get("msgs_per_s"))),
        ("commit latency p50 / p99 (ms)", Cell(f"{lat('txn-commit', 'p50')} / {lat('txn-commit', 'p99')}"
                                                if (latency.get("txn-commit") or {}).get("count") else NA)),
        ("end-to-end latency p99 (ms)", lat("end-to-end", "p99")),
        ("ledger entries / committed txn", per_txn("ledger_entries")),
        ("metadata-store writes / committed txn", per_txn("metadata_writes")),
        ("fsyncs / committed txn", per_txn("fsyncs")),
        ("load generator", Cell((perf.get("load_generator") or {}).get("verdict") or NA)),
    ]
    return Section("Summary", "summary", tables=(Table.of(("", "measured window"), rows),))


def run_sections(perf: Mapping[str, Any], results: Mapping[str, Any] | None, charts: Sequence[Chart],
                 run: RunDir, manifest: Mapping[str, Any] | None = None) -> list[Section]:
    by_name = {c.name: c for c in charts}
    judgement = judge_run(run.path, results, manifest or {}) if results is not None else None
    sections = [summary_section(perf, results), verdict_section(results, judgement=judgement)]
    sections.append(Section("Throughput", "throughput", tables=(_headline_table(perf),),
                            charts=tuple(by_name[n] for n in ("throughput",) if n in by_name)))
    latency_tables = [latency_table(perf.get("latency_ms") or {}, "Latency (ms), measured window")]
    if perf.get("service_time_ms"):
        latency_tables.append(latency_table(perf["service_time_ms"], "Service time (ms) of the operations that "
                                            "carry an intended start: from the actual invoke, for comparison",
                                            corrected=False))
    e2e = perf.get("end_to_end") or {}
    paragraphs = ("End-to-end latency runs from a transaction's commit request (its invoke) to the first delivery of "
                  "each of its values to the load's consumers (when the broker's frame reached the client, "
                  f"not when the application took it); {fmt_count(e2e.get('unreceived'))} committed "
                  "value(s) had no such receive (e.g. topics without consumers) and "
                  f"{fmt_count(e2e.get('received_before_commit_completed'))} were received before the client "
                  "saw the commit complete (the path made them visible before answering the commit).",)
    sections.append(Section("Latency", "latency", paragraphs=paragraphs, tables=tuple(latency_tables),
                            charts=tuple(by_name[n] for n in ("latency_percentiles", "latency_summary",
                                                              "latency_timeline") if n in by_name)))
    sections.append(cost_ledger_section(perf.get("cost_ledger") or {}))
    sections.append(critical_path_section(perf.get("critical_path") or {}, perf.get("latency_ms") or {}))
    io = perf.get("io") or {}
    io_paragraphs = [io["reason"]] if io.get("reason") else []
    if io.get("absent"):
        io_paragraphs.append(f"Absent (no snapshot exposes them, so no value is claimed): {', '.join(io['absent'])}.")
    sections.append(Section("I/O per committed transaction", "io", paragraphs=tuple(io_paragraphs),
                            tables=(_io_table(io),) if io.get("metrics") else (),
                            charts=tuple(by_name[n] for n in ("io_per_txn",) if n in by_name)))
    phase_tables = [t for t in (_phases_table(perf), _faults_table(perf)) if t is not None]
    if phase_tables:
        recovery = perf.get("coordinator_recovery_s") or {}
        recovery_text = ("Coordinator recovery gauge (pulsar_txn_coordinator_recovery_seconds, largest over "
                         "brokers) at the end of each phase: "
                         + ", ".join(f"{k} {fmt_num(v)} s" for k, v in recovery.items()) if not recovery.get("absent")
                         else str(recovery.get("reason", "")))
        progress_text = _faults_progress_text((manifest or {}).get("faults_progress"))
        sections.append(Section("Phases and faults", "phases",
                                paragraphs=(recovery_text, *([progress_text] if progress_text else [])),
                                tables=tuple(phase_tables)))
    sections.append(_loadgen_section(perf))
    sections.append(_inputs_section(perf, run))
    return sections


def _faults_progress_text(progress: Mapping[str, Any] | None) -> str | None:
    """How far the fault timeline got (manifest `faults_progress`); a warning when windows never ran."""
    if not progress or not progress.get("windows"):
        return None
    head = (f"Fault timeline: {progress['started']} of {progress['windows']} planned windows ran, the last "
            f"{float(progress.get('last_late_s') or 0.0):g} s behind its plan (heals and triggers take time).")
    overrun = float(progress.get("overrun_s") or 0.0)
    if overrun > 0:
        head += f" The faults phase ran {overrun:g} s past its planned length to play them."
    exits = progress.get("service_exits") or {}
    if exits:
        head += (" Services that exited on their own, recorded as `exit` faults and started again by the "
                 f"supervisor: {', '.join(f'{name} {count}x' for name, count in sorted(exits.items()))}.")
    missed = progress.get("unreached") or []
    if not missed:
        return head
    names = "; ".join(f"at {m['at_s']:g} s: {', '.join(m['faults'])}" for m in missed)
    return (f"⚠ {head} {len(missed)} windows never ran, the faults phase ended first, so this run says "
            f"nothing about them: {names}. Raise phases.faults_overrun_s (or faults_s) to run them.")


def _intro(perf: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    w = perf.get("workload") or {}
    window = perf.get("window") or {}
    planted = planted_bugs_of(dict(manifest))
    warning = ([f"⚠ PLANTED BUGS ON (deliberate faults of the txnbench self-test; this run says nothing about "
                f"Pulsar): {', '.join(planted)}"] if planted else [])
    return [
        *warning,
        f"Path {perf.get('path') or NA} · scenario {perf.get('scenario') or NA} · target {perf.get('target') or NA} · "
        f"metadata store {(perf.get('metadata_store') or store_of_manifest(manifest)).get('label') or NA} · "
        f"status {perf.get('status') or NA} · seed {manifest.get('seed', NA)}",
        f"Workload {w.get('kind') or NA}: {w.get('users') or NA} users, {w.get('messages_per_txn') or NA} messages "
        f"over {w.get('topics_per_txn') or NA} topics per transaction, abort ratio {w.get('abort_ratio', NA)}; "
        f"measured window {window.get('name', NA)} ({fmt_num(window.get('duration_s'))} s).",
        meaning_paragraph(perf.get("target")),
    ]


def run_page(inputs: RunInputs, out_dir: Path) -> Page:
    """Draw the charts into the run's plots/ and build its page (`out_dir` is the run folder)."""
    run, perf, results, manifest = inputs.run, inputs.perf, inputs.results, inputs.manifest
    charts = run_charts(perf, run.plots_dir)
    footer = (f"Generated {perf.get('generated', {}).get('at', '')} from {run.path.name}/analysis/perf.json "
              "and analysis/results.json.")
    return Page(f"txnbench report: {perf.get('run_id') or run.run_id}", _intro(perf, manifest),
                run_sections(perf, results, charts, run, manifest), footer, tuple(charts))


RUN_REPORT: ReportKind[RunInputs] = ReportKind("report", run_page)
"""report.html and report.md in the run folder: `write_report(RUN_REPORT, RunInputs(...), run.path)`."""
