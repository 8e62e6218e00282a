"""Percentiles from bucket counts match HdrHistogram's own, and stay within its precision."""

from __future__ import annotations

import random

from hdrh.histogram import HdrHistogram

from analysis.perf.hdr import (
    HIGHEST_US,
    LOWEST_US,
    PERCENTILES,
    SIGNIFICANT_DIGITS,
    LatencyBuckets,
    decode_hdr,
    hgrm_text,
    highest_equivalent_us,
    percentile_key,
    percentile_us,
    quantize_us,
    summarize,
)


def test_quantize_matches_hdrhistogram_buckets() -> None:
    hist = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
    rng = random.Random(3)
    values = [0, 1, 2047, 2048, 2049, 4095, 4096, 123_456, 10**9, HIGHEST_US]
    values += [rng.randrange(1, 10**10) for _ in range(2000)]
    for v in values:
        if v == 0:
            assert quantize_us(v) == 0
            continue
        assert quantize_us(v) == hist.get_lowest_equivalent_value(v), v
        assert highest_equivalent_us(quantize_us(v)) == hist.get_highest_equivalent_value(v), v
    assert quantize_us(HIGHEST_US * 5) == quantize_us(HIGHEST_US)


def test_percentiles_equal_hdrhistogram_recording_every_value() -> None:
    rng = random.Random(11)
    values = [int(rng.lognormvariate(8, 1.5)) + 1 for _ in range(5000)]
    hist = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
    counts: dict[int, int] = {}
    for v in values:
        hist.record_value(v)
        counts[quantize_us(v)] = counts.get(quantize_us(v), 0) + 1
    buckets = sorted(counts.items())
    for p in (*PERCENTILES, 10.0, 75.0, 99.99, 100.0):
        assert percentile_us(buckets, len(values), p) == hist.get_value_at_percentile(p), p


def test_summary_is_within_precision_of_exact_nearest_rank_and_exact_at_the_extremes() -> None:
    rng = random.Random(5)
    ns = [rng.randrange(100_000, 900_000_000) for _ in range(777)]
    counts: dict[int, int] = {}
    for v in ns:
        counts[quantize_us(v // 1000)] = counts.get(quantize_us(v // 1000), 0) + 1
    lat = LatencyBuckets.of(counts.items(), min(ns), max(ns), sum(ns))
    out = summarize(lat, with_hdr=True)
    ordered = sorted(ns)
    for p in PERCENTILES:
        rank = max(1, int(p * len(ns) / 100 + 0.5))
        exact_ms = ordered[rank - 1] / 1e6
        assert abs(out[percentile_key(p)] - exact_ms) <= exact_ms * 0.001 + 0.0011, p
    assert out["max"] == round(max(ns) / 1e6, 3) and out["min"] == round(min(ns) / 1e6, 3)
    assert out["mean"] == round(sum(ns) / len(ns) / 1e6, 3)
    assert out["count"] == 777
    assert all(value <= out["max"] for _, value in out["spectrum"])
    decoded = decode_hdr(out["hdr"])
    assert decoded.get_total_count() == 777
    assert "Value" in hgrm_text(lat) and "TotalCount" in hgrm_text(lat)


def test_percentiles_never_exceed_the_exact_max() -> None:
    # One value of 5000 µs: its bucket's highest value is 5003 µs, but the max is exact.
    lat = LatencyBuckets.of([(quantize_us(5000), 1)], 5_000_000, 5_000_000, 5_000_000)
    out = summarize(lat)
    assert out["p50"] == out["p99.9"] == out["max"] == 5.0


def test_empty() -> None:
    assert summarize(LatencyBuckets.of([], 0, 0, 0)) == {"count": 0}
    assert percentile_us([], 0, 50.0) == 0
