"""The fidelity report: the same scenarios on the embedded model and on real Pulsar, side by side.

Theory of operation. A fidelity report reads runs that are already analysed (each run's
`analysis/perf.json` and `analysis/results.json`) and never recomputes a number: every
figure is copied from perf.json together with the Prometheus selector (or "history") it
came from on that run's target. A run is placed by its manifest: `target` (the system:
`embedded` or `pulsar`), `scenario` (`bench`, `failover`, a chaos scenario) and `path`.

Rules that keep the comparison honest:

* **Not measured is never a number.** A figure whose metric the system does not export (real
  Pulsar has no critical-path spans, no `pulsar_txn_coordinator_recovery_seconds`, and its
  metadata store's fsyncs are not scraped) is `None` with the reason perf.json gives; no
  model number or estimate stands in for it, and its gap is not computed.
* **Design-level figures** (I/O per committed transaction, critical-path depth, coordinator
  failover and replay) get a relative gap `(embedded - pulsar) / pulsar`; it is flagged when
  its size is over `GAP_LIMIT` (20%) and the absolute difference is over the figure's floor
  (so 0.01 against 0.02 writes per transaction is not a finding). Real Pulsar is right: a
  flagged gap is fixed in the model or explained in `embedded/README.md`, "Fidelity".
* **Throughput ratios** between paths (each path over v4) are compared across the systems the
  same way, but they are not design-level: two shared cores decide absolute rates.
* **Each conclusion names the system it rests on**: `pulsar` when the real system measured it,
  `embedded` when only the model could (then it is a statement about the model), `both` when
  both measured it and agree.

Public API:

    FIGURES                                        the figures, in table order
    figures_of_run(perf, results, manifest) -> dict[key, dict]
    build_fidelity(runs) -> dict                   fidelity.json
    render_markdown(doc) -> str                    fidelity.md
    render_html(doc) -> str                        fidelity.html
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.history.schema import FaultEffect, recorded_effects
from harness.results import config_of

__all__ = ["FIGURES", "GAP_LIMIT", "SYSTEMS", "Figure", "RunRecord", "aims_at_coordinator", "build_fidelity",
           "figures_of_run", "relative_gap", "render_html", "render_markdown"]

GAP_LIMIT = 0.20
SYSTEMS = ("embedded", "pulsar")
PATH_ORDER = ("v4", "v4-batched", "v5")
FIDELITY_SCHEMA = 1
README_SECTION = "embedded/README.md, \"Fidelity\""


@dataclass(frozen=True)
class Figure:
    """One row of the per-path table: which scenario it comes from and how it is compared."""

    key: str
    title: str
    scenario: str            # bench, failover or chaos
    design_level: bool       # compared with a flagged relative gap
    floor: float = 0.0       # an absolute difference at or under this is not a gap
    digits: int = 2


FIGURES: tuple[Figure, ...] = (
    Figure("metadata_store", "metadata store", "bench", False),
    Figure("committed_txn_per_s", "committed txn/s", "bench", False),
    Figure("commit_p50_ms", "commit p50 (ms)", "bench", False, digits=1),
    Figure("commit_p99_ms", "commit p99 (ms)", "bench", False, digits=1),
    Figure("e2e_p99_ms", "end-to-end p99 (ms)", "bench", False, digits=1),
    Figure("ledger_entries_per_txn", "ledger entries / txn", "bench", True, floor=0.05),
    Figure("metadata_writes_per_txn", "metadata writes / txn", "bench", True, floor=0.05),
    Figure("ledger_fsyncs_per_txn", "ledger journal fsyncs / txn", "bench", True, floor=0.05),
    Figure("metadata_fsyncs_per_txn", "metadata-store fsyncs / txn", "bench", True, floor=0.05),
    Figure("commit_depth_writes", "critical path of a commit: sequential durable writes", "bench", True,
           floor=0.25),
    Figure("commit_depth_round_trips", "critical path of a commit: sequential round trips", "bench", True,
           floor=0.25),
    Figure("failover_outage_s", "failover: coordinator outage (s)", "failover", True, floor=1.0, digits=1),
    Figure("replay_s", "failover: coordinator recovery / replay (s)", "failover", True, floor=0.5, digits=3),
    Figure("failover_committed_txn_per_s", "failover: committed txn/s over the faults", "failover", False),
    Figure("chaos_committed_txn_per_s", "chaos: committed txn/s over the faults", "chaos", False),
)
_BY_KEY = {f.key: f for f in FIGURES}
VERDICT_SCENARIOS = ("bench", "failover", "chaos")

# Where each figure comes from in perf.json, and the metric behind it on each system.
_HISTORY = "history (txnbench's own operation log)"
_SOURCES: dict[str, dict[str, str]] = {
    "ledger_entries_per_txn": {"embedded": "bookkeeper_server_ADD_ENTRY_count (our ledger store)",
                               "pulsar": "bookkeeper_server_ADD_ENTRY_count (the bookie)"},
    "metadata_writes_per_txn": {
        "embedded": 'txnbench_metadata_ops_total{op=~"put|delete|delete_range"} (our metadata store)',
        "pulsar": 'pulsar_metadata_store_ops_latency_ms_count{type=~"put|del",status="success"} (the brokers)'},
    "ledger_fsyncs_per_txn": {"embedded": "bookie_journal_JOURNAL_SYNC_count (our ledger store)",
                              "pulsar": "bookie_journal_JOURNAL_SYNC_count (the bookie)"},
    "metadata_fsyncs_per_txn": {"embedded": "txnbench_metadata_fsyncs_total (our metadata store)",
                                "pulsar": "none: the target scrapes no metadata-store (ZooKeeper/Oxia) fsync count"},
    "commit_depth_writes": {"embedded": 'txnbench_request_span_writes_total{request="END_TXN"} (+ participants)',
                            "pulsar": "none: real brokers export no request spans"},
    "commit_depth_round_trips": {
        "embedded": 'txnbench_request_span_round_trips_total{request="END_TXN"} (+ participants)',
        "pulsar": "none: real brokers export no request spans"},
    "replay_s": {"embedded": "pulsar_txn_coordinator_recovery_seconds (embedded brokers)",
                 "pulsar": "pulsar_txn_coordinator_recovery_seconds: not exported by Pulsar 5.0.1"},
}


@dataclass(frozen=True)
class RunRecord:
    """An analysed run: where it ran and what its analysis says."""

    system: str
    scenario: str           # the scenario group: bench, failover or chaos
    path: str
    run_dir: str
    perf: Mapping[str, Any]
    results: Mapping[str, Any]
    manifest: Mapping[str, Any]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _measured(value: float | None, source: str) -> dict[str, Any]:
    return {"value": value, "source": source, "measured": True}


def _absent(source: str, reason: str) -> dict[str, Any]:
    return {"value": None, "source": source, "measured": False, "reason": reason}


def _io(perf: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    metric = ((perf.get("io") or {}).get("metrics") or {}).get(key) or {}
    value = _number((perf.get("io_per_txn") or {}).get(key))
    if value is None:
        return _absent(source, str(metric.get("reason") or f"perf.json has no {key}"))
    return _measured(value, source)


def _latency(perf: Mapping[str, Any], f: str, q: str) -> dict[str, Any]:
    value = _number(((perf.get("latency_ms") or {}).get(f) or {}).get(q))
    return _measured(value, _HISTORY) if value is not None else _absent(_HISTORY, f"no {f} latency in the window")


def _depth(perf: Mapping[str, Any], what: str, source: str) -> dict[str, Any]:
    block = perf.get("critical_path") or {}
    if block.get("absent"):
        return _absent(source, str(block.get("reason")))
    value = _number(((block.get("operations") or {}).get("txn-commit") or {}).get(what))
    return _measured(value, source) if value is not None else _absent(source, "no END_TXN span in the window")


def aims_at_coordinator(selector: str) -> bool:
    """True for a scenario `target` that picks the broker hosting a transaction coordinator:
    `coordinator`, `coordinator:<n>`, `coordinator:random`, `coordinator:trigger`,
    `broker:coordinator` (faults/selectors.py's grammar; the history keeps the text as
    `extra.selector`, and the analysis does not import the faults)."""
    head, _, tail = selector.strip().partition(":")
    return head == "coordinator" or (head == "broker" and tail == "coordinator")


def _failover(perf: Mapping[str, Any]) -> dict[str, Any]:
    """Experiment 3's outage: the slowest coordinator's, after the stopping faults aimed at a coordinator.

    Why only those: every coordinator also waits out a stopped store or another broker's stop, and
    a scenario that stacks such faults beside the kill would otherwise report the slowest of them
    as the failover. A perf.json written before the faults kept their selector names none: there
    every stopping fault counts, as it did, and the source says so."""
    stopping = [f for f in perf.get("faults") or []
                if FaultEffect.STOPS in recorded_effects(f) and f.get("injected", True)]
    selectors_kept = all("selector" in f for f in stopping)
    aimed = ([f for f in stopping if aims_at_coordinator(str(f.get("selector") or ""))] if selectors_kept
             else stopping)
    outages = [o for o in (_number(f.get("coordinator_outage_s")) for f in aimed) if o is not None]
    if not outages:
        return _absent(_HISTORY, "no fault aimed at a coordinator (target coordinator or broker:coordinator) "
                                 "stopped it with a measured outage in the run")
    source = _HISTORY + ": fault start to the stopped coordinator's next commit or abort"
    if not selectors_kept:
        source += " (this perf.json names no fault's target: the slowest of every stopping fault)"
    return _measured(max(outages), source)


def _replay(perf: Mapping[str, Any], source: str) -> dict[str, Any]:
    block = perf.get("coordinator_recovery_s") or {}
    if block.get("absent"):
        return _absent(source, str(block.get("reason")))
    # the gauge holds the last recovery: at the end of the faults (or recovery) phase, the one after the kill
    for phase in ("faults", "recovery"):
        value = _number(block.get(phase))
        if value is not None:
            return _measured(value, source + f", at the end of the {phase} phase")
    return _absent(source, "no recovery gauge at the end of the faults or recovery phase")


def _phase_rate(perf: Mapping[str, Any], phase: str) -> dict[str, Any]:
    value = _number(((perf.get("phases") or {}).get(phase) or {}).get("committed_txn_per_s"))
    return _measured(value, _HISTORY) if value is not None else _absent(_HISTORY, f"no {phase} phase")


def design_range(perf: Mapping[str, Any], settings: Mapping[str, Any], what: str) -> dict[str, Any] | None:
    """What the design predicts per committed transaction for the run's own transactions and store.

    From the run's history shape (`cost_ledger.shape`) by the cost ledger's design functions
    (`analysis.perf.ledger`), with the store the run used (`metadata_store.kind`: on ZooKeeper
    sequence keys are emulated). `what` is `metadata_writes` (low: the exact writes, high: plus
    every write the design bounds) or `ledger_entries` (data + coordinator log + pending-ack log;
    cursor and snapshot entries are not predicted). None without a shape.
    """
    from analysis.perf.ledger import Shape, design_v4, design_v5

    ledger = perf.get("cost_ledger") or {}
    shape_counts, committed = ledger.get("shape"), int(ledger.get("committed_txns") or 0)
    txn_path = perf.get("path")
    if not shape_counts or committed <= 0 or txn_path not in PATH_ORDER:
        return None
    shape = Shape.of(shape_counts)
    store_kind = (perf.get("metadata_store") or {}).get("kind")
    design = design_v5(shape, settings, store_kind) if txn_path == "v5" else design_v4(shape, txn_path == "v4-batched")
    if what == "metadata_writes":
        low = float(sum(design["metadata"].values()))
        high = low + float(sum(design["bounds"].values()))
    else:
        total = float(sum(design["ledger"].values()))
        low = float(design["ledger"]["data"]) if design.get("ledger_is_bound") else total
        high = total
    return {"low": round(low / committed, 3), "high": round(high / committed, 3), "store": store_kind or "unknown"}


def figures_of_run(perf: Mapping[str, Any], system: str, scenario: str,
                   settings: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The figures one run supplies (its scenario's rows of FIGURES), each with its source; the I/O
    figures also carry `design`, the design's prediction for the run's own transactions and store."""
    src = {k: v.get(system, v["pulsar"]) for k, v in _SOURCES.items()}
    out: dict[str, dict[str, Any]] = {}
    if scenario == "bench":
        rate = _number(perf.get("committed_txn_per_s"))
        out["committed_txn_per_s"] = _measured(rate, _HISTORY) if rate is not None else _absent(_HISTORY, "no rate")
        out["commit_p50_ms"] = _latency(perf, "txn-commit", "p50")
        out["commit_p99_ms"] = _latency(perf, "txn-commit", "p99")
        out["e2e_p99_ms"] = _latency(perf, "end-to-end", "p99")
        out["ledger_entries_per_txn"] = _io(perf, "ledger_entries", src["ledger_entries_per_txn"])
        writes_key = "metadata_writes" if system == "embedded" else "broker_metadata_writes"
        out["metadata_writes_per_txn"] = _io(perf, writes_key, src["metadata_writes_per_txn"])
        out["ledger_fsyncs_per_txn"] = _io(perf, "ledger_fsyncs", src["ledger_fsyncs_per_txn"])
        if system == "embedded":
            out["metadata_fsyncs_per_txn"] = _io(perf, "metadata_fsyncs", src["metadata_fsyncs_per_txn"])
        else:
            out["metadata_fsyncs_per_txn"] = _absent(src["metadata_fsyncs_per_txn"],
                                                     "the pulsar target's metadata store exports no fsync count")
        for key, what in (("metadata_writes_per_txn", "metadata_writes"), ("ledger_entries_per_txn", "ledger_entries")):
            predicted = design_range(perf, settings or {}, what)
            if predicted is not None:
                out[key]["design"] = predicted
        store = perf.get("metadata_store") or {}
        out["metadata_store"] = {"value": None, "label": store.get("label") or store.get("kind") or "unknown",
                                 "kind": store.get("kind"), "source": "manifest.json metadata_store",
                                 "measured": True}
        out["commit_depth_writes"] = _depth(perf, "writes", src["commit_depth_writes"])
        out["commit_depth_round_trips"] = _depth(perf, "round_trips", src["commit_depth_round_trips"])
    elif scenario == "failover":
        out["failover_outage_s"] = _failover(perf)
        out["replay_s"] = _replay(perf, src["replay_s"])
        out["failover_committed_txn_per_s"] = _phase_rate(perf, "faults")
    elif scenario == "chaos":
        out["chaos_committed_txn_per_s"] = _phase_rate(perf, "faults")
    return out


def verdict_of(results: Mapping[str, Any]) -> str:
    """valid, unknown, or `invalid: class n, ...` from results.json."""
    valid = results.get("valid")
    if valid is True:
        return "valid"
    if valid is False:
        found = results.get("anomalies") or {}
        return "invalid: " + ", ".join(f"{k} {(v or {}).get('count', '?')}" for k, v in sorted(found.items()))
    return "unknown" if results else "not checked"


def relative_gap(embedded: float | None, pulsar: float | None, floor: float = 0.0) -> dict[str, Any]:
    """`(embedded - pulsar) / pulsar` and whether it is over GAP_LIMIT (and the absolute floor).

    None when either side is not measured. A real value of 0 gives no ratio: then only a
    difference over the floor is flagged.
    """
    if embedded is None or pulsar is None:
        return {"gap": None, "flagged": False, "reason": "not measured on both systems"}
    diff = embedded - pulsar
    over_floor = abs(diff) > floor
    if pulsar == 0:
        return {"gap": None, "flagged": over_floor, "difference": round(diff, 4),
                "reason": "real value is 0" + ("" if over_floor else "; the difference is under the floor")}
    gap = diff / pulsar
    return {"gap": round(gap, 4), "difference": round(diff, 4), "flagged": abs(gap) > GAP_LIMIT and over_floor}


