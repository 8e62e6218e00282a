"""The charts of one run's report, drawn from its perf.json alone.

Every chart reads numbers perf.json holds (so a picture never shows a number
the JSON does not): the 1-second timeline with phases and fault windows, the
latency percentile spectrum and summary (log scale), per-second commit latency,
and I/O per committed transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analysis.report.charts import (
    Chart,
    color_for,
    empty,
    log_y,
    new_figure,
    percentile_axis,
    save,
    shade_faults,
    shade_phases,
    spectrum_xy,
)

__all__ = ["LATENCY_ORDER", "run_charts"]

LATENCY_ORDER = ("txn-open", "send", "ack", "txn-commit", "txn-abort", "end-to-end")
_OP_COLORS = {"txn-open": "#9467bd", "send": "#1f77b4", "ack": "#8c564b", "txn-commit": "#2ca02c",
              "txn-abort": "#ff7f0e", "end-to-end": "#d62728"}
_PERCENTILE_BARS = ("p50", "p95", "p99", "p99.9", "max")


def _measured(perf: Mapping[str, Any]) -> str | None:
    window = perf.get("window") or {}
    return window.get("name")


def throughput_chart(perf: Mapping[str, Any], directory: Path) -> Chart:
    timeline = perf.get("timeline") or {}
    t = timeline.get("t") or []
    series = timeline.get("series") or {}
    fig = new_figure(11, 7.5)
    axes = fig.subplots(3, 1, sharex=True, height_ratios=[3, 2, 1.5])
    faults = perf.get("faults") or []
    phases = perf.get("phase_windows") or []
    end_s = float(t[-1] + 1) if t else 0.0
    if not t:
        for ax in axes:
            empty(ax, "no load operations in the history")
    else:
        x = [v + 0.5 for v in t]
        ax = axes[0]
        ax.plot(x, series.get("committed", []), drawstyle="steps-mid", color="#2ca02c", lw=1.6, label="committed txn/s")
        ax.plot(x, series.get("aborted", []), drawstyle="steps-mid", color="#ff7f0e", lw=1.0, label="aborted txn/s (by the client)")
        ax.set_ylabel("transactions / s")
        ax = axes[1]
        ax.plot(x, series.get("sends", []), drawstyle="steps-mid", color="#1f77b4", lw=1.4, label="sends ok / s")
        ax.plot(x, series.get("receives", []), drawstyle="steps-mid", color="#17becf", lw=1.0, label="receives / s")
        ax.plot(x, series.get("acks", []), drawstyle="steps-mid", color="#8c564b", lw=1.0, label="acks ok / s")
        ax.set_ylabel("messages / s")
        ax = axes[2]
        ax.bar(x, series.get("failed", []), width=0.9, color="#d62728", label="commit/abort failed")
        ax.bar(x, series.get("unknown", []), width=0.9, bottom=series.get("failed", []), color="#7f7f7f",
               label="commit/abort outcome unknown")
        ax.set_ylabel("per s")
        ax.set_xlabel("run time (s)")
        for i, ax in enumerate(axes):
            shade_phases(ax, phases, _measured(perf), names=("warmup", "steady", "faults", "recovery", "drain"))
            shade_faults(ax, faults, end_s, label=(i == 0))
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.25)
            ax.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"Throughput over time, 1-second buckets ({perf.get('path') or 'run'})", fontsize=11)
    return save(fig, directory, "throughput", "Throughput over time",
                "Committed and aborted transactions per second, messages per second and failed or unknown "
                "transaction ends per second, with phases marked and fault windows shaded")


def latency_spectrum_chart(perf: Mapping[str, Any], directory: Path) -> Chart:
    latency = perf.get("latency_ms") or {}
    fig = new_figure(10, 5)
    ax = fig.subplots()
    drawn = 0
    ys_all: list[float] = []
    for op in LATENCY_ORDER:
        entry = latency.get(op) or {}
        spectrum = entry.get("spectrum")
        if not entry.get("count") or not spectrum:
            continue
        xs, ys = spectrum_xy(spectrum, int(entry["count"]))
        ax.plot(xs, ys, color=_OP_COLORS[op], lw=1.6, marker=".", ms=3, label=f"{op} (n={entry['count']:,})")
        ys_all += ys
        drawn += 1
    if drawn:
        percentile_axis(ax)
        log_y(ax, ys_all)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper left")
    else:
        empty(ax, "no completed operations in the measured window")
    fig.suptitle(f"Latency by percentile, measured window ({_measured(perf)})", fontsize=11)
    return save(fig, directory, "latency_percentiles", "Latency by percentile",
                "Latency of each operation against percentile, both on log scales (HdrHistogram style)")


def latency_summary_chart(perf: Mapping[str, Any], directory: Path) -> Chart:
    latency = perf.get("latency_ms") or {}
    ops = [op for op in LATENCY_ORDER if (latency.get(op) or {}).get("count")]
    fig = new_figure(10, 4.5)
    ax = fig.subplots()
    if not ops:
        empty(ax, "no completed operations in the measured window")
    else:
        width = 0.8 / len(_PERCENTILE_BARS)
        values: list[float] = []
        for j, key in enumerate(_PERCENTILE_BARS):
            heights = [max(float(latency[op].get(key) or 0.0), 1e-3) for op in ops]
            values += heights
            ax.bar([i + (j - (len(_PERCENTILE_BARS) - 1) / 2) * width for i in range(len(ops))], heights,
                   width=width, label=key, color=color_for(key, j + 2) if key not in ("p50",) else "#1f77b4")
        ax.set_xticks(range(len(ops)), ops)
        log_y(ax, values)
        ax.grid(alpha=0.3, axis="y", which="both")
        ax.legend(fontsize=8, ncols=len(_PERCENTILE_BARS))
    fig.suptitle("Latency percentiles per operation (measured window)", fontsize=11)
    return save(fig, directory, "latency_summary", "Latency percentiles per operation",
                "Bars of p50, p95, p99, p99.9 and max latency per operation on a log scale")


def latency_timeline_chart(perf: Mapping[str, Any], directory: Path) -> Chart:
    timeline = (perf.get("timeline") or {}).get("latency_ms") or {}
    fig = new_figure(11, 4.5)
    ax = fig.subplots()
    points = timeline.get("txn-commit") or []
    faults = perf.get("faults") or []
    if not points:
        empty(ax, "no committed transactions")
    else:
        x = [p["t"] + 0.5 for p in points]
        for key, style in (("p50", "-"), ("p99", "-"), ("max", ":")):
            ax.plot(x, [max(p[key], 1e-3) for p in points], ls=style, lw=1.4, label=f"commit {key}")
        e2e = timeline.get("end-to-end") or []
        if e2e:
            ax.plot([p["t"] + 0.5 for p in e2e], [max(p["p99"], 1e-3) for p in e2e], lw=1.0, color="#d62728",
                    alpha=0.8, label="end-to-end p99")
        log_y(ax, [p["p50"] for p in points])
        ax.set_xlabel("run time (s), by operation start")
        end_s = float(points[-1]["t"] + 1)
        shade_phases(ax, perf.get("phase_windows") or [], _measured(perf),
                     names=("warmup", "steady", "faults", "recovery", "drain"))
        shade_faults(ax, faults, end_s)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle("Commit latency per second (approximate per-second percentiles)", fontsize=11)
    return save(fig, directory, "latency_timeline", "Commit latency over time",
                "Per-second p50, p99 and max of commit latency and p99 end-to-end latency, log scale, "
                "with fault windows shaded")


def io_chart(perf: Mapping[str, Any], directory: Path) -> Chart:
    io = perf.get("io") or {}
    metrics = io.get("metrics") or {}
    counts = [(k, m) for k, m in metrics.items() if not m.get("absent") and m.get("unit") != "bytes"
              and m.get("per_txn") is not None]
    sizes = [(k, m) for k, m in metrics.items() if not m.get("absent") and m.get("unit") == "bytes"
             and m.get("per_txn") is not None]
    absent = [k for k, m in metrics.items() if m.get("absent")]
    fig = new_figure(11, max(4.0, 0.32 * (len(counts) + len(sizes)) + 2))
    axes = fig.subplots(1, 2, width_ratios=[3, 2])
    for ax, items, unit in ((axes[0], counts, "per committed transaction"),
                            (axes[1], sizes, "bytes per committed transaction")):
        if not items:
            empty(ax, "no metrics")
            continue
        labels = [k for k, _ in items][::-1]
        values = [float(m["per_txn"]) for _, m in items][::-1]
        ax.barh(labels, values, color="#1f77b4")
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:,.2f}", va="center", fontsize=7)
        ax.set_xlabel(unit)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(alpha=0.3, axis="x")
    note = f"absent (not exposed by the snapshots): {', '.join(absent)}" if absent else "no metric absent"
    fig.suptitle(f"I/O per committed transaction, {io.get('window') or 'no window'} "
                 f"({io.get('committed_txns', 0)} committed)\n{note}", fontsize=9)
    return save(fig, directory, "io_per_txn", "I/O per committed transaction",
                "Horizontal bars of ledger entries, metadata operations and fsyncs per committed transaction, "
                "and bytes per committed transaction")


def run_charts(perf: Mapping[str, Any], directory: Path) -> list[Chart]:
    """Draw every chart of a run into `directory` (its plots/ folder)."""
    return [throughput_chart(perf, directory), latency_spectrum_chart(perf, directory),
            latency_summary_chart(perf, directory), latency_timeline_chart(perf, directory),
            io_chart(perf, directory)]
