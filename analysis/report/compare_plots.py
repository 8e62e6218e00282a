"""The comparison's charts, drawn from compare.json alone: one colour per path, overlaid."""

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
    spectrum_xy,
)
from analysis.report.run_plots import LATENCY_ORDER

__all__ = ["compare_charts"]


def _runs(compare: Mapping[str, Any]) -> list[tuple[int, str, Mapping[str, Any]]]:
    return [(i, label, compare["paths"][label]) for i, label in enumerate(compare.get("order") or [])]


def throughput_chart(compare: Mapping[str, Any], directory: Path) -> Chart:
    runs = _runs(compare)
    fig = new_figure(11, 4.5)
    axes = fig.subplots(1, 2)
    if not runs:
        for ax in axes:
            empty(ax, "no runs")
    for ax, key, cap_key, title in ((axes[0], "committed_txn_per_s", "capacity_txn_per_s", "committed transactions / s"),
                                    (axes[1], "msgs_per_s", "capacity_msgs_per_s", "messages / s")):
        if not runs:
            continue
        labels = [label for _, label, _ in runs]
        values = [float(r.get(key) or 0.0) for _, _, r in runs]
        colors = [color_for(label, i) for i, label, _ in runs]
        ax.bar(range(len(runs)), values, color=colors)
        for x, v in enumerate(values):
            ax.text(x, v, f"{v:,.1f}", ha="center", va="bottom", fontsize=8)
        capacities = [(x, (r.get("load_generator") or {}).get(cap_key)) for x, (_, _, r) in enumerate(runs)]
        drawn = False
        for x, cap in capacities:
            if cap is None:
                continue
            ax.plot([x - 0.4, x + 0.4], [float(cap), float(cap)], color="#333333", ls="--", lw=1.2,
                    label="load generator capacity" if not drawn else None)
            drawn = True
        ax.set_xticks(range(len(runs)), labels)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3, axis="y")
        if drawn:
            ax.legend(fontsize=8)
    fig.suptitle("Throughput in the measured window (dashed: the client's capacity against a null broker)",
                 fontsize=11)
    return save(fig, directory, "compare_throughput", "Throughput by path",
                "Bars of committed transactions per second and messages per second per path, with the load "
                "generator's measured capacity as a dashed line where known")


def latency_chart(compare: Mapping[str, Any], directory: Path) -> Chart:
    runs = _runs(compare)
    ops = [op for op in LATENCY_ORDER if any((r["latency_ms"].get(op) or {}).get("count") for _, _, r in runs)]
    cols = 3
    rows = max(1, (len(ops) + cols - 1) // cols)
    fig = new_figure(12, 3.4 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    keys = ("p50", "p99", "p99.9", "max")
    for k, ax in enumerate(axes.flat):
        if k >= len(ops):
            ax.set_visible(False)
            continue
        op = ops[k]
        width = 0.8 / max(1, len(runs))
        values: list[float] = []
        for j, (i, label, r) in enumerate(runs):
            entry = r["latency_ms"].get(op) or {}
            heights = [max(float(entry.get(key) or 0.0), 1e-3) if entry.get("count") else 0.0 for key in keys]
            values += [h for h in heights if h > 0]
            ax.bar([x + (j - (len(runs) - 1) / 2) * width for x in range(len(keys))], heights, width=width,
                   color=color_for(label, i), label=label)
        ax.set_xticks(range(len(keys)), keys)
        log_y(ax, values, "ms (log)")
        ax.set_title(op, fontsize=10)
        ax.grid(alpha=0.3, axis="y", which="both")
        if k == 0:
            ax.legend(fontsize=8)
    if not ops:
        empty(axes.flat[0], "no latency data")
        axes.flat[0].set_visible(True)
    fig.suptitle("Latency percentiles per operation and path (measured window, log scale)", fontsize=11)
    return save(fig, directory, "compare_latency", "Latency percentiles by path",
                "For each operation, bars of p50, p99, p99.9 and max latency per path on a log scale")


def spectrum_chart(compare: Mapping[str, Any], directory: Path) -> Chart:
    runs = _runs(compare)
    fig = new_figure(12, 4.5)
    axes = fig.subplots(1, 2)
    for ax, op in zip(axes, ("txn-commit", "end-to-end"), strict=True):
        ys_all: list[float] = []
        for i, label, r in runs:
            entry = r["latency_ms"].get(op) or {}
            if not entry.get("count") or not entry.get("spectrum"):
                continue
            xs, ys = spectrum_xy(entry["spectrum"], int(entry["count"]))
            ax.plot(xs, ys, color=color_for(label, i), lw=1.6, marker=".", ms=3, label=f"{label} (n={entry['count']:,})")
            ys_all += ys
        if ys_all:
            percentile_axis(ax)
            log_y(ax, ys_all)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=8, loc="upper left")
        else:
            empty(ax, f"no {op} latency")
        ax.set_title(op, fontsize=10)
    fig.suptitle("Latency by percentile, overlaid (HdrHistogram style)", fontsize=11)
    return save(fig, directory, "compare_latency_spectrum", "Commit and end-to-end latency by percentile",
                "Commit and end-to-end latency against percentile for each path, log scales")


def io_chart(compare: Mapping[str, Any], directory: Path) -> Chart:
    runs = _runs(compare)
    keys = [k for k in (compare["paths"][runs[0][1]]["io_per_txn"] if runs else {})
            if any(r["io_per_txn"].get(k) is not None for _, _, r in runs)]
    byte_keys = [k for k in keys if k.endswith("_bytes") or k == "bytes_written"]
    count_keys = [k for k in keys if k not in byte_keys]
    fig = new_figure(12, max(4.5, 0.42 * max(len(count_keys), 1) + 1.5))
    axes = fig.subplots(1, 2, width_ratios=[3, 2])
    for ax, group, unit in ((axes[0], count_keys, "per committed transaction"),
                            (axes[1], byte_keys, "bytes per committed transaction")):
        if not group or not runs:
            empty(ax, "no metrics")
            continue
        height = 0.8 / len(runs)
        for j, (i, label, r) in enumerate(runs):
            values = [float(r["io_per_txn"].get(k) or 0.0) for k in group][::-1]
            ys = [y + (j - (len(runs) - 1) / 2) * height for y in range(len(group))]
            ax.barh(ys, values, height=height, color=color_for(label, i), label=label)
            for y, k in zip(ys, group[::-1], strict=True):
                if r["io_per_txn"].get(k) is None:
                    ax.text(0, y, " absent", va="center", fontsize=6, color="#888888")
        ax.set_yticks(range(len(group)), group[::-1], fontsize=8)
        ax.set_xlabel(unit)
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize=8)
    fig.suptitle("I/O per committed transaction by path (measured window)", fontsize=11)
    return save(fig, directory, "compare_io", "I/O per committed transaction by path",
                "Grouped horizontal bars of ledger entries, metadata operations, fsyncs and bytes per committed "
                "transaction, one colour per path; metrics a path does not expose are marked absent")