def _group(runs: Iterable[RunRecord]) -> dict[tuple[str, str, str], RunRecord]:
    """(system, scenario, path) -> the newest run of it (later runs in the input win)."""
    out: dict[tuple[str, str, str], RunRecord] = {}
    for run in runs:
        out[(run.system, run.scenario, run.path)] = run
    return out


def _paths(grouped: Mapping[tuple[str, str, str], RunRecord]) -> list[str]:
    seen = {k[2] for k in grouped}
    return [p for p in PATH_ORDER if p in seen] + sorted(seen - set(PATH_ORDER))


def _ratios(table: Mapping[str, Mapping[str, Any]], paths: Sequence[str]) -> list[dict[str, Any]]:
    """Committed txn/s of each path over v4's, per system, and how far the systems' ratios are apart."""
    out = []
    base = "v4"
    for txn_path in paths:
        if txn_path == base or base not in table:
            continue
        entry: dict[str, Any] = {"paths": f"{txn_path} / {base}"}
        for system in SYSTEMS:
            num = table[txn_path]["figures"].get("committed_txn_per_s", {}).get(system, {}).get("value")
            den = table[base]["figures"].get("committed_txn_per_s", {}).get(system, {}).get("value")
            entry[system] = round(num / den, 3) if num is not None and den else None
        entry.update(relative_gap(entry["embedded"], entry["pulsar"]))
        out.append(entry)
    return out


