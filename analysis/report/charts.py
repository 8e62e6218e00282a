"""Shared drawing helpers: Agg figures, fault shading, the percentile axis, PNG output.

Figures are built with `matplotlib.figure.Figure` directly (never pyplot), so
drawing needs no display, keeps no global state between reports and runs the
same in a test, the orchestrator or the CLI. Each chart is written as a PNG
file and also returned as bytes, which the HTML report inlines as base64.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

__all__ = ["PATH_COLORS", "Chart", "color_for", "new_figure", "percentile_axis", "save", "shade_faults",
           "shade_phases"]

PATH_COLORS: dict[str, str] = {"v4": "#1f77b4", "v4-batched": "#ff7f0e", "v5": "#2ca02c"}
_CYCLE = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728")
FAULT_COLOR = "#d62728"
MEASURED_COLOR = "#2ca02c"
DPI = 100


@dataclass(frozen=True)
class Chart:
    """One written chart: its file, its PNG bytes, a title and alt text for the page."""

    name: str
    path: Path
    png: bytes
    title: str
    alt: str


def color_for(label: str, index: int = 0) -> str:
    return PATH_COLORS.get(label, _CYCLE[index % len(_CYCLE)])


def new_figure(width: float = 10.0, height: float = 4.0) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig


def save(fig: Figure, directory: Path, name: str, title: str, alt: str) -> Chart:
    """Write `directory/name.png` and return it with its bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    png = buffer.getvalue()
    path = directory / f"{name}.png"
    tmp = path.with_suffix(".png.tmp")
    tmp.write_bytes(png)
    tmp.replace(path)
    return Chart(name, path, png, title, alt)


def shade_faults(ax: Axes, faults: Sequence[Mapping[str, Any]], end_s: float, *, offset_s: float = 0.0,
                 label: bool = True) -> None:
    """Shade each fault window red (start to heal; to `end_s` when never healed)."""
    for i, fault in enumerate(faults):
        start = float(fault["start_s"]) - offset_s
        stop = (float(fault["end_s"]) if fault.get("end_s") is not None else end_s) - offset_s
        ax.axvspan(start, max(stop, start + 0.05), color=FAULT_COLOR, alpha=0.15, lw=0,
                   label="fault" if (label and i == 0) else None)
        if label:
            ax.text(start, 1.0, f" {fault.get('kind', 'fault')}", transform=ax.get_xaxis_transform(),
                    fontsize=7, color=FAULT_COLOR, va="top", ha="left", rotation=90)


def shade_phases(ax: Axes, phases: Sequence[Mapping[str, Any]], measured: str | None, *,
                 offset_s: float = 0.0, names: Iterable[str] | None = None) -> None:
    """Dashed lines at phase starts, labelled; the measured window lightly green."""
    keep = set(names) if names is not None else None
    for phase in phases:
        if keep is not None and phase["name"] not in keep:
            continue
        start = float(phase["start_s"]) - offset_s
        ax.axvline(start, color="#555555", lw=0.8, ls="--", alpha=0.6)
        ax.text(start, 0.02, f" {phase['name']}", transform=ax.get_xaxis_transform(), fontsize=7,
                color="#333333", va="bottom", ha="left")
        if phase["name"] == measured:
            ax.axvspan(start, float(phase["end_s"]) - offset_s, color=MEASURED_COLOR, alpha=0.06, lw=0,
                       label="measured window")


def _to_x(percentile: float) -> float:
    """HdrHistogram plotter's x: 1 / (1 - p), so 90 %, 99 %, 99.9 % are equally spaced."""
    p = min(float(percentile), 99.9999) / 100.0
    return 1.0 / (1.0 - p)


def percentile_axis(ax: Axes, max_percentile: float = 99.999) -> None:
    """A log x axis labelled in percentiles (50 %, 90 %, 99 %, ...)."""
    ax.set_xscale("log")
    ticks = [p for p in (0.0, 50.0, 90.0, 99.0, 99.9, 99.99, 99.999) if p <= max_percentile]
    ax.xaxis.set_major_locator(FixedLocator([_to_x(p) for p in ticks]))
    ax.xaxis.set_minor_locator(NullLocator())
    labels = {round(_to_x(p), 6): (f"{p:g}%") for p in ticks}
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: labels.get(round(x, 6), "")))
    ax.set_xlabel("percentile")


def spectrum_xy(spectrum: Sequence[Sequence[float]], count: int) -> tuple[list[float], list[float]]:
    """(x, y) of a perf.json spectrum, cut where the sample runs out of resolution.

    With n values, percentiles above 100 (1 - 1/n) all equal the maximum; the
    curve stops there, with the maximum as its last point.
    """
    limit = 100.0 * (1.0 - 1.0 / max(count, 2))
    xs, ys = [], []
    peak = None
    for p, value in spectrum:
        if value is None:
            continue
        if p >= 100.0:
            peak = float(value)
            continue
        if p < limit:
            xs.append(_to_x(p))
            ys.append(max(float(value), 1e-3))
    if peak is not None:
        xs.append(_to_x(limit))
        ys.append(max(peak, 1e-3))
    return xs, ys


def log_y(ax: Axes, values: Iterable[float | None], label: str = "latency (ms, log)") -> None:
    """A log y axis with plain-number labels (0.5, 1, 2, 5, 10 ...)."""
    ax.set_yscale("log")
    ax.set_ylim(bottom=log_floor(values))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(label)


def log_floor(values: Iterable[float | None]) -> float:
    """A lower limit for a log axis that shows every positive value."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return 1e-3
    return 10 ** math.floor(math.log10(min(positive)))


def empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", fontsize=10, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])