def timeline_chart(compare: Mapping[str, Any], directory: Path) -> Chart:
    runs = _runs(compare)
    with_faults = any(r.get("faults") for _, _, r in runs)
    panels = 1 + (len(runs) if with_faults else 0)
    fig = new_figure(12, 3.2 + (2.2 * (panels - 1)))
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    top = axes[0]
    drawn = False
    for i, label, r in runs:
        tl = r.get("timeline") or {}
        if not tl.get("t"):
            continue
        offset = float(tl.get("steady_start_s") or 0.0)
        x = [t + 0.5 - offset for t in tl["t"]]
        top.plot(x, tl["committed"], drawstyle="steps-mid", color=color_for(label, i), lw=1.4, label=label)
        drawn = True
    if drawn:
        top.axvline(0, color="#555555", ls="--", lw=0.8)
        top.set_xlabel("seconds since the steady phase started")
        top.set_ylabel("committed txn / s")
        top.set_ylim(bottom=0)
        top.grid(alpha=0.3)
        top.legend(fontsize=8)
    else:
        empty(top, "no timelines")
    top.set_title("Committed transactions per second, aligned on the start of the steady phase", fontsize=10)
    if with_faults:
        for ax, (i, label, r) in zip(axes[1:], runs, strict=True):
            tl = r.get("timeline") or {}
            if not tl.get("t"):
                empty(ax, f"{label}: no timeline")
                continue
            x = [t + 0.5 for t in tl["t"]]
            ax.plot(x, tl["committed"], drawstyle="steps-mid", color=color_for(label, i), lw=1.3, label=f"{label} committed")
            errors = [a + b for a, b in zip(tl.get("failed") or [0] * len(x), tl.get("unknown") or [0] * len(x),
                                            strict=False)]
            ax.bar(x[:len(errors)], errors, width=0.9, color="#7f7f7f", alpha=0.7, label="failed + unknown ends")
            shade_faults(ax, r.get("faults") or [], float(tl["t"][-1] + 1))
            ax.set_ylabel("per s")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="upper right")
            ax.set_title(f"{label}: availability over the run, fault windows shaded", fontsize=9)
        axes[-1].set_xlabel("run time (s)")
    return save(fig, directory, "compare_timeline", "Throughput timelines",
                "Committed transactions per second of every path overlaid, and per path with fault windows shaded")


def compare_charts(compare: Mapping[str, Any], directory: Path) -> list[Chart]:
    return [throughput_chart(compare, directory), latency_chart(compare, directory),
            spectrum_chart(compare, directory), io_chart(compare, directory), timeline_chart(compare, directory)]