def _rests_on(embedded: Any, pulsar: Any) -> str:
    if pulsar is not None and embedded is not None:
        return "both"
    return "pulsar" if pulsar is not None else ("embedded" if embedded is not None else "neither")


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "not measured"
    return f"{value:,.{digits}f}"


def _conclusions(table: Mapping[str, Mapping[str, Any]], ratios: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the report concludes, each with the system it rests on (real Pulsar wherever it measured)."""
    out: list[dict[str, Any]] = []
    for entry in ratios:
        emb, real = entry["embedded"], entry["pulsar"]
        if real is None and emb is None:
            continue
        verb = "agrees" if entry["gap"] is not None and not entry["flagged"] else "disagrees"
        text = f"throughput {entry['paths']}: {_fmt(real, 2)} on real Pulsar"
        if emb is not None:
            text += f"; the model's {_fmt(emb, 2)} {verb if real is not None else 'is all there is'}"
            if real is not None and verb == "disagrees":
                same = (emb > 1) == (real > 1)
                text += " in size, not in direction" if same else " in direction: the systems rank the paths " \
                                                                      "differently"
        out.append({"topic": f"throughput {entry['paths']}", "text": text,
                    "rests_on": "pulsar" if real is not None else "embedded", "flagged": bool(entry["flagged"])})
    for txn_path, row in table.items():
        for key, cell in row["figures"].items():
            spec = _BY_KEY[key]
            if not spec.design_level:
                continue
            emb, real = cell["embedded"].get("value"), cell["pulsar"].get("value")
            rests = _rests_on(emb, real)
            if rests == "neither":
                continue
            if rests == "embedded":
                text = (f"{txn_path} {spec.title} = {_fmt(emb, spec.digits)} in the model only; real Pulsar: not "
                        f"measured ({cell['pulsar'].get('reason')}), so this is a statement about the model")
            elif rests == "pulsar":
                text = f"{txn_path} {spec.title} = {_fmt(real, spec.digits)} on real Pulsar (the model measures none)"
            else:
                gap = cell["gap"]
                pct = f"{gap['gap'] * 100:+.0f}%" if gap.get("gap") is not None else "n/a"
                state = f"gap {pct}, over 20%: see {README_SECTION}" if gap["flagged"] else f"gap {pct}: agree"
                text = (f"{txn_path} {spec.title}: real Pulsar {_fmt(real, spec.digits)}, model "
                        f"{_fmt(emb, spec.digits)} ({state})")
                rests = "pulsar" if gap["flagged"] else "both"
                design = cell["pulsar"].get("design")
                if design:
                    inside = design["low"] * (1 - GAP_LIMIT) <= real <= design["high"] * (1 + GAP_LIMIT)
                    text += (f"; real Pulsar is {'within' if inside else 'more than'} 20% of the design's prediction "
                             f"for its own transactions on {design['store']} ({design['low']:g} to {design['high']:g})")
            out.append({"topic": f"{txn_path} {key}", "text": text, "rests_on": rests,
                        "flagged": bool(cell.get("gap", {}).get("flagged"))})
    return out


def build_fidelity(runs: Iterable[RunRecord], *, inputs: Sequence[str] = (), command: str | None = None,
                   generated: str | None = None) -> dict[str, Any]:
    """fidelity.json: per path, each figure on each system with its source, the gaps, ratios, conclusions."""
    grouped = _group(runs)
    paths = _paths(grouped)
    table: dict[str, dict[str, Any]] = {}
    for txn_path in paths:
        figures: dict[str, dict[str, Any]] = {}
        verdicts: dict[str, dict[str, str]] = {}
        runs_of: dict[str, dict[str, str]] = {}
        for spec in FIGURES:
            figures[spec.key] = {}
        for system in SYSTEMS:
            for scenario in VERDICT_SCENARIOS:
                run = grouped.get((system, scenario, txn_path))
                verdicts.setdefault(scenario, {})[system] = verdict_of(run.results) if run else "not run"
                if run:
                    runs_of.setdefault(scenario, {})[system] = run.run_dir
                config = config_of(run.manifest) if run else None
                settings = config.cluster.settings if config else {}
                supplied = figures_of_run(run.perf, system, scenario, settings) if run else {}
                for spec in FIGURES:
                    if spec.scenario != scenario:
                        continue
                    figures[spec.key][system] = supplied.get(spec.key) or _absent(
                        "-", f"no {scenario} run of {txn_path} on {system}")
        for spec in FIGURES:
            cell = figures[spec.key]
            if spec.design_level:
                cell["gap"] = relative_gap(cell["embedded"].get("value"), cell["pulsar"].get("value"), spec.floor)
        table[txn_path] = {"figures": figures, "verdicts": verdicts, "runs": runs_of}
    ratios = _ratios(table, paths)
    flagged = [{"path": p, "figure": k, "title": _BY_KEY[k].title, **table[p]["figures"][k]["gap"],
                "embedded": table[p]["figures"][k]["embedded"].get("value"),
                "pulsar": table[p]["figures"][k]["pulsar"].get("value")}
               for p in paths for k in table[p]["figures"]
               if _BY_KEY[k].design_level and table[p]["figures"][k]["gap"]["flagged"]]
    return {
        "schema": FIDELITY_SCHEMA, "generated": generated, "command": command, "inputs": list(inputs),
        "gap_limit": GAP_LIMIT, "paths": paths,
        "figures": [{"key": f.key, "title": f.title, "scenario": f.scenario, "design_level": f.design_level,
                     "floor": f.floor} for f in FIGURES],
        "table": table, "throughput_ratios": ratios, "flagged_gaps": flagged,
        "conclusions": _conclusions(table, ratios),
        "explanations": README_SECTION,
    }


# ---- rendering -----------------------------------------------------------------------------------

def _cell_text(cell: Mapping[str, Any], digits: int) -> str:
    if "label" in cell:
        return str(cell["label"]).split(" at ")[0]
    text = _fmt(cell.get("value"), digits) if cell.get("measured") else "not measured"
    design = cell.get("design")
    if design:
        span = f"{design['low']:g}" if design["low"] == design["high"] else f"{design['low']:g} to {design['high']:g}"
        text += f" (design for these txns on {design['store']}: {span})"
    return text


def _gap_text(gap: Mapping[str, Any] | None) -> str:
    if not gap:
        return ""
    if gap.get("gap") is None:
        if gap.get("reason") == "not measured on both systems":
            return "n/a"
        return ("**flagged** " if gap.get("flagged") else "") + str(gap.get("reason"))
    text = f"{gap['gap'] * 100:+.0f}%"
    return f"**{text}** ⚑" if gap.get("flagged") else text


def _rows(doc: Mapping[str, Any], txn_path: str) -> list[list[str]]:
    row = doc["table"][txn_path]
    out: list[list[str]] = []
    for scenario in VERDICT_SCENARIOS:
        v = row["verdicts"].get(scenario, {})
        out.append([f"{scenario} verdict", v.get("embedded", "not run"), v.get("pulsar", "not run"), "", ""])
    for spec in FIGURES:
        cell = row["figures"][spec.key]
        pulsar_src = cell["pulsar"].get("source", "")
        if not cell["pulsar"].get("measured"):
            pulsar_src = f"not measured: {cell['pulsar'].get('reason')}"
        out.append([spec.title + (" †" if spec.design_level else ""), _cell_text(cell["embedded"], spec.digits),
                    _cell_text(cell["pulsar"], spec.digits), _gap_text(cell.get("gap")), pulsar_src])
    return out


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def esc(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return lines


_HEADER = ("figure", "embedded (model)", "pulsar (real)", "gap (model vs real)", "real-side metric")


def render_markdown(doc: Mapping[str, Any]) -> str:
    """fidelity.md: one side-by-side table per path, the ratios, the flagged gaps, the conclusions."""
    lines = ["# Fidelity: the embedded model against real Apache Pulsar", ""]
    if doc.get("command"):
        lines += [f"Command: `{doc['command']}`", ""]
    if doc.get("generated"):
        lines += [f"Generated {doc['generated']} from: " + ", ".join(f"`{i}`" for i in doc.get("inputs", [])), ""]
    lines += ["† design-level figure: a gap over 20% (and over the figure's floor) is flagged ⚑ and is fixed in "
              f"the model or explained in {doc.get('explanations', README_SECTION)}. Gap = (model - real) / real. "
              "\"not measured\" means the system exports no such metric: no model number stands in for it.", ""]
    for txn_path in doc["paths"]:
        lines += [f"## {txn_path}", ""]
        lines += _md_table(_HEADER, _rows(doc, txn_path))
        runs = doc["table"][txn_path]["runs"]
        lines += ["", "Runs: " + "; ".join(f"{sc} {sys}: `{d}`" for sc, by in runs.items() for sys, d in by.items()),
                  ""]
    if doc["throughput_ratios"]:
        lines += ["## Throughput ratios between paths (committed txn/s over v4's)", ""]
        lines += _md_table(("paths", "embedded (model)", "pulsar (real)", "gap"),
                           [[r["paths"], _fmt(r["embedded"], 3), _fmt(r["pulsar"], 3), _gap_text(r)]
                            for r in doc["throughput_ratios"]])
        lines.append("")
    lines += ["## Design-level gaps over 20%", ""]
    if doc["flagged_gaps"]:
        lines += _md_table(("path", "figure", "model", "real", "gap"),
                           [[g["path"], g["title"], _fmt(g["embedded"]), _fmt(g["pulsar"]), _gap_text(g)]
                            for g in doc["flagged_gaps"]])
        lines += ["", f"Each is fixed in the model or explained in {doc.get('explanations', README_SECTION)}.", ""]
    else:
        lines += ["None among the figures measured on both systems.", ""]
    lines += ["## Conclusions and the system each rests on", ""]
    lines += _md_table(("conclusion", "rests on"), [[c["text"], c["rests_on"]] for c in doc["conclusions"]])
    return "\n".join(lines) + "\n"


def render_html(doc: Mapping[str, Any]) -> str:
    """fidelity.html: the same tables as fidelity.md, as a standalone page."""
    def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c)).replace('**', '')}</td>" for c in r) + "</tr>"
                       for r in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>txnbench fidelity</title><style>",
             "body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}"
             "th{background:#eee}</style></head><body>",
             "<h1>Fidelity: the embedded model against real Apache Pulsar</h1>"]
    if doc.get("command"):
        parts.append(f"<p>Command: <code>{html.escape(doc['command'])}</code></p>")
    parts.append(f"<p>† design-level: a gap over 20% is flagged ⚑ and fixed or explained in "
                 f"{html.escape(str(doc.get('explanations', README_SECTION)))}.</p>")
    for txn_path in doc["paths"]:
        parts += [f"<h2>{html.escape(txn_path)}</h2>", table(_HEADER, _rows(doc, txn_path))]
    if doc["throughput_ratios"]:
        parts += ["<h2>Throughput ratios between paths</h2>",
                  table(("paths", "embedded (model)", "pulsar (real)", "gap"),
                        [[r["paths"], _fmt(r["embedded"], 3), _fmt(r["pulsar"], 3), _gap_text(r)]
                         for r in doc["throughput_ratios"]])]
    parts += ["<h2>Conclusions and the system each rests on</h2>",
              table(("conclusion", "rests on"), [[c["text"], c["rests_on"]] for c in doc["conclusions"]]),
              "</body></html>"]
    return "\n".join(parts) + "\n"


# ---- reading analysed runs ------------------------------------------------------------------------

def scenario_group(scenario: str | None) -> str | None:
    """The report's scenario group of a run's scenario name: bench, failover, chaos (any chaos-*), or None."""
    if not scenario:
        return None
    if scenario in ("bench", "failover"):
        return scenario
    return "chaos" if scenario.startswith("chaos") else None
