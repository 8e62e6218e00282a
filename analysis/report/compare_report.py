"""The comparison report: compare.json, compare.md and compare.html (+ plots/compare_*.png).

Side-by-side tables per path with ratios against the baseline (v4), overlaid
charts, the verdict of every run, and the load generator's capacity next to
the measured throughput so a reader can see the harness was not the limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.perf.io import DERIVED_METRICS, IO_METRICS
from analysis.report.charts import Chart
from analysis.report.compare_plots import compare_charts
from analysis.report.cost import (
    compare_depth_table,
    ledger_rows,
    meaning_paragraph,
    model_settings_note,
)
from analysis.report.model import (
    ABSENT,
    NA,
    Cell,
    Section,
    Table,
    fmt_count,
    fmt_ms,
    fmt_num,
    fmt_ratio,
    fmt_s,
)
from analysis.report.races import races_table
from analysis.report.run_plots import LATENCY_ORDER
from analysis.report.run_report import fault_end_cell
from analysis.report.writer import PLOTS, Page, ReportKind

__all__ = ["COMPARE_REPORT", "compare_page", "compare_sections"]

_TITLES: dict[str, str] = {m.key: m.title for m in IO_METRICS} | {d.key: d.title for d in DERIVED_METRICS}


def _verdict_cell(verdict: Mapping[str, Any]) -> Cell:
    valid = verdict.get("valid")
    if valid is True:
        return Cell("valid", "good")
    if valid is False and verdict.get("only_expected"):
        return Cell("INVALID, as the scenario expects", "warn")
    if valid is False:
        return Cell("INVALID", "bad")
    return Cell("unknown" if "valid" in verdict and valid is not None else "no verdict", "warn")


def _verdicts(compare: Mapping[str, Any]) -> Section:
    rows = []
    for label in compare["order"]:
        r = compare["paths"][label]
        verdict = r["verdict"]
        expected = verdict.get("expected") or {}
        anomalies = ", ".join(f"{k} {v}" + (" (expected)" if k in expected else "")
                              for k, v in verdict.get("anomalies", {}).items()) or "none"
        reasons = "; ".join(verdict.get("unknown_reasons") or []) or verdict.get("note", "")
        if expected:
            why = "; ".join(sorted(set(expected.values())))
            reasons = f"{reasons}; expected: {why}" if reasons else f"expected: {why}"
        store = (r.get("metadata_store") or {}).get("label") or NA
        rows.append((label, store, Cell(str(r.get("status") or NA)), _verdict_cell(verdict), anomalies, reasons))
    valids = [compare["paths"][label]["verdict"].get("valid") for label in compare["order"]]
    css = ("verdict-invalid" if any(v is False for v in valids) else
           "verdict-valid" if valids and all(v is True for v in valids) else "verdict-unknown")
    return Section("Verdicts", "verdicts", tables=(Table.of(("path", "metadata store", "run status", "verdict", "anomalies", "doubts"),
                                                            rows),), css=css)


def _throughput(compare: Mapping[str, Any], charts: Mapping[str, Chart]) -> Section:
    base = compare.get("baseline")
    rows = []
    for label in compare["order"]:
        r = compare["paths"][label]
        ratios = compare["ratios_vs_baseline"].get(label, {})
        txns = r.get("transactions") or {}
        rows.append((
            label, fmt_num(r.get("committed_txn_per_s")), fmt_ratio(ratios.get("committed_txn_per_s")),
            fmt_num(r.get("msgs_per_s")), fmt_ratio(ratios.get("msgs_per_s")),
            fmt_num(r.get("committed_msgs_per_s")), fmt_count(txns.get("aborted")), fmt_count(txns.get("failed")),
            fmt_count(txns.get("unknown")), fmt_num((r.get("window") or {}).get("duration_s")),
        ))
    headroom = []
    for label in compare["order"]:
        r = compare["paths"][label]
        lg = r.get("load_generator") or {}
        css = "bad" if lg.get("saturated") else ("good" if lg.get("saturated") is False else "warn")
        util, msgs_util = lg.get("utilization"), lg.get("msgs_utilization")
        headroom.append((label, fmt_num(r.get("committed_txn_per_s")),
                         fmt_num(lg.get("capacity_txn_per_s")) if lg.get("capacity_txn_per_s") is not None
                         else Cell(ABSENT, "absent"),
                         f"{100 * float(util):.1f}%" if util is not None else Cell(ABSENT, "absent"),
                         f"{100 * float(msgs_util):.1f}%" if msgs_util is not None else Cell(ABSENT, "absent"),
                         fmt_num(lg.get("cpu_per_process_percent")) if lg.get("cpu_per_process_percent") is not None
                         else Cell(ABSENT, "absent"),
                         fmt_count(lg.get("errors")) if lg.get("errors") is not None else Cell(ABSENT, "absent"),
                         fmt_count(lg.get("ack_conflicts")) if lg.get("ack_conflicts") is not None
                         else Cell(ABSENT, "absent"),
                         Cell(lg.get("verdict") or NA, css)))
    return Section(
        "Throughput", "throughput",
        paragraphs=(f"Measured window: each run's steady phase. Ratios are against {base}.",),
        tables=(Table.of(("path", "committed txn/s", f"vs {base}", "msgs/s", f"vs {base}", "committed msgs/s",
                          "aborted", "failed", "unknown", "window (s)"), rows),
                Table.of(("path", "achieved txn/s", "client capacity txn/s", "txn/s utilization",
                          "msgs/s utilization", "load CPU per process (% core)", "load errors", "ack conflicts",
                          "load generator"), headroom,
                         caption="Was the harness the bottleneck? Capacity is the client's rate against a null "
                                 "broker, measured by the load process. Load errors: failed operations and "
                                 "task exceptions of the whole run; ack conflicts (acks refused because another "
                                 "transaction had acked the message) are expected and counted apart"),
                races_table([(label, compare["paths"][label].get("races")) for label in compare["order"]])),
        charts=tuple(charts[n] for n in ("compare_throughput", "compare_timeline") if n in charts))


def _latency(compare: Mapping[str, Any], charts: Mapping[str, Chart]) -> Section:
    base = compare.get("baseline")
    rows = []
    for op in LATENCY_ORDER:
        for label in compare["order"]:
            entry = compare["paths"][label]["latency_ms"].get(op)
            if entry is None:
                continue
            ratios = compare["ratios_vs_baseline"].get(label, {})
            if not entry.get("count"):
                rows.append((op, label, "0", *([Cell(NA, "absent")] * 5), NA))
                continue
            rows.append((op, label, fmt_count(entry.get("count")),
                         *(fmt_ms(entry.get(k)) for k in ("p50", "p95", "p99", "p99.9", "max")),
                         fmt_ratio((ratios.get("latency_p99_ms") or {}).get(op))))
    return Section("Latency", "latency",
                   paragraphs=("Milliseconds, measured window, timed from the intended start where the load "
                               "recorded one (no coordinated omission); HdrHistogram precision.",),
                   tables=(Table.of(("operation", "path", "count", "p50", "p95", "p99", "p99.9", "max",
                                     f"p99 vs {base}"), rows),),
                   charts=tuple(charts[n] for n in ("compare_latency", "compare_latency_spectrum") if n in charts))


def _io(compare: Mapping[str, Any], charts: Mapping[str, Chart]) -> Section:
    base = compare.get("baseline")
    order = compare["order"]
    keys = list(compare["paths"][order[0]]["io_per_txn"]) if order else []
    rows = []
    for key in keys:
        row: list[Any] = [key]
        for label in order:
            value = compare["paths"][label]["io_per_txn"].get(key)
            row.append(fmt_num(value) if value is not None else Cell(ABSENT, "absent"))
        for label in order:
            if label == base:
                continue
            row.append(fmt_ratio((compare["ratios_vs_baseline"].get(label, {}).get("io_per_txn") or {}).get(key)))
        row.append(_TITLES.get(key, ""))
        rows.append(row)
    headers = ["metric", *order, *(f"{label} vs {base}" for label in order if label != base), "meaning"]
    return Section("I/O per committed transaction", "io",
                   paragraphs=("Metrics-snapshot deltas over each run's steady phase divided by the transactions "
                               "committed in it. \"absent\" means the run's snapshots do not expose the metric "
                               "(never a zero).",),
                   tables=(Table.of(headers, rows),),
                   charts=tuple(charts[n] for n in ("compare_io",) if n in charts))


def _phases(compare: Mapping[str, Any]) -> Section | None:
    order = compare["order"]
    if not any(compare["paths"][label].get("faults") or "faults" in (compare["paths"][label].get("phases") or {})
               for label in order):
        return None
    rows = []
    for label in order:
        for name, p in (compare["paths"][label].get("phases") or {}).items():
            rows.append((label, name, fmt_num(p.get("duration_s")), fmt_num(p.get("committed_txn_per_s")),
                         fmt_ms(p.get("commit_p99_ms")) if p.get("commit_p99_ms") is not None else NA,
                         fmt_count(p.get("failed")), fmt_count(p.get("unknown")),
                         f"{p.get('seconds_without_commit', 0)} of {p.get('seconds', 0)}"))
    fault_rows = []
    for label in order:
        for f in compare["paths"][label].get("faults") or []:
            fault_rows.append((label, f.get("kind"), Cell(f.get("targets") or "", "code"), fmt_s(f.get("start_s")),
                               fault_end_cell(f),
                               fmt_count(f.get("commits_during")), fmt_s(f.get("longest_commit_gap_s")),
                               fmt_s(f.get("first_commit_after_heal_s"))))
    tables = [Table.of(("path", "phase", "seconds", "committed txn/s", "commit p99 (ms)", "failed", "unknown",
                        "seconds without a commit"), rows, caption="Per phase")]
    if fault_rows:
        tables.append(Table.of(("path", "fault", "targets", "start (s)", "healed (s)", "commits during",
                                "longest gap (s)", "first commit after heal (s)"), fault_rows,
                               caption="Fault windows"))
    return Section("Phases and faults", "phases", tables=tuple(tables))


def _inputs(compare: Mapping[str, Any]) -> Section:
    items = [f"{label}: {r['run_dir']} (numbers: {r['perf_json']}; verdict: {r.get('results_json') or 'none'})"
             for label, r in ((label, compare["paths"][label]) for label in compare["order"])]
    items += [f"not compared: {where}: {why}" for where, why in (compare.get("errors") or {}).items()]
    return Section("Inputs", "inputs", paragraphs=(
        "Every number above is copied from the named run's perf.json or results.json (see docs/report.md for "
        "definitions); ratios divide by the baseline's number.",), items=tuple(items))


def _fairness(compare: Mapping[str, Any]) -> Section:
    """Equal topologies, model-only settings, and what the numbers mean on the target."""
    order = compare["order"]
    runs = compare["paths"]
    mismatch = compare.get("shape_mismatch") or []
    keys = ("per_topic", "topics", "topics_per_txn", "messages_per_txn", "acks_per_txn")
    rows = []
    for label in order:
        shape = runs[label].get("participants") or {}
        rows.append((label, *(Cell(str(shape.get(k, "n/a")), "bad" if mismatch else "") for k in keys)))
    paragraphs = [meaning_paragraph(next((runs[label].get("target") for label in order), None))]
    stores = {label: (runs[label].get("metadata_store") or {}).get("label") or NA for label in order}
    paragraphs.append("Metadata store of each run: "
                      + "; ".join(f"{label}: {store}" for label, store in stores.items()) + ".")
    if mismatch:
        paragraphs.append("NOT A FAIR COMPARISON: the runs' participants shapes differ (" + "; ".join(mismatch)
                          + "), so a transaction touches different numbers of participants on each path.")
    else:
        paragraphs.append("Every run has the same participants shape (v4 partitions = v5 segments per topic, the "
                          "same topics, messages and acks per transaction).")
    for label in order:
        note = model_settings_note(runs[label].get("cost_ledger") or {})
        if note:
            paragraphs.append(f"{label}: {note}")
    table = Table.of(("path", "participants per topic", "topics", "topics per txn", "messages per txn",
                      "acks per txn"), rows, caption="Participants shape of each run")
    return Section("Fair comparison", "fairness", paragraphs=tuple(paragraphs), tables=(table,),
                   css="verdict invalid" if mismatch else "")


def _cost_ledger(compare: Mapping[str, Any]) -> Section:
    rows: list[tuple[Any, ...]] = []
    notes = []
    for label in compare["order"]:
        ledger = compare["paths"][label].get("cost_ledger") or {}
        if ledger.get("absent"):
            notes.append(f"{label}: {ledger.get('reason')}")
            continue
        rows += [(label, *row) for row in ledger_rows(ledger)]
        deferred = (ledger.get("deferred") or {}).get("note")
        if deferred:
            notes.append(f"{label}: {deferred}")
    paragraphs = ("Per committed transaction: measured against what each design predicts for the transactions that "
                  "run actually did (embedded/broker/{v4,v5}/README.md trace every operation to its source). Excess "
                  "over 10% is red with its biggest contributor; `+ ≤n` is what a design bounds but does not fix.",
                  *notes)
    return Section("Cost ledger", "cost-ledger", paragraphs=paragraphs,
                   tables=(Table.of(("path", "", "measured", "predicted", "excess", "biggest contributor", "basis"),
                                    rows),) if rows else ())


def _critical_path(compare: Mapping[str, Any]) -> Section:
    order = compare["order"]
    missing = [f"{label}: {(compare['paths'][label].get('critical_path') or {}).get('reason')}" for label in order
               if (compare["paths"][label].get("critical_path") or {}).get("absent")]
    return Section("Critical-path depth", "critical-path",
                   paragraphs=("Sequential durable writes and round trips per operation, measured by tracing the "
                               "cluster's requests (calls in parallel count once), beside each path's measured "
                               "latency.", *missing),
                   tables=(compare_depth_table(order, compare["paths"]),))


def compare_sections(compare: Mapping[str, Any], charts: Sequence[Chart]) -> list[Section]:
    by_name = {c.name: c for c in charts}
    sections = [_fairness(compare), _verdicts(compare), _throughput(compare, by_name), _latency(compare, by_name),
                _cost_ledger(compare), _critical_path(compare), _io(compare, by_name)]
    phases = _phases(compare)
    if phases is not None:
        sections.append(phases)
    sections.append(_inputs(compare))
    return sections


def compare_page(compare: Mapping[str, Any], out_dir: Path) -> Page:
    """Draw the comparison's charts into `out_dir`/plots and build its page."""
    charts = compare_charts(compare, out_dir / PLOTS)
    sections = compare_sections(compare, charts)
    what = compare.get("matrix") or out_dir.name
    title = f"txnbench comparison: {what}"
    intro = [f"{compare.get('kind') or 'runs'} over {', '.join(compare['order']) or 'no runs'}; scenario "
             f"{', '.join(compare.get('scenarios') or []) or NA}; baseline {compare.get('baseline') or NA}."]
    planted = [f"{label}: {', '.join(compare['paths'][label].get('planted_bugs') or [])}"
               for label in compare["order"] if compare["paths"][label].get("planted_bugs")]
    if planted:
        intro.insert(0, "⚠ PLANTED BUGS ON (deliberate faults of the txnbench self-test; these runs say nothing "
                        f"about Pulsar): {'; '.join(planted)}")
    footer = f"Generated {compare.get('generated', '')} from compare.json."
    return Page(title, intro, sections, footer, tuple(charts))


COMPARE_REPORT: ReportKind[Mapping[str, Any]] = ReportKind("compare", compare_page, keeps_json=True)
"""compare.json, compare.html, compare.md: `write_report(COMPARE_REPORT, compare, out_dir)`."""
