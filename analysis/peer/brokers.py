"""Broker-side counts a run moved: the same counters for pulsar-perf's run and txnbench's.

Why from the brokers: each tool counts its own transactions its own way (pulsar-perf counts
a commit when the client's future completes, txnbench from its history), while the brokers'
counters are one yardstick for both. The delta of each counter between two snapshot sets
(`{service: Prometheus text}`), summed over brokers and labels, is taken for the
transaction coordinator's counters (every `pulsar_txn_*` counter), the messages in and out,
and the bookie's appends; a name no snapshot has is simply absent, never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from analysis.perf.prom import parse_prometheus

FIXED = ("pulsar_in_messages_total", "pulsar_out_messages_total", "bookkeeper_server_ADD_ENTRY_count",
         "pulsar_metadata_store_ops_latency_ms_count")
#: Headline names, in the order a report shows them.
HEADLINE = ("pulsar_txn_created_total", "pulsar_txn_committed_total", "pulsar_txn_aborted_total",
            "pulsar_txn_timeout_total", "pulsar_txn_append_log_total", "pulsar_in_messages_total",
            "bookkeeper_server_ADD_ENTRY_count")


def _wanted(name: str) -> bool:
    if name in FIXED:
        return True
    return name.startswith("pulsar_txn_") and (name.endswith("_total") or name.endswith("_count"))


def sums(texts: Mapping[str, str]) -> dict[str, float]:
    """Each wanted counter summed over every service and label set."""
    out: dict[str, float] = {}
    for text in texts.values():
        samples, _ = parse_prometheus(text)
        for s in samples:
            if _wanted(s.name):
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def deltas(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, float]:
    """after - before for every wanted counter the `after` set exposes (a restart shows as a negative)."""
    b, a = sums(before), sums(after)
    return {name: round(a[name] - b.get(name, 0.0), 3) for name in sorted(a)}


def read_texts(folder: Path, label: str) -> dict[str, str]:
    """`{service: text}` of `<folder>/<label>-<service>.prom` (brokers and bookie of one snapshot)."""
    return {p.stem.split("-", 1)[1]: p.read_text() for p in sorted(folder.glob(f"{label}-*.prom"))}
