"""The design-level sections of every report: the cost ledger and the critical-path depth.

Both come from perf.json (`cost_ledger`, `critical_path`, analysis.perf.ledger and
analysis.perf.depth). On the embedded target they are the comparison's design-level
result: throughput there is the reference implementation's CPU cost on the machine that
ran it, while the ledger counts what each design writes and the depth how many durable
writes and round trips a request waits for, which no Python speed changes. On compose or
external targets the same sections show what those clusters expose (usually nothing of
the spans, which only our brokers export).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis.report.model import NA, Cell, Section, Table, fmt_count, fmt_ms, fmt_num

__all__ = ["cost_ledger_section", "critical_path_section", "meaning_paragraph", "model_settings_note"]

_OPS = (("txn-open", "open"), ("send", "send"), ("ack", "ack"), ("txn-commit", "commit"))


def meaning_paragraph(target: str | None) -> str:
    """What the numbers mean on this target."""
    if (target or "embedded") == "embedded":
        return ("On the embedded target, throughput and latency reflect the reference implementation's CPU cost on "
                "this machine (a Python model of each design, on shared cores). The cost ledger (what each design "
                "writes per committed transaction, against what its design predicts) and the critical-path depth "
                "(sequential durable writes and round trips per request, traced in the cluster) are the "
                "design-level results.")
    return (f"On the {target} target, throughput and latency are the real cluster's; the cost ledger and the "
            "critical-path depth show what that cluster exposes (its metrics; request spans only where the brokers "
            "export them).")


def model_settings_note(ledger: Mapping[str, Any]) -> str | None:
    on = ledger.get("model_settings") or []
    if not on:
        return None
    return ("This run turned on behaviour no source mandates (or the PIP text where Pulsar 5.0 differs), so its "
            "numbers depend on it: " + "; ".join(f"{m['setting']}={m['value']} ({m['meaning']})" for m in on) + ".")


def _excess_cell(row: Mapping[str, Any]) -> Cell:
    """Measured against the effective prediction: red above +10%, amber below -10% (predicted work missing)."""
    excess = row.get("excess")
    if row.get("predicted") is None:
        return Cell("—")
    if excess is None:
        return Cell("over a prediction of 0", "bad") if row.get("flagged") else Cell(NA)
    css = "bad" if row.get("flagged") else "warn" if excess < -0.10 else "good"
    return Cell(f"{excess * 100:+.1f}%", css)


def ledger_rows(ledger: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    rows = []
    for row in (ledger.get("rows") or {}).values():
        predicted = fmt_num(row.get("predicted"))
        if row.get("bound"):
            predicted += f" + ≤{fmt_num(row['bound'])} = {fmt_num(row.get('effective_prediction'))}"
        rows.append((row.get("title", ""), Cell(fmt_num(row.get("measured")), "bad" if row.get("flagged") else ""),
                     predicted if row.get("predicted") is not None else "—", _excess_cell(row),
                     Cell(row.get("contributor") or "", "bad" if row.get("flagged") else ""), row.get("basis", "")))
    return rows


def cost_ledger_section(ledger: Mapping[str, Any], *, anchor: str = "cost-ledger") -> Section:
    if not ledger or ledger.get("absent"):
        return Section("Cost ledger", anchor, paragraphs=(str((ledger or {}).get("reason", "no cost ledger")),))
    shape = ledger.get("shape") or {}
    txns = shape.get("committed", 0) + shape.get("aborted", 0)
    paragraphs = [
        f"Per committed transaction in the {ledger.get('window')} window ({fmt_count(ledger.get('committed_txns'))} "
        f"committed, {fmt_count(shape.get('aborted'))} aborted; aborted work is charged to the committed ones on "
        "both sides). Predicted: the design's count for the transactions actually run "
        f"({fmt_count(shape.get('sends_committed', 0) + shape.get('sends_aborted', 0))} transactional sends, "
        f"{fmt_count(shape.get('acks_committed', 0) + shape.get('acks_aborted', 0))} acks, "
        f"{fmt_count(shape.get('write_participants_committed', 0) + shape.get('write_participants_aborted', 0))} "
        f"written and {fmt_count(shape.get('ack_participants_committed', 0) + shape.get('ack_participants_aborted', 0))}"
        f" acked participants over {fmt_count(txns)} transactions, {fmt_count(shape.get('plain_sends'))} "
        f"non-transactional sends), by the per-operation costs traced to their sources in {ledger.get('source')}. "
        "`+ ≤n = e`: n is what the design bounds but does not fix (the v5 watermark), counted as measured up to "
        "the bound, e the prediction the measurement is held to. Excess over 10% is red, with its biggest "
        "contributor; under -10% (predicted work that did not happen in the window) amber.",
    ]
    deferred = ledger.get("deferred") or {}
    if deferred.get("note"):
        paragraphs.append(str(deferred["note"]))
    elif deferred.get("gc_retention_s") is not None:
        paragraphs.append(f"Deferred work: v5 collects decided headers {fmt_num(deferred['gc_retention_s'])} s after "
                          "the decision, inside the window, so the collection of the window's transactions is "
                          "measured with them.")
    note = model_settings_note(ledger)
    if note:
        paragraphs.append(note)
    table = Table.of(("", "measured", "predicted", "excess", "biggest contributor", "basis"), ledger_rows(ledger),
                     caption="Cost ledger, per committed transaction")
    families = ledger.get("families") or {}
    fam_rows = [(name, fmt_num(v.get("measured")), fmt_num(v.get("predicted")) if v.get("predicted") is not None
                 else ("≤" + fmt_num(v.get("bound")) if v.get("bound") is not None else "—"))
                for name, v in sorted(families.items())]
    tables = [table]
    if fam_rows:
        tables.append(Table.of(("metadata write: kind, record family", "measured", "predicted"), fam_rows,
                               caption="Metadata writes by kind and record family, per committed transaction"))
    return Section("Cost ledger", anchor, paragraphs=tuple(paragraphs), tables=tuple(tables))


def depth_rows(path_label: str | None, critical: Mapping[str, Any], latency: Mapping[str, Any]
               ) -> list[tuple[Any, ...]]:
    rows = []
    ops = critical.get("operations") or {}
    for op, label in _OPS:
        entry = ops.get(op)
        lat = latency.get(op) or {}
        prefix = (path_label,) if path_label is not None else ()
        if entry is None:
            rows.append((*prefix, label, NA, NA, NA, fmt_ms(lat.get("p50")), fmt_ms(lat.get("p99"))))
            continue
        rows.append((*prefix, label, " + ".join(entry.get("requests") or []), fmt_num(entry.get("writes")),
                     fmt_num(entry.get("round_trips")), fmt_ms(lat.get("p50")), fmt_ms(lat.get("p99"))))
    return rows


def critical_path_section(critical: Mapping[str, Any], latency: Mapping[str, Any], *,
                          anchor: str = "critical-path") -> Section:
    if not critical or critical.get("absent"):
        return Section("Critical-path depth", anchor,
                       paragraphs=(str((critical or {}).get("reason", "no request spans")),))
    paragraphs = ("Sequential durable writes and round trips on the path of each operation, measured: every broker "
                  "traces its transactional requests and counts the longest chain of calls (metadata, ledger, other "
                  "brokers) that waited for each other; calls in parallel count once. Mean over the window's "
                  "requests, beside the operation's measured latency.",)
    table = Table.of(("operation", "requests", "sequential durable writes", "sequential round trips",
                      "latency p50 (ms)", "latency p99 (ms)"), depth_rows(None, critical, latency),
                     caption="Critical-path depth per operation")
    req_rows = [(name, fmt_count(m.get("requests")), fmt_num(m.get("writes")), fmt_num(m.get("round_trips")))
                for name, m in (critical.get("requests") or {}).items()]
    return Section("Critical-path depth", anchor, paragraphs=paragraphs,
                   tables=(table, Table.of(("request", "traced", "writes (mean)", "round trips (mean)"), req_rows,
                                           caption="Per request kind")))


def compare_depth_table(labels: Sequence[str], runs: Mapping[str, Mapping[str, Any]]) -> Table:
    rows: list[tuple[Any, ...]] = []
    for label in labels:
        run = runs[label]
        rows += depth_rows(label, run.get("critical_path") or {}, run.get("latency_ms") or {})
    return Table.of(("path", "operation", "requests", "sequential durable writes", "sequential round trips",
                     "latency p50 (ms)", "latency p99 (ms)"), rows, caption="Critical-path depth per operation")
