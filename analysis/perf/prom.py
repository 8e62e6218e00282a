"""Reading the metrics snapshots a run took: `metrics/<phase>-<service>.prom`.

Theory of operation. The orchestrator scrapes every service at the end of each
phase and writes the Prometheus text exposition (format 0.0.4) as it came. A
snapshot is therefore a set of samples `name{labels} value` at one instant per
service; the analysis only ever subtracts two snapshots of the same service
(end of a phase minus end of the phase before it). Parsing is our own, small
and strict about what it keeps: comment lines (`# HELP`, `# TYPE`) are skipped,
names are kept exactly as written (no `_total` games: BookKeeper's
`bookkeeper_server_ADD_ENTRY_count` is a counter whose name ends in `_count`),
label values are unescaped, timestamps are ignored, and a line that cannot be
read is counted in `Snapshot.skipped` instead of failing the report: a metrics
file is evidence, and one odd line must not hide the rest.

A file name is `<phase>-<service>.prom`; phase names have no `-`, service names
may (`broker-0`), so the name splits at its first `-`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Sample", "Snapshot", "parse_prometheus", "read_snapshots", "snapshot_name"]

Labels = tuple[tuple[str, str], ...]

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LINE = re.compile(rf"^(?P<name>{_NAME})(?:\{{(?P<labels>.*)\}})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class Sample:
    """One `name{labels} value` line."""

    name: str
    labels: Labels
    value: float

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None


@dataclass(frozen=True)
class Snapshot:
    """The samples of one service at the end of one phase."""

    phase: str
    service: str
    path: Path
    samples: tuple[Sample, ...]
    skipped: int = 0

    def named(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]

    def has(self, name: str) -> bool:
        return any(s.name == name for s in self.samples)


def _unescape(value: str) -> str:
    return re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], value)


def _parse_labels(text: str) -> Labels | None:
    labels: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            return None
        labels.append((match["key"], _unescape(match["value"])))
        pos = match.end()
    return tuple(sorted(labels))


def _parse_value(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def parse_prometheus(text: str) -> tuple[list[Sample], int]:
    """Samples of a Prometheus text exposition, and how many lines could not be read."""
    samples: list[Sample] = []
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            skipped += 1
            continue
        labels = _parse_labels(match["labels"]) if match["labels"] else ()
        value = _parse_value(match["value"])
        if labels is None or value is None:
            skipped += 1
            continue
        samples.append(Sample(match["name"], labels, value))
    return samples, skipped


def snapshot_name(path: Path) -> tuple[str, str] | None:
    """(phase, service) of `<phase>-<service>.prom`, or None for other names."""
    if path.suffix != ".prom" or "-" not in path.stem:
        return None
    phase, service = path.stem.split("-", 1)
    if not phase or not service:
        return None
    return phase, service


def read_snapshots(metrics_dir: Path) -> dict[str, dict[str, Snapshot]]:
    """Every snapshot of a run: {phase: {service: Snapshot}}; {} when there is no folder."""
    out: dict[str, dict[str, Snapshot]] = {}
    if not metrics_dir.is_dir():
        return out
    for path in sorted(metrics_dir.glob("*.prom")):
        named = snapshot_name(path)
        if named is None or not path.is_file():
            continue
        phase, service = named
        samples, skipped = parse_prometheus(path.read_text(encoding="utf-8", errors="replace"))
        out.setdefault(phase, {})[service] = Snapshot(phase, service, path, tuple(samples), skipped)
    return out
