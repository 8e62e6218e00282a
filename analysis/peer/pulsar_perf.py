"""What `pulsar-perf transaction` measured, read from the files it leaves.

Theory of operation. pulsar-perf prints one line every 10 s ("Throughput transaction:
<total> --- <rate>/s --- SendLatency ... --- AckLatency ...", the rate counting the
transactions whose commit or abort completed in that interval) and writes, at the same
moment, two interval histograms to its HdrHistogram log: send latency, then ack latency,
in microseconds, untagged. Interval k (1-based) therefore covers seconds (k-1)*10 to k*10
of the test, and the measured window is the intervals that lie wholly after the warm-up
and inside warm-up + steady; the throughput is their summed transactions over their
summed time, and the latency percentiles come from the window's histograms added up,
exactly as HdrHistogram would report them. pulsar-perf does not time commits (it fires
`commit()` and opens the next transaction without waiting), so there is no commit
latency on its side. The log lines carry Unix milliseconds (our log4j2 pattern), which
place the window in wall time for the CPU samples.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

INTERVAL_S = 10
LOWEST_US, HIGHEST_US, DIGITS = 1, 3_600_000_000, 3
PERCENTILES = (50.0, 95.0, 99.0, 99.9)

_INTERVAL = re.compile(r"^(?P<ms>\d{12,})\s.*Throughput transactions?:?\s*(?P<total>\d+)\D.*?---\s*"
                       r"(?P<rate>[\d.]+)\s*(?:transactions?)?/s")
_AGGREGATED = re.compile(r"Aggregated throughput stats ---\s*(?P<total>\d+) transaction executed ---\s*"
                         r"(?P<rate>[\d.]+) transaction/s\s*---\s*(?P<open_ok>\d+) transaction open successfully"
                         r"\s*---\s*(?P<open_fail>\d+) transaction open failed\s*---\s*(?P<end_ok>\d+) transaction "
                         r"end successfully\s*---\s*(?P<end_fail>\d+) transaction end failed\s*---\s*(?P<ack_fail>\d+)"
                         r" message ack failed\s*---\s*(?P<send_fail>\d+) message send failed\s*---\s*(?P<ack_ok>\d+) "
                         r"message ack success\s*---\s*(?P<send_ok>\d+) message send success")
_HGRM_LINE = re.compile(r"^(?:Tag=[^,]*,)?([\d.]+),([\d.]+),([\d.]+),(\S+)$")


@dataclass(frozen=True)
class IntervalLine:
    """One 10-second line: when it was printed (Unix ms), the running total and the interval's rate."""

    wall_ms: int
    total: int
    rate: float


@dataclass
class PerfResult:
    """pulsar-perf's side of the comparison, in the units txnbench's perf.json uses."""

    intervals: list[IntervalLine] = field(default_factory=list)
    window: tuple[int, int] | None = None          # 1-based interval numbers, inclusive
    txn_per_s: float | None = None
    transactions: float | None = None
    window_wall_s: tuple[float, float] | None = None
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    aggregated: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"txn_per_s": self.txn_per_s, "transactions": self.transactions,
                "window_intervals": list(self.window) if self.window else None,
                "window_wall_s": list(self.window_wall_s) if self.window_wall_s else None,
                "latency_ms": self.latency_ms, "aggregated": self.aggregated,
                "intervals": [[i.wall_ms, i.total, i.rate] for i in self.intervals], "notes": self.notes}


def parse_log(text: str) -> tuple[list[IntervalLine], dict[str, float]]:
    """The interval lines and the final aggregated counters of a pulsar-perf transaction log."""
    intervals = []
    aggregated: dict[str, float] = {}
    for line in text.splitlines():
        m = _INTERVAL.search(line)
        if m:
            intervals.append(IntervalLine(int(m["ms"]), int(m["total"]), float(m["rate"])))
            continue
        m = _AGGREGATED.search(line)
        if m:
            aggregated = {k: float(v) for k, v in m.groupdict().items()}
    return intervals, aggregated


def window_intervals(count: int, warmup_s: int, steady_s: int) -> tuple[int, int] | None:
    """Interval numbers (1-based, inclusive) wholly inside [warmup, warmup + steady]; None if none is."""
    first = warmup_s // INTERVAL_S + 1
    last = min(count, (warmup_s + steady_s) // INTERVAL_S)
    return (first, last) if last >= first else None


def read_hgrm(text: str) -> list[HdrHistogram]:
    """The interval histograms of an HdrHistogram log, in file order."""
    out = []
    for line in text.splitlines():
        m = _HGRM_LINE.match(line.strip())
        if m is None:
            continue
        histogram = HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)
        histogram.decode_and_add(m.group(4))
        out.append(histogram)
    return out


def summarize_us(histogram: HdrHistogram) -> dict[str, float]:
    """count, percentiles, max and mean in milliseconds (the histogram holds microseconds)."""
    n = histogram.get_total_count()
    if n == 0:
        return {"count": 0}
    out: dict[str, float] = {"count": n}
    for p in PERCENTILES:
        out[f"p{p:g}"] = round(histogram.get_value_at_percentile(p) / 1000.0, 3)
    out["max"] = round(histogram.get_max_value() / 1000.0, 3)
    out["mean"] = round(histogram.get_mean_value() / 1000.0, 3)
    return out


def window_latency(histograms: Sequence[HdrHistogram], window: tuple[int, int]) -> dict[str, dict[str, float]]:
    """Send and ack latency over the window's intervals (histograms alternate send, ack per interval)."""
    out = {}
    for offset, op in enumerate(("send", "ack")):
        total = HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)
        for k in range(window[0], window[1] + 1):
            index = 2 * (k - 1) + offset
            if index < len(histograms):
                total.add(histograms[index])
        out[op] = summarize_us(total)
    return out


def read_result(log_text: str, hgrm_text: str | None, warmup_s: int, steady_s: int) -> PerfResult:
    """pulsar-perf's measured window: transactions per second, send/ack latency, the window in wall time."""
    intervals, aggregated = parse_log(log_text)
    result = PerfResult(intervals=intervals, aggregated=aggregated)
    window = window_intervals(len(intervals), warmup_s, steady_s)
    if window is None:
        result.notes.append(f"pulsar-perf printed {len(intervals)} interval lines; none lies inside the measured "
                            f"window ({warmup_s}-{warmup_s + steady_s} s)")
        return result
    result.window = window
    # an interval's rate is its count over its own length, which runs a little over 10 s (the
    # printing thread sleeps 10 s, then works): the length is the gap to the previous line
    lengths = [INTERVAL_S if k == 0 else (intervals[k].wall_ms - intervals[k - 1].wall_ms) / 1000.0
               for k in range(len(intervals))]
    chosen = range(window[0] - 1, window[1])
    seconds = sum(lengths[k] for k in chosen)
    result.transactions = round(sum(intervals[k].rate * lengths[k] for k in chosen), 1)
    result.txn_per_s = round(result.transactions / seconds, 3)
    result.window_wall_s = (intervals[window[0] - 1].wall_ms / 1000.0 - lengths[window[0] - 1],
                            intervals[window[1] - 1].wall_ms / 1000.0)
    if hgrm_text is None:
        result.notes.append("no HdrHistogram log: latency unknown")
    else:
        result.latency_ms = window_latency(read_hgrm(hgrm_text), window)
    return result


def cpu_over(samples: Sequence[Sequence[float]], start_s: float, end_s: float) -> float | None:
    """CPU seconds spent between two wall times, from cumulative [[unix s, cpu s], ...] samples."""
    inside = [s for s in samples if start_s < s[0] <= end_s]
    before = [s for s in samples if s[0] <= start_s]
    if not inside:
        return None
    first = before[-1] if before else inside[0]
    return round(inside[-1][1] - first[1], 3)
