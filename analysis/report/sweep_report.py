"""The concurrency sweep's report: sweep.json, sweep.md, sweep.html and plots/sweep_*.png.

One line per path against the number of users: where a design stops scaling,
what its latency costs on the way there, and whether its I/O per transaction
falls as concurrency rises (batching) or stays flat. Each point links back to
the level's full comparison (levels/u<users>/compare.html).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.report.charts import Chart, color_for, empty, log_y, new_figure, save
from analysis.report.model import (
    ABSENT,
    NA,
    Cell,
    Section,
    Table,
    fmt_count,
    fmt_ms,
    fmt_num,
    fmt_s,
)
from analysis.report.writer import PLOTS, Page, ReportKind
from analysis.sweep import SATURATION_GAIN, SWEEP_IO_KEYS

__all__ = ["SWEEP_REPORT", "sweep_charts", "sweep_page"]


def _series(sweep: Mapping[str, Any]) -> list[tuple[int, str, list[Mapping[str, Any]]]]:
    return [(i, txn_path, list(sweep["series"][txn_path])) for i, txn_path in enumerate(sweep.get("order") or [])]


def _xy(points: Sequence[Mapping[str, Any]], value: Any) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for point in points:
        v = value(point)
        if v is not None:
            xs.append(int(point["users"]))
            ys.append(float(v))
    return xs, ys


def _users_axis(ax: Any, levels: Sequence[int]) -> None:
    if len(levels) > 1 and max(levels) / max(min(levels), 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(list(levels), [str(u) for u in levels])
    ax.set_xlabel("users (concurrent transactions)")
    ax.grid(alpha=0.3)


def _two_panels(sweep: Mapping[str, Any], directory: Path, panels: Sequence[tuple[str, Callable[[Any], Any]]],
                suptitle: str, name: str, title: str, alt: str) -> Chart:
    """Two side-by-side panels, each one line per path of a point's value against users."""
    fig = new_figure(11, 4.5)
    axes = fig.subplots(1, 2)
    series = _series(sweep)
    for ax, (panel_title, value) in zip(axes, panels, strict=True):
        if not series:
            empty(ax, "no runs")
            continue
        for i, txn_path, points in series:
            xs, ys = _xy(points, value)
            ax.plot(xs, ys, marker="o", color=color_for(txn_path, i), label=txn_path)
        _users_axis(ax, sweep.get("levels") or [])
        ax.set_ylim(bottom=0)
        ax.set_title(panel_title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(suptitle, fontsize=11)
    return save(fig, directory, name, title, alt)


def throughput_chart(sweep: Mapping[str, Any], directory: Path) -> Chart:
    return _two_panels(sweep, directory, (("committed transactions / s", lambda p: p.get("committed_txn_per_s")),
                                          ("messages / s", lambda p: p.get("msgs_per_s"))),
                       "Throughput against concurrency (measured window of each run)", "sweep_throughput",
                       "Throughput against concurrency",
                       "Lines of committed transactions per second and messages per second per path against users")


def latency_chart(sweep: Mapping[str, Any], directory: Path) -> Chart:
    fig = new_figure(11, 4.5)
    axes = fig.subplots(1, 2)
    series = _series(sweep)
    for ax, op in ((axes[0], "txn-commit"), (axes[1], "end-to-end")):
        if not series:
            empty(ax, "no runs")
            continue
        values: list[float] = []
        for i, txn_path, points in series:
            for key, style in (("p50", "--"), ("p99", "-")):
                xs, ys = _xy(points, lambda p, k=key, o=op: ((p.get("latency_ms") or {}).get(o) or {}).get(k))
                values += ys
                ax.plot(xs, ys, ls=style, marker="o", ms=4, color=color_for(txn_path, i), label=f"{txn_path} {key}")
        _users_axis(ax, sweep.get("levels") or [])
        log_y(ax, values)
        ax.set_title(f"{op} latency (dashed p50, solid p99)", fontsize=10)
        ax.legend(fontsize=7, ncol=2)
    fig.suptitle("Latency against concurrency", fontsize=11)
    return save(fig, directory, "sweep_latency", "Latency against concurrency",
                "Lines of p50 and p99 commit and end-to-end latency per path against users, log scale")


def io_chart(sweep: Mapping[str, Any], directory: Path) -> Chart:
    return _two_panels(sweep, directory,
                       (("ledger entries per committed txn", lambda p: (p.get("io_per_txn") or {}).get("ledger_entries")),
                        ("fsyncs per committed txn (ledger + metadata)",
                         lambda p: (p.get("io_per_txn") or {}).get("fsyncs"))),
                       "Storage cost per committed transaction against concurrency", "sweep_io",
                       "I/O per transaction against concurrency",
                       "Lines of ledger entries and fsyncs per committed transaction per path against users")


def _has_faults(sweep: Mapping[str, Any]) -> bool:
    return any(p.get("faults") for _, _, points in _series(sweep) for p in points)


def fault_label(fault: Mapping[str, Any]) -> str:
    """A fault as the failover chart and table name it: its kind and the scenario's target
    (`kill coordinator`, `kill broker:0`), so two faults of one kind aimed at different things are
    two lines, not one; just the kind for a sweep written before faults kept their target."""
    kind = str(fault.get("kind") or NA)
    selector = fault.get("selector")
    return f"{kind} {selector}" if selector else kind


def failover_chart(sweep: Mapping[str, Any], directory: Path) -> Chart:
    """Experiment 3: coordinator outage against the transactions open when the fault struck."""
    fig = new_figure(11, 4.5)
    ax = fig.subplots(1, 1)
    drawn = False
    labels = sorted({fault_label(f) for _, _, pts in _series(sweep) for p in pts for f in p.get("faults") or []})
    markers = dict(zip(labels, "osD^v<>", strict=False))
    for i, txn_path, points in _series(sweep):
        for label in labels:
            xs, ys = [], []
            for p in points:
                for f in p.get("faults") or []:
                    if fault_label(f) == label and f.get("open_txns_at_start") is not None \
                            and f.get("coordinator_outage_s") is not None:
                        xs.append(float(f["open_txns_at_start"]))
                        ys.append(float(f["coordinator_outage_s"]))
            if xs:
                order = sorted(range(len(xs)), key=xs.__getitem__)
                ax.plot([xs[j] for j in order], [ys[j] for j in order], marker=markers.get(label, "o"),
                        color=color_for(txn_path, i), label=f"{txn_path} {label}")
                drawn = True
    if not drawn:
        empty(ax, "no fault with a measured coordinator outage")
    else:
        ax.set_xlabel("transactions open when the fault struck")
        ax.set_ylabel("coordinator outage (s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Coordinator failover against open transactions (fault start to the slowest coordinator's "
                 "next commit or abort)", fontsize=11)
    return save(fig, directory, "sweep_failover", "Coordinator outage against open transactions",
                "Lines of the slowest coordinator's outage in seconds against the number of transactions open "
                "at the fault, per path, fault kind and target")


def sweep_charts(sweep: Mapping[str, Any], directory: Path) -> list[Chart]:
    charts = [throughput_chart(sweep, directory), latency_chart(sweep, directory), io_chart(sweep, directory)]
    if _has_faults(sweep):
        charts.append(failover_chart(sweep, directory))
    return charts


def _faults_table(sweep: Mapping[str, Any]) -> Table:
    rows = []
    for _, txn_path, points in _series(sweep):
        for p in points:
            for f in p.get("faults") or []:
                stalled = f.get("coordinators_stalled") or []
                rows.append((txn_path, fmt_count(p["users"]), fault_label(f), Cell(str(f.get("targets") or ""), "code"),
                             fmt_count(f.get("open_txns_at_start")),
                             fmt_s(f.get("coordinator_outage_s")) + (" (never served again: "
                                                                     + ", ".join(stalled) + ")" if stalled else ""),
                             fmt_s(f.get("longest_commit_gap_s")), fmt_s(f.get("first_commit_after_heal_s")),
                             fmt_s(p.get("coordinator_recovery_s"))))
    return Table.of(("path", "users", "fault", "targets", "open txns at start", "coordinator outage (s)",
                     "longest commit gap (s)", "first commit after heal (s)", "longest log replay (s)"), rows,
                    caption="Coordinator outage: fault start to the slowest coordinator's next commit or abort. "
                            "Log replay: the coordinators' own recovery gauge (v4 replays its log; v5 reads one "
                            "counter)")


def _verdict(point: Mapping[str, Any]) -> Cell:
    if point.get("valid") is True:
        return Cell("valid", "good")
    if point.get("valid") is False:
        anomalies = ", ".join(f"{k} {v}" for k, v in (point.get("anomalies") or {}).items())
        return Cell(f"INVALID{', as expected' if point.get('only_expected') else ''} ({anomalies})",
                    "warn" if point.get("only_expected") else "bad")
    return Cell(f"no verdict ({point.get('status') or NA})", "warn")


def _points_table(sweep: Mapping[str, Any]) -> Table:
    rows = []
    for _, txn_path, points in _series(sweep):
        for p in points:
            commit = (p.get("latency_ms") or {}).get("txn-commit") or {}
            e2e = (p.get("latency_ms") or {}).get("end-to-end") or {}
            load = p.get("load_generator") or {}
            util = load.get("utilization")
            rows.append((txn_path, fmt_count(p["users"]), fmt_num(p.get("committed_txn_per_s")),
                         fmt_num(p.get("msgs_per_s")), fmt_ms(commit.get("p50")), fmt_ms(commit.get("p99")),
                         fmt_ms(e2e.get("p50")), fmt_ms(e2e.get("p99")),
                         f"{100 * float(util):.1f}%" if util is not None else Cell(ABSENT, "absent"),
                         _verdict(p), Cell(f"{p['compare']}/compare.html", "code")))
    return Table.of(("path", "users", "committed txn/s", "msgs/s", "commit p50", "commit p99", "end-to-end p50",
                     "end-to-end p99", "load generator utilization", "verdict", "full comparison"), rows,
                    caption="Latency in milliseconds; utilization is achieved txn/s over the load generator's "
                            "capacity against a null broker")


def _io_table(sweep: Mapping[str, Any]) -> Table:
    rows = []
    for _, txn_path, points in _series(sweep):
        for p in points:
            io = p.get("io_per_txn") or {}
            rows.append((txn_path, fmt_count(p["users"]),
                         *(fmt_num(io.get(k)) if io.get(k) is not None else Cell(ABSENT, "absent")
                           for k in SWEEP_IO_KEYS)))
    return Table.of(("path", "users", *SWEEP_IO_KEYS), rows)


def _saturation_items(sweep: Mapping[str, Any]) -> tuple[str, ...]:
    items = []
    for txn_path in sweep.get("order") or []:
        s = sweep["saturation"][txn_path]
        if s.get("peak_users") is None:
            items.append(f"{txn_path}: no throughput measured")
            continue
        where = (f"adding users stopped paying at {s['saturated_at_users']} users (less than "
                 f"{round(100 * (SATURATION_GAIN - 1))}% more throughput than the level before)"
                 if s.get("saturated_at_users") is not None else "still scaling at the highest level")
        items.append(f"{txn_path}: peak {fmt_num(s['peak_txn_per_s'])} committed txn/s at {s['peak_users']} users; "
                     f"{where}")
    return tuple(items)


def sweep_sections(sweep: Mapping[str, Any], charts: Sequence[Chart]) -> list[Section]:
    by_name = {c.name: c for c in charts}
    verdicts_ok = sweep.get("all_valid")
    sections = [
        Section("Where each path stops scaling", "saturation", items=_saturation_items(sweep),
                paragraphs=("Every point is one run's measured window; compare paths within this sweep, not "
                            "across machines or days.",),
                css="verdict-valid" if verdicts_ok else "verdict-invalid"),
        Section("Throughput", "throughput", tables=(_points_table(sweep),),
                charts=tuple(by_name[n] for n in ("sweep_throughput",) if n in by_name)),
        Section("Latency", "latency", charts=tuple(by_name[n] for n in ("sweep_latency",) if n in by_name)),
        Section("I/O per committed transaction", "io", tables=(_io_table(sweep),),
                paragraphs=("Metrics-snapshot deltas over each run's steady phase divided by its committed "
                            "transactions (docs/report.md).",),
                charts=tuple(by_name[n] for n in ("sweep_io",) if n in by_name)),
    ]
    if _has_faults(sweep):
        sections.append(Section("Faults and coordinator failover", "failover", tables=(_faults_table(sweep),),
                                paragraphs=("Experiment 3: how long transactions on the coordinator a fault hit "
                                            "could not end, against how many were open at that moment.",),
                                charts=tuple(by_name[n] for n in ("sweep_failover",) if n in by_name)))
    errors = sweep.get("errors") or {}
    if errors:
        sections.append(Section("Not in the sweep", "errors", items=tuple(f"{k}: {v}" for k, v in errors.items())))
    return sections


def sweep_page(sweep: Mapping[str, Any], out_dir: Path) -> Page:
    """Draw the sweep's charts into `out_dir`/plots and build its page."""
    charts = sweep_charts(sweep, out_dir / PLOTS)
    sections = sweep_sections(sweep, charts)
    title = f"txnbench concurrency sweep: {sweep.get('matrix') or out_dir.name}"
    intro = [f"Scenario {sweep.get('scenario') or NA} over {', '.join(sweep.get('order') or []) or 'no paths'} "
             f"at {', '.join(str(u) for u in sweep.get('levels') or [])} users."]
    footer = f"Generated {sweep.get('generated', '')} from sweep.json."
    return Page(title, intro, sections, footer, tuple(charts))


SWEEP_REPORT: ReportKind[Mapping[str, Any]] = ReportKind("sweep", sweep_page, keeps_json=True)
"""sweep.json, sweep.html, sweep.md: `write_report(SWEEP_REPORT, sweep, matrix_dir)`."""
