"""Latency percentiles with HdrHistogram precision, from bucket counts Spark computes.

Theory of operation. A history can hold tens of millions of latencies, so they
never come to the driver one by one. Spark rounds each latency (whole
microseconds) down to the lowest value of its HdrHistogram bucket
(`quantize_us`: 3 significant digits, so values below 2048 µs are exact and
larger ones keep 11 significant bits, a relative error below 0.1 %) and
counts per bucket; the driver receives at most a few thousand (bucket, count)
pairs per operation and loads them into an `hdrh` HdrHistogram of the same
layout, which is then identical to the one recording every value would have
built. Percentiles follow HdrHistogram's definition: the value at rank
max(1, round(p/100 * n)) of the sorted latencies, reported as the highest
value of its bucket, and never above the exact maximum (Spark computes the
exact minimum, maximum and sum, so `max`, `min` and `mean` are exact).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hdrh.histogram import HdrHistogram

__all__ = [
    "HIGHEST_US", "LOWEST_US", "PERCENTILES", "SIGNIFICANT_DIGITS", "SPECTRUM", "SUB_BUCKET_BITS",
    "LatencyBuckets", "highest_equivalent_us", "histogram_of", "percentile_key", "percentile_us",
    "quantize_us", "summarize",
]

LOWEST_US = 1
HIGHEST_US = 86_400_000_000          # one day, in microseconds
SIGNIFICANT_DIGITS = 3
SUB_BUCKET_BITS = 11                 # 2048 sub-buckets hold 3 significant decimal digits
PERCENTILES: tuple[float, ...] = (50.0, 95.0, 99.0, 99.9)
SPECTRUM: tuple[float, ...] = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.75, 99.9,
                               99.95, 99.99, 99.995, 99.999, 100.0)


def percentile_key(p: float) -> str:
    """50.0 -> "p50", 99.9 -> "p99.9"."""
    return f"p{p:g}"


def quantize_us(value_us: int) -> int:
    """The lowest value of `value_us`'s HdrHistogram bucket (3 significant digits)."""
    if value_us <= 0:
        return 0
    value_us = min(value_us, HIGHEST_US)
    shift = max(0, value_us.bit_length() - SUB_BUCKET_BITS)
    return (value_us >> shift) << shift


def highest_equivalent_us(quantized_us: int) -> int:
    """The highest value in the bucket whose lowest value is `quantized_us`."""
    if quantized_us <= 0:
        return 0
    shift = max(0, quantized_us.bit_length() - SUB_BUCKET_BITS)
    return quantized_us + (1 << shift) - 1


@dataclass(frozen=True)
class LatencyBuckets:
    """What Spark returns for one (window, operation): bucket counts and exact extremes.

    `buckets` holds (quantized µs, count) pairs; `count`, `min_ns`, `max_ns` and
    `sum_ns` are exact over the same latencies.
    """

    buckets: tuple[tuple[int, int], ...]
    count: int
    min_ns: int
    max_ns: int
    sum_ns: int

    @classmethod
    def of(cls, buckets: Iterable[tuple[int, int]], min_ns: int, max_ns: int, sum_ns: int) -> LatencyBuckets:
        merged: dict[int, int] = {}
        for value, count in buckets:
            merged[int(value)] = merged.get(int(value), 0) + int(count)
        ordered = tuple(sorted(merged.items()))
        return cls(ordered, sum(c for _, c in ordered), int(min_ns), int(max_ns), int(sum_ns))


def percentile_us(buckets: Sequence[tuple[int, int]], total: int, percentile: float) -> int:
    """HdrHistogram's value at `percentile` over sorted (quantized µs, count) buckets."""
    if total <= 0 or not buckets:
        return 0
    target = max(1, int(min(percentile, 100.0) * total / 100 + 0.5))
    seen = 0
    for value, count in buckets:
        seen += count
        if seen >= target:
            return highest_equivalent_us(value) if percentile > 0 else value
    return highest_equivalent_us(buckets[-1][0])


def histogram_of(lat: LatencyBuckets) -> HdrHistogram:
    """An `hdrh` histogram holding exactly these buckets."""
    hist = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
    for value, count in lat.buckets:
        hist.record_value(max(value, 0), count)
    return hist


def _ms(value_us: float) -> float:
    return round(value_us / 1000.0, 3)


def summarize(lat: LatencyBuckets, *, with_hdr: bool = False, with_spectrum: bool = True) -> dict[str, Any]:
    """count, p50, p95, p99, p99.9, max, min, mean (milliseconds) and optionally the spectrum/HDR."""
    if lat.count <= 0:
        return {"count": 0}
    max_us = lat.max_ns / 1000.0
    min_us = lat.min_ns / 1000.0

    def clamp(value_us: int) -> float:
        return _ms(min(max(value_us, min_us), max_us))

    out: dict[str, Any] = {"count": lat.count}
    for p in PERCENTILES:
        out[percentile_key(p)] = clamp(percentile_us(lat.buckets, lat.count, p))
    out["max"] = _ms(max_us)
    out["min"] = _ms(min_us)
    out["mean"] = _ms(lat.sum_ns / lat.count / 1000.0)
    if with_spectrum:
        out["spectrum"] = [[p, clamp(percentile_us(lat.buckets, lat.count, p)) if p < 100 else _ms(max_us)]
                           for p in SPECTRUM]
    if with_hdr:
        out["hdr"] = histogram_of(lat).encode().decode("ascii")
    return out


def hgrm_text(lat: LatencyBuckets) -> str:
    """HdrHistogram's percentile distribution (`.hgrm`, values in milliseconds)."""
    buffer = io.BytesIO()
    histogram_of(lat).output_percentile_distribution(buffer, 1000.0)
    return buffer.getvalue().decode("ascii", errors="replace")


def decode_hdr(encoded: str) -> HdrHistogram:
    """The histogram a perf.json `hdr` field holds (base64 of HdrHistogram's compressed form)."""
    base64.b64decode(encoded, validate=True)  # a clear error for a damaged field
    return HdrHistogram.decode(encoded.encode("ascii"))
