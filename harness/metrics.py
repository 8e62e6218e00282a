"""A small Prometheus registry with exact metric names.

Why not prometheus_client: it appends `_total` to every counter, and the ledger
store must expose BookKeeper's names as they are (`bookkeeper_server_ADD_ENTRY_count`)
so dashboards and the analysis read the same names from us and from real Pulsar.
Metrics here are plain counters, gauges and fixed-bucket histograms, keyed by
label values; `render()` produces the Prometheus text exposition format 0.0.4.
Everything runs on one asyncio loop, so there is no locking.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

LabelValues = tuple[str, ...]


def _fmt(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


@dataclass
class Counter:
    name: str
    help: str
    labelnames: tuple[str, ...] = ()
    values: dict[LabelValues, float] = field(default_factory=dict)
    kind: str = "counter"

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(str(labels[n]) for n in self.labelnames)
        self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, **labels: str) -> float:
        return self.values.get(tuple(str(labels[n]) for n in self.labelnames), 0.0)

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} {self.kind}"
        if not self.values and not self.labelnames:
            yield f"{self.name} 0"
        for key, value in sorted(self.values.items()):
            yield f"{self.name}{_labels(self.labelnames, key)} {_fmt(value)}"


@dataclass
class Gauge(Counter):
    kind: str = "gauge"

    def set(self, value: float, **labels: str) -> None:
        self.values[tuple(str(labels[n]) for n in self.labelnames)] = float(value)

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        self.inc(-amount, **labels)


@dataclass
class Histogram:
    name: str
    help: str
    buckets: tuple[float, ...]
    labelnames: tuple[str, ...] = ()
    counts: dict[LabelValues, list[int]] = field(default_factory=dict)
    sums: dict[LabelValues, float] = field(default_factory=dict)

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(str(labels[n]) for n in self.labelnames)
        counts = self.counts.setdefault(key, [0] * (len(self.buckets) + 1))
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                counts[i] += 1
        counts[-1] += 1
        self.sums[key] = self.sums.get(key, 0.0) + value

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        for key, counts in sorted(self.counts.items()):
            for bound, count in zip(self.buckets, counts, strict=False):
                le = 'le="' + _fmt(bound) + '"'
                yield f"{self.name}_bucket{_labels(self.labelnames, key, le)} {count}"
            inf = 'le="+Inf"'
            yield f"{self.name}_bucket{_labels(self.labelnames, key, inf)} {counts[-1]}"
            yield f"{self.name}_sum{_labels(self.labelnames, key)} {_fmt(self.sums[key])}"
            yield f"{self.name}_count{_labels(self.labelnames, key)} {counts[-1]}"


class Registry:
    """Named metrics of one process, rendered in registration order."""

    def __init__(self) -> None:
        self._metrics: dict[str, Counter | Histogram] = {}

    def _add(self, metric: Counter | Histogram) -> None:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self._metrics[metric.name] = metric

    def counter(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Counter:
        metric = Counter(name, help, tuple(labelnames))
        self._add(metric)
        return metric

    def gauge(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Gauge:
        metric = Gauge(name, help, tuple(labelnames))
        self._add(metric)
        return metric

    def histogram(self, name: str, help: str, buckets: Sequence[float],
                  labelnames: Sequence[str] = ()) -> Histogram:
        metric = Histogram(name, help, tuple(sorted(buckets)), tuple(labelnames))
        self._add(metric)
        return metric

    def render(self) -> str:
        lines: list[str] = []
        for metric in self._metrics.values():
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"


def parse_prometheus_text(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse exposition text into {(name, sorted labels): value}. For tests and the analysis."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            label_text, value_text = rest.rsplit("}", 1)
            labels: list[tuple[str, str]] = []
            for part in _split_labels(label_text):
                key, _, val = part.partition("=")
                labels.append((key.strip(), val.strip().strip('"').replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")))
            out[(name.strip(), tuple(sorted(labels)))] = float(value_text.split()[0])
        else:
            name, value_text = line.split(None, 1)
            out[(name, ())] = float(value_text.split()[0])
    return out


def _split_labels(text: str) -> list[str]:
    parts, current, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == '"':
            current.append(ch)
            quoted = not quoted
        elif ch == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts
